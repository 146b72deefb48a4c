//! The host's lifecycle: starting and stopping the servers, the catalog of
//! their tools after policy, pinning, and the route cache (`Published`).

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use core_agent_mcp_config::{
    BuiltinTools, Config, ConfigWarning, Env, LeftOut, Limits, ServerEntry,
};
use core_agent_mcp_policy::{
    Annotations, Catalog, CatalogEntry, DiscoveredTool, Naming, ServerSummary, ServerTools,
};
use core_agent_mcp_transport::model::Tool;
use core_agent_mcp_transport::{Server, Servers, StartOptions, Status};
use core_agent_permissions::{BUILTIN, Gate, MCP, PermissionsConfig};
use serde_json::Value;

use crate::pipeline::ToolRoute;
use crate::session::{Session, SessionOptions};
use crate::tools::{self, BUILTINS, open_survey};
use crate::{Error, Result};

/// Hears about each server as its start ends, with the count of tools policy
/// publishes from it (`None` for a server that failed).
pub type ServerReady = Arc<dyn Fn(&Server, Option<&ServerSummary>) + Send + Sync>;

/// `warning` in words, naming `commands`' trust command where it asks for
/// that step.
pub(crate) fn word_warning(
    commands: Option<&dyn crate::Commands>,
    warning: &core_agent_mcp_policy::Warning,
) -> String {
    warning.describe(&|server, tool| commands.and_then(|c| c.trust(server, tool)))
}

/// How the Host starts servers and runs calls, for every session. Start
/// from [`HostOptions::default`] (no digest, no survey tools, the default
/// gate) and change what you need with the `with_*` methods:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use core_agent_host::{DigestOptions, HostOptions};
///
/// let store = Arc::new(core_agent_digest::MemoryStore::new());
/// let options = HostOptions::default()
///     .with_call_timeout(Some(Duration::from_secs(30)))
///     .with_digest(Some(DigestOptions::new(store)));
/// assert!(options.survey.is_none());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
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
    /// The front end's commands, named in messages that ask for a login
    /// or for accepting a changed tool; `None` says those steps in words.
    pub commands: Option<Arc<dyn crate::Commands>>,
    /// How the catalog names tools: `<server>_<tool>` (the default), or the
    /// servers' own names ([`Naming::Bare`], for a host of one server that
    /// guards it transparently). The host's tools keep their names either
    /// way: a server's tool named like one gets a suffix and a
    /// `reserved-name` warning.
    pub naming: Naming,
    /// Where sessions keep their "always" answers and plans for another
    /// process that continues them (a gateway's replicas); `None` keeps
    /// them in each session only.
    pub memory: Option<Arc<dyn crate::SessionMemory>>,
    /// The pins shared by a fleet of processes, used instead of the
    /// config's `mcp.lock` file (pinning stays off when the config pins
    /// nothing); `None` uses the file.
    pub pins: Option<Arc<dyn crate::PinStore>>,
}

/// Where the survey tools look, and how much they return.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// What callers below `creator` do not see, beyond
    /// [`core_agent_survey::Hidden::DEFAULT`] and the ignored files:
    /// patterns (`*.pem`, `config/secrets.toml`).
    pub hidden: Vec<String>,
    /// Files callers below `creator` do not see: the audit trail, the
    /// session database (with its `-wal`/`-shm` siblings).
    pub hidden_files: Vec<std::path::PathBuf>,
    /// Survey calls running at once, for all callers (default 8); past
    /// it a call is refused with a tool error saying to retry.
    pub max_calls: usize,
    /// Survey calls running at once for one caller (its token's name, or
    /// its session when it has none; default 2).
    pub max_calls_per_caller: usize,
}

/// The digest shared by every session: the router's settings, the store of
/// raw payloads and telemetry, and the LLM second chance. The store has no
/// default: [`DigestOptions::new`] takes it, and the `with_*` methods change
/// the rest.
#[derive(Clone)]
#[non_exhaustive]
pub struct DigestOptions {
    /// The router's settings (threshold, bounds).
    pub settings: core_agent_digest::Settings,
    /// Where raw payloads and telemetry go.
    pub store: Arc<dyn core_agent_digest::Store>,
    /// The LLM second chance, when enabled.
    pub llm: Option<crate::LlmPath>,
}

impl HostOptions {
    /// The digest (`None` turns it off, and `retrieve_raw` with it).
    pub fn with_digest(mut self, digest: Option<DigestOptions>) -> HostOptions {
        self.digest = digest;
        self
    }

    /// The survey tools (`None` turns them off).
    pub fn with_survey(mut self, survey: Option<SurveyOptions>) -> HostOptions {
        self.survey = survey;
        self
    }

    /// The permission gate's config.
    pub fn with_permissions(mut self, permissions: PermissionsConfig) -> HostOptions {
        self.permissions = permissions;
        self
    }

    /// Overrides every server's `call_timeout_ms`.
    pub fn with_call_timeout(mut self, timeout: Option<Duration>) -> HostOptions {
        self.call_timeout = timeout;
        self
    }

    /// How servers are started.
    pub fn with_start(mut self, start: StartOptions) -> HostOptions {
        self.start = start;
        self
    }

    /// Where sessions keep their "always" answers and plans, so that a
    /// session reopened under its id (here, or by another process sharing
    /// the memory) recalls them.
    pub fn with_memory(mut self, memory: Option<Arc<dyn crate::SessionMemory>>) -> HostOptions {
        self.memory = memory;
        self
    }

    /// Keeps the pins in `pins`, shared with the other processes of a
    /// fleet, instead of the `mcp.lock` file.
    pub fn with_pins(mut self, pins: Option<Arc<dyn crate::PinStore>>) -> HostOptions {
        self.pins = pins;
        self
    }

    /// The front end's commands, named in the host's messages.
    pub fn with_commands(mut self, commands: Arc<dyn crate::Commands>) -> HostOptions {
        self.commands = Some(commands);
        self
    }

    /// How the catalog names tools (see [`HostOptions::naming`]).
    pub fn with_naming(mut self, naming: Naming) -> HostOptions {
        self.naming = naming;
        self
    }
}

impl SurveyOptions {
    /// The survey tools confined to `root`, with the default limits, all
    /// four offered to every trust level.
    pub fn new(root: impl Into<std::path::PathBuf>) -> SurveyOptions {
        SurveyOptions {
            root: root.into(),
            limits: core_agent_survey::Limits::default(),
            access: BuiltinTools::default(),
            hidden: Vec::new(),
            hidden_files: Vec::new(),
            max_calls: SurveyOptions::MAX_CALLS,
            max_calls_per_caller: SurveyOptions::MAX_CALLS_PER_CALLER,
        }
    }

    /// The default of [`SurveyOptions::max_calls`].
    pub const MAX_CALLS: usize = 8;
    /// The default of [`SurveyOptions::max_calls_per_caller`].
    pub const MAX_CALLS_PER_CALLER: usize = 2;

    /// Also hides `patterns` from callers below `creator`.
    pub fn with_hidden(mut self, patterns: Vec<String>) -> SurveyOptions {
        self.hidden = patterns;
        self
    }

    /// Also hides the file at `path` from callers below `creator`.
    pub fn with_hidden_file(mut self, path: impl Into<std::path::PathBuf>) -> SurveyOptions {
        self.hidden_files.push(path.into());
        self
    }

    /// Survey calls running at once, in all and per caller (each at
    /// least 1).
    pub fn with_max_calls(mut self, total: usize, per_caller: usize) -> SurveyOptions {
        self.max_calls = total.max(1);
        self.max_calls_per_caller = per_caller.max(1);
        self
    }

    /// Bounds on each output.
    pub fn with_limits(mut self, limits: core_agent_survey::Limits) -> SurveyOptions {
        self.limits = limits;
        self
    }

    /// Which of the four are offered and to which trust levels.
    pub fn with_access(mut self, access: BuiltinTools) -> SurveyOptions {
        self.access = access;
        self
    }
}

impl DigestOptions {
    /// The digest over `store`, with the router's default settings and no
    /// LLM second chance.
    pub fn new(store: Arc<dyn core_agent_digest::Store>) -> DigestOptions {
        DigestOptions {
            settings: core_agent_digest::Settings::default(),
            store,
            llm: None,
        }
    }

    /// The router's settings.
    pub fn with_settings(mut self, settings: core_agent_digest::Settings) -> DigestOptions {
        self.settings = settings;
        self
    }

    /// The LLM second chance.
    pub fn with_llm(mut self, llm: Option<crate::LlmPath>) -> DigestOptions {
        self.llm = llm;
        self
    }
}

impl std::fmt::Debug for DigestOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestOptions")
            .field("settings", &self.settings)
            .field("llm", &self.llm)
            .finish_non_exhaustive()
    }
}

/// The owners of the sessions of a host with `options`, kept beside its
/// digest's store.
fn owners_of(options: &HostOptions) -> Option<crate::Owners> {
    options
        .digest
        .as_ref()
        .map(|d| crate::Owners::new(d.store.clone()))
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("servers", &self.servers)
            .field("left_out", &self.left_out)
            .finish_non_exhaustive()
    }
}

/// The MCP host, shared by every caller: the configured servers, the
/// catalog of their tools, and the digest's store. Put it in an [`Arc`] and
/// open a [`Session`] per caller; calls go through a session.
///
/// Always call [`Host::shutdown`] before dropping it: that is what stops the
/// servers' child processes gracefully (dropping it kills their process
/// groups).
pub struct Host {
    pub(crate) servers: Servers,
    pub(crate) entries: Vec<ServerEntry>,
    pub(crate) left_out: Vec<LeftOut>,
    pub(crate) config_warnings: Vec<ConfigWarning>,
    pub(crate) options: HostOptions,
    /// The survey tools over their root, when on and the root is usable.
    pub(crate) survey: Option<Arc<crate::tools::survey::Surveys>>,
    /// Why the survey tools are off although asked for (a root that cannot be used).
    pub(crate) survey_warning: Option<String>,
    /// The catalog, its routes, and the key (tools version plus pin epoch)
    /// they were built from.
    pub(crate) published: Mutex<(u64, Arc<Published>)>,
    /// `mcp.lock`, where tool definitions are pinned (`None`: no pinning).
    pub(crate) lock: Option<std::path::PathBuf>,
    /// Bumped when `trust` rewrites pins, so the catalog is rebuilt.
    pub(crate) pin_epoch: std::sync::atomic::AtomicU64,
    /// Held while the lock is read, checked and written.
    pub(crate) pin_io: Mutex<()>,
    /// Why the lock could not be read or written at the last check.
    pub(crate) pin_problem: Mutex<Option<String>>,
    /// Who opened each session (`None` when the digest is off).
    pub(crate) owners: Option<crate::Owners>,
    /// Resources and prompts across sessions: notices, the prompt lists,
    /// subscriptions.
    pub(crate) context: crate::context::ContextState,
    /// How many sessions are open under each digest session id, with or
    /// without an owner: the store hears an id ended only when none is.
    pub(crate) open: Mutex<std::collections::HashMap<String, usize>>,
}

impl Host {
    /// A catalog warning, naming the front end's trust command where it
    /// asks for that step.
    pub(crate) fn word(&self, warning: &core_agent_mcp_policy::Warning) -> String {
        word_warning(self.options.commands.as_deref(), warning)
    }

    /// What a server that failed to start says: its error, and the front
    /// end's login command when logging in is what it needs.
    pub(crate) fn problem_of(&self, server: &Server) -> Option<String> {
        let problem = server.problem()?;
        let problem = self.redactor().redact(&problem).into_owned();
        match self.login_command(server) {
            Some(command) => Some(format!("{problem}: run `{command}`")),
            None => Some(problem),
        }
    }

    /// The known secret values (the start options' redactor): whatever a
    /// front end prints, logs or sends that a server or a caller wrote goes
    /// through it. The host applies it to call results and server problems.
    pub fn redactor(&self) -> &core_agent_mcp_config::Redactor {
        &self.options.start.redactor
    }

    /// The front end's login command for `server`, when it cannot start
    /// until someone logs in.
    pub(crate) fn login_command(&self, server: &Server) -> Option<String> {
        let commands = self.options.commands.as_deref()?;
        server
            .error()
            .filter(|e| e.needs_login())
            .and_then(|_| commands.login(server.name()))
    }

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
        let shared = options.pins.clone();
        let ready = |server: &Server| {
            let pins = config.lock.as_deref().map(|path| match &shared {
                Some(store) => crate::pin::Pins::Shared(store.as_ref()),
                None => crate::pin::Pins::File(path),
            });
            let catalog = summary_of(entries, server, pins);
            on_ready(
                server,
                catalog.as_ref().and_then(|c| c.summary(server.name())),
            );
        };
        let mut options = options;
        let (context, notices) = crate::context::ContextState::new(options.start.notices.take());
        options.start.notices = Some(notices);
        let servers = Servers::start(entries, env, &options.start, &ready).await;
        let (survey, survey_warning) = open_survey(options.survey.as_ref());
        let owners = owners_of(&options);
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
            owners,
            context,
            open: Mutex::default(),
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
            let shared = options.pins.clone();
            Arc::new(move |server: &Server| {
                let pins = lock.as_deref().map(|path| match &shared {
                    Some(store) => crate::pin::Pins::Shared(store.as_ref()),
                    None => crate::pin::Pins::File(path),
                });
                let catalog = summary_of(&entries, server, pins);
                on_ready(
                    server,
                    catalog.as_ref().and_then(|c| c.summary(server.name())),
                );
            })
        };
        let mut options = options;
        let (context, notices) = crate::context::ContextState::new(options.start.notices.take());
        options.start.notices = Some(notices);
        let servers = Servers::launch(&config.servers, env, &options.start, Some(ready));
        let (survey, survey_warning) = open_survey(options.survey.as_ref());
        let owners = owners_of(&options);
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
            owners,
            context,
            open: Mutex::default(),
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
            if *name == tools::RECORD_PLAN
                || tools::host_tool(name, false, true).is_some_and(|t| t.survey().is_some())
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
            if owners.is_empty() || tools::BUILTINS.contains(name) {
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

    /// Lists again, in the background, the tools of servers whose last
    /// listing is past the freshness they gave it (`ttlMs`); a change found
    /// rebuilds the catalog and wakes [`Host::subscribe`]rs. For a front end
    /// to call when its client lists tools. Must be called within a Tokio
    /// runtime.
    pub fn revalidate(&self) {
        self.servers.revalidate();
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

    /// Who opened each session, by session id (`None` when the digest is
    /// off): `retrieve_raw` reads the payloads of its caller's other
    /// sessions by it.
    pub fn owners(&self) -> Option<&crate::Owners> {
        self.owners.as_ref()
    }

    /// Opens a session for one caller.
    pub fn session(self: &Arc<Self>, options: SessionOptions) -> Session {
        // Only an id the session had before can have anything to recall.
        let reopened = options.id.is_some() && !options.new_id;
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
        if digest.is_some()
            && let Ok(mut open) = self.open.lock()
        {
            *open.entry(id.clone()).or_default() += 1;
        }
        // A session id already claimed by another owner keeps its payloads
        // to itself; an id made up just now is nobody else's.
        let owner = options.owner.filter(|owner| {
            self.owners().is_some_and(|owners| {
                if reopened {
                    owners.claim(&id, owner)
                } else {
                    owners.claim_new(&id, owner)
                }
            })
        });
        let memory = self.options.memory.clone();
        let gate = RwLock::new(Gate::new(self.options.permissions.clone(), options.mode));
        let mut plan = None;
        if let Some(memory) = memory.as_ref().filter(|_| reopened) {
            let recalling = crate::pipeline::Remembering {
                memory: memory.as_ref(),
                session: &id,
            };
            if recalling.recall_into(&gate) {
                plan = memory.recall(&id).ok().and_then(|r| r.plan);
            }
        }
        Session {
            host: self.clone(),
            owner,
            level: options.trust_level,
            prompter: options.prompter,
            gate,
            plan: Mutex::new(plan),
            mutation: tokio::sync::Mutex::new(()),
            digest,
            observer: options.observer,
            key: id,
            memory,
        }
    }

    /// A session under digest session id `id` closed: true when it was the
    /// last open one.
    pub(crate) fn closed(&self, id: &str) -> bool {
        let Ok(mut open) = self.open.lock() else {
            return false;
        };
        match open.get_mut(id) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                open.remove(id);
                true
            }
            None => false,
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
    pub(crate) fn published(&self) -> Arc<Published> {
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
    pub(crate) fn catalog_key(&self) -> u64 {
        self.servers
            .tools_version()
            .wrapping_add(self.pin_epoch.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Builds the catalog and computes, once per tool, what dispatch needs.
    pub(crate) fn publish(&self) -> Published {
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

    pub(crate) fn build_catalog(&self) -> Catalog {
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
        Catalog::builder()
            .with_reserved(BUILTINS)
            .with_verdicts(verdicts)
            .with_naming(self.options.naming)
            .build(discovered.iter().map(|(s, e, tools)| ServerTools {
                name: s.name(),
                spec: &e.spec,
                tools,
            }))
    }

    /// Checks the connected servers' tools against `mcp.lock` and pins the
    /// new ones (see [`crate::pin`]); no lock path, no verdicts.
    pub(crate) fn pin_verdicts(
        &self,
        discovered: &[(&Server, &ServerEntry, Vec<DiscoveredTool>)],
    ) -> core_agent_mcp_policy::Verdicts {
        let Some(pins) = self.pins() else {
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
        let (verdicts, problem) = crate::pin::check(pins, &listed);
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
        let Some(pins) = self.pins() else {
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
            let why = self.problem_of(s).unwrap_or_default();
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
            crate::pin::trust(pins, server, &tools, tool).map_err(pin_error)?
        };
        self.pins_changed();
        Ok(report)
    }

    /// Where this host's pins are: the shared ones when it has a
    /// [`crate::PinStore`], else `mcp.lock`; `None` when it pins nothing.
    pub(crate) fn pins(&self) -> Option<crate::pin::Pins<'_>> {
        let path = self.lock.as_deref()?;
        Some(match &self.options.pins {
            Some(store) => crate::pin::Pins::Shared(store.as_ref()),
            None => crate::pin::Pins::File(path),
        })
    }

    /// The pins changed (here, by [`Host::trust`], or in another process
    /// sharing them): the catalog is built again with them, and front ends
    /// tell their clients the tools changed.
    pub fn pins_changed(&self) {
        self.pin_epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.servers.announce_change();
    }

    /// The tools of another process sharing this host's clients changed
    /// (a replica behind the same balancer): front ends tell their clients
    /// to list them again.
    pub fn tools_changed_elsewhere(&self) {
        self.servers.announce_change();
    }

    /// How many times this host's own servers changed their tools (not
    /// counting [`Host::pins_changed`] and [`Host::tools_changed_elsewhere`]):
    /// what a process tells the others sharing its clients.
    pub fn changes_here(&self) -> u64 {
        self.servers.changes_here()
    }

    /// The servers the config names but that were not started (disabled,
    /// or on a transport core-agent does not speak).
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
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
        out.extend(
            catalog
                .warnings()
                .iter()
                .map(|w| format!("mcp: {}", self.word(w))),
        );
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
    pub(crate) fn limits(&self, server: &str) -> Limits {
        self.servers
            .get(server)
            .map_or_else(Limits::default, Server::limits)
    }

    /// The survey tools' root (`None` when they are off).
    pub fn survey_root(&self) -> Option<&std::path::Path> {
        self.survey.as_ref().map(|s| s.full.root().path())
    }

    /// The survey tools' allowlist and trust levels, while they are on.
    pub(crate) fn survey_access(&self) -> Option<&BuiltinTools> {
        let access = self.options.survey.as_ref().map(|o| &o.access);
        self.survey.as_ref().and(access)
    }

    /// Whether results of `server` are digested (the wrap is on and the
    /// server did not opt out with `agentic_never`).
    pub(crate) fn digests(&self, server: &str) -> bool {
        self.options.digest.is_some()
            && !self
                .entries
                .iter()
                .any(|e| e.name == server && e.spec.agentic_never)
    }
}

/// The catalog and, by published name, where each of its tools is dispatched.
#[derive(Debug, Default)]
pub(crate) struct Published {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) routes: std::collections::HashMap<String, Arc<ToolRoute>>,
}

impl Published {
    /// `catalog`, with the route `route` gives each entry (an entry it
    /// gives none, such as one whose server is gone, cannot be called).
    pub(crate) fn new(
        catalog: Catalog,
        route: impl Fn(&CatalogEntry) -> Option<ToolRoute>,
    ) -> Published {
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

/// The one-server catalog of a server that connected, for its ready line:
/// checked against the pins in `lock` (read only; the catalog build that
/// follows pins what is new), so a quarantined tool is not counted.
pub(crate) fn summary_of(
    entries: &[ServerEntry],
    server: &Server,
    pins: Option<crate::pin::Pins<'_>>,
) -> Option<Catalog> {
    if server.status() != Status::Connected {
        return None;
    }
    let entry = entries.iter().find(|e| e.name == server.name())?;
    let listed = server.tools();
    let tools: Vec<DiscoveredTool> = listed.iter().map(discovered).collect();
    let verdicts = match pins {
        Some(pins) if entry.spec.pin != core_agent_mcp_config::PinMode::Off => {
            let definitions: Vec<_> = listed.iter().map(crate::pin::definition).collect();
            crate::pin::peek(pins, server.name(), &definitions)
        }
        _ => Default::default(),
    };
    Some(
        Catalog::builder()
            .with_verdicts(verdicts)
            .build([ServerTools {
                name: server.name(),
                spec: &entry.spec,
                tools: &tools,
            }]),
    )
}

pub(crate) fn discovered(tool: &Tool) -> DiscoveredTool {
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
