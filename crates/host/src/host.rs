use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use core_agent_mcp_config::{
    BuiltinTools, Config, ConfigWarning, Env, LeftOut, LeftOutReason, Limits, ServerEntry,
    TrustLevel,
};
use core_agent_mcp_policy::{
    Annotations, Catalog, CatalogEntry, DiscoveredTool, Restricted, ServerSummary, ServerTools,
};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use core_agent_mcp_transport::{ProgressSink, Server, Servers, StartOptions, Status};
use core_agent_permissions::{
    Answer, BUILTIN, Decision, Gate, MCP, Mode, PermissionsConfig, Prompter, RefuseAll, Request,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::builtin::{self, BUILTINS};
use crate::cap::{cap_result, fit_json_str};
use crate::{Error, Result};

/// Hears about each server as its start ends, with the count of tools policy
/// publishes from it (`None` for a server that failed).
pub type ServerReady = Arc<dyn Fn(&Server, Option<&ServerSummary>) + Send + Sync>;

/// How the Host starts servers and runs calls, for every session.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// How servers are started (timeout, elicitor, client info).
    pub start: StartOptions,
    /// Overrides every server's `call_timeout_ms`.
    pub call_timeout: Option<Duration>,
    /// The permission gate's config (each session gets its own gate).
    pub permissions: PermissionsConfig,
    /// The digest; `None` turns it off (and `retrieve_raw` with it).
    pub digest: Option<DigestOptions>,
    /// The survey tools (`list_dir`, `glob`, `grep`, `read_many_files`)
    /// and the directory they are confined to; `None` turns them off.
    pub survey: Option<SurveyOptions>,
}

/// Where the survey tools look, and how much they return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurveyOptions {
    /// The directory they are confined to (the project root: the directory
    /// that holds the agents directory).
    pub root: std::path::PathBuf,
    /// Bounds on each output.
    pub limits: core_agent_survey::Limits,
    /// Which of the four are offered and to which trust levels (the entry
    /// under the reserved name `builtin`); the default offers all four to
    /// every level.
    pub access: BuiltinTools,
}

/// How long a survey call may take when the host sets no `call_timeout`.
const SURVEY_TIMEOUT: Duration = Duration::from_secs(30);

/// The digest shared by every session: the router's settings, the store of
/// raw payloads and telemetry, and the LLM second chance.
#[derive(Clone)]
pub struct DigestOptions {
    /// The router's settings (threshold, bounds).
    pub settings: core_agent_digest::Settings,
    /// Where raw payloads and telemetry go.
    pub store: Arc<dyn core_agent_digest::Store>,
    /// The LLM second chance, when enabled.
    pub llm: Option<crate::LlmPath>,
}

/// One caller's settings: its trust level, how its asks are answered, its
/// session id.
#[derive(Clone)]
pub struct SessionOptions {
    /// Which tools the caller may see and call.
    pub trust_level: TrustLevel,
    /// Overrides the configured permission mode.
    pub mode: Option<Mode>,
    /// Answers the gate's asks.
    pub prompter: Arc<dyn Prompter>,
    /// The session id its digests and telemetry are kept under (default: a
    /// new unique one); reuse one to read its earlier payloads back.
    pub id: Option<String>,
    /// Overrides the LLM second chance's spending ceiling for this session.
    pub cost_ceiling: Option<f64>,
    /// Who opened the session (a gateway token's name). Recorded in the
    /// store; `retrieve_raw` then also reads payloads of the owner's other
    /// sessions, including those of earlier runs kept in `--session-db`.
    pub owner: Option<String>,
    /// Said as the `"note"` of each of its digests' synthetic responses:
    /// what the caller should know about keeping the raw payloads (the
    /// front end's words; a one-shot run whose payloads die with it says
    /// how to keep them).
    pub digest_note: Option<String>,
}

impl std::fmt::Debug for DigestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestOptions")
            .field("settings", &self.settings)
            .field("llm", &self.llm)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionOptions")
            .field("trust_level", &self.trust_level)
            .field("mode", &self.mode)
            .field("id", &self.id)
            .field("cost_ceiling", &self.cost_ceiling)
            .field("owner", &self.owner)
            .field("digest_note", &self.digest_note)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("servers", &self.servers)
            .field("left_out", &self.left_out)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("level", &self.level)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            trust_level: TrustLevel::Creator,
            mode: None,
            prompter: Arc::new(RefuseAll),
            id: None,
            cost_ceiling: None,
            owner: None,
            digest_note: None,
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

/// The MCP host, shared by every caller: the configured servers, the
/// catalog of their tools, and the digest's store. Put it in an [`Arc`] and
/// open a [`Session`] per caller; calls go through a session.
///
/// Always call [`Host::shutdown`] before dropping it: that is what stops the
/// servers' child processes gracefully (dropping it kills their process
/// groups).
pub struct Host {
    servers: Servers,
    entries: Vec<ServerEntry>,
    left_out: Vec<LeftOut>,
    config_warnings: Vec<ConfigWarning>,
    options: HostOptions,
    /// The survey tools over their root, when on and the root is usable.
    survey: Option<Arc<core_agent_survey::Survey>>,
    /// Why the survey tools are off although asked for (a root that cannot be used).
    survey_warning: Option<String>,
    /// The catalog, its routes, and the key (tools version plus pin epoch)
    /// they were built from.
    published: Mutex<(u64, Arc<Published>)>,
    /// `mcp.lock`, where tool definitions are pinned (`None`: no pinning).
    lock: Option<std::path::PathBuf>,
    /// Bumped when `trust` rewrites pins, so the catalog is rebuilt.
    pin_epoch: std::sync::atomic::AtomicU64,
    /// Held while the lock is read, checked and written.
    pin_io: Mutex<()>,
    /// Why the lock could not be read or written at the last check.
    pin_problem: Mutex<Option<String>>,
}

/// One caller of a shared [`Host`]: its trust level, its permission gate
/// (mode, "always" answers, whether a plan is recorded), the plan, the lock
/// that runs its mutating calls one at a time, and its digest ledger (session
/// id, LLM spend under its ceiling).
pub struct Session {
    host: Arc<Host>,
    level: TrustLevel,
    prompter: Arc<dyn Prompter>,
    /// Read by every call's gate step, written by `record_plan` and an
    /// "always" answer.
    gate: RwLock<Gate>,
    plan: Mutex<Option<String>>,
    /// Mutating calls run one at a time, in the order they were asked.
    mutation: tokio::sync::Mutex<()>,
    digest: Option<crate::DigestWrap>,
    /// Who opened it, as recorded in the store (`None` when not recorded).
    owner: Option<String>,
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
    /// `"connected"`, `"error"`, `"disabled"` (`"disabled": true` in its
    /// file) or `"left-out"` (configured in a way core-agent cannot start,
    /// such as the SSE transport; `error` says why).
    pub status: String,
    /// How many tools it publishes to a caller of the report's trust level.
    pub tools: usize,
    /// How many tools the server listed.
    pub listed: usize,
    /// How many of the listed tools policy left out, by reason
    /// (`"the allowlist"`, `"the blocklist"`, `"max_input_schema_bytes"`, `"max_tools"`).
    pub left_out: BTreeMap<String, usize>,
    /// Why it is not connected, or `null`.
    pub error: Option<String>,
    /// How many of its published tools the caller's trust level may not see.
    pub restricted: usize,
    /// Each published tool that is not open to every trust level, with the
    /// levels that may call it and why (whatever the caller's level).
    pub restricted_tools: Vec<RestrictedTool>,
    /// What the operator should hear about it (allowlist typos, dropped tools, …).
    pub warnings: Vec<String>,
    /// How its requests are authenticated; never a secret.
    pub auth: AuthStatus,
    /// The config file it came from.
    pub source: String,
}

/// A published tool that some trust level may not call, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestrictedTool {
    /// The name the model calls.
    pub name: String,
    /// The server's own name for the tool.
    pub tool: String,
    /// The trust levels that may call it.
    pub trust_levels: Vec<&'static str>,
    /// Why: `mutating, not marked non-destructive`, `open-world`, `the
    /// server's allowedTrustLevels`, `its toolPolicies entry`, or several
    /// of them joined by `; `.
    pub why: String,
}

/// The tools of `server` in `catalog` that are not open to every level.
pub(crate) fn restricted_tools(catalog: &Catalog, server: &str) -> Vec<RestrictedTool> {
    catalog
        .entries()
        .iter()
        .filter(|e| e.server == server && !e.restricted.is_empty())
        .map(|e| RestrictedTool {
            name: e.name.clone(),
            tool: e.tool.clone(),
            trust_levels: e.trust_levels.iter().map(|l| l.as_str()).collect(),
            why: Restricted::join(&e.restricted),
        })
        .collect()
}

/// How a server's requests are authenticated, as `mcp list` and doctor show
/// it: `auth: none`, `auth: static`, `auth: google-adc (authorized user …)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthStatus {
    /// `"none"`, `"static"` (an `Authorization` written in `headers`),
    /// `"google-adc"`, or `"-"` for a server that was left out.
    pub kind: String,
    /// Where the token comes from, in the source's words
    /// (`service account key /path/key.json`); `null` when there is no source.
    pub detail: Option<String>,
}

impl AuthStatus {
    /// A server that was not started.
    pub(crate) fn left_out() -> AuthStatus {
        AuthStatus {
            kind: "-".to_owned(),
            detail: None,
        }
    }
}

impl From<&core_agent_mcp_transport::Auth> for AuthStatus {
    fn from(auth: &core_agent_mcp_transport::Auth) -> Self {
        let described = auth.to_string();
        let kind = auth.kind().to_owned();
        // `google-adc (service account key /k.json)` → detail `service account key /k.json`.
        let detail = described
            .strip_prefix(&kind)
            .map(str::trim)
            .and_then(|rest| rest.strip_prefix('('))
            .and_then(|rest| rest.strip_suffix(')'))
            .map(str::to_owned);
        AuthStatus { kind, detail }
    }
}

impl std::fmt::Display for AuthStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.detail {
            Some(detail) => write!(f, "{} ({detail})", self.kind),
            None => f.write_str(&self.kind),
        }
    }
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
    /// Why it is not open to every trust level (`mutating, not marked
    /// non-destructive`, `open-world`, …), or `null` when it is.
    pub why_restricted: Option<String>,
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
            why_restricted: (!e.restricted.is_empty()).then(|| Restricted::join(&e.restricted)),
        }
    }
}

impl Host {
    /// Starts every server of `config` concurrently; `on_ready` hears about
    /// each one as it connects or fails, with the count of tools policy
    /// publishes from it (`None` for a server that failed). Servers that fail
    /// stay in the list with their error; they never stop the others.
    ///
    /// Dropping the returned future part-way (an interrupt during start)
    /// stops every server already spawned, with its process group.
    pub async fn start(
        config: &Config,
        env: &dyn Env,
        options: HostOptions,
        on_ready: &(dyn Fn(&Server, Option<&ServerSummary>) + Sync),
    ) -> Host {
        let entries = &config.servers;
        let ready = |server: &Server| {
            let catalog = summary_of(entries, server, config.lock.as_deref());
            on_ready(
                server,
                catalog.as_ref().and_then(|c| c.summary(server.name())),
            );
        };
        let servers = Servers::start(entries, env, &options.start, &ready).await;
        let (survey, survey_warning) = open_survey(options.survey.as_ref());
        let mut host = Host {
            servers,
            entries: config.servers.clone(),
            left_out: config.left_out.clone(),
            config_warnings: config.warnings.clone(),
            options,
            survey,
            survey_warning,
            published: Mutex::new((0, Arc::new(Published::default()))),
            lock: config.lock.clone(),
            pin_epoch: Default::default(),
            pin_io: Mutex::new(()),
            pin_problem: Mutex::new(None),
        };
        let built = (host.catalog_key(), Arc::new(host.publish()));
        host.published = Mutex::new(built);
        host
    }

    /// Starts every server of `config` concurrently and returns at once: a
    /// session's call waits only for the servers its tool names can belong
    /// to (a name no server prefix explains waits for all), and listings
    /// ([`Host::wait_all`] first) for every server. `on_ready` hears about
    /// each server as its start ends, from the start's own task.
    ///
    /// Dropping the Host while servers start drops their starts, and a
    /// starting stdio child's process group with it.
    pub fn launch(
        config: &Config,
        env: &dyn Env,
        options: HostOptions,
        on_ready: ServerReady,
    ) -> Host {
        let entries = Arc::new(config.servers.clone());
        let ready: core_agent_mcp_transport::OnReady = {
            let entries = entries.clone();
            let lock = config.lock.clone();
            Arc::new(move |server: &Server| {
                let catalog = summary_of(&entries, server, lock.as_deref());
                on_ready(
                    server,
                    catalog.as_ref().and_then(|c| c.summary(server.name())),
                );
            })
        };
        let servers = Servers::launch(&config.servers, env, &options.start, Some(ready));
        let (survey, survey_warning) = open_survey(options.survey.as_ref());
        Host {
            servers,
            entries: config.servers.clone(),
            left_out: config.left_out.clone(),
            config_warnings: config.warnings.clone(),
            options,
            survey,
            survey_warning,
            published: Mutex::new((0, Arc::new(Published::default()))),
            lock: config.lock.clone(),
            pin_epoch: Default::default(),
            pin_io: Mutex::new(()),
            pin_problem: Mutex::new(None),
        }
    }

    /// Waits until every server's start has ended (connected or failed).
    pub async fn wait_all(&self) {
        self.servers.wait_all().await;
    }

    /// Waits until the servers that calls to `names` can go to have
    /// started: for each name, the servers whose namespace prefixes it; for
    /// a name none prefixes (or `wait_and_verify`/`retrieve_raw`, which
    /// reach other tools), all of them. `record_plan` and the survey tools
    /// wait for none.
    pub async fn wait_for(&self, names: &[&str]) {
        // Once every start has ended (always after `Host::start`), a call
        // pays nothing here.
        if self.servers.all_started() {
            return;
        }
        let mut wanted: Vec<&str> = Vec::new();
        for name in names {
            if *name == builtin::RECORD_PLAN
                || builtin::host_tool(name, false, true).is_some_and(|t| t.survey.is_some())
            {
                continue;
            }
            let owners: Vec<&str> = self
                .entries
                .iter()
                .filter(|e| {
                    name.strip_prefix(core_agent_mcp_policy::sanitize(&e.name).as_str())
                        .is_some_and(|rest| rest.starts_with('_'))
                })
                .map(|e| e.name.as_str())
                .collect();
            if owners.is_empty() || builtin::BUILTINS.contains(name) {
                return self.servers.wait_all().await;
            }
            wanted.extend(owners);
        }
        self.servers.wait(&wanted).await;
    }

    /// The servers still starting (after [`Host::launch`]).
    pub fn starting(&self) -> Vec<&str> {
        self.servers.starting()
    }

    /// Whether every server's start has ended.
    pub fn all_started(&self) -> bool {
        self.servers.all_started()
    }

    /// A receiver that wakes whenever the catalog may have changed (a
    /// server's tools changed on `tools/list_changed`, or the servers
    /// stopped); [`Host::catalog`] then gives the new one.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.servers.subscribe()
    }

    /// Where raw payloads and digest telemetry are kept (`None` when the
    /// digest is off): the sessions API reads each session's usage here.
    pub fn digest_store(&self) -> Option<&Arc<dyn core_agent_digest::Store>> {
        self.options.digest.as_ref().map(|d| &d.store)
    }

    /// Opens a session for one caller.
    pub fn session(self: &Arc<Self>, options: SessionOptions) -> Session {
        let id = options.id.unwrap_or_else(core_agent_digest::new_session_id);
        let digest = self.options.digest.as_ref().map(|d| {
            let wrap = crate::DigestWrap::new(d.settings, d.store.clone(), id.clone())
                .with_note(options.digest_note.clone());
            match &d.llm {
                Some(llm) => {
                    let mut llm = llm.clone();
                    if options.cost_ceiling.is_some() {
                        llm.cost_ceiling = options.cost_ceiling;
                    }
                    wrap.with_llm(llm)
                }
                None => wrap,
            }
        });
        // A session id already claimed by another owner keeps its payloads to itself.
        let owner = options.owner.filter(|owner| {
            self.digest_store()
                .is_some_and(|store| store.claim(&id, owner).is_ok())
        });
        Session {
            host: self.clone(),
            owner,
            level: options.trust_level,
            prompter: options.prompter,
            gate: RwLock::new(Gate::new(self.options.permissions.clone(), options.mode)),
            plan: Mutex::new(None),
            mutation: tokio::sync::Mutex::new(()),
            digest,
        }
    }

    /// The servers, in config order.
    pub fn servers(&self) -> impl Iterator<Item = &Server> {
        self.servers.iter()
    }

    /// The catalog of every connected server's current tools, after
    /// policy. Built once at start and again only when a server's tools
    /// have changed since; cheap to call otherwise.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.published().catalog.clone()
    }

    /// The catalog with each tool's route, rebuilt only when the tools changed.
    fn published(&self) -> Arc<Published> {
        let version = self.catalog_key();
        if let Ok(cached) = self.published.lock()
            && cached.0 == version
        {
            return cached.1.clone();
        }
        let built = Arc::new(self.publish());
        if let Ok(mut cached) = self.published.lock()
            && cached.0 <= version
        {
            *cached = (version, built.clone());
        }
        built
    }

    /// What the catalog is built from: the tools version plus the pin epoch
    /// (both only grow, so equal sums mean equal inputs).
    fn catalog_key(&self) -> u64 {
        self.servers
            .tools_version()
            .wrapping_add(self.pin_epoch.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Builds the catalog and computes, once per tool, what dispatch needs.
    fn publish(&self) -> Published {
        Published::new(self.build_catalog(), |e| {
            let index = self.servers.index_of(&e.server)?;
            let limits = self.servers.at(index)?.limits();
            let timeout = self
                .options
                .call_timeout
                .unwrap_or(Duration::from_millis(limits.call_timeout_ms));
            Some(ToolRoute {
                server: index,
                server_name: e.server.clone(),
                tool: e.tool.clone(),
                read_only: e.read_only,
                trust_levels: e.trust_levels.clone(),
                timeout,
                max_result_bytes: limits.max_result_bytes,
                digest: self.digests(&e.server),
            })
        })
    }

    fn build_catalog(&self) -> Catalog {
        let discovered: Vec<(&Server, &ServerEntry, Vec<DiscoveredTool>)> = self
            .servers
            .iter()
            .filter(|s| s.status().publishes())
            .filter_map(|s| {
                let entry = self.entries.iter().find(|e| e.name == s.name())?;
                Some((s, entry, s.tools().iter().map(discovered).collect()))
            })
            .collect();
        let verdicts = self.pin_verdicts(&discovered);
        Catalog::build_pinned(
            discovered.iter().map(|(s, e, tools)| ServerTools {
                name: s.name(),
                spec: &e.spec,
                tools,
            }),
            &BUILTINS,
            &verdicts,
        )
    }

    /// Checks the connected servers' tools against `mcp.lock` and pins the
    /// new ones (see [`crate::pin`]); no lock path, no verdicts.
    fn pin_verdicts(
        &self,
        discovered: &[(&Server, &ServerEntry, Vec<DiscoveredTool>)],
    ) -> core_agent_mcp_policy::Verdicts {
        let Some(path) = &self.lock else {
            return Default::default();
        };
        let listed: Vec<crate::pin::Listed<'_>> = discovered
            .iter()
            .map(|(s, e, _)| crate::pin::Listed {
                server: s.name(),
                mode: e.spec.pin,
                tools: if e.spec.pin == core_agent_mcp_config::PinMode::Off {
                    Vec::new()
                } else {
                    s.tools().iter().map(crate::pin::definition).collect()
                },
            })
            .collect();
        let _io = self.pin_io.lock();
        let (verdicts, problem) = crate::pin::check(path, &listed);
        if let Ok(mut slot) = self.pin_problem.lock() {
            *slot = problem;
        }
        verdicts
    }

    /// Why `mcp.lock` could not be read or written when the catalog was
    /// last built (`None` when it could, or nothing is pinned).
    pub fn pin_problem(&self) -> Option<String> {
        let _ = self.catalog();
        self.pin_problem.lock().ok().and_then(|p| p.clone())
    }

    /// Accepts the definitions `server` lists now into `mcp.lock`: of its
    /// tool `tool` only, or of every tool it lists (dropping the pins of
    /// tools it no longer lists). The catalog is rebuilt with the new pins,
    /// so a tool quarantined under `pin: "strict"` is published again.
    pub fn trust(&self, server: &str, tool: Option<&str>) -> Result<Vec<crate::Trusted>> {
        let pin_error = |message: String| Error::Pin { message };
        let Some(path) = &self.lock else {
            return Err(pin_error(
                "this host pins nothing (its config names no mcp.lock)".to_owned(),
            ));
        };
        let Some(s) = self.servers.get(server) else {
            let names: Vec<&str> = self.servers.iter().map(Server::name).collect();
            let hint = match core_agent_mcp_config::closest(server, &names) {
                Some(n) => format!("did you mean `{n}`?"),
                None => format!("the configured servers are: {}", names.join(", ")),
            };
            return Err(pin_error(format!("no server named `{server}`; {hint}")));
        };
        if s.status() != Status::Connected {
            let why = s.error().map(ToString::to_string).unwrap_or_default();
            return Err(pin_error(format!(
                "server `{server}` did not start, so its tools cannot be read: {why}"
            )));
        }
        let tools: Vec<core_agent_mcp_policy::ToolDefinition> =
            s.tools().iter().map(crate::pin::definition).collect();
        if let Some(tool) = tool
            && !tools.iter().any(|t| t.name == tool)
        {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let hint = match core_agent_mcp_config::closest(tool, &names) {
                Some(n) => format!("did you mean `{n}`?"),
                None => format!("it lists: {}", names.join(", ")),
            };
            return Err(pin_error(format!(
                "server `{server}` lists no tool `{tool}`; {hint}"
            )));
        }
        let report = {
            let _io = self.pin_io.lock();
            crate::pin::trust(path, server, &tools, tool).map_err(pin_error)?
        };
        self.pin_epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(report)
    }

    /// The servers the config names but that were not started (disabled,
    /// or on a transport core-agent does not speak).
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// Every server's state, with tool counts and restrictions as a caller
    /// of `level` sees them; servers the config left out come last.
    pub fn server_reports(&self, level: TrustLevel) -> Vec<ServerReport> {
        let catalog = self.catalog();
        let mut reports: Vec<ServerReport> = self
            .servers
            .iter()
            .map(|s| {
                let mut warnings: Vec<String> = catalog
                    .warnings()
                    .iter()
                    .filter(|w| w.server() == Some(s.name()))
                    .map(ToString::to_string)
                    .collect();
                warnings.extend(s.warnings());
                warnings.extend(
                    self.config_warnings
                        .iter()
                        .filter(|w| w.server.as_deref() == Some(s.name()))
                        .map(|w| w.message.clone()),
                );
                let summary = catalog.summary(s.name()).cloned().unwrap_or_default();
                ServerReport {
                    name: s.name().to_owned(),
                    transport: s.transport().to_owned(),
                    scope: s.scope().as_str().to_owned(),
                    status: s.status().as_str().to_owned(),
                    tools: catalog
                        .visible(level)
                        .filter(|e| e.server == s.name())
                        .count(),
                    listed: summary.listed,
                    left_out: summary.left_out_by_reason(),
                    error: s.problem(),
                    restricted: catalog.restricted(s.name(), level),
                    restricted_tools: restricted_tools(&catalog, s.name()),
                    warnings,
                    auth: AuthStatus::from(s.auth()),
                    source: self
                        .entries
                        .iter()
                        .find(|e| e.name == s.name())
                        .map(|e| e.source.display().to_string())
                        .unwrap_or_default(),
                }
            })
            .collect();
        reports.extend(self.left_out.iter().map(|l| ServerReport {
            name: l.name.clone(),
            transport: "-".to_owned(),
            scope: l.scope.as_str().to_owned(),
            status: left_out_status(&l.reason).to_owned(),
            tools: 0,
            listed: 0,
            left_out: BTreeMap::new(),
            error: Some(l.reason.to_string()),
            restricted: 0,
            restricted_tools: Vec::new(),
            warnings: Vec::new(),
            auth: AuthStatus::left_out(),
            source: l.source.display().to_string(),
        }));
        reports
    }

    /// What a caller of `level` sees: the built-ins, then the catalog.
    pub fn tool_reports(&self, level: TrustLevel) -> Vec<ToolReport> {
        let digest_on = self.options.digest.is_some();
        let survey = self.survey_access();
        let mut reports: Vec<ToolReport> = builtin::HOST_TOOLS
            .iter()
            .filter(|t| t.available(digest_on, survey.is_some()))
            .filter_map(|t| {
                let mut report = builtin::report(t);
                if t.survey.is_some() {
                    let levels = survey.and_then(|a| a.levels(t.name))?;
                    if !levels.contains(&level) {
                        return None;
                    }
                    report.trust_levels = levels.iter().map(|l| l.as_str()).collect();
                    if levels.len() < TrustLevel::ALL.len() {
                        let by_policy =
                            survey.is_some_and(|a| a.tool_policies.contains_key(t.name));
                        let why = if by_policy {
                            Restricted::ToolPolicy
                        } else {
                            Restricted::ServerPolicy
                        };
                        report.why_restricted = Some(why.to_string());
                    }
                }
                Some(report)
            })
            .collect();
        reports.extend(self.catalog().visible(level).map(ToolReport::from));
        reports
    }

    /// Everything the operator should hear about at startup, each line
    /// prefixed with its area: policy warnings (allowlist typos, left-out or
    /// renamed tools, cut tool lists) and permission patterns that match no tool.
    ///
    /// While servers are still starting, it says what is known so far: the
    /// config's warnings and those of the servers that have started, but no
    /// unmatched permission pattern (a late server may yet bring its tool).
    /// The list is a function of the config and the current catalog, so a
    /// caller that shows warnings as they come (after a rebuild) keeps the
    /// ones it has shown and shows the new ones.
    pub fn warnings(&self) -> Vec<String> {
        let catalog = self.catalog();
        let mut out: Vec<String> = self
            .config_warnings
            .iter()
            .map(|w| format!("config: {w}"))
            .chain(self.left_out.iter().map(|l| format!("mcp: {l}")))
            .chain(self.survey_warning.iter().map(|w| format!("survey: {w}")))
            .collect();
        if let Some(problem) = self.pin_problem.lock().ok().and_then(|p| p.clone()) {
            out.push(format!("pin: {problem}"));
        }
        out.extend(catalog.warnings().iter().map(|w| format!("mcp: {w}")));
        out.extend(
            self.servers
                .iter()
                .flat_map(Server::warnings)
                .map(|w| format!("mcp: {w}")),
        );
        if !self.servers.all_started() {
            return out;
        }
        let tools: Vec<(&str, &str)> = catalog
            .entries()
            .iter()
            .map(|e| (MCP, e.name.as_str()))
            .chain(BUILTINS.iter().map(|b| (BUILTIN, *b)))
            .collect();
        let gate = Gate::new(self.options.permissions.clone(), None);
        for p in gate.unmatched_patterns(&tools) {
            out.push(format!(
                "permissions: pattern `{p}` in {} matches no tool in the catalog",
                p.source().display()
            ));
        }
        out
    }

    /// Stops every server (stdio children: EOF, SIGTERM, then SIGKILL).
    /// Calls in flight fail; later calls find no server.
    pub async fn shutdown(&self) {
        self.servers.shutdown().await;
    }

    /// The limits of `server` (the defaults for a server that is gone).
    fn limits(&self, server: &str) -> Limits {
        self.servers
            .get(server)
            .map_or_else(Limits::default, Server::limits)
    }

    /// The survey tools' root (`None` when they are off).
    pub fn survey_root(&self) -> Option<&std::path::Path> {
        self.survey.as_ref().map(|s| s.root().path())
    }

    /// The survey tools' allowlist and trust levels, while they are on.
    fn survey_access(&self) -> Option<&BuiltinTools> {
        let access = self.options.survey.as_ref().map(|o| &o.access);
        self.survey.as_ref().and(access)
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
}

impl Drop for Session {
    /// Releases its claim in the store: an in-memory store then forgets the
    /// owner of a session that stored nothing, so sessions that come and go
    /// leave nothing behind.
    fn drop(&mut self) {
        if let (Some(_), Some(digest)) = (&self.owner, &self.digest)
            && let Err(e) = digest.store.release(&digest.session)
        {
            tracing::warn!("the session's claim could not be released: {e}");
        }
    }
}

impl Session {
    /// The host this session calls through.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The caller's trust level.
    pub fn trust_level(&self) -> TrustLevel {
        self.level
    }

    /// The id its digests and telemetry are kept under (`None` when the
    /// digest is off).
    pub fn id(&self) -> Option<&str> {
        self.digest.as_ref().map(|d| d.session.as_str())
    }

    /// Whether `session` was opened by this session's owner.
    fn owns(&self, session: &str) -> bool {
        let (Some(owner), Some(digest)) = (&self.owner, &self.digest) else {
            return false;
        };
        digest.store.owner(session).ok().flatten().as_deref() == Some(owner.as_str())
    }

    /// The plan recorded in this session, if any.
    pub fn plan(&self) -> Option<String> {
        self.plan.lock().ok().and_then(|p| p.clone())
    }

    /// Calls one tool as a caller of `level`: through the gate, then the
    /// dispatcher. `Ok` with `is_error: Some(true)` means the tool ran and
    /// reported a failure; `Err` means it was refused or could not finish.
    ///
    /// The same steps as a batch of one call, without the batch's
    /// bookkeeping.
    pub async fn call(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult> {
        self.call_with(name, arguments, None).await
    }

    /// [`Session::call`], passing the progress updates the server sends
    /// about the call to `progress` (a gateway relays them to its client).
    pub async fn call_with_progress(
        &self,
        name: &str,
        arguments: JsonObject,
        progress: &ProgressSink,
    ) -> Result<CallToolResult> {
        self.call_with(name, arguments, Some(progress)).await
    }

    async fn call_with(
        &self,
        name: &str,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let level = self.level;
        self.host.wait_for(&[name]).await;
        let published = self.host.published();
        let plan = self.decide(&published, name, arguments, level).await;
        self.run(&published, plan, level, progress).await
    }

    /// Runs one turn's calls. Every call is decided in order before any
    /// runs: resolved, checked against the caller's trust level and put
    /// through the gate (asking where needed; `record_plan` taking effect for
    /// the calls after it; `wait_and_verify` decided, and asked about once,
    /// for the tool it will poll). Then read-only calls run concurrently
    /// while mutating calls run one at a time, in the order they were asked.
    /// Outcomes come back in input order.
    pub async fn call_batch(&self, calls: Vec<CallRequest>) -> Vec<CallOutcome> {
        self.call_batch_with_progress(calls, &[]).await
    }

    /// [`Session::call_batch`], passing the progress updates the server
    /// sends about the call at index `i` to `progress[i]` (calls past the
    /// end of `progress` report to nobody).
    pub async fn call_batch_with_progress(
        &self,
        calls: Vec<CallRequest>,
        progress: &[ProgressSink],
    ) -> Vec<CallOutcome> {
        let level = self.level;
        if !self.host.all_started() {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            self.host.wait_for(&names).await;
        }
        let published = self.host.published();
        // Decided one at a time, in order: an ask is answered, and a
        // `record_plan` takes effect, before the next call is decided.
        let mut planned: Vec<(String, Planned)> = Vec::with_capacity(calls.len());
        for CallRequest { name, arguments } in calls {
            let plan = self.decide(&published, &name, arguments, level).await;
            planned.push((name, plan));
        }
        let started = Instant::now();
        let published = &published;
        let runs = planned
            .into_iter()
            .enumerate()
            .map(|(i, (name, plan))| async move {
                let result = self.run(published, plan, level, progress.get(i)).await;
                CallOutcome {
                    name,
                    result,
                    elapsed: started.elapsed(),
                }
            });
        futures::future::join_all(runs).await
    }

    /// Decides one call of a batch, before anything runs: the pipeline's
    /// first steps, the same for every tool — resolve, trust, gate — then
    /// what the tool needs at planning time.
    async fn decide(
        &self,
        published: &Published,
        name: &str,
        arguments: JsonObject,
        level: TrustLevel,
    ) -> Planned {
        let route = match self.admit(published, name, &arguments, level).await {
            Ok(route) => route,
            Err(e) => return Planned::Done(Err(e)),
        };
        match route {
            Route::Mcp(route) => Planned::Run(route, arguments),
            Route::Host(tool) => match tool.name {
                // Takes effect for the calls after it in this turn.
                builtin::RECORD_PLAN => Planned::Done(self.record_plan(&arguments)),
                builtin::WAIT_AND_VERIFY => {
                    match self.plan_wait(published, &arguments, level).await {
                        Ok((route, args)) => Planned::Wait(route, Box::new(args)),
                        Err(e) => Planned::Done(Err(e)),
                    }
                }
                _ => match tool.survey {
                    Some(survey) => Planned::Survey(survey, arguments),
                    None => Planned::Raw(arguments),
                },
            },
        }
    }

    /// Runs a decided call.
    async fn run(
        &self,
        published: &Published,
        plan: Planned,
        level: TrustLevel,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        match plan {
            Planned::Done(result) => result,
            Planned::Run(route, arguments) => self.dispatch(&route, arguments, progress).await,
            Planned::Wait(route, args) => self.wait_and_verify(&route, *args).await,
            Planned::Raw(arguments) => self.retrieve_raw(published, &arguments, level),
            Planned::Survey(tool, arguments) => self.survey(tool, arguments).await,
        }
    }

    /// Resolve → trust → gate, for any tool: the route of an admitted call.
    async fn admit(
        &self,
        published: &Published,
        name: &str,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<Route> {
        let survey = self.host.survey_access();
        let route = resolve(published, name, level, self.digest.is_some(), survey)?;
        trust(&route, name, level, survey)?;
        let (namespace, read_only) = match &route {
            Route::Mcp(route) => (MCP, route.read_only),
            Route::Host(tool) if tool.gated => (BUILTIN, tool.read_only),
            Route::Host(_) => return Ok(route),
        };
        let request = Request {
            namespace,
            name,
            arguments,
            read_only,
        };
        gate(&self.gate, self.prompter.as_ref(), request).await?;
        Ok(route)
    }

    /// Runs an admitted call: mutating calls hold the session's lock; the
    /// server's own limit bounds calls in flight. The result is as the server sent it.
    async fn dispatch_raw(
        &self,
        route: &ToolRoute,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let Some(server) = self.host.servers.at(route.server) else {
            return Err(Error::UnknownTool {
                name: route.tool.clone(),
                suggestions: Vec::new(),
            });
        };
        let _turn = if route.read_only {
            None
        } else {
            Some(self.mutation.lock().await)
        };
        Ok(server
            .call_tool_with_progress(&route.tool, arguments, route.timeout, progress)
            .await?)
    }

    /// Runs an admitted call and shapes its result for the caller (see [`shape`]).
    async fn dispatch(
        &self,
        route: &ToolRoute,
        arguments: JsonObject,
        progress: Option<&ProgressSink>,
    ) -> Result<CallToolResult> {
        let result = self.dispatch_raw(route, arguments, progress).await?;
        Ok(shape(result, self.digest.as_ref(), route).await)
    }

    /// Runs a survey tool on a blocking thread, under the host's call
    /// timeout (30 s when none is set), cancelled when the call's future is
    /// dropped or the time is up. Its output, as JSON text, is shaped like a
    /// server's result (digest, then the cap); what the survey refuses (a
    /// path outside the root, a bad pattern, bad arguments) is a tool error.
    async fn survey(
        &self,
        tool: core_agent_survey::Tool,
        arguments: JsonObject,
    ) -> Result<CallToolResult> {
        let Some(survey) = self.host.survey.clone() else {
            return Err(Error::UnknownTool {
                name: tool.name().to_owned(),
                suggestions: Vec::new(),
            });
        };
        let timeout = self.host.options.call_timeout.unwrap_or(SURVEY_TIMEOUT);
        let cancel = core_agent_survey::Cancel::new();
        // Set when this future ends, however it ends: the walk stops soon after.
        let _stop = CancelOnDrop(cancel.clone());
        let task = tokio::task::spawn_blocking(move || {
            survey
                .call(tool, Value::Object(arguments), &cancel)
                .map(|out| serde_json::to_string(&out))
        });
        let result = match tokio::time::timeout(timeout, task).await {
            Err(_) => {
                return Err(Error::TimedOut {
                    name: tool.name().to_owned(),
                    after: timeout,
                });
            }
            Ok(Err(joined)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "`{}` failed: {joined}",
                tool.name()
            ))]),
            Ok(Ok(Ok(Ok(json)))) => CallToolResult::success(vec![ContentBlock::text(json)]),
            Ok(Ok(Ok(Err(e)))) => CallToolResult::error(vec![ContentBlock::text(format!(
                "`{}`: cannot serialize the output: {e}",
                tool.name()
            ))]),
            Ok(Ok(Err(e))) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        let route = ToolRoute {
            server: usize::MAX,
            server_name: builtin::HOST_SERVER.to_owned(),
            tool: tool.name().to_owned(),
            read_only: true,
            trust_levels: TrustLevel::ALL.to_vec(),
            timeout,
            max_result_bytes: Limits::default().max_result_bytes,
            digest: true,
        };
        Ok(shape(result, self.digest.as_ref(), &route).await)
    }

    /// `retrieve_raw {call_id, pointer?, offset?, length?}`: the raw payload
    /// of one of this session's digests (or the part at a JSON pointer), to a
    /// caller whose trust level may call the tool that produced it. A payload
    /// over the producing server's `max_result_bytes` comes back a page at a
    /// time, with the offset of the next page.
    fn retrieve_raw(
        &self,
        published: &Published,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<CallToolResult> {
        let bad = |message: String| Error::BadArguments {
            name: builtin::RETRIEVE_RAW.to_owned(),
            message,
        };
        let Some(digest) = &self.digest else {
            return Err(bad("the digest is off, so nothing was stored".to_owned()));
        };
        let call_id = arguments
            .get("call_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("pass {\"call_id\": \"…\"} from a digest".to_owned()))?;
        let not_here = || {
            let mut message = format!("no raw payload is stored under `{call_id}` in this session");
            if let Ok(Some(evicted)) = digest.store.evicted() {
                message.push_str(&format!(
                    "; the in-memory store has dropped its {} oldest payloads ({} bytes) to keep \
                     memory under its budget of {} bytes, so it may be one of them; a session \
                     database keeps every payload",
                    evicted.payloads, evicted.bytes, evicted.budget
                ));
                if let Some(note) = &digest.note {
                    message.push_str(&format!(" ({note})"));
                }
            }
            bad(message)
        };
        let record = digest
            .store
            .get(call_id)
            .map_err(|e| bad(e.to_string()))?
            .filter(|r| r.session_id == digest.session || self.owns(&r.session_id))
            .ok_or_else(not_here)?;
        // The payload is as restricted as the tool that produced it.
        match published
            .catalog
            .entries()
            .iter()
            .find(|e| e.server == record.server && e.tool == record.tool)
        {
            Some(entry) if entry.allows(level) => {}
            Some(entry) => return Err(restricted(&entry.name, level, &entry.trust_levels)),
            // A survey tool's: readable by the levels that may call the tool.
            None if record.server == builtin::HOST_SERVER
                && builtin::host_tool(&record.tool, true, true)
                    .is_some_and(|t| t.survey.is_some())
                && self
                    .host
                    .survey_access()
                    .and_then(|a| a.levels(&record.tool))
                    .is_some_and(|levels| levels.contains(&level)) => {}
            None => {
                return Err(bad(format!(
                    "`{call_id}` came from `{}` of server `{}`, which is not in the catalog now",
                    record.tool, record.server
                )));
            }
        }
        let text = match arguments.get("pointer").and_then(Value::as_str) {
            Some(pointer) => core_agent_digest::extract(&record.payload, pointer).map_err(bad)?,
            None => record.payload,
        };
        let number = |key: &str| -> Result<Option<usize>> {
            match arguments.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| bad(format!("`{key}` must be a whole number of bytes"))),
            }
        };
        let page = Page::of(
            &text,
            number("offset")?.unwrap_or(0),
            number("length")?,
            self.host.limits(&record.server).max_result_bytes,
        )
        .map_err(bad)?;
        if page.start == 0 && page.end == text.len() {
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]));
        }
        let about = json!({
            "call_id": call_id,
            "offset": page.start,
            "returned_bytes": page.end - page.start,
            "total_bytes": text.len(),
            "next_offset": (page.end < text.len()).then_some(page.end),
        });
        Ok(CallToolResult::success(vec![
            ContentBlock::text(text[page.start..page.end].to_owned()),
            ContentBlock::text(about.to_string()),
        ]))
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
        if let Ok(mut gate) = self.gate.write() {
            gate.record_plan();
        }
        if let Ok(mut slot) = self.plan.lock() {
            *slot = Some(plan.to_owned());
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "plan recorded; mutating tools may run from now on in this session",
        )]))
    }

    /// Decides a `wait_and_verify` call when the batch is planned: its
    /// arguments, whether the tool may be polled, and the tool's own trust
    /// and gate decision, asked about once for every attempt.
    async fn plan_wait(
        &self,
        published: &Published,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<(Arc<ToolRoute>, builtin::WaitArgs)> {
        let args = builtin::WaitArgs::parse(arguments)?;
        let catalog = &published.catalog;
        let Some(entry) = catalog.get(&args.tool) else {
            return Err(Error::UnknownTool {
                name: args.tool.clone(),
                suggestions: suggest(catalog, &args.tool, level),
            });
        };
        let (may_poll, config_file) = self
            .gate
            .read()
            .map(|g| (g.may_poll(&entry.name, entry.read_only), g.config_file()))
            .unwrap_or((false, String::new()));
        if !may_poll {
            return Err(Error::BadArguments {
                name: builtin::WAIT_AND_VERIFY.to_owned(),
                message: format!(
                    "refuses to poll `{}`: it changes state, and polling repeats it; list it in tools.wait_and_verify.poll_allow in {config_file} to allow polling it",
                    entry.name
                ),
            });
        }
        match self
            .admit(published, &entry.name, &args.arguments, level)
            .await?
        {
            Route::Mcp(route) => Ok((route, args)),
            Route::Host(tool) => Err(Error::BadArguments {
                name: builtin::WAIT_AND_VERIFY.to_owned(),
                message: format!("cannot poll `{}`, a host tool", tool.name),
            }),
        }
    }

    /// Polls an admitted tool until a condition on its result holds.
    ///
    /// An attempt whose server crashed, is being restarted or did not answer
    /// in time is an unmet attempt: the poll goes on. A server that is down
    /// (past its restart limit) ends the poll with its reason; other call
    /// errors end it as errors. The report lists every attempt's outcome.
    async fn wait_and_verify(
        &self,
        entry: &ToolRoute,
        args: builtin::WaitArgs,
    ) -> Result<CallToolResult> {
        let mut last = Value::Null;
        let mut outcomes = Vec::new();
        for attempt in 1..=args.max_attempts {
            // The condition reads the whole result, not its digest.
            match self.dispatch_raw(entry, args.arguments.clone(), None).await {
                Ok(result) => {
                    last = serde_json::to_value(cap_result(result.clone(), 64 * 1024))
                        .unwrap_or(Value::Null);
                    if args.until.holds(&result) {
                        outcomes.push(json!({"attempt": attempt, "outcome": "met"}));
                        let report = json!({"satisfied": true, "attempts": attempt, "outcomes": outcomes, "result": last});
                        return Ok(CallToolResult::success(vec![ContentBlock::text(
                            report.to_string(),
                        )]));
                    }
                    outcomes.push(json!({"attempt": attempt, "outcome": "unmet"}));
                }
                Err(Error::Call(err)) if attempt_may_recover(&err) => {
                    outcomes.push(
                        json!({"attempt": attempt, "outcome": "failed", "error": err.to_string()}),
                    );
                }
                Err(Error::Call(err @ core_agent_mcp_transport::Error::Down { .. })) => {
                    let reason = err.to_string();
                    outcomes.push(
                        json!({"attempt": attempt, "outcome": "down", "error": reason.clone()}),
                    );
                    let report = json!({"satisfied": false, "attempts": attempt, "stopped": reason, "outcomes": outcomes, "result": last});
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        report.to_string(),
                    )]));
                }
                Err(other) => return Err(other),
            }
            if attempt < args.max_attempts {
                tokio::time::sleep(args.interval).await;
            }
        }
        let report = json!({"satisfied": false, "attempts": args.max_attempts, "outcomes": outcomes, "result": last});
        Ok(CallToolResult::error(vec![ContentBlock::text(
            report.to_string(),
        )]))
    }
}

/// Whether a polled call that failed this way may succeed on a later
/// attempt: its server crashed (and may be restarted), is being restarted,
/// or did not answer in time.
fn attempt_may_recover(err: &core_agent_mcp_transport::Error) -> bool {
    matches!(
        err,
        core_agent_mcp_transport::Error::Crashed { .. }
            | core_agent_mcp_transport::Error::Restarting { .. }
            | core_agent_mcp_transport::Error::Timeout { .. }
    )
}

/// The catalog and, by published name, where each of its tools is dispatched.
#[derive(Debug, Default)]
struct Published {
    catalog: Arc<Catalog>,
    routes: std::collections::HashMap<String, Arc<ToolRoute>>,
}

impl Published {
    /// `catalog`, with the route `route` gives each entry (an entry it
    /// gives none, such as one whose server is gone, cannot be called).
    fn new(catalog: Catalog, route: impl Fn(&CatalogEntry) -> Option<ToolRoute>) -> Published {
        let routes = catalog
            .entries()
            .iter()
            .filter_map(|e| Some((e.name.clone(), Arc::new(route(e)?))))
            .collect();
        Published {
            catalog: Arc::new(catalog),
            routes,
        }
    }
}

/// What a call of one published tool needs, from resolve to the cap,
/// computed when the catalog is built: a call takes it by cloning an `Arc`,
/// and does not look its server, config or catalog entry up again.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ToolRoute {
    /// The server's index in the host's servers.
    server: usize,
    /// The server's key in the config (what the digest records).
    server_name: String,
    /// The server's own name for the tool.
    tool: String,
    /// The dispatch class.
    read_only: bool,
    /// The trust levels that may call it (the catalog entry's).
    trust_levels: Vec<TrustLevel>,
    /// The call's time limit.
    timeout: Duration,
    /// The bound on the result.
    max_result_bytes: usize,
    /// Whether results are digested.
    digest: bool,
}

/// Where an admitted call goes.
#[derive(Debug)]
enum Route {
    /// A server's tool: where dispatch sends it.
    Mcp(Arc<ToolRoute>),
    /// A host tool.
    Host(&'static builtin::HostTool),
}

/// The resolve step: the tool published as `name`. A host tool (their
/// names are reserved, so no server's tool can take one; `retrieve_raw` only
/// while the digest is on, the survey tools only while they are on), else the catalog's route; an unknown name comes
/// back with up to three names a caller of `level` could have meant.
fn resolve(
    published: &Published,
    name: &str,
    level: TrustLevel,
    digest_on: bool,
    survey: Option<&BuiltinTools>,
) -> Result<Route> {
    if let Some(tool) = builtin::host_tool(name, digest_on, survey.is_some())
        && (tool.survey.is_none() || survey.and_then(|a| a.levels(name)).is_some())
    {
        return Ok(Route::Host(tool));
    }
    match published.routes.get(name) {
        Some(route) => Ok(Route::Mcp(route.clone())),
        // Why a tool is missing is told to the creator and to callers who
        // may see other tools of that server; others hear of no such tool.
        None => match published.catalog.warnings().iter().find(|w| {
            w.withholds(name)
                && (level == TrustLevel::Creator
                    || w.server().is_some_and(|server| {
                        published.catalog.visible(level).any(|e| e.server == server)
                    }))
        }) {
            Some(warning) => Err(Error::Withheld {
                name: name.to_owned(),
                reason: warning.to_string(),
            }),
            None => Err(Error::UnknownTool {
                name: name.to_owned(),
                suggestions: suggest(&published.catalog, name, level),
            }),
        },
    }
}

/// The trust step: a server's tool allows the levels policy gave it; a
/// survey tool the levels under the reserved name `builtin` give it (every
/// level by default); the other host tools allow every level (what they
/// reach is checked by the tool).
fn trust(
    route: &Route,
    name: &str,
    level: TrustLevel,
    survey: Option<&BuiltinTools>,
) -> Result<()> {
    match route {
        Route::Mcp(route) if !route.trust_levels.contains(&level) => {
            Err(restricted(name, level, &route.trust_levels))
        }
        Route::Host(tool) if tool.survey.is_some() => {
            let levels = survey.and_then(|a| a.levels(name)).unwrap_or_default();
            if levels.contains(&level) {
                Ok(())
            } else {
                Err(restricted(name, level, &levels))
            }
        }
        _ => Ok(()),
    }
}

/// The gate step: the session's gate decides the call, and the `prompter`
/// answers where the gate asks ("always" allows the tool for the rest of
/// the session). The gate is only read unless an answer changes it.
async fn gate(gate: &RwLock<Gate>, prompter: &dyn Prompter, request: Request<'_>) -> Result<()> {
    let decision = match gate.read() {
        Ok(gate) => gate.decide(request),
        Err(_) => Decision::Deny {
            reason: "the permission gate is unavailable".into(),
            advice: "retry".into(),
        },
    };
    let Request {
        namespace, name, ..
    } = request;
    match decision {
        Decision::Allow => Ok(()),
        Decision::Deny { reason, advice } => Err(Error::Denied {
            name: name.to_owned(),
            reason,
            advice,
            unanswered_ask: false,
        }),
        Decision::Ask { detail } => match prompter.ask(name, &detail).await {
            Answer::Yes => Ok(()),
            Answer::Always => {
                if let Ok(mut gate) = gate.write() {
                    gate.allow_for_session(name);
                }
                Ok(())
            }
            Answer::No => {
                let config_file = gate.read().map(|g| g.config_file()).unwrap_or_default();
                Err(Error::Denied {
                    name: name.to_owned(),
                    reason: format!(
                        "`{name}` needs approval (permissions.mode is \"ask\") and was not approved"
                    ),
                    advice: format!(
                        "approve it when asked, or add \"{namespace}:{name}\" to permissions.allow in {config_file}"
                    ),
                    unanswered_ask: true,
                })
            }
        },
    }
}

/// The shaping step, on a result as the server sent it: the digest, when
/// the session has one and the route's server is digested (the raw payload
/// is stored whole, and the synthetic response made to fit the cap whole),
/// then the route's `max_result_bytes` cap, on what the caller will see.
async fn shape(
    result: CallToolResult,
    digest: Option<&crate::DigestWrap>,
    route: &ToolRoute,
) -> CallToolResult {
    let result = match digest {
        Some(digest) if route.digest => {
            digest
                .apply_within(
                    result,
                    &route.server_name,
                    &route.tool,
                    route.max_result_bytes,
                )
                .await
        }
        _ => result,
    };
    cap_result(result, route.max_result_bytes)
}

/// A call after the gate, before dispatch.
enum Planned {
    Done(Result<CallToolResult>),
    Run(Arc<ToolRoute>, JsonObject),
    Wait(Arc<ToolRoute>, Box<builtin::WaitArgs>),
    Raw(JsonObject),
    Survey(core_agent_survey::Tool, JsonObject),
}

/// One page of a raw payload: the bytes `start..end` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Page {
    start: usize,
    end: usize,
}

/// Room kept in a page's result for its JSON framing and the paging note.
const PAGE_FRAMING: usize = 1024;

impl Page {
    /// The page of `text` from `offset` (moved back to a character
    /// boundary), at most `length` bytes, and small enough that the result
    /// carrying it, JSON-escaped, stays within `max_result_bytes`.
    fn of(
        text: &str,
        offset: usize,
        length: Option<usize>,
        max_result_bytes: usize,
    ) -> std::result::Result<Page, String> {
        if offset > text.len() {
            return Err(format!(
                "`offset` {offset} is past the end of the payload ({} bytes)",
                text.len()
            ));
        }
        if length == Some(0) {
            return Err("`length` must be at least 1".to_owned());
        }
        let start = text.floor_char_boundary(offset);
        let budget = max_result_bytes.saturating_sub(PAGE_FRAMING).max(1);
        let rest = &text[start..];
        let mut end = start + fit_json_str(rest, budget);
        if let Some(length) = length {
            let want = text.floor_char_boundary((start + length).min(text.len()));
            end = end.min(want);
        }
        if end == start && start < text.len() {
            // One character always fits.
            end = start + rest.chars().next().map_or(0, char::len_utf8);
        }
        Ok(Page { start, end })
    }
}

/// Cancels a survey operation when dropped.
struct CancelOnDrop(core_agent_survey::Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The survey over the configured root, or why it cannot be used.
fn open_survey(
    options: Option<&SurveyOptions>,
) -> (Option<Arc<core_agent_survey::Survey>>, Option<String>) {
    let Some(options) = options else {
        return (None, None);
    };
    match core_agent_survey::Root::new(&options.root) {
        Ok(root) => (
            Some(Arc::new(core_agent_survey::Survey::with_limits(
                root,
                options.limits.clone(),
            ))),
            None,
        ),
        Err(e) => (None, Some(format!("the survey tools are off: {e}"))),
    }
}

fn restricted(name: &str, level: TrustLevel, allowed: &[TrustLevel]) -> Error {
    Error::Restricted {
        name: name.to_owned(),
        level: level.as_str().to_owned(),
        allowed: allowed
            .iter()
            .map(|l| format!("`{}`", l.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The status reports give a configured server that was not started:
/// `disabled` when its file says so, `left-out` otherwise.
pub(crate) fn left_out_status(reason: &LeftOutReason) -> &'static str {
    match reason {
        LeftOutReason::Disabled => "disabled",
        _ => "left-out",
    }
}

/// The one-server catalog of a server that connected, for its ready line:
/// checked against the pins in `lock` (read only; the catalog build that
/// follows pins what is new), so a quarantined tool is not counted.
fn summary_of(
    entries: &[ServerEntry],
    server: &Server,
    lock: Option<&std::path::Path>,
) -> Option<Catalog> {
    if server.status() != Status::Connected {
        return None;
    }
    let entry = entries.iter().find(|e| e.name == server.name())?;
    let listed = server.tools();
    let tools: Vec<DiscoveredTool> = listed.iter().map(discovered).collect();
    let verdicts = match lock {
        Some(path) if entry.spec.pin != core_agent_mcp_config::PinMode::Off => {
            let definitions: Vec<_> = listed.iter().map(crate::pin::definition).collect();
            crate::pin::peek(path, server.name(), &definitions)
        }
        _ => Default::default(),
    };
    Some(Catalog::build_pinned(
        [ServerTools {
            name: server.name(),
            spec: &entry.spec,
            tools: &tools,
        }],
        &[],
        &verdicts,
    ))
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

#[cfg(test)]
mod pipeline_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_step_follows_policy_for_server_tools_and_opens_host_tools() {
        let route = Route::Mcp(Arc::new(ToolRoute {
            server: 0,
            server_name: "fs".into(),
            tool: "delete".into(),
            read_only: false,
            trust_levels: vec![TrustLevel::Creator],
            timeout: Duration::from_secs(30),
            max_result_bytes: 131_072,
            digest: true,
        }));
        assert!(trust(&route, "fs_delete", TrustLevel::Creator, None).is_ok());
        let err = trust(&route, "fs_delete", TrustLevel::Public, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`fs_delete` is not available at trust level `public`; it allows `creator`"
        );
        for tool in &builtin::HOST_TOOLS {
            let open = BuiltinTools::default();
            let route = Route::Host(tool);
            assert!(trust(&route, tool.name, TrustLevel::Public, Some(&open)).is_ok());
        }
    }

    #[test]
    fn host_tools_are_declared_and_retrieve_raw_needs_the_digest() {
        assert_eq!(
            builtin::host_tool("retrieve_raw", true, false).map(|t| (t.read_only, t.gated)),
            Some((true, true))
        );
        assert_eq!(builtin::host_tool("retrieve_raw", false, true), None);
        assert_eq!(
            builtin::host_tool("record_plan", false, false).map(|t| t.gated),
            Some(false)
        );
        assert_eq!(builtin::host_tool("demo_divide", true, true), None);
        assert_eq!(
            builtin::host_tool("grep", false, true).map(|t| (t.read_only, t.gated)),
            Some((true, true))
        );
        assert_eq!(builtin::host_tool("grep", true, false), None);
        let names: Vec<&str> = builtin::HOST_TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(names, BUILTINS, "every reserved name is a declared tool");
    }

    #[test]
    fn pages_cover_the_payload_and_respect_the_bound() {
        let text = "a\"é".repeat(100_000);
        let mut offset = 0;
        let mut pages = 0;
        while offset < text.len() {
            let page = Page::of(&text, offset, None, 16_384).unwrap();
            assert_eq!(page.start, offset);
            assert!(page.end > page.start);
            let escaped = serde_json::to_string(&text[page.start..page.end]).unwrap();
            assert!(
                escaped.len() <= 16_384 - PAGE_FRAMING + 2,
                "{}",
                escaped.len()
            );
            offset = page.end;
            pages += 1;
        }
        assert!(pages > 1);
        // A caller's length is honoured, on a character boundary.
        let page = Page::of(&text, 0, Some(2), 16_384).unwrap();
        assert_eq!((page.start, page.end), (0, 2));
        let page = Page::of(&text, 3, Some(1), 16_384).unwrap();
        assert_eq!(
            (page.start, page.end),
            (2, 4),
            "moved back into the é, whole"
        );
        assert!(Page::of(&text, text.len() + 1, None, 16_384).is_err());
        assert!(Page::of(&text, 0, Some(0), 16_384).is_err());
        let small = Page::of("short", 0, None, 131_072).unwrap();
        assert_eq!((small.start, small.end), (0, 5));
    }
}
