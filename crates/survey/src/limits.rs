/// The bounds on what one operation returns. Counts past a bound are still
/// counted (`total`, `count`), only the records are left out.
///
/// Start from [`Limits::default`] and change a bound with its `with_*`
/// method:
///
/// ```
/// use core_agent_survey::Limits;
///
/// let limits = Limits::default().with_max_matches(50).with_max_context(2);
/// assert_eq!((limits.max_matches, limits.max_entries), (50, 1000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// `list_dir`: entries returned (default 1000).
    pub max_entries: usize,
    /// `list_dir`: the deepest `depth` accepted (default 16).
    pub max_depth: usize,
    /// `glob`: paths returned (default 1000).
    pub max_paths: usize,
    /// `grep`: records (matching and context lines) returned (default 500).
    pub max_matches: usize,
    /// `grep`: a line longer than this many characters is cut (default 500).
    pub max_line_chars: usize,
    /// `grep`: the largest `context` accepted (default 10).
    pub max_context: usize,
    /// `read_many_files`: bytes of one file returned (default 64 KiB).
    pub max_file_bytes: usize,
    /// `read_many_files`: bytes of all files returned (default 512 KiB).
    pub max_total_bytes: usize,
    /// `read_many_files`: files read (default 100).
    pub max_files: usize,
    /// `grep` and `glob`: the longest pattern accepted, in bytes (default
    /// 1024).
    pub max_pattern_bytes: usize,
    /// `grep`: the most memory a compiled regular expression may take, in
    /// bytes (default 1 MiB); a larger one is refused before it is built.
    pub regex_size_limit: usize,
    /// `grep`: the most memory each search thread's lazy DFA may take, in
    /// bytes (default 1 MiB); past it the search goes on more slowly
    /// instead of growing.
    pub regex_dfa_size_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entries: 1000,
            max_depth: 16,
            max_paths: 1000,
            max_matches: 500,
            max_line_chars: 500,
            max_context: 10,
            max_file_bytes: 64 * 1024,
            max_total_bytes: 512 * 1024,
            max_files: 100,
            max_pattern_bytes: 1024,
            regex_size_limit: 1024 * 1024,
            regex_dfa_size_limit: 1024 * 1024,
        }
    }
}

impl Limits {
    /// `list_dir`: entries returned.
    pub fn with_max_entries(mut self, entries: usize) -> Limits {
        self.max_entries = entries;
        self
    }

    /// `list_dir`: the deepest `depth` accepted.
    pub fn with_max_depth(mut self, depth: usize) -> Limits {
        self.max_depth = depth;
        self
    }

    /// `glob`: paths returned.
    pub fn with_max_paths(mut self, paths: usize) -> Limits {
        self.max_paths = paths;
        self
    }

    /// `grep`: records (matching and context lines) returned.
    pub fn with_max_matches(mut self, records: usize) -> Limits {
        self.max_matches = records;
        self
    }

    /// `grep`: a line longer than this many characters is cut.
    pub fn with_max_line_chars(mut self, chars: usize) -> Limits {
        self.max_line_chars = chars;
        self
    }

    /// `grep`: the largest `context` accepted.
    pub fn with_max_context(mut self, lines: usize) -> Limits {
        self.max_context = lines;
        self
    }

    /// `read_many_files`: bytes of one file returned.
    pub fn with_max_file_bytes(mut self, bytes: usize) -> Limits {
        self.max_file_bytes = bytes;
        self
    }

    /// `read_many_files`: bytes of all files returned.
    pub fn with_max_total_bytes(mut self, bytes: usize) -> Limits {
        self.max_total_bytes = bytes;
        self
    }

    /// `read_many_files`: files read.
    pub fn with_max_files(mut self, files: usize) -> Limits {
        self.max_files = files;
        self
    }

    /// `grep` and `glob`: the longest pattern accepted, in bytes.
    pub fn with_max_pattern_bytes(mut self, bytes: usize) -> Limits {
        self.max_pattern_bytes = bytes;
        self
    }

    /// `grep`: the most memory a compiled regular expression may take.
    pub fn with_regex_size_limit(mut self, bytes: usize) -> Limits {
        self.regex_size_limit = bytes;
        self
    }

    /// `grep`: the most memory each search thread's lazy DFA may take.
    pub fn with_regex_dfa_size_limit(mut self, bytes: usize) -> Limits {
        self.regex_dfa_size_limit = bytes;
        self
    }
}
