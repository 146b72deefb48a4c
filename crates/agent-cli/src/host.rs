use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_mcp_config::{Config, Env, ServerEntry, TrustLevel};
use core_agent_mcp_policy::{Annotations, Catalog, CatalogEntry, DiscoveredTool, ServerTools};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use core_agent_mcp_transport::{Server, Servers, StartOptions, Status};
use core_agent_permissions::{
    Answer, Decision, Gate, Mode, PermissionsConfig, Prompter, RefuseAll, Request,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::builtin::{self, BUILTINS};
use crate::{Error, Result};

/// How the Host starts servers, gates and runs calls.
#[derive(Clone)]
pub struct HostOptions {
    /// How servers are started (timeout, elicitor, client info).
    pub start: StartOptions,
    /// Overrides every server's `call_timeout_ms`.
    pub call_timeout: Option<Duration>,
    /// The permission gate's config.
    pub permissions: PermissionsConfig,
    /// Overrides the configured permission mode.
    pub mode: Option<Mode>,
    /// Answers the gate's asks.
    pub prompter: Arc<dyn Prompter>,
    /// The digest wrap; `None` turns it off (and `retrieve_raw` with it).
    pub digest: Option<Arc<crate::DigestWrap>>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            start: StartOptions::default(),
            call_timeout: None,
            permissions: PermissionsConfig::default(),
            mode: None,
            prompter: Arc::new(RefuseAll),
            digest: None,
        }
    }
}

/// One call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// The namespaced tool name (or a built-in's name).
    pub name: String,
    /// Its arguments.
    pub arguments: JsonObject,
}

/// How one call of a batch ended.
#[derive(Debug)]
pub struct CallOutcome {
    /// The name that was called.
    pub name: String,
    /// The result, or why there is none.
    pub result: Result<CallToolResult>,
    /// How long it took, from the start of the batch's dispatch.
    pub elapsed: Duration,
}

/// The MCP host of one session: every configured server, the catalog of
/// their tools, the permission gate, and the dispatcher.
///
/// Always call [`Host::shutdown`] before dropping it: that is what stops the
/// servers' child processes.
pub struct Host {
    servers: Servers,
    entries: Vec<ServerEntry>,
    options: HostOptions,
    gate: Mutex<Gate>,
    plan: Mutex<Option<String>>,
    /// Mutating calls run one at a time, in the order they were asked.
    mutation: tokio::sync::Mutex<()>,
}

/// One server's state, as `core-agent mcp list --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerReport {
    /// The server's key in `mcp.json`.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: String,
    /// `"project"` or `"user"`.
    pub scope: String,
    /// `"connected"` or `"error"`.
    pub status: String,
    /// How many tools it publishes to a caller of the report's trust level.
    pub tools: usize,
    /// Why it is not connected, or `null`.
    pub error: Option<String>,
    /// How many of its published tools the caller's trust level may not see.
    pub restricted: usize,
    /// What the operator should hear about it (allowlist typos, dropped tools, …).
    pub warnings: Vec<String>,
}

/// One tool, as `core-agent tools --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolReport {
    /// The name the model calls.
    pub name: String,
    /// The server's key in `mcp.json` (`null` for a built-in).
    pub server: Option<String>,
    /// The server's own name for the tool.
    pub tool: String,
    /// The description the model reads, notes included.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub input_schema: Value,
    /// The dispatch class: read-only calls run concurrently.
    pub read_only: bool,
    /// The trust levels that may see and call it.
    pub trust_levels: Vec<&'static str>,
}

impl From<&CatalogEntry> for ToolReport {
    fn from(e: &CatalogEntry) -> Self {
        ToolReport {
            name: e.name.clone(),
            server: Some(e.server.clone()),
            tool: e.tool.clone(),
            description: e.description.clone(),
            input_schema: e.input_schema.clone(),
            read_only: e.read_only,
            trust_levels: e.trust_levels.iter().map(|l| l.as_str()).collect(),
        }
    }
}

impl Host {
    /// Starts every server of `config` concurrently; `on_ready` hears about
    /// each one as it connects or fails. Servers that fail stay in the list
    /// with their error; they never stop the others.
    pub async fn start(
        config: &Config,
        env: &dyn Env,
        options: HostOptions,
        on_ready: &(dyn Fn(&Server) + Sync),
    ) -> Host {
        let servers = Servers::start(&config.servers, env, &options.start, on_ready).await;
        let gate = Gate::new(options.permissions.clone(), options.mode);
        Host {
            servers,
            entries: config.servers.clone(),
            options,
            gate: Mutex::new(gate),
            plan: Mutex::new(None),
            mutation: tokio::sync::Mutex::new(()),
        }
    }

    /// The servers, in config order.
    pub fn servers(&self) -> impl Iterator<Item = &Server> {
        self.servers.iter()
    }

    /// The catalog of every connected server's current tools, after policy.
    pub fn catalog(&self) -> Catalog {
        let discovered: Vec<(&Server, &ServerEntry, Vec<DiscoveredTool>)> = self
            .servers
            .iter()
            .filter(|s| s.status() == Status::Connected)
            .filter_map(|s| {
                let entry = self.entries.iter().find(|e| e.name == s.name())?;
                Some((s, entry, s.tools().iter().map(discovered).collect()))
            })
            .collect();
        Catalog::build(discovered.iter().map(|(s, e, tools)| ServerTools {
            name: s.name(),
            spec: &e.spec,
            tools,
        }))
    }

    /// Every server's state, with tool counts and restrictions as a caller
    /// of `level` sees them.
    pub fn server_reports(&self, level: TrustLevel) -> Vec<ServerReport> {
        let catalog = self.catalog();
        self.servers
            .iter()
            .map(|s| {
                let mut warnings: Vec<String> = catalog
                    .warnings()
                    .iter()
                    .filter(|w| w.server() == Some(s.name()))
                    .map(ToString::to_string)
                    .collect();
                warnings.extend(s.warnings());
                ServerReport {
                    name: s.name().to_owned(),
                    transport: s.transport().to_owned(),
                    scope: s.scope().as_str().to_owned(),
                    status: s.status().as_str().to_owned(),
                    tools: catalog
                        .visible(level)
                        .filter(|e| e.server == s.name())
                        .count(),
                    error: s.error().map(ToString::to_string),
                    restricted: catalog.restricted(s.name(), level),
                    warnings,
                }
            })
            .collect()
    }

    /// What a caller of `level` sees: the built-ins, then the catalog.
    pub fn tool_reports(&self, level: TrustLevel) -> Vec<ToolReport> {
        let mut reports: Vec<ToolReport> = BUILTINS
            .iter()
            .filter(|b| **b != builtin::RETRIEVE_RAW || self.options.digest.is_some())
            .map(builtin::report)
            .collect();
        reports.extend(self.catalog().visible(level).map(ToolReport::from));
        reports
    }

    /// Everything the operator should hear about at startup, each line
    /// prefixed with its area: policy warnings (allowlist typos, left-out or
    /// renamed tools, cut tool lists) and permission patterns that match no tool.
    pub fn warnings(&self) -> Vec<String> {
        let catalog = self.catalog();
        let mut out: Vec<String> = catalog
            .warnings()
            .iter()
            .map(|w| format!("mcp: {w}"))
            .collect();
        out.extend(
            self.servers
                .iter()
                .flat_map(Server::warnings)
                .map(|w| format!("mcp: {w}")),
        );
        let names: Vec<&str> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
        if let Ok(gate) = self.gate.lock() {
            for p in gate.unmatched_patterns(&names) {
                out.push(format!(
                    "permissions: pattern `{p}` in {} matches no tool in the catalog",
                    p.source().display()
                ));
            }
        }
        out
    }

    /// The plan recorded in this session, if any.
    pub fn plan(&self) -> Option<String> {
        self.plan.lock().ok().and_then(|p| p.clone())
    }

    /// Calls one tool as a caller of `level`: through the gate, then the
    /// dispatcher. `Ok` with `is_error: Some(true)` means the tool ran and
    /// reported a failure; `Err` means it was refused or could not finish.
    pub async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> Result<CallToolResult> {
        let mut outcomes = self
            .call_batch(
                vec![CallRequest {
                    name: name.to_owned(),
                    arguments,
                }],
                level,
            )
            .await;
        match outcomes.pop() {
            Some(outcome) => outcome.result,
            None => Err(Error::UnknownTool {
                name: name.to_owned(),
                suggestions: Vec::new(),
            }),
        }
    }

    /// Runs one turn's calls. Gate decisions are made in order (asking where
    /// needed, and `record_plan` taking effect for the calls after it); then
    /// read-only calls run concurrently while mutating calls run one at a
    /// time, in the order they were asked. Outcomes come back in input order.
    pub async fn call_batch(&self, calls: Vec<CallRequest>, level: TrustLevel) -> Vec<CallOutcome> {
        let catalog = self.catalog();
        let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
        let planned: Vec<Planned> = calls
            .into_iter()
            .map(|call| match call.name.as_str() {
                builtin::RECORD_PLAN => Planned::Done(self.record_plan(&call.arguments)),
                builtin::WAIT_AND_VERIFY => Planned::Wait(call.arguments),
                builtin::RETRIEVE_RAW if self.options.digest.is_some() => {
                    Planned::Done(self.retrieve_raw(&call.arguments))
                }
                _ => match self.admit(&catalog, &call.name, &call.arguments, level) {
                    Ok(entry) => Planned::Run(Box::new(entry), call.arguments),
                    Err(e) => Planned::Done(Err(e)),
                },
            })
            .collect();
        let started = Instant::now();
        let catalog = &catalog;
        let runs = planned.into_iter().map(|plan| async move {
            let result = match plan {
                Planned::Done(result) => result,
                Planned::Run(entry, arguments) => self.dispatch(&entry, arguments).await,
                Planned::Wait(arguments) => self.wait_and_verify(catalog, arguments, level).await,
            };
            (result, started.elapsed())
        });
        futures::future::join_all(runs)
            .await
            .into_iter()
            .zip(names)
            .map(|((result, elapsed), name)| CallOutcome {
                name,
                result,
                elapsed,
            })
            .collect()
    }

    /// Stops every server (stdio children: EOF, SIGTERM, then SIGKILL).
    pub async fn shutdown(&mut self) {
        self.servers.shutdown().await;
    }

    /// Resolves a name and puts the call through trust and the gate.
    fn admit(
        &self,
        catalog: &Catalog,
        name: &str,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<CatalogEntry> {
        let Some(entry) = catalog.get(name) else {
            return Err(Error::UnknownTool {
                name: name.to_owned(),
                suggestions: suggest(catalog, name, level),
            });
        };
        if !entry.allows(level) {
            return Err(Error::Restricted {
                name: name.to_owned(),
                level: level.as_str().to_owned(),
                allowed: entry
                    .trust_levels
                    .iter()
                    .map(|l| format!("`{}`", l.as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let args = Value::Object(arguments.clone());
        let request = Request {
            name,
            arguments: &args,
            read_only: entry.read_only,
        };
        let decision = match self.gate.lock() {
            Ok(gate) => gate.decide(request),
            Err(_) => Decision::Deny {
                reason: "the permission gate is unavailable".into(),
                advice: "retry".into(),
            },
        };
        match decision {
            Decision::Allow => Ok(entry.clone()),
            Decision::Deny { reason, advice } => Err(Error::Denied {
                name: name.to_owned(),
                reason,
                advice,
            }),
            Decision::Ask { detail } => match self.options.prompter.ask(name, &detail) {
                Answer::Yes => Ok(entry.clone()),
                Answer::Always => {
                    if let Ok(mut gate) = self.gate.lock() {
                        gate.allow_for_session(name);
                    }
                    Ok(entry.clone())
                }
                Answer::No => Err(Error::Denied {
                    name: name.to_owned(),
                    reason: format!(
                        "`{name}` needs approval (permissions.mode is \"ask\") and was not approved"
                    ),
                    advice: format!(
                        "approve it when asked, run with --yes, or add \"mcp:{name}\" to permissions.allow in .agents/config.json"
                    ),
                }),
            },
        }
    }

    /// Runs an admitted call: mutating calls hold the session's lock; the
    /// server's own limit bounds calls in flight. The result is as the server sent it.
    async fn dispatch_raw(
        &self,
        entry: &CatalogEntry,
        arguments: JsonObject,
    ) -> Result<CallToolResult> {
        let Some(server) = self.servers.get(&entry.server) else {
            return Err(Error::UnknownTool {
                name: entry.name.clone(),
                suggestions: Vec::new(),
            });
        };
        let limits = server.limits();
        let timeout = self
            .options
            .call_timeout
            .unwrap_or(Duration::from_millis(limits.call_timeout_ms));
        let _turn = if entry.read_only {
            None
        } else {
            Some(self.mutation.lock().await)
        };
        Ok(server.call_tool(&entry.tool, arguments, timeout).await?)
    }

    /// Runs an admitted call and shapes its result for the caller: the
    /// digest (raw payload stored whole), then the `max_result_bytes` cap.
    async fn dispatch(
        &self,
        entry: &CatalogEntry,
        arguments: JsonObject,
    ) -> Result<CallToolResult> {
        let result = self.dispatch_raw(entry, arguments).await?;
        let result = match (&self.options.digest, self.digests(&entry.server)) {
            (Some(digest), true) => digest.apply(result, &entry.server, &entry.tool).await,
            _ => result,
        };
        let max = self
            .servers
            .get(&entry.server)
            .map_or(usize::MAX, |s| s.limits().max_result_bytes);
        Ok(cap_result(result, max))
    }

    /// Whether results of `server` are digested (the wrap is on and the
    /// server did not opt out with `agentic_never`).
    fn digests(&self, server: &str) -> bool {
        self.options.digest.is_some()
            && !self
                .entries
                .iter()
                .any(|e| e.name == server && e.spec.agentic_never)
    }

    /// `retrieve_raw {call_id, pointer?}`: the raw payload, or the part at a JSON pointer.
    fn retrieve_raw(&self, arguments: &JsonObject) -> Result<CallToolResult> {
        let bad = |message: String| Error::BadArguments {
            name: builtin::RETRIEVE_RAW.to_owned(),
            message,
        };
        let Some(digest) = &self.options.digest else {
            return Err(bad("the digest is off, so nothing was stored".to_owned()));
        };
        let call_id = arguments
            .get("call_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("pass {\"call_id\": \"…\"} from a digest".to_owned()))?;
        let record = digest
            .store
            .get(call_id)
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad(format!("no raw payload is stored under `{call_id}`")))?;
        let text = match arguments.get("pointer").and_then(Value::as_str) {
            Some(pointer) => core_agent_digest::extract(&record.payload, pointer).map_err(bad)?,
            None => record.payload,
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    fn record_plan(&self, arguments: &JsonObject) -> Result<CallToolResult> {
        let Some(plan) = arguments
            .get("plan")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
        else {
            return Err(Error::BadArguments {
                name: builtin::RECORD_PLAN.to_owned(),
                message: "pass {\"plan\": \"<the steps you will take>\"}".to_owned(),
            });
        };
        if let Ok(mut gate) = self.gate.lock() {
            gate.record_plan();
        }
        if let Ok(mut slot) = self.plan.lock() {
            *slot = Some(plan.to_owned());
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "plan recorded; mutating tools may run from now on in this session",
        )]))
    }

    /// Polls a tool until a condition on its result holds.
    async fn wait_and_verify(
        &self,
        catalog: &Catalog,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> Result<CallToolResult> {
        let args = builtin::WaitArgs::parse(&arguments)?;
        let Some(entry) = catalog.get(&args.tool) else {
            return Err(Error::UnknownTool {
                name: args.tool.clone(),
                suggestions: suggest(catalog, &args.tool, level),
            });
        };
        let may_poll = self
            .gate
            .lock()
            .map(|g| g.may_poll(&entry.name, entry.read_only))
            .unwrap_or(false);
        if !may_poll {
            return Err(Error::BadArguments {
                name: builtin::WAIT_AND_VERIFY.to_owned(),
                message: format!(
                    "refuses to poll `{}`: it changes state, and polling repeats it; list it in tools.wait_and_verify.poll_allow in .agents/config.json to allow polling it",
                    entry.name
                ),
            });
        }
        let mut last = Value::Null;
        for attempt in 1..=args.max_attempts {
            let admitted = self.admit(catalog, &entry.name, &args.arguments, level)?;
            // The condition reads the whole result, not its digest.
            let result = self.dispatch_raw(&admitted, args.arguments.clone()).await?;
            last =
                serde_json::to_value(cap_result(result.clone(), 64 * 1024)).unwrap_or(Value::Null);
            if args.until.holds(&result) {
                let report = json!({"satisfied": true, "attempts": attempt, "result": last});
                return Ok(CallToolResult::success(vec![ContentBlock::text(
                    report.to_string(),
                )]));
            }
            if attempt < args.max_attempts {
                tokio::time::sleep(args.interval).await;
            }
        }
        let report = json!({"satisfied": false, "attempts": args.max_attempts, "result": last});
        Ok(CallToolResult::error(vec![ContentBlock::text(
            report.to_string(),
        )]))
    }
}

/// A call after the gate, before dispatch.
enum Planned {
    Done(Result<CallToolResult>),
    Run(Box<CatalogEntry>, JsonObject),
    Wait(JsonObject),
}

fn discovered(tool: &Tool) -> DiscoveredTool {
    let tool_annotations = tool.annotations.as_ref().map(|a| Annotations {
        read_only_hint: a.read_only_hint,
        destructive_hint: a.destructive_hint,
        idempotent_hint: a.idempotent_hint,
        open_world_hint: a.open_world_hint,
    });
    let mut d = DiscoveredTool::new(
        tool.name.to_string(),
        tool.description.as_deref().unwrap_or_default(),
        Value::Object((*tool.input_schema).clone()),
    );
    d.annotations = tool_annotations;
    d
}

/// Cuts the text of a result longer than `max` bytes, with a marker saying
/// how much was cut. Other content is kept.
pub fn cap_result(mut result: CallToolResult, max: usize) -> CallToolResult {
    let total: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    if total <= max {
        return result;
    }
    let mut budget = max;
    for block in &mut result.content {
        let Some(text) = block.as_text() else {
            continue;
        };
        let len = text.text.len();
        if len <= budget {
            budget -= len;
            continue;
        }
        let mut end = budget;
        while !text.text.is_char_boundary(end) {
            end -= 1;
        }
        *block = ContentBlock::text(text.text[..end].to_owned());
        budget = 0;
    }
    result
        .content
        .retain(|c| c.as_text().is_none_or(|t| !t.text.is_empty()));
    result.content.push(ContentBlock::text(format!(
        "[core-agent: {} of {total} bytes cut: the result is over max_result_bytes ({max})]",
        total - max
    )));
    result
}

/// Up to three names close to `name` that a caller of `level` may use, best
/// first: tools whose own name is `name` (the namespace was left out), then
/// near spellings.
fn suggest(catalog: &Catalog, name: &str, level: TrustLevel) -> Vec<String> {
    let bare = core_agent_mcp_policy::sanitize(name);
    let mut scored: Vec<(f64, &str)> = catalog
        .visible(level)
        .map(|e| {
            let score = if core_agent_mcp_policy::sanitize(&e.tool) == bare {
                2.0
            } else {
                strsim::jaro_winkler(name, &e.name)
            };
            (score, e.name.as_str())
        })
        .filter(|(score, _)| *score >= 0.88)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_owned())
        .collect()
}
