/// The bounds on what one operation returns. Counts past a bound are still
/// counted (`total`, `count`), only the records are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        }
    }
}
