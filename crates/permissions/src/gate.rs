use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::{Mode, Pattern, PermissionsConfig};

/// The namespace every MCP tool call is gated under.
pub const MCP: &str = "mcp";

/// The namespace of the host's built-in tools (`retrieve_raw`, …).
pub const BUILTIN: &str = "builtin";

/// Longest detail string shown when asking.
pub const DETAIL_CHARS: usize = 200;

/// A call the gate is asked about.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The namespace patterns are matched in: [`MCP`] for MCP tools,
    /// [`BUILTIN`] for the host's built-ins.
    pub namespace: &'a str,
    /// The namespaced tool name.
    pub name: &'a str,
    /// Its arguments (borrowed: the gate reads them only to describe an ask).
    pub arguments: &'a Map<String, Value>,
    /// Its dispatch class.
    pub read_only: bool,
}

/// What the gate says about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it; `reason` says why and `advice` what would allow it.
    Deny {
        /// Why.
        reason: String,
        /// What would allow it (the pattern to add, the call to make first).
        advice: String,
    },
    /// Ask the [`Prompter`] with this detail string.
    Ask {
        /// `<tool_name> <json-args>`, cut at 200 characters.
        detail: String,
    },
}

/// Which rule made the gate's [`Decision`], as [`Gate::decide_with_rule`]
/// tells it: what an audit trail records beside the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// `permissions.mode` is `yolo`: everything runs.
    Yolo,
    /// This `permissions.deny` pattern refused it.
    Deny(String),
    /// Plan-first (`permissions.require_plan_artifact`) refused a mutating
    /// call before `record_plan`.
    PlanFirst,
    /// An "always" answer earlier in the session allowed it.
    Always,
    /// This `permissions.allow` pattern allowed it.
    Allow(String),
    /// No pattern allowed it in `allowlist` mode.
    NotAllowed,
    /// No pattern decided it in `ask` mode: the prompter is asked.
    Ask,
}

impl std::fmt::Display for Rule {
    /// `mode yolo`, `deny mcp:fs_*`, `plan-first`, `always`,
    /// `allow mcp:fs_read`, `not allowlisted`, `ask`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Yolo => f.write_str("mode yolo"),
            Rule::Deny(p) => write!(f, "deny {p}"),
            Rule::PlanFirst => f.write_str("plan-first"),
            Rule::Always => f.write_str("always"),
            Rule::Allow(p) => write!(f, "allow {p}"),
            Rule::NotAllowed => f.write_str("not allowlisted"),
            Rule::Ask => f.write_str("ask"),
        }
    }
}

/// A person's (or a policy's) answer to an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Run this call.
    Yes,
    /// Refuse this call.
    No,
    /// Run this call and every later call of the same tool in this session.
    Always,
}

/// A boxed future that can be sent across threads, as [`Prompter::ask`] returns.
pub type AskFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send + 'a>>;

/// Answers the gate's asks: a TTY prompt, a headless policy, or a gateway
/// forwarding to its own client.
///
/// The answer is a future, so an implementation may wait on something slow
/// (a person at a terminal, a client answering an elicitation) without
/// blocking a runtime thread. The host waits for it as long as it takes; an
/// implementation that may never answer should answer [`Answer::No`] after a
/// deadline of its own. Dropping the future (the call was cancelled) must be
/// harmless.
pub trait Prompter: Send + Sync {
    /// Answers the ask about `tool`, shown to a person as `detail`.
    fn ask<'a>(&'a self, tool: &'a str, detail: &'a str) -> AskFuture<'a>;
}

/// A prompter that refuses every ask: for runs with nobody to ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct RefuseAll;

impl Prompter for RefuseAll {
    fn ask<'a>(&'a self, _tool: &'a str, _detail: &'a str) -> AskFuture<'a> {
        Box::pin(std::future::ready(Answer::No))
    }
}

/// A prompter that approves every ask (`--yes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Prompter for ApproveAll {
    fn ask<'a>(&'a self, _tool: &'a str, _detail: &'a str) -> AskFuture<'a> {
        Box::pin(std::future::ready(Answer::Yes))
    }
}

/// The permission gate of one session.
#[derive(Debug, Clone)]
pub struct Gate {
    config: PermissionsConfig,
    mode: Mode,
    plan_recorded: bool,
    session_allow: BTreeSet<String>,
}

impl Gate {
    /// A gate with `config`; `mode` overrides the configured mode.
    pub fn new(config: PermissionsConfig, mode: Option<Mode>) -> Gate {
        let mode = mode.unwrap_or(config.mode);
        Gate {
            config,
            mode,
            plan_recorded: false,
            session_allow: BTreeSet::new(),
        }
    }

    /// The mode in force.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The config the gate was built from.
    pub fn config(&self) -> &PermissionsConfig {
        &self.config
    }

    /// Decides a call: in `yolo` mode everything runs; otherwise a deny
    /// pattern refuses, then plan-first refuses a mutating call before
    /// `record_plan`, then an allow pattern (or an earlier "always") runs it;
    /// what is left is asked about in `ask` mode and refused in `allowlist` mode.
    pub fn decide(&self, request: Request<'_>) -> Decision {
        self.decide_with_rule(request).0
    }

    /// [`Gate::decide`], with the rule that decided (for an audit trail).
    pub fn decide_with_rule(&self, request: Request<'_>) -> (Decision, Rule) {
        if self.mode == Mode::Yolo {
            return (Decision::Allow, Rule::Yolo);
        }
        let name = request.name;
        let ns = request.namespace;
        if let Some(p) = self.config.deny.iter().find(|p| p.matches(ns, name)) {
            let decision = Decision::Deny {
                reason: format!("`{name}` is denied by `{p}` in {}", p.source().display()),
                advice: "remove that pattern from permissions.deny to allow it".to_owned(),
            };
            return (decision, Rule::Deny(p.to_string()));
        }
        if self.config.require_plan_artifact && !request.read_only && !self.plan_recorded {
            let decision = Decision::Deny {
                reason: format!(
                    "plan-first is on (permissions.require_plan_artifact) and `{name}` changes state, but no plan has been recorded in this session"
                ),
                advice: "call `record_plan` with your plan first; read-only tools need no plan"
                    .to_owned(),
            };
            return (decision, Rule::PlanFirst);
        }
        if self.session_allow.contains(name) {
            return (Decision::Allow, Rule::Always);
        }
        if let Some(p) = self.config.allow.iter().find(|p| p.matches(ns, name)) {
            return (Decision::Allow, Rule::Allow(p.to_string()));
        }
        match self.mode {
            Mode::Allowlist => {
                let decision = Decision::Deny {
                    reason: format!(
                        "`{name}` is not on the allowlist (permissions.mode is \"allowlist\")"
                    ),
                    advice: format!(
                        "add \"{ns}:{name}\" to permissions.allow in {}",
                        self.config_file()
                    ),
                };
                (decision, Rule::NotAllowed)
            }
            _ => {
                let decision = Decision::Ask {
                    detail: detail(name, request.arguments),
                };
                (decision, Rule::Ask)
            }
        }
    }

    /// The project's `config.json`, as advice names it.
    pub fn config_file(&self) -> String {
        self.config.project_file.as_ref().map_or_else(
            || "the project's config.json".to_owned(),
            |p| p.display().to_string(),
        )
    }

    /// Records that the plan exists: mutating calls may run from now on.
    pub fn record_plan(&mut self) {
        self.plan_recorded = true;
    }

    /// Whether `record_plan` has run in this session.
    pub fn plan_recorded(&self) -> bool {
        self.plan_recorded
    }

    /// Allows `name` for the rest of the session (an "always" answer).
    pub fn allow_for_session(&mut self, name: &str) {
        self.session_allow.insert(name.to_owned());
    }

    /// Whether `wait_and_verify` may poll `name`: read-only tools always,
    /// mutating ones only when `tools.wait_and_verify.poll_allow` lists them
    /// (by name, or by an `mcp:` pattern).
    pub fn may_poll(&self, name: &str, read_only: bool) -> bool {
        read_only
            || self
                .config
                .poll_allow
                .iter()
                .any(|p| p.matches(MCP, name) || p.as_str() == name)
    }

    /// The `mcp:` and `builtin:` patterns that match none of `tools`, given
    /// as `(namespace, name)` (likely typos). Other namespaces belong to
    /// other tools and are not checked.
    pub fn unmatched_patterns<'a>(&'a self, tools: &[(&str, &str)]) -> Vec<&'a Pattern> {
        self.config
            .allow
            .iter()
            .chain(&self.config.deny)
            .filter(|p| {
                (p.namespace() == MCP || p.namespace() == BUILTIN)
                    && !tools.iter().any(|(ns, n)| p.matches(ns, n))
            })
            .collect()
    }
}

/// The detail string of an ask: `<tool_name> <json-args>`, cut at 200 characters.
pub fn detail(name: &str, arguments: &Map<String, Value>) -> String {
    // A map with string keys always serializes.
    let arguments = serde_json::to_string(arguments).unwrap_or_default();
    let full = format!("{name} {arguments}");
    if full.chars().count() <= DETAIL_CHARS {
        full
    } else {
        let cut: String = full.chars().take(DETAIL_CHARS - 1).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;

    /// The arguments of a call, as the gate borrows them.
    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("arguments are an object, not {other}"),
        }
    }

    fn patterns(raw: &[&str]) -> Vec<Pattern> {
        raw.iter()
            .map(|r| Pattern::parse(r, Path::new(".agents/config.json")).unwrap())
            .collect()
    }

    fn gate(mode: Mode, allow: &[&str], deny: &[&str], plan_first: bool) -> Gate {
        Gate::new(
            PermissionsConfig {
                mode,
                allow: patterns(allow),
                deny: patterns(deny),
                require_plan_artifact: plan_first,
                ..PermissionsConfig::default()
            },
            None,
        )
    }

    fn kind(d: &Decision) -> &'static str {
        match d {
            Decision::Allow => "allow",
            Decision::Deny { .. } => "deny",
            Decision::Ask { .. } => "ask",
        }
    }

    #[test]
    fn each_decision_names_the_rule_that_made_it() {
        let args = args(json!({}));
        let request = |name, read_only| Request {
            namespace: MCP,
            name,
            arguments: &args,
            read_only,
        };
        let mut g = gate(Mode::Ask, &["mcp:fs_*"], &["mcp:fs_write"], true);
        let rule = |g: &Gate, name, read_only| g.decide_with_rule(request(name, read_only)).1;
        assert_eq!(
            rule(&g, "fs_write", false),
            Rule::Deny("mcp:fs_write".into())
        );
        assert_eq!(rule(&g, "fs_move", false), Rule::PlanFirst);
        assert_eq!(rule(&g, "fs_read", true), Rule::Allow("mcp:fs_*".into()));
        assert_eq!(rule(&g, "git_log", true), Rule::Ask);
        g.allow_for_session("git_log");
        assert_eq!(rule(&g, "git_log", true), Rule::Always);
        let strict = gate(Mode::Allowlist, &[], &[], false);
        assert_eq!(rule(&strict, "git_log", true), Rule::NotAllowed);
        let yolo = gate(Mode::Yolo, &[], &["mcp:*"], false);
        assert_eq!(rule(&yolo, "git_log", true), Rule::Yolo);
        assert_eq!(Rule::Allow("mcp:fs_*".into()).to_string(), "allow mcp:fs_*");
        // The decision is the one `decide` gives.
        for name in ["fs_write", "fs_move", "fs_read", "git_log"] {
            assert_eq!(
                g.decide_with_rule(request(name, false)).0,
                g.decide(request(name, false))
            );
        }
    }

    #[test]
    fn every_rule_in_order() {
        let args = args(json!({"path": "/tmp"}));
        // (mode, allow, deny, plan-first, tool, read_only) → decision
        #[allow(clippy::type_complexity)]
        let cases: [(Mode, &[&str], &[&str], bool, &str, bool, &str); 12] = [
            (Mode::Ask, &[], &[], false, "fs_read", true, "ask"),
            (
                Mode::Ask,
                &["mcp:fs_read"],
                &[],
                false,
                "fs_read",
                true,
                "allow",
            ),
            (
                Mode::Ask,
                &["mcp:fs_*"],
                &["mcp:fs_write"],
                false,
                "fs_write",
                false,
                "deny",
            ), // deny beats allow
            (
                Mode::Ask,
                &["mcp:*"],
                &[],
                false,
                "fs_write",
                false,
                "allow",
            ),
            (Mode::Allowlist, &[], &[], false, "fs_read", true, "deny"),
            (
                Mode::Allowlist,
                &["mcp:fs_read"],
                &[],
                false,
                "fs_read",
                true,
                "allow",
            ),
            (
                Mode::Yolo,
                &[],
                &["mcp:*"],
                true,
                "fs_write",
                false,
                "allow",
            ), // yolo skips the gate
            (Mode::Ask, &["mcp:*"], &[], true, "fs_write", false, "deny"), // plan-first
            (Mode::Ask, &["mcp:*"], &[], true, "fs_read", true, "allow"),  // reads are exempt
            (Mode::Ask, &[], &[], true, "fs_read", true, "ask"),
            (
                Mode::Ask,
                &[],
                &["mcp:fs_read"],
                true,
                "fs_read",
                true,
                "deny",
            ),
            (Mode::Ask, &["bash:*"], &[], false, "fs_read", true, "ask"), // other namespaces do not apply
        ];
        for (mode, allow, deny, plan, tool, read_only, want) in cases {
            let g = gate(mode, allow, deny, plan);
            let d = g.decide(Request {
                namespace: MCP,
                name: tool,
                arguments: &args,
                read_only,
            });
            assert_eq!(
                kind(&d),
                want,
                "{mode:?} allow {allow:?} deny {deny:?} plan {plan} {tool}"
            );
        }
    }

    #[test]
    fn refusals_say_why_and_what_would_allow() {
        let args = args(json!({}));
        let g = gate(Mode::Allowlist, &[], &[], false);
        assert_eq!(
            g.decide(Request {
                namespace: MCP,
                name: "fs_write",
                arguments: &args,
                read_only: false
            }),
            Decision::Deny {
                reason: "`fs_write` is not on the allowlist (permissions.mode is \"allowlist\")"
                    .into(),
                advice: "add \"mcp:fs_write\" to permissions.allow in the project's config.json"
                    .into(),
            }
        );
        let g = gate(Mode::Ask, &[], &["mcp:fs_*"], false);
        let Decision::Deny { reason, .. } = g.decide(Request {
            namespace: MCP,
            name: "fs_x",
            arguments: &args,
            read_only: true,
        }) else {
            panic!("deny")
        };
        assert_eq!(
            reason,
            "`fs_x` is denied by `mcp:fs_*` in .agents/config.json"
        );
    }

    #[test]
    fn plan_first_lifts_after_record_plan() {
        let mut g = gate(Mode::Ask, &["mcp:*"], &[], true);
        let args = args(json!({}));
        let write = Request {
            namespace: MCP,
            name: "fs_write",
            arguments: &args,
            read_only: false,
        };
        assert_eq!(kind(&g.decide(write)), "deny");
        g.record_plan();
        assert_eq!(kind(&g.decide(write)), "allow");
    }

    #[test]
    fn always_allows_the_tool_for_the_session() {
        let mut g = gate(Mode::Ask, &[], &[], false);
        let args = args(json!({}));
        let r = Request {
            namespace: MCP,
            name: "fs_write",
            arguments: &args,
            read_only: false,
        };
        assert_eq!(kind(&g.decide(r)), "ask");
        g.allow_for_session("fs_write");
        assert_eq!(kind(&g.decide(r)), "allow");
    }

    #[test]
    fn the_detail_is_cut_at_200_characters() {
        assert_eq!(
            detail("fs_read", &args(json!({"path": "/tmp"}))),
            r#"fs_read {"path":"/tmp"}"#
        );
        let long = detail("t", &args(json!({"x": "y".repeat(500)})));
        assert_eq!(long.chars().count(), 200);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn unmatched_patterns_are_found() {
        let g = gate(
            Mode::Ask,
            &["mcp:fs_*", "mcp:gh_*", "bash:ls"],
            &["mcp:fs_delete"],
            false,
        );
        let tools = [
            (MCP, "fs_read"),
            (MCP, "fs_write"),
            (BUILTIN, "retrieve_raw"),
        ];
        let unmatched: Vec<&str> = g
            .unmatched_patterns(&tools)
            .iter()
            .map(|p| p.as_str())
            .collect();
        assert_eq!(unmatched, ["mcp:gh_*", "mcp:fs_delete"]);
        let g = gate(Mode::Ask, &["builtin:retrieve_row"], &[], false);
        assert_eq!(g.unmatched_patterns(&tools).len(), 1);
    }

    #[test]
    fn built_ins_are_matched_in_their_own_namespace() {
        let args = args(json!({}));
        let raw = |g: &Gate| {
            kind(&g.decide(Request {
                namespace: BUILTIN,
                name: "retrieve_raw",
                arguments: &args,
                read_only: true,
            }))
        };
        assert_eq!(raw(&gate(Mode::Allowlist, &["mcp:*"], &[], false)), "deny");
        assert_eq!(
            raw(&gate(
                Mode::Allowlist,
                &["builtin:retrieve_raw"],
                &[],
                false
            )),
            "allow"
        );
        assert_eq!(raw(&gate(Mode::Ask, &[], &[], false)), "ask");
        assert_eq!(
            raw(&gate(Mode::Ask, &["mcp:*"], &["builtin:*"], false)),
            "deny"
        );
        let Decision::Deny { advice, .. } =
            gate(Mode::Allowlist, &[], &[], false).decide(Request {
                namespace: BUILTIN,
                name: "retrieve_raw",
                arguments: &args,
                read_only: true,
            })
        else {
            panic!("deny")
        };
        assert!(
            advice.starts_with("add \"builtin:retrieve_raw\""),
            "{advice}"
        );
    }

    #[test]
    fn polling_needs_read_only_or_poll_allow() {
        let mut g = gate(Mode::Ask, &[], &[], false);
        assert!(g.may_poll("fs_read", true));
        assert!(!g.may_poll("jobs_start", false));
        g.config.poll_allow = patterns(&["mcp:jobs_*"]);
        assert!(g.may_poll("jobs_start", false));
    }
}
