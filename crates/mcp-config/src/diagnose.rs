//! Static checks of a loaded config, for `core-agent mcp doctor`.

use std::fmt;

use crate::{Cloud, Config, Env, Problem, ServerEntry, Template, Transport};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Something will not work; `doctor` exits 1.
    Error,
    /// Something works but should be fixed.
    Warning,
}

impl Severity {
    /// `"error"` or `"warning"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One thing `doctor` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// Which check found it, as a stable id (`missing-env`, `literal-secret`, …).
    pub check: &'static str,
    /// The server it concerns.
    pub server: Option<String>,
    /// The file and JSON pointer of the field it concerns.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.severity.as_str())?;
        if let Some(server) = &self.server {
            write!(f, "{server}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}; {}", self.message, self.fix)
    }
}

impl Finding {
    /// A config load problem as a finding.
    pub fn from_problem(p: &Problem) -> Finding {
        let at = match (p.line, p.column) {
            (Some(l), Some(c)) => format!("{}:{l}:{c} {}", p.path.display(), p.pointer),
            _ => format!("{} {}", p.path.display(), p.pointer),
        };
        Finding {
            severity: Severity::Error,
            check: "invalid-config",
            server: p.server.clone(),
            field: Some(at),
            message: p.message.clone(),
            fix: p.fix.clone(),
        }
    }
}

/// Runs every static check: environment references that resolve to
/// nothing, literal secrets in `headers`/`env`, and with `cloud`, what a
/// cloud deployment cannot run. Reads nothing but `env`.
pub fn diagnose(config: &Config, env: &dyn Env, cloud: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for server in &config.servers {
        for (field, name, template) in templates(server) {
            let pointer = pointer(server, field, name);
            for var in template.missing(env) {
                findings.push(Finding {
                    severity: Severity::Error,
                    check: "missing-env",
                    server: Some(server.name.clone()),
                    field: Some(pointer.clone()),
                    message: format!("`{var}` is set neither in the environment nor in .env, so it expands to nothing"),
                    fix: format!("export {var}, add `{var}=…` to the project's .env, or write ${{{var}:-default}}"),
                });
            }
            if !template.has_placeholders()
                && let Some(kind) = secret_kind(name, template.raw())
            {
                findings.push(Finding {
                    severity: Severity::Warning,
                    check: "literal-secret",
                    server: Some(server.name.clone()),
                    field: Some(pointer.clone()),
                    message: format!("`{name}` holds {kind} written into the config file"),
                    fix: format!(
                        "move the value to the project's .env (e.g. `{}=…`) and write ${{{}}} here, so the file can be committed",
                        env_name(&server.name, name),
                        env_name(&server.name, name)
                    ),
                });
            }
        }
        // `command`, `args` and `url` placeholders (the mcpServers dialect).
        for u in server.unexpanded(env) {
            let (name, key) = u.field.split_once('/').unwrap_or((u.field.as_str(), ""));
            let field = Some(pointer(server, name, key));
            let (severity, check, message, fix) = match &u.reason {
                crate::UnexpandedReason::Unset { name } => (
                    Severity::Error,
                    "missing-env",
                    format!("`{name}` is set neither in the environment nor in .env, so `{}` expands to nothing", u.placeholder),
                    format!("export {name}, add `{name}=…` to the project's .env, or write ${{{name}:-default}}"),
                ),
                crate::UnexpandedReason::Input => (
                    Severity::Error,
                    "unsupported-placeholder",
                    format!("`{}` is VS Code's prompt for a value when the server starts; core-agent asks nothing and passes it as written", u.placeholder),
                    "write ${NAME} instead and set NAME in the environment or the project's .env".to_owned(),
                ),
                _ => (
                    Severity::Warning,
                    "unexpanded-placeholder",
                    format!("`{}` is no placeholder core-agent expands here, so it is passed as written", u.placeholder),
                    "write ${NAME}, ${NAME:-default}, ${workspaceFolder} or ${userHome}; `$${` writes a literal `${`".to_owned(),
                ),
            };
            findings.push(Finding {
                severity,
                check,
                server: Some(server.name.clone()),
                field,
                message,
                fix,
            });
        }
        // A server marked `cloud: "disabled"` or `"localOnly"` is not run in
        // the cloud, so nothing about it can fail there.
        let local = matches!(server.spec.cloud, Some(Cloud::Disabled | Cloud::LocalOnly));
        if cloud && !local {
            match &server.spec.transport {
                Transport::Stdio(_) => {
                    findings.push(Finding {
                        severity: Severity::Error,
                        check: "cloud-stdio",
                        server: Some(server.name.clone()),
                        field: Some(pointer(server, "", "")),
                        message: "a local stdio server cannot run in a cloud deployment".to_owned(),
                        fix: "mark it \"cloud\": \"disabled\" or \"localOnly\", or use a remote https server".to_owned(),
                    });
                }
                Transport::Http(http) if is_loopback(&http.url) => {
                    findings.push(Finding {
                        severity: Severity::Error,
                        check: "cloud-loopback",
                        server: Some(server.name.clone()),
                        field: Some(pointer(server, "url", "")),
                        message: format!(
                            "`{}` is a loopback address: a cloud deployment cannot reach a server on this machine",
                            http.url
                        ),
                        fix: "mark it \"cloud\": \"disabled\" or \"localOnly\", or use the server's remote https endpoint".to_owned(),
                    });
                }
                Transport::Http(http) if !http.url.starts_with("https://") => {
                    findings.push(Finding {
                        severity: Severity::Error,
                        check: "cloud-http",
                        server: Some(server.name.clone()),
                        field: Some(pointer(server, "url", "")),
                        message: format!(
                            "`{}` is not https, so its traffic and tokens travel in clear",
                            http.url
                        ),
                        fix: "use the server's https:// endpoint, or mark it \"cloud\": \"disabled\" or \"localOnly\"".to_owned(),
                    });
                }
                Transport::Http(_) => {}
            }
        }
    }
    findings
}

/// Every template of a server: (field, key, template).
fn templates(server: &ServerEntry) -> Vec<(&'static str, &str, &Template)> {
    match &server.spec.transport {
        Transport::Stdio(s) => s.env.iter().map(|(k, t)| ("env", k.as_str(), t)).collect(),
        Transport::Http(h) => h
            .headers
            .iter()
            .map(|(k, t)| ("headers", k.as_str(), t))
            .collect(),
    }
}

/// `<file> /servers/<name>/<field>/<key>`, in the server's own dialect.
fn pointer(server: &ServerEntry, field: &str, key: &str) -> String {
    let root = server.dialect.servers_key();
    let mut p = format!("/{root}/{}", crate::escape_pointer(&server.name));
    for seg in [field, key] {
        if !seg.is_empty() {
            p.push('/');
            p.push_str(&crate::escape_pointer(seg));
        }
    }
    format!("{} {p}", server.source.display())
}

/// A variable name to suggest for a secret: `GITHUB_AUTHORIZATION`.
fn env_name(server: &str, key: &str) -> String {
    format!("{}_{}", server, key)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split(']')
            .next()
            .map(|h| h.trim_start_matches('['))
            .unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or_default()
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

/// What kind of secret `value` looks like, if any. Never returns the value.
pub fn secret_kind(key: &str, value: &str) -> Option<&'static str> {
    let v = value.trim();
    let key = key.to_ascii_lowercase();
    let token = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .map(str::trim);
    if let Some(t) = token
        && !t.is_empty()
    {
        return Some("a literal bearer token");
    }
    let words = |p: &str| {
        v.split(|c: char| c.is_whitespace() || c == '=')
            .any(|w| w.starts_with(p))
    };
    if words("ghp_") || words("gho_") || words("ghs_") || words("github_pat_") {
        return Some("a GitHub token");
    }
    if words("xoxb-") || words("xoxp-") {
        return Some("a Slack token");
    }
    if v.split_whitespace()
        .any(|w| w.starts_with("sk-") && w.len() >= 20)
    {
        return Some("an API key (`sk-…`)");
    }
    if v.split_whitespace().any(|w| {
        w.len() == 20
            && w.starts_with("AKIA")
            && w[4..]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    }) {
        return Some("an AWS access key id");
    }
    if (key == "authorization"
        || key.contains("token")
        || key.contains("secret")
        || key.contains("api_key"))
        && v.len() >= 16
        && !v.contains(' ')
    {
        return Some("what looks like a credential");
    }
    if v.len() >= 32 && !v.contains(char::is_whitespace) && entropy(v) >= 3.5 {
        let has_digit = v.chars().any(|c| c.is_ascii_digit());
        let has_alpha = v.chars().any(|c| c.is_ascii_alphabetic());
        let path_like = v.starts_with('/') || v.contains("://") || v.matches('/').count() > 2;
        if has_digit && has_alpha && !path_like {
            return Some("a long high-entropy string (likely a key)");
        }
    }
    None
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = s.chars().count() as f64;
    counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_shape() {
        let cases = [
            (
                "Authorization",
                "Bearer abc.def",
                Some("a literal bearer token"),
            ),
            (
                "X-Token",
                "ghp_0123456789abcdefghij0123456789abcdef",
                Some("a GitHub token"),
            ),
            (
                "X",
                "github_pat_11ABCDEFG0123456789",
                Some("a GitHub token"),
            ),
            ("SLACK", "xoxb-1234-5678-abcdef", Some("a Slack token")),
            (
                "OPENAI",
                "sk-proj-0123456789abcdef0123",
                Some("an API key (`sk-…`)"),
            ),
            ("AWS", "AKIAIOSFODNN7EXAMPLE", Some("an AWS access key id")),
            (
                "API_TOKEN",
                "0123456789abcdefXYZ",
                Some("what looks like a credential"),
            ),
            (
                "X-Key",
                "q8Zr3kLp0Wv7Yt2Nb5Mx9Hc4Jd6Fs1Ga",
                Some("a long high-entropy string (likely a key)"),
            ),
            ("LOG_LEVEL", "info", None),
            (
                "ROOT",
                "/usr/local/share/some/long/path/to/a/directory",
                None,
            ),
            ("URL", "https://example.com/some/long/path?with=query", None),
            ("Accept", "application/json, text/event-stream", None),
        ];
        for (key, value, want) in cases {
            assert_eq!(secret_kind(key, value), want, "{key}={value}");
        }
    }

    #[test]
    fn loopback_urls() {
        for url in [
            "http://127.0.0.1:3000/mcp",
            "http://localhost/mcp",
            "http://[::1]:80/",
            "http://u@127.0.0.2/x",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "http://example.com/mcp",
            "http://10.0.0.1/mcp",
            "http://localhost.evil.com/",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }
}
