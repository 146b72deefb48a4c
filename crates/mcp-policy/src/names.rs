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

/// The name a model sees for `tool` of `server`: `<server>_<tool>`, sanitized.
///
/// ```
/// assert_eq!(core_agent_mcp_policy::namespaced("my-server", "get-env"), "my_server_get_env");
/// ```
pub fn namespaced(server: &str, tool: &str) -> String {
    format!("{}_{}", sanitize(server), sanitize(tool))
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
