use std::fmt;
use std::path::{Path, PathBuf};

/// A permission pattern: `namespace:glob`, such as `mcp:filesystem_*`.
///
/// The glob is matched against the namespaced tool name (`*`, `?`, `[…]`,
/// `{a,b}` as in `globset`).
#[derive(Debug, Clone)]
pub struct Pattern {
    raw: String,
    namespace: String,
    matcher: globset::GlobMatcher,
    source: PathBuf,
}

impl Pattern {
    /// Parses `raw`, written in `source`.
    pub fn parse(raw: &str, source: &Path) -> Result<Pattern, String> {
        let Some((namespace, glob)) = raw.split_once(':') else {
            return Err(format!("`{raw}` has no namespace"));
        };
        if namespace.is_empty() || glob.is_empty() {
            return Err(format!("`{raw}` needs both a namespace and a glob"));
        }
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(false)
            .build()
            .map_err(|e| format!("`{raw}` is not a valid glob: {}", e.kind()))?
            .compile_matcher();
        Ok(Pattern {
            raw: raw.to_owned(),
            namespace: namespace.to_owned(),
            matcher,
            source: source.to_owned(),
        })
    }

    /// Whether the pattern covers tool `name` in `namespace`.
    pub fn matches(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace && self.matcher.is_match(name)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Its namespace (`mcp`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The file it came from.
    pub fn source(&self) -> &Path {
        &self.source
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(raw: &str) -> Pattern {
        Pattern::parse(raw, Path::new("config.json")).unwrap()
    }

    #[test]
    fn patterns_match_namespaced_names() {
        let cases = [
            ("mcp:filesystem_read_file", "filesystem_read_file", true),
            ("mcp:filesystem_read_file", "filesystem_read_files", false),
            ("mcp:filesystem_*", "filesystem_write_file", true),
            ("mcp:filesystem_*", "fs_write_file", false),
            ("mcp:*", "anything_at_all", true),
            ("mcp:*_{read,list}_*", "gke_list_k8s_events", true),
            ("mcp:gke_get_?", "gke_get_x", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(p(pattern).matches("mcp", name), want, "{pattern} vs {name}");
        }
        assert!(!p("bash:*").matches("mcp", "x"));
    }

    #[test]
    fn bad_patterns_say_why() {
        let err = |raw: &str| Pattern::parse(raw, Path::new("c.json")).unwrap_err();
        assert_eq!(err("filesystem_*"), "`filesystem_*` has no namespace");
        assert_eq!(err("mcp:"), "`mcp:` needs both a namespace and a glob");
        assert!(err("mcp:[abc").starts_with("`mcp:[abc` is not a valid glob"));
    }
}
