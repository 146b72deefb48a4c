use std::collections::{BTreeMap, BTreeSet};

use core_agent_mcp_config::{PinMode, ServerSpec, TrustLevel};

use crate::catalog::{Catalog, CatalogEntry, DiscoveredTool, Restricted, ServerTools};
use crate::names::{Naming, disambiguated, fit};
use crate::pin::Verdict;
use crate::summary::{LeftOutBy, ServerSummary};
use crate::warning::Warning;

/// Each server's pin verdicts, by server name, then by the server's own
/// tool name: the input of [`CatalogBuilder::with_verdicts`].
pub type Verdicts = BTreeMap<String, BTreeMap<String, Verdict>>;

/// Builds [`Catalog`]s: what a build needs beyond each server's tools and
/// config, the names kept free for the host's built-ins and the pin
/// verdicts; by default neither.
///
/// ```
/// # use core_agent_mcp_policy::{Catalog, ServerTools, Verdicts};
/// # let servers: Vec<ServerTools<'_>> = Vec::new();
/// let catalog = Catalog::builder()
///     .with_reserved(["record_plan", "retrieve_raw"])
///     .with_verdicts(Verdicts::new())
///     .build(servers);
/// assert!(catalog.entries().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a CatalogBuilder builds nothing until `build` is called"]
pub struct CatalogBuilder {
    reserved: BTreeSet<String>,
    verdicts: Verdicts,
    naming: Naming,
}

impl CatalogBuilder {
    /// Keeps these names (the host's built-ins) free: a tool that would be
    /// published under one gets a suffix from its (server, tool) identity
    /// and a `reserved-name` warning.
    pub fn with_reserved(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> CatalogBuilder {
        self.reserved = names.into_iter().map(Into::into).collect();
        self
    }

    /// Checks each server's tools against their pins (see [`Lock::check`](crate::Lock::check))
    /// after the allowlist and blocklist: under the server's `pin` mode, a
    /// changed tool gets a warning with what changed (`warn`) or is
    /// quarantined (`strict`, as is every tool of a strict server whose
    /// pins could not be read); `off` ignores the verdicts.
    pub fn with_verdicts(mut self, verdicts: Verdicts) -> CatalogBuilder {
        self.verdicts = verdicts;
        self
    }

    /// How tools are named: `<server>_<tool>` ([`Naming::Prefixed`], the
    /// default), or each server's own names ([`Naming::Bare`], for a
    /// catalog of one server). Either way, names are then made valid,
    /// unique and free of the reserved ones, so under `Bare` a tool named
    /// like a built-in still gets a suffix and a `reserved-name` warning.
    pub fn with_naming(mut self, naming: Naming) -> CatalogBuilder {
        self.naming = naming;
        self
    }

    /// Builds the catalog: for each server, in the order given, the allowlist
    /// and blocklist filter the server's own names, the pin verdicts are
    /// applied, tools whose schema is too large are quarantined, `max_tools`
    /// caps the rest, notes are appended, the dispatch class and trust
    /// levels are decided; then every name is made valid, unique and free
    /// of the reserved ones.
    pub fn build<'a>(&self, servers: impl IntoIterator<Item = ServerTools<'a>>) -> Catalog {
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        let mut summaries = BTreeMap::new();
        for server in servers {
            let mut summary = ServerSummary {
                listed: server.tools.len(),
                ..ServerSummary::default()
            };
            let server_entries = server_entries(
                server,
                self.naming,
                self.verdicts.get(server.name),
                &mut warnings,
                &mut summary.left_out,
            );
            summary.published = server_entries.len();
            summaries.insert(server.name.to_owned(), summary);
            entries.extend(server_entries);
        }
        name_entries(&mut entries, &mut warnings, &self.reserved);
        Catalog::new(entries, warnings, summaries, self.naming)
    }
}

fn server_entries(
    server: ServerTools<'_>,
    naming: Naming,
    verdicts: Option<&BTreeMap<String, Verdict>>,
    warnings: &mut Vec<Warning>,
    left_out: &mut BTreeMap<LeftOutBy, usize>,
) -> Vec<CatalogEntry> {
    let spec = server.spec;
    let name = server.name.to_owned();
    // A name that is not a valid MCP tool name is never published (nor
    // listed in a warning whole): one warning counts them.
    let (valid, invalid): (Vec<&DiscoveredTool>, Vec<&DiscoveredTool>) = server
        .tools
        .iter()
        .partition(|t| crate::valid_tool_name(&t.name));
    if !invalid.is_empty() {
        *left_out.entry(LeftOutBy::InvalidName).or_default() += invalid.len();
        warnings.push(Warning::InvalidNames {
            server: name.clone(),
            count: invalid.len(),
            examples: invalid
                .iter()
                .take(3)
                .map(|t| crate::elide(&crate::strip_controls(&t.name), 32).into_owned())
                .collect(),
        });
    }
    let exposed: Vec<String> = valid.iter().map(|t| t.name.clone()).collect();
    let exposed_set: BTreeSet<&str> = exposed.iter().map(String::as_str).collect();

    let unknown: Vec<String> = spec
        .tools
        .iter()
        .filter(|t| !exposed_set.contains(t.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        warnings.push(Warning::UnknownAllowed {
            server: name.clone(),
            names: unknown,
            exposed: exposed.clone(),
        });
    }
    let allowed = |t: &str| {
        (spec.tools.is_empty() || spec.tools.iter().any(|a| a == t))
            && !spec.blocked_tools.iter().any(|b| b == t)
    };
    let (unknown_notes, excluded_notes): (Vec<String>, Vec<String>) = spec
        .tool_notes
        .keys()
        .filter(|k| !exposed_set.contains(k.as_str()) || !allowed(k))
        .cloned()
        .partition(|k| !exposed_set.contains(k.as_str()));
    if !unknown_notes.is_empty() {
        warnings.push(Warning::UnknownNotes {
            server: name.clone(),
            names: unknown_notes,
            exposed: exposed.clone(),
        });
    }
    if !excluded_notes.is_empty() {
        warnings.push(Warning::ExcludedNotes {
            server: name.clone(),
            names: excluded_notes,
        });
    }

    for tool in valid.iter().filter(|t| !allowed(&t.name)) {
        let by = if spec.blocked_tools.contains(&tool.name) {
            LeftOutBy::Blocklist
        } else {
            LeftOutBy::Allowlist
        };
        *left_out.entry(by).or_default() += 1;
    }
    let mut kept: Vec<&DiscoveredTool> = Vec::new();
    let mut unverified: Vec<String> = Vec::new();
    for tool in valid.iter().copied().filter(|t| allowed(&t.name)) {
        let verdict = match spec.pin {
            PinMode::Off => None,
            _ => verdicts.and_then(|v| v.get(&tool.name)),
        };
        let strict = spec.pin == PinMode::Strict;
        match verdict {
            Some(Verdict::Changed(change)) => {
                warnings.push(Warning::ToolChanged {
                    server: name.clone(),
                    tool: tool.name.clone(),
                    change: change.clone(),
                    quarantined: strict,
                });
                if strict {
                    *left_out.entry(LeftOutBy::Quarantine).or_default() += 1;
                    continue;
                }
            }
            Some(Verdict::Unverified) if strict => {
                *left_out.entry(LeftOutBy::Quarantine).or_default() += 1;
                unverified.push(tool.name.clone());
                continue;
            }
            _ => {}
        }
        let bytes = tool.input_schema.to_string().len();
        if bytes > spec.limits.max_input_schema_bytes {
            *left_out.entry(LeftOutBy::SchemaSize).or_default() += 1;
            warnings.push(Warning::SchemaTooLarge {
                server: name.clone(),
                tool: tool.name.clone(),
                bytes,
                limit: spec.limits.max_input_schema_bytes,
            });
        } else {
            kept.push(tool);
        }
    }
    if !unverified.is_empty() {
        warnings.push(Warning::Unverified {
            server: name.clone(),
            tools: unverified,
        });
    }
    if kept.len() > spec.limits.max_tools {
        *left_out.entry(LeftOutBy::MaxTools).or_default() += kept.len() - spec.limits.max_tools;
        let dropped = kept
            .split_off(spec.limits.max_tools)
            .iter()
            .map(|t| t.name.clone())
            .collect();
        warnings.push(Warning::TooManyTools {
            server: name.clone(),
            limit: spec.limits.max_tools,
            dropped,
        });
    }

    kept.into_iter()
        .map(|tool| {
            // Control characters (terminal escapes) never reach a client.
            let own = crate::strip_controls(&tool.description);
            let description = match spec.tool_notes.get(&tool.name) {
                Some(note) if own.is_empty() => note.clone(),
                Some(note) => format!("{own}\n\n{note}"),
                None => own.into_owned(),
            };
            // The tool's own block wins in both directions; a block without
            // readOnlyHint has answered "mutating"; no block defers to the server.
            let read_only = match tool.annotations {
                Some(a) => a.read_only_hint.unwrap_or(false),
                None => spec.read_only,
            };
            let (trust_levels, restricted) = trust_levels(spec, tool, read_only);
            CatalogEntry {
                name: naming.name(server.name, &tool.name),
                server: name.clone(),
                tool: tool.name.clone(),
                description,
                input_schema: tool.input_schema.clone(),
                read_only,
                trust_levels,
                restricted,
            }
        })
        .collect()
}

/// The levels that may call `tool`, and why that is not every level.
///
/// One rule for annotated and unannotated tools alike: by default a tool is
/// open to every level only when it is read-only (`read_only`, the dispatch
/// class: its own `readOnlyHint`, or its server's `read_only` when it
/// published no annotation block) or explicitly non-destructive
/// (`destructiveHint: false`), and not explicitly open-world
/// (`openWorldHint: true`); anything else is `creator` only. Only what a
/// tool says counts: an absent `destructiveHint` is not "non-destructive",
/// and an absent `openWorldHint` is not "open-world" (the protocol reads
/// both as `true`; this rule does not). The operator's word replaces the
/// default, narrowing or widening it: a tool policy sets that tool's
/// levels, else the server's `allowedTrustLevels` sets the levels of each
/// of its tools.
fn trust_levels(
    spec: &ServerSpec,
    tool: &DiscoveredTool,
    read_only: bool,
) -> (Vec<TrustLevel>, Vec<Restricted>) {
    if let Some(explicit) = spec.tool_policies.get(&tool.name) {
        return operators(explicit, Restricted::ToolPolicy);
    }
    if let Some(allowed) = &spec.allowed_trust_levels {
        return operators(allowed, Restricted::ServerPolicy);
    }
    let hints = tool.annotations.unwrap_or_default();
    let mut why = Vec::new();
    if !read_only && hints.destructive_hint != Some(false) {
        why.push(Restricted::Mutating);
    }
    if hints.open_world_hint == Some(true) {
        why.push(Restricted::OpenWorld);
    }
    let levels = if why.is_empty() {
        TrustLevel::ALL.to_vec()
    } else {
        vec![TrustLevel::Creator]
    };
    (levels, why)
}

/// Levels the operator set, sorted and once each, restricted by `reason`
/// when they leave a level out.
fn operators(levels: &[TrustLevel], reason: Restricted) -> (Vec<TrustLevel>, Vec<Restricted>) {
    let mut levels = levels.to_vec();
    levels.sort();
    levels.dedup();
    let why = if levels.len() < TrustLevel::ALL.len() {
        vec![reason]
    } else {
        Vec::new()
    };
    (levels, why)
}

/// Makes every name valid and unique: a name that is `reserved` gets a
/// suffix from its (server, tool) identity; pairs that collide all get one
/// too; names over 64 characters are shortened.
fn name_entries(
    entries: &mut [CatalogEntry],
    warnings: &mut Vec<Warning>,
    reserved: &BTreeSet<String>,
) {
    for e in entries.iter_mut() {
        if reserved.contains(e.name.as_str()) {
            let name = disambiguated(&e.name, &e.server, &e.tool);
            warnings.push(Warning::ReservedName {
                server: e.server.clone(),
                tool: e.tool.clone(),
                reserved: std::mem::replace(&mut e.name, name.clone()),
                name,
            });
        }
    }
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        groups.entry(e.name.clone()).or_default().push(i);
    }
    for (name, members) in groups {
        if members.len() > 1 {
            let mut renamed = Vec::new();
            for &i in &members {
                let e = &mut entries[i];
                e.name = disambiguated(&name, &e.server, &e.tool);
                renamed.push((e.server.clone(), e.tool.clone(), e.name.clone()));
            }
            warnings.push(Warning::NameCollision { name, renamed });
        } else if name.len() > 64 {
            let e = &mut entries[members[0]];
            e.name = fit(&name);
            warnings.push(Warning::Shortened {
                server: e.server.clone(),
                tool: e.tool.clone(),
                name: e.name.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_config::{StdioSpec, Transport};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::catalog::Annotations;
    use crate::pin::Change;

    fn spec() -> ServerSpec {
        ServerSpec::new(Transport::Stdio(StdioSpec {
            command: "x".into(),
            args: vec![],
            env: BTreeMap::new(),
        }))
    }

    fn tool(name: &str) -> DiscoveredTool {
        DiscoveredTool::new(
            name,
            format!("{name} does things."),
            json!({"type": "object"}),
        )
    }

    fn hints(
        read_only: Option<bool>,
        destructive: Option<bool>,
        open_world: Option<bool>,
    ) -> Annotations {
        Annotations {
            read_only_hint: read_only,
            destructive_hint: destructive,
            idempotent_hint: None,
            open_world_hint: open_world,
        }
    }

    fn build(spec: &ServerSpec, tools: &[DiscoveredTool]) -> Catalog {
        Catalog::builder().build([ServerTools {
            name: "srv",
            spec,
            tools,
        }])
    }

    fn names(c: &Catalog) -> Vec<&str> {
        c.entries().iter().map(|e| e.tool.as_str()).collect()
    }

    #[test]
    fn pin_verdicts_warn_quarantine_or_are_ignored_by_mode() {
        let tools = [
            tool("same"),
            tool("changed"),
            tool("fresh"),
            tool("blocked"),
        ];
        let change = Change {
            description: Some(("old".into(), "new".into())),
            ..Change::default()
        };
        let mut of_srv = BTreeMap::new();
        of_srv.insert("same".to_owned(), Verdict::Pinned);
        of_srv.insert("changed".to_owned(), Verdict::Changed(change.clone()));
        of_srv.insert("fresh".to_owned(), Verdict::New);
        of_srv.insert("blocked".to_owned(), Verdict::Changed(change.clone()));
        let verdicts: Verdicts = [("srv".to_owned(), of_srv)].into_iter().collect();
        let pinned = Catalog::builder().with_verdicts(verdicts);
        let build = |spec: &ServerSpec| {
            pinned.build([ServerTools {
                name: "srv",
                spec,
                tools: &tools,
            }])
        };
        let mut s = spec();
        s.blocked_tools = vec!["blocked".into()];
        // warn: every tool stays; the changed one (not the blocked one) is named.
        let warned = build(&s);
        assert_eq!(names(&warned), ["changed", "fresh", "same"]);
        let kinds: Vec<&str> = warned.warnings().iter().map(Warning::kind).collect();
        assert_eq!(kinds, ["tool-changed"]);
        assert_eq!(
            warned.warnings()[0].to_string(),
            "srv: tool `changed` changed since it was pinned in mcp.lock (description: \"[-old-]{+new+}\"); \
             review it, then trust it to pin the new definition"
        );
        let command = |server: &str, tool: Option<&str>| {
            Some(format!("trust {server} {}", tool.unwrap_or("*")))
        };
        assert_eq!(
            warned.warnings()[0].describe(&command),
            "srv: tool `changed` changed since it was pinned in mcp.lock (description: \"[-old-]{+new+}\"); \
             review it, then run `trust srv changed` to pin the new definition"
        );
        // strict: the changed tool is left out, counted and named.
        s.pin = PinMode::Strict;
        let strict = build(&s);
        assert_eq!(names(&strict), ["fresh", "same"]);
        assert_eq!(strict.warnings()[0].kind(), "tool-quarantined");
        // A call to it can say why it is missing; a warning withholds nothing else.
        assert!(strict.warnings()[0].withholds("srv_changed"));
        assert!(!strict.warnings()[0].withholds("srv_fresh"));
        assert!(
            !warned.warnings()[0].withholds("srv_changed"),
            "warn keeps it"
        );
        assert_eq!(
            strict.summary("srv").unwrap().to_string(),
            "2 tools (1 left out by the blocklist, 1 left out by the pin (mcp.lock))"
        );
        // off: verdicts are ignored.
        s.pin = PinMode::Off;
        let off = build(&s);
        assert_eq!(names(&off), ["changed", "fresh", "same"]);
        assert!(off.warnings().is_empty());
        // An unreadable lock quarantines a strict server's tools only.
        let unverified: Verdicts = [(
            "srv".to_owned(),
            tools
                .iter()
                .map(|t| (t.name.clone(), Verdict::Unverified))
                .collect(),
        )]
        .into_iter()
        .collect();
        let unreadable = Catalog::builder().with_verdicts(unverified);
        let unverifiable = |spec: &ServerSpec| {
            unreadable.build([ServerTools {
                name: "srv",
                spec,
                tools: &tools,
            }])
        };
        s.pin = PinMode::Strict;
        let c = unverifiable(&s);
        assert!(c.entries().is_empty());
        assert_eq!(c.warnings()[0].kind(), "pin-unverified");
        s.pin = PinMode::Warn;
        assert_eq!(names(&unverifiable(&s)), ["changed", "fresh", "same"]);
    }

    #[test]
    fn allowlists_and_blocklists_filter_by_the_servers_own_names() {
        let tools = [tool("a"), tool("b-x"), tool("c")];
        let cases: [(&[&str], &[&str], &[&str]); 5] = [
            (&[], &[], &["a", "b-x", "c"]),
            (&["a", "c"], &[], &["a", "c"]),
            (&[], &["c"], &["a", "b-x"]),
            (&["a", "c"], &["c"], &["a"]),
            (&["b-x"], &[], &["b-x"]),
        ];
        for (allow, block, want) in cases {
            let mut s = spec();
            s.tools = allow.iter().map(|t| t.to_string()).collect();
            s.blocked_tools = block.iter().map(|t| t.to_string()).collect();
            assert_eq!(
                names(&build(&s, &tools)),
                want,
                "allow {allow:?} block {block:?}"
            );
        }
    }

    #[test]
    fn unknown_allowlist_and_note_names_are_reported_in_the_specs_wording() {
        let mut s = spec();
        s.tools = vec!["a".into(), "nope".into()];
        s.tool_notes.insert("typo".into(), "n".into());
        s.tool_notes
            .insert("b".into(), "excluded by the allowlist".into());
        let c = build(&s, &[tool("a"), tool("b")]);
        let got: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "srv: tools allowlist names 1 tool(s) this server does not expose: nope; it exposes: a, b",
                "srv: tool_notes names 1 tool(s) this server does not expose: typo; it exposes: a, b",
                "srv: tool_notes names 1 tool(s) the allowlist excluded, so the note describes nothing: b",
            ]
        );
    }

    #[test]
    fn notes_are_appended_after_a_blank_line() {
        let mut s = spec();
        s.tool_notes
            .insert("a".into(), "Prefer absolute paths.".into());
        let c = build(&s, &[tool("a"), DiscoveredTool::new("bare", "", json!({}))]);
        assert_eq!(
            c.get("srv_a").unwrap().description,
            "a does things.\n\nPrefer absolute paths."
        );
        s.tool_notes.insert("bare".into(), "Only note.".into());
        let c = build(&s, &[DiscoveredTool::new("bare", "", json!({}))]);
        assert_eq!(c.get("srv_bare").unwrap().description, "Only note.");
    }

    #[test]
    fn read_only_class_follows_the_spec() {
        // (tool annotations, server read_only) → read-only?
        let cases = [
            (None, false, false),
            (None, true, true),
            (Some(hints(Some(true), None, None)), false, true),
            (Some(hints(Some(false), None, None)), true, false), // per-tool beats read_only: true
            (Some(hints(None, None, None)), true, false), // a block without readOnlyHint is mutating
            (Some(hints(None, Some(false), None)), true, false),
            (Some(hints(Some(true), None, None)), true, true),
        ];
        for (annotations, server_read_only, want) in cases {
            let mut s = spec();
            s.read_only = server_read_only;
            let mut t = tool("t");
            t.annotations = annotations;
            assert_eq!(
                build(&s, &[t]).entries()[0].read_only,
                want,
                "{annotations:?} server {server_read_only}"
            );
        }
    }

    /// One case of the trust rule: what the tool and its server say, and
    /// the levels and reasons the catalog must give it.
    struct TrustCase {
        annotations: Option<Annotations>,
        server_read_only: bool,
        allowed: Option<Vec<TrustLevel>>,
        policy: Option<Vec<TrustLevel>>,
        levels: Vec<TrustLevel>,
        why: Vec<Restricted>,
    }

    fn case(
        annotations: Option<Annotations>,
        server_read_only: bool,
        levels: &[TrustLevel],
        why: &[Restricted],
    ) -> TrustCase {
        TrustCase {
            annotations,
            server_read_only,
            allowed: None,
            policy: None,
            levels: levels.to_vec(),
            why: why.to_vec(),
        }
    }

    #[test]
    fn trust_levels_follow_one_rule_for_annotated_and_unannotated_tools() {
        use Restricted::{Mutating, OpenWorld, ServerPolicy, ToolPolicy};
        use TrustLevel::*;
        let all = &TrustLevel::ALL;
        let creator = &[Creator];
        let h = |r, d, o| Some(hints(r, d, o));
        let mut cases = vec![
            // Read-only by its own hint: open, although openWorldHint is
            // absent (git_status of an honest server); not read-only: creator.
            case(h(Some(true), None, None), false, all, &[]),
            case(h(Some(false), None, None), false, creator, &[Mutating]),
            // Read-only by the server's read_only, for a tool that said nothing.
            case(None, true, all, &[]),
            case(None, false, creator, &[Mutating]),
            // A block without readOnlyHint has answered "mutating" (the class
            // rule), so the server's read_only does not make it read-only.
            case(h(None, None, None), true, creator, &[Mutating]),
            case(h(Some(false), None, None), true, creator, &[Mutating]),
            // Explicitly non-destructive: open; destructive or silent: creator.
            case(h(Some(false), Some(false), None), false, all, &[]),
            case(h(None, Some(false), None), false, all, &[]),
            case(
                h(Some(false), Some(true), None),
                false,
                creator,
                &[Mutating],
            ),
            case(h(None, None, Some(false)), false, creator, &[Mutating]),
            // A read-only tool destroys nothing, whatever destructiveHint says.
            case(h(Some(true), Some(true), None), false, all, &[]),
            // Explicitly open-world: creator, even when read-only; closed or
            // silent: open.
            case(
                h(Some(true), None, Some(true)),
                false,
                creator,
                &[OpenWorld],
            ),
            case(h(Some(true), None, Some(false)), false, all, &[]),
            case(None, true, all, &[]),
            case(
                h(None, Some(false), Some(true)),
                false,
                creator,
                &[OpenWorld],
            ),
            case(
                h(Some(false), Some(true), Some(true)),
                false,
                creator,
                &[Mutating, OpenWorld],
            ),
        ];
        // The server's allowedTrustLevels replaces the default: it narrows
        // a read-only tool and widens a mutating or open-world one.
        cases.push(TrustCase {
            allowed: Some(vec![Creator, Agent]),
            ..case(None, true, &[Creator, Agent], &[ServerPolicy])
        });
        cases.push(TrustCase {
            allowed: Some(vec![Agent, Creator]),
            ..case(None, false, &[Creator, Agent], &[ServerPolicy])
        });
        cases.push(TrustCase {
            allowed: Some(vec![Agent]),
            ..case(
                h(Some(true), None, Some(true)),
                false,
                &[Agent],
                &[ServerPolicy],
            )
        });
        cases.push(TrustCase {
            allowed: Some(TrustLevel::ALL.to_vec()),
            ..case(h(Some(false), Some(true), Some(true)), false, all, &[])
        });
        // A tool policy sets the levels, and may widen them.
        cases.push(TrustCase {
            allowed: Some(vec![Creator]),
            policy: Some(vec![Public, Agent]),
            ..case(
                h(None, Some(true), None),
                false,
                &[Agent, Public],
                &[ToolPolicy],
            )
        });
        cases.push(TrustCase {
            policy: Some(TrustLevel::ALL.to_vec()),
            ..case(None, false, all, &[])
        });
        for c in cases {
            let mut s = spec();
            s.read_only = c.server_read_only;
            s.allowed_trust_levels = c.allowed.clone();
            if let Some(p) = c.policy.clone() {
                s.tool_policies.insert("t".into(), p);
            }
            let mut t = tool("t");
            t.annotations = c.annotations;
            let built = build(&s, &[t]);
            let entry = &built.entries()[0];
            let said = format!(
                "{:?} read_only {} allowed {:?} policy {:?}",
                c.annotations, c.server_read_only, c.allowed, c.policy
            );
            assert_eq!(entry.trust_levels, c.levels, "{said}");
            assert_eq!(entry.restricted, c.why, "{said}");
            let hidden: usize = TrustLevel::ALL
                .iter()
                .map(|l| built.restricted("srv", *l))
                .sum();
            assert_eq!(hidden, TrustLevel::ALL.len() - c.levels.len(), "{said}");
        }
    }

    #[test]
    fn summaries_count_what_is_published_and_why_the_rest_is_not() {
        let mut s = spec();
        s.tools = vec!["a".into(), "b".into(), "big".into(), "gone".into()];
        s.blocked_tools = vec!["b".into()];
        s.limits.max_input_schema_bytes = 100;
        let big = DiscoveredTool::new("big", "", json!({"description": "x".repeat(200)}));
        let tools = [tool("a"), tool("b"), big, tool("c"), tool("d")];
        let c = build(&s, &tools);
        let summary = c.summary("srv").unwrap();
        assert_eq!((summary.listed, summary.published), (5, 1));
        assert_eq!(
            summary.to_string(),
            "1 tool (2 left out by the allowlist, 1 left out by the blocklist, 1 left out by max_input_schema_bytes)"
        );
        assert_eq!(c.summary("other"), None);
        let plain = build(&spec(), &[tool("a"), tool("b")]);
        assert_eq!(plain.summary("srv").unwrap().to_string(), "2 tools");
        let empty = build(&spec(), &[]);
        assert_eq!(empty.summary("srv").unwrap().to_string(), "0 tools");
    }

    #[test]
    fn reserved_names_are_never_published() {
        let s = spec();
        let tools = [tool("plan"), tool("other")];
        let c = Catalog::builder()
            .with_reserved(["record_plan", "retrieve_raw"])
            .build([ServerTools {
                name: "record",
                spec: &s,
                tools: &tools,
            }]);
        let published: Vec<&str> = c.entries().iter().map(|e| e.name.as_str()).collect();
        assert!(!published.contains(&"record_plan"), "{published:?}");
        assert!(published.contains(&"record_other"));
        let renamed = c.entries().iter().find(|e| e.tool == "plan").unwrap();
        assert!(renamed.name.starts_with("record_plan_"), "{}", renamed.name);
        let w = &c.warnings()[0];
        assert_eq!(w.kind(), "reserved-name");
        assert_eq!(
            w.to_string(),
            format!(
                "record: tool `plan` would be named `record_plan`, the name of a built-in tool; it is published as `{}`",
                renamed.name
            )
        );
    }

    #[test]
    fn bare_naming_publishes_the_servers_own_names_under_the_same_rules() {
        let mut s = spec();
        s.limits.max_tools = 4;
        s.limits.max_input_schema_bytes = 100;
        s.tool_policies
            .insert("divide".into(), vec![TrustLevel::Creator, TrustLevel::User]);
        let big = DiscoveredTool::new("big", "", json!({"description": "x".repeat(200)}));
        let tools = [
            tool("divide"),
            tool("get-env"),
            tool("retrieve_raw"),
            big,
            tool("a.b"),
            tool("a_b"),
        ];
        let c = Catalog::builder()
            .with_reserved(["record_plan", "retrieve_raw"])
            .with_naming(Naming::Bare)
            .build([ServerTools {
                name: "demo",
                spec: &s,
                tools: &tools,
            }]);
        assert_eq!(c.naming(), Naming::Bare);
        let published: Vec<(&str, &str)> = c
            .entries()
            .iter()
            .map(|e| (e.name.as_str(), e.tool.as_str()))
            .collect();
        let raw = c
            .entries()
            .iter()
            .find(|e| e.tool == "retrieve_raw")
            .unwrap();
        assert!(raw.name.starts_with("retrieve_raw_"), "{}", raw.name);
        // Own names, sanitized; the built-in's name stays free.
        assert!(published.contains(&("divide", "divide")), "{published:?}");
        assert!(published.contains(&("get_env", "get-env")), "{published:?}");
        assert!(!published.iter().any(|(n, _)| *n == "retrieve_raw"));
        // Past max_tools (4, after `big` is quarantined): `a_b` is left out.
        assert!(published.contains(&("a_b", "a.b")), "{published:?}");
        assert_eq!(published.len(), 4, "{published:?}");
        // Trust levels follow the server's own tool name.
        let divide = c.get("divide").unwrap();
        assert_eq!(divide.trust_levels, [TrustLevel::Creator, TrustLevel::User]);
        let kinds: Vec<&str> = c.warnings().iter().map(Warning::kind).collect();
        assert_eq!(kinds, ["schema-size", "max-tools", "reserved-name"]);
        // A withheld tool is found by the name it would have had.
        assert_eq!(c.withheld("big").count(), 1);
        assert_eq!(c.withheld("a_b").count(), 1);
        assert_eq!(c.withheld("demo_big").count(), 0);
        assert!(c.warnings()[0].withholds("demo_big"));
        // Bare names of two servers that collide still get suffixes.
        let both = Catalog::builder().with_naming(Naming::Bare).build([
            ServerTools {
                name: "one",
                spec: &s,
                tools: &[tool("same")],
            },
            ServerTools {
                name: "two",
                spec: &s,
                tools: &[tool("same")],
            },
        ]);
        let kinds: Vec<&str> = both.warnings().iter().map(Warning::kind).collect();
        assert_eq!(kinds, ["name-collision"]);
        assert!(both.entries().iter().all(|e| e.name.starts_with("same_")));
    }

    #[test]
    fn limits_quarantine_large_schemas_and_cap_the_count() {
        let mut s = spec();
        s.limits.max_tools = 2;
        s.limits.max_input_schema_bytes = 100;
        let big = DiscoveredTool::new("big", "", json!({"description": "x".repeat(200)}));
        let c = build(&s, &[tool("a"), big, tool("b"), tool("c")]);
        assert_eq!(names(&c), ["a", "b"]);
        let got: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "srv: tool `big` is left out: its input schema is 218 bytes, over max_input_schema_bytes (100)",
                "srv: only the first 2 tools are published (max_tools); left out: c",
            ]
        );
        s.limits.max_tools = 1;
        let c = build(&s, &[tool("a"), tool("b")]);
        assert_eq!(
            c.warnings()[0].to_string(),
            "srv: only the first tool is published (max_tools); left out: b"
        );
    }

    #[test]
    fn colliding_names_are_all_disambiguated() {
        let s = spec();
        let t = [tool("t")];
        let c = Catalog::builder().build([
            ServerTools {
                name: "my-server",
                spec: &s,
                tools: &t,
            },
            ServerTools {
                name: "my_server",
                spec: &s,
                tools: &t,
            },
        ]);
        let got: Vec<(&str, &str)> = c
            .entries()
            .iter()
            .map(|e| (e.name.as_str(), e.server.as_str()))
            .collect();
        assert_eq!(got.len(), 2);
        assert!(
            got.iter()
                .all(|(n, _)| n.starts_with("my_server_t_") && n.len() == "my_server_t_".len() + 8)
        );
        assert_ne!(got[0].0, got[1].0);
        assert!(
            c.warnings()[0]
                .to_string()
                .starts_with("tools of different servers would all be named `my_server_t`")
        );
    }

    #[test]
    fn invalid_names_are_left_out_with_one_short_warning_and_descriptions_lose_controls() {
        let s = spec();
        let mut tools: Vec<DiscoveredTool> = (0..1400)
            .map(|i| tool(&format!("{i}{}", "x".repeat(10_000))))
            .collect();
        tools.push(DiscoveredTool::new(
            "ok",
            "line\u{1b}]52;c;aGk=\u{7}\nnext",
            json!({"type": "object"}),
        ));
        let c = Catalog::builder().build([ServerTools {
            name: "h",
            spec: &s,
            tools: &tools,
        }]);
        assert_eq!(c.entries().len(), 1);
        assert_eq!(c.entries()[0].description, "line]52;c;aGk=\nnext");
        assert_eq!(c.warnings().len(), 1);
        let text = c.warnings()[0].to_string();
        assert_eq!(c.warnings()[0].kind(), "invalid-name");
        assert!(text.starts_with("h: 1400 tool(s) are left out"), "{text}");
        assert!(text.len() < 512, "{} bytes", text.len());
    }

    proptest! {
        /// For any server and tool names: every published name is valid and
        /// unique, maps back to its (server, tool), and is the same on a rebuild.
        #[test]
        fn names_are_valid_unique_stable_and_map_back(
            servers in proptest::collection::btree_map("[a-zA-Z0-9_.-]{0,40}", proptest::collection::btree_set("[a-zA-Z0-9_.-]{1,50}|.{0,50}", 0..6), 1..5)
        ) {
            let s = spec();
            let tools: Vec<(String, Vec<DiscoveredTool>)> = servers
                .iter()
                .map(|(name, tools)| (name.clone(), tools.iter().map(|t| tool(t)).collect()))
                .collect();
            let input = || tools.iter().map(|(n, t)| ServerTools { name: n, spec: &s, tools: t });
            let first = Catalog::builder().build(input());
            let second = Catalog::builder().build(input());
            // A name that is not a valid MCP tool name is left out.
            let total: usize = servers.values().map(|t| t.iter().filter(|n| crate::valid_tool_name(n)).count()).sum();
            prop_assert_eq!(first.entries().len(), total);
            let mut seen = BTreeSet::new();
            for e in first.entries() {
                prop_assert!(!e.name.is_empty() && e.name.len() <= 64, "{}", e.name);
                prop_assert!(e.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{}", e.name);
                prop_assert!(seen.insert(e.name.clone()), "duplicate {}", e.name);
                prop_assert_eq!(first.get(&e.name).map(|x| (&x.server, &x.tool)), Some((&e.server, &e.tool)));
                prop_assert!(servers[&e.server].contains(&e.tool));
            }
            let again: Vec<&str> = second.entries().iter().map(|e| e.name.as_str()).collect();
            let names: Vec<&str> = first.entries().iter().map(|e| e.name.as_str()).collect();
            prop_assert_eq!(names, again);
        }
    }
}
