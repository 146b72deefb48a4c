/// Replaces every character outside `[A-Za-z0-9_]` with `_`.
///
/// ```
/// assert_eq!(core_agent_mcp_policy::sanitize("file.system"), "file_system");
/// ```
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The name a model sees for `tool` of `server` before collisions and
/// length are handled: `<server>_<tool>`, sanitized.
///
/// ```
/// assert_eq!(core_agent_mcp_policy::namespaced("my-server", "get-env"), "my_server_get_env");
/// ```
pub fn namespaced(server: &str, tool: &str) -> String {
    format!("{}_{}", sanitize(server), sanitize(tool))
}

/// How a catalog names its tools.
///
/// ```
/// use core_agent_mcp_policy::Naming;
///
/// assert_eq!(Naming::Prefixed.name("my-server", "get-env"), "my_server_get_env");
/// assert_eq!(Naming::Bare.name("my-server", "get-env"), "get_env");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Naming {
    /// `<server>_<tool>` ([`namespaced`]): tools of many servers side by side.
    #[default]
    Prefixed,
    /// The server's own tool name, sanitized: for a catalog of one server
    /// served transparently. Names that collide still get a suffix.
    Bare,
}

impl Naming {
    /// The name a model sees for `tool` of `server` before collisions,
    /// reserved names and length are handled.
    pub fn name(self, server: &str, tool: &str) -> String {
        match self {
            Naming::Prefixed => namespaced(server, tool),
            Naming::Bare => sanitize(tool),
        }
    }
}

/// The published names of `(server, name)` pairs under the rules tool
/// names follow: named by `naming` and sanitized, a name several pairs
/// share gets a suffix from each pair's identity, and a name over
/// [`MAX_NAME`] is shortened. Prompts are named this way.
///
/// ```
/// use core_agent_mcp_policy::{Naming, unique_names};
///
/// let names = unique_names(Naming::Prefixed, &[("a-b", "c"), ("a", "b_c"), ("fs", "hi")]);
/// assert_eq!(names[2], "fs_hi");
/// assert!(names[0].starts_with("a_b_c_") && names[0] != names[1]);
/// assert_eq!(unique_names(Naming::Bare, &[("fs", "hi")]), ["hi"]);
/// ```
pub fn unique_names(naming: Naming, pairs: &[(&str, &str)]) -> Vec<String> {
    let names: Vec<String> = pairs.iter().map(|(s, n)| naming.name(s, n)).collect();
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for name in &names {
        *seen.entry(name.as_str()).or_default() += 1;
    }
    names
        .iter()
        .zip(pairs)
        .map(|(name, (server, item))| match seen.get(name.as_str()) {
            Some(n) if *n > 1 => disambiguated(name, server, item),
            _ => fit(name),
        })
        .collect()
}

/// Longest published name.
pub const MAX_NAME: usize = 64;

/// `name` if it fits in 64 characters, else a readable prefix plus `_` and
/// a stable 8-hex-digit hash of the whole name.
pub(crate) fn fit(name: &str) -> String {
    if name.len() <= MAX_NAME {
        return name.to_owned();
    }
    // Sanitized names are ASCII, so byte slicing is safe.
    format!("{}_{}", &name[..MAX_NAME - 9], hash8(name))
}

/// `name` with a suffix from the (server, tool) identity, fitted to 64.
pub(crate) fn disambiguated(name: &str, server: &str, tool: &str) -> String {
    let suffix = hash8(&format!("{server}\u{0}{tool}"));
    let base = if name.len() + 9 > MAX_NAME {
        &name[..MAX_NAME - 9]
    } else {
        name
    };
    format!("{base}_{suffix}")
}

/// The first 8 hex digits of the 64-bit FNV-1a hash: stable across runs,
/// platforms and versions.
fn hash8(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", h >> 32)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn examples_from_the_spec() {
        assert_eq!(
            namespaced("filesystem", "read_file"),
            "filesystem_read_file"
        );
        assert_eq!(namespaced("my-server", "x"), "my_server_x");
        assert_eq!(namespaced("file.system", "x"), "file_system_x");
        assert_eq!(sanitize("ünï cödé"), "_n__c_d_");
    }

    #[test]
    fn long_names_are_shortened_stably() {
        let long = "a".repeat(70);
        let short = fit(&long);
        assert_eq!(short.len(), 64);
        assert!(short.starts_with(&"a".repeat(55)));
        assert_eq!(short, fit(&long));
        assert_ne!(fit(&format!("{long}b")), fit(&format!("{long}c")));
        assert_eq!(hash8("core-agent"), hash8("core-agent"));
        assert_eq!(fit("short"), "short");
    }

    proptest! {
        #[test]
        fn sanitized_names_use_only_the_safe_alphabet(s in ".*") {
            let out = sanitize(&s);
            prop_assert!(out.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            prop_assert_eq!(out.chars().count(), s.chars().count());
            prop_assert_eq!(sanitize(&out), out.clone()); // idempotent
        }
    }
}
