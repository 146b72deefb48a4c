//! One MCP client session: an rmcp `ServerHandler` whose `tools/list` is the
//! caller's catalog and whose `tools/call` runs through its host `Session`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use core_agent_host::{Error as HostError, Session, SessionOptions, ToolReport};
use core_agent_mcp_transport::{Progress, ProgressSink};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, DiscoverResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ResultType, ServerConfig, SubscriptionFilter,
    Tool,
};
#[allow(deprecated)] // MCP logging (SEP-2577), which clients still read
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
#[allow(deprecated)] // legacy subscriptions, which clients below 2026-07-28 speak
use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::Gateway;
use crate::auth::Caller;
use crate::prompt::{Answered, ElicitPrompter, approval_answer, approval_request};
use crate::registry::Record;
use crate::telemetry::Traced;

/// The handler of one MCP session. Its host `Session` is opened on the first
/// request that needs it, with the caller the request's token names (or the
/// fixed caller of a stdio session).
pub(crate) struct McpSession {
    gateway: Gateway,
    /// The caller of every request (stdio, `--no-auth`), else `None`: read
    /// from each HTTP request's extensions.
    fixed: Option<Caller>,
    live: OnceLock<Live>,
    /// The catalog's changes, watched from the session's creation (before
    /// the client can list the tools) until `on_initialized` starts the
    /// watcher: that runs as a task of its own, after the client may have
    /// listed, and a change in between would never be told.
    changes: Mutex<Option<tokio::sync::watch::Receiver<u64>>>,
    /// Forward `tools/list_changed` and the host's warnings to the client
    /// while the session lives.
    watchers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Whether the client wants `warning` log messages: yes until its
    /// `logging/setLevel` asks for a level above it.
    warnings_wanted: Arc<AtomicBool>,
    /// This session's number among the gateway's (for its log level).
    number: u64,
    /// Its id: its host session's, its record's, and its key in the router.
    id: String,
    /// The least level of the backends' log messages it hears (0: all).
    log_level: Arc<AtomicU8>,
    /// The public resource URIs it subscribed to.
    subscribed: Arc<Mutex<HashSet<String>>>,
    /// Its record id once its host session is open (for routing the
    /// backends' log messages to the session whose call is in flight).
    record_id: Arc<Mutex<Option<String>>>,
}

struct Live {
    caller: Caller,
    session: Arc<Session>,
    record: Arc<Record>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession")
            .field("fixed", &self.fixed)
            .field("session", &self.live.get().map(|l| l.record.id.clone()))
            .finish_non_exhaustive()
    }
}

impl McpSession {
    pub(crate) fn new(gateway: Gateway, fixed: Option<Caller>) -> McpSession {
        let mut changes = gateway.inner.host.subscribe();
        changes.borrow_and_update();
        McpSession {
            fixed,
            live: OnceLock::new(),
            changes: Mutex::new(Some(changes)),
            watchers: Mutex::new(Vec::new()),
            warnings_wanted: Arc::new(AtomicBool::new(true)),
            number: gateway.inner.next_session.fetch_add(1, Ordering::Relaxed),
            id: core_agent_digest::new_session_id(),
            log_level: Arc::new(AtomicU8::new(0)),
            subscribed: Arc::default(),
            record_id: Arc::default(),
            gateway,
        }
    }

    /// The caller of this request: the fixed one, else the one the auth
    /// layer put in the HTTP request's extensions.
    fn caller(&self, cx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
        if let Some(caller) = &self.fixed {
            return Ok(caller.clone());
        }
        cx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| ErrorData::invalid_request("no credentials reached the session", None))
    }

    /// The host session, opened on first use. A request whose token is not
    /// the one that opened the session is refused (the HTTP layer refuses it
    /// first; this is the second lock). A client without sessions
    /// (2026-07-28) gets a session per request, whose asks are answered by
    /// `answered` (the approval its retry carries) instead of an elicitation.
    fn live(
        &self,
        cx: &RequestContext<RoleServer>,
        answered: Option<bool>,
    ) -> Result<&Live, ErrorData> {
        let caller = self.caller(cx)?;
        let live = self.live.get_or_init(|| {
            // An HTTP session is known by its transport id, which stays the
            // same when another replica continues it; any other is new.
            let transport = transport_session(cx);
            let continued = transport.is_some();
            let id = transport.unwrap_or_else(|| self.id.clone());
            let record = self.gateway.inner.registry.open(id.clone(), &caller);
            let options = &self.gateway.inner.options;
            let prompter: Arc<dyn core_agent_permissions::Prompter> = if sessionless(cx) {
                Arc::new(Answered(answered.unwrap_or(false)))
            } else {
                Arc::new(ElicitPrompter {
                    peer: cx.peer.clone(),
                    timeout: options.ask_timeout,
                })
            };
            let opening = SessionOptions::new(caller.trust_level);
            let opening = if continued {
                opening.with_id(Some(id.clone()))
            } else {
                opening.with_new_id(id.clone())
            };
            let session = Arc::new(
                self.gateway.inner.host.session(
                    opening
                        .with_mode(options.mode)
                        .with_prompter(prompter)
                        .with_cost_ceiling(options.cost_ceiling)
                        // Payloads stay readable by the same owner's later sessions
                        // (the same token, or the same signed-in user; also
                        // across restarts, with --session-db).
                        .with_owner(Some(caller.owner()))
                        .with_observer(self.observer_for(&caller)),
                ),
            );
            if let Ok(mut id) = self.record_id.lock() {
                *id = Some(record.id.clone());
            }
            Live {
                caller: caller.clone(),
                session,
                record,
            }
        });
        // The same owner at the same level: a signed-in user's refreshed
        // token (new claims, same issuer and subject) keeps the session.
        if live.caller.owner() != caller.owner() || live.caller.trust_level != caller.trust_level {
            return Err(ErrorData::invalid_request(
                "this session was opened with another token",
                None,
            ));
        }
        Ok(live)
    }
}

impl McpSession {
    /// What a host session of `caller` tells its calls to: the gateway's
    /// observers (metrics) and, with an audit trail, the trail under
    /// `caller`.
    fn observer_for(&self, caller: &Caller) -> Option<Arc<dyn core_agent_host::Observer>> {
        let shared = self.gateway.inner.observer.clone();
        let Some(log) = self.gateway.inner.options.audit.clone() else {
            return shared;
        };
        let audit: Arc<dyn core_agent_host::Observer> = Arc::new(crate::audit::SessionAudit {
            log,
            caller: caller.clone(),
        });
        Some(match shared {
            Some(shared) => Arc::new(crate::telemetry::Observers(vec![shared, audit])),
            None => audit,
        })
    }
}

impl McpSession {
    /// The retry of a backend's question relayed for `what` (a sealed
    /// state of this gateway's, with the client's answers), when this is
    /// one; a state that does not open is refused.
    fn resume(
        &self,
        cx: &RequestContext<RoleServer>,
        what: &str,
        responses: &Option<rmcp::model::InputResponses>,
        state: &Option<String>,
    ) -> Result<Option<core_agent_mcp_transport::Resume>, ErrorData> {
        let Some(key) = &self.gateway.inner.relay_key else {
            return Ok(None);
        };
        if !sessionless(cx) {
            return Ok(None);
        }
        let Some(state) = state else {
            // Answers given up front go to the backend as they are.
            return Ok(for_backend(responses.as_ref())
                .map(|answers| core_agent_mcp_transport::Resume::new(Some(answers), None)));
        };
        match key.open(what, state) {
            Some(relayed) => Ok(Some(core_agent_mcp_transport::Resume::new(
                for_backend(responses.as_ref()),
                relayed.backend,
            ))),
            None => Err(ErrorData::invalid_params(
                "requestState failed its integrity check: send back the one this request's result gave",
                None,
            )),
        }
    }

    /// Runs `request` (for `what`), relaying a backend's questions to a
    /// client without sessions: its result, or the input-required result
    /// to answer, under the gateway's sealed state.
    async fn relay<T>(
        &self,
        cx: &RequestContext<RoleServer>,
        session: &core_agent_host::Session,
        what: &str,
        resume: Option<core_agent_mcp_transport::Resume>,
        request: impl std::future::Future<Output = Result<T, HostError>>,
    ) -> Result<Result<T, rmcp::model::InputRequiredResult>, ErrorData> {
        let key = self
            .gateway
            .inner
            .relay_key
            .as_ref()
            .filter(|_| sessionless(cx));
        let outcome = match key {
            Some(_) => core_agent_mcp_transport::relaying(resume, request).await,
            None => request.await,
        };
        match (outcome, key) {
            (Ok(value), _) => Ok(Ok(value)),
            (
                Err(HostError::Call(core_agent_mcp_transport::Error::InputRequired {
                    mut asked,
                    server,
                    ..
                })),
                Some(key),
            ) => {
                if let Some(missing) = undeclared(&mut asked, cx) {
                    return Err(ErrorData::missing_required_client_capability(missing));
                }
                gate_sampling(&mut asked, &server, session).await?;
                asked.request_state = Some(key.seal(what, asked.request_state.as_deref()));
                Ok(Err(*asked))
            }
            (Err(e), _) => Err(crate::context::protocol_error(
                e,
                self.gateway.inner.host.redactor(),
            )),
        }
    }

    /// Lists the client's roots, when it declared them and a router passes
    /// them to the backends, and tells the backends they changed.
    #[allow(deprecated)] // roots (SEP-2577), which clients still declare
    fn list_roots(&self, peer: &rmcp::Peer<RoleServer>) -> Option<tokio::task::JoinHandle<()>> {
        let router = self.gateway.inner.options.elicitations.clone()?;
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !declared {
            return None;
        }
        let peer = peer.clone();
        let host = self.gateway.inner.host.clone();
        let id = self.id.clone();
        Some(tokio::spawn(async move {
            let listed = peer.list_roots().await;
            match listed {
                Ok(listed) => {
                    router.set_roots(&id, Some(listed.roots));
                    host.roots_changed().await;
                }
                Err(e) => tracing::info!("the client's roots could not be listed: {e}"),
            }
        }))
    }

    /// Waits, at most the gateway's `list_wait`, for servers still starting.
    async fn wait_for_servers(&self) {
        let host = &self.gateway.inner.host;
        if !host.all_started() {
            let _ =
                tokio::time::timeout(self.gateway.inner.options.list_wait, host.wait_all()).await;
        }
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        if let Ok(mut watchers) = self.watchers.lock() {
            for task in watchers.drain(..) {
                task.abort();
            }
        }
        if let Some(live) = self.live.get() {
            self.gateway.inner.registry.close(&live.record);
        }
        self.gateway.inner.log_levels.forget(self.number);
        if let Some(router) = &self.gateway.inner.options.elicitations {
            router.set_roots(&self.id, None);
        }
        // Its subscriptions end with it.
        let subscribed: Vec<String> = self
            .subscribed
            .lock()
            .map(|mut s| s.drain().collect())
            .unwrap_or_default();
        if !subscribed.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let host = self.gateway.inner.host.clone();
            runtime.spawn(async move {
                for uri in subscribed {
                    let _ = host.unsubscribe_resource(&uri).await;
                }
            });
        }
    }
}

/// A tool as served: its name, description (notes included) and input
/// schema from the catalog; `readOnlyHint` is the class core-agent decided,
/// so the client's plan mode agrees with the gate (and a read-only tool is
/// not destructive). What else the server said of it (`original`), its
/// title, icons and other hints, passes on. Its `outputSchema` does not: a
/// digested or capped result's `structuredContent` cannot match it, and
/// clients that check results against it would refuse them. Nor does its
/// `_meta`, whose URIs (an app's `ui.resourceUri`) name the server's own
/// resources, which clients read under `core-agent://<server>/…`.
pub(crate) fn mcp_tool_from(report: ToolReport, original: Option<&Tool>) -> Tool {
    let schema = match report.input_schema {
        serde_json::Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let mut annotations = original
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    annotations.read_only_hint = Some(report.read_only);
    if report.read_only {
        annotations.destructive_hint = Some(false);
    }
    let mut tool =
        Tool::new(report.name, report.description, Arc::new(schema)).annotate(annotations);
    if let Some(original) = original {
        // Control characters (terminal escapes) are not served.
        tool.title = original
            .title
            .as_deref()
            .map(|t| core_agent_mcp_policy::strip_controls(t).into_owned());
        tool.icons = original.icons.clone();
    }
    tool
}

/// Each backend tool as its server listed it, by (server, its own name).
fn originals(host: &core_agent_host::Host) -> HashMap<(String, String), Tool> {
    host.servers()
        .flat_map(|server| {
            let name = server.name().to_owned();
            server
                .tools()
                .into_iter()
                .map(move |tool| ((name.clone(), tool.name.to_string()), tool))
        })
        .collect()
}

/// The served form of a catalog tool, with what its server said of it.
fn served(report: ToolReport, originals: &HashMap<(String, String), Tool>) -> Tool {
    let original = report
        .server
        .as_ref()
        .and_then(|server| originals.get(&(server.clone(), report.tool.clone())));
    mcp_tool_from(report, original)
}

/// What a host error becomes for the client: an unknown tool is a protocol
/// error (-32602); everything else is a tool error the model can read.
/// Known secret values in its text are replaced (`redactor`).
fn refusal(
    e: &HostError,
    elicits: bool,
    redactor: &core_agent_mcp_config::Redactor,
) -> Result<CallToolResponse, ErrorData> {
    let text = match e {
        HostError::UnknownTool { .. } => {
            return Err(ErrorData::invalid_params(
                redactor.redact(&e.to_string()).into_owned(),
                None,
            ));
        }
        HostError::Denied {
            unanswered_ask: true,
            ..
        } if elicits => {
            format!("{e} (core-agent asked through an MCP elicitation and the answer was not yes)")
        }
        HostError::Denied {
            unanswered_ask: true,
            ..
        } => format!(
            "{e} (this client does not answer MCP elicitations, so core-agent could not ask)"
        ),
        _ => e.to_string(),
    };
    Ok(complete(CallToolResult::error(vec![ContentBlock::text(
        redactor.redact(&text).into_owned(),
    )])))
}

/// Whether the request comes from a client without sessions (protocol
/// 2026-07-28 and later: no `initialize`, metadata on every request).
/// The `Mcp-Session-Id` of an HTTP request, when it has one.
fn transport_session(cx: &RequestContext<RoleServer>) -> Option<String> {
    cx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_owned)
}

fn sessionless(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// Leaves out of `asked` the input requests the client did not declare it
/// answers (the backend sees the gateway's capabilities, not the
/// client's); when that leaves none of several, the capabilities they
/// needed.
#[allow(deprecated)] // sampling and roots (SEP-2577), which clients still declare
fn undeclared(
    asked: &mut rmcp::model::InputRequiredResult,
    cx: &RequestContext<RoleServer>,
) -> Option<rmcp::model::ClientCapabilities> {
    use rmcp::model::InputRequest;
    let declared = cx.client_capabilities().unwrap_or_default();
    let requests = asked.input_requests.as_mut()?;
    let mut missing = rmcp::model::ClientCapabilities::default();
    let before = requests.len();
    requests.retain(|_, request| match request {
        InputRequest::Elicitation(_) if declared.elicitation.is_none() => {
            missing.elicitation = Some(Default::default());
            false
        }
        InputRequest::CreateMessage(_) if declared.sampling.is_none() => {
            missing.sampling = Some(Default::default());
            false
        }
        InputRequest::ListRoots(_) if declared.roots.is_none() => {
            missing.roots = Some(Default::default());
            false
        }
        _ => true,
    });
    (before > 0 && requests.is_empty()).then_some(missing)
}

/// Leaves out of `asked` a backend's sampling requests unless the session's
/// gate allows `sampling:<server>` without asking (a client without a
/// session cannot be asked in the middle of a request); when that leaves
/// nothing, the refusal says how to allow it.
#[allow(deprecated)] // sampling (SEP-2577), which servers still use
async fn gate_sampling(
    asked: &mut rmcp::model::InputRequiredResult,
    server: &str,
    session: &core_agent_host::Session,
) -> Result<(), ErrorData> {
    use rmcp::model::InputRequest;
    let Some(requests) = asked.input_requests.as_mut() else {
        return Ok(());
    };
    if !requests
        .values()
        .any(|r| matches!(r, InputRequest::CreateMessage(_)))
    {
        return Ok(());
    }
    let Err(refused) = session.sampling_allowed(server).await else {
        return Ok(());
    };
    tracing::info!("left out {server}'s sampling request: {refused}");
    requests.retain(|_, r| !matches!(r, InputRequest::CreateMessage(_)));
    if !requests.is_empty() {
        return Ok(());
    }
    let why = match refused {
        HostError::Denied {
            unanswered_ask: true,
            ..
        } => format!(
            "core-agent: `{server}` asked to use your model (sampling), which needs approval that a client without a session is not asked for in the middle of a request: add \"{ns}:{server}\" to permissions.allow",
            ns = core_agent_host::SAMPLING,
        ),
        other => format!("core-agent: `{server}` may not use your model (sampling): {other}"),
    };
    Err(ErrorData::invalid_request(why, None))
}

/// A client's answers less the gate's own approval: what its backend may
/// read (`None` when nothing is left), on a retry of the backend's round
/// or sent up front with no state of ours.
fn for_backend(
    responses: Option<&rmcp::model::InputResponses>,
) -> Option<rmcp::model::InputResponses> {
    let mut answers = responses?.clone();
    answers.remove(crate::prompt::APPROVAL_KEY);
    (!answers.is_empty()).then_some(answers)
}

/// Whether the client declared that it answers elicitations.
fn elicits(cx: &RequestContext<RoleServer>) -> bool {
    cx.client_capabilities()
        .is_some_and(|c| c.elicitation.is_some())
}

/// A result as every protocol version wants it: clients of 2026-07-28
/// require `resultType`, which rmcp strips for older ones.
fn complete(mut result: CallToolResult) -> CallToolResponse {
    result.result_type.get_or_insert(ResultType::COMPLETE);
    result.into()
}

impl ServerHandler for McpSession {
    #[allow(deprecated)] // `logging`: MCP logging (SEP-2577), which clients still read
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(crate::context::capabilities(
            self.gateway.inner.host.offers(),
        ))
        .with_server_info(Implementation::new("core-agent", env!("CARGO_PKG_VERSION")))
        .with_instructions(match self.gateway.inner.host.catalog().naming() {
            core_agent_mcp_policy::Naming::Bare => {
                "core-agent: the tools, prompts and resources of one MCP server, under their own \
                 names, behind core-agent's permission gate. Large results come back as a digest \
                 with a call_id; pass it to retrieve_raw for the raw payload."
            }
            _ => {
                "core-agent: the tools of every configured MCP server, namespaced <server>_<tool>, \
                 behind core-agent's permission gate, with their prompts (<server>_<prompt>) and \
                 resources (core-agent://<server>/<uri>). Large results come back as a digest \
                 with a call_id; pass it to retrieve_raw for the raw payload."
            }
        })
    }

    /// A backend tool's definition, for rmcp's check of a 2026-07-28
    /// request's `Mcp-Param-*` headers against the parameters its schema
    /// marks `x-mcp-header` (the call itself is gated as always).
    /// Only the input schema matters here, so the server's own listing is
    /// not copied for each call.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.gateway.inner.host.catalog();
        let entry = catalog.get(name)?;
        Some(mcp_tool_from(ToolReport::from(entry), None))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The capabilities are the union of what the backends offer: give
        // the ones still starting a moment to say.
        self.wait_for_servers().await;
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn discover(&self, _cx: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        self.wait_for_servers().await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    /// A 2026-07-28 client's `subscriptions/listen`: the catalog's changes
    /// and the backends' notices it asked for, until it goes away.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let level = self.caller(context.request_context())?.trust_level;
        crate::context::listen(&self.gateway.inner.host, level, context).await;
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let level = self.caller(&cx)?.trust_level;
        self.wait_for_servers().await;
        let resources = self.gateway.inner.host.resources(level).await;
        let (ttl, scope) = crate::context::cache_hints();
        Ok(ListResourcesResult::with_all_items(resources)
            .with_ttl_ms(ttl)
            .with_cache_scope(scope))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let level = self.caller(&cx)?.trust_level;
        self.wait_for_servers().await;
        let templates = self.gateway.inner.host.resource_templates(level).await;
        let (ttl, scope) = crate::context::cache_hints();
        Ok(ListResourceTemplatesResult::with_all_items(templates)
            .with_ttl_ms(ttl)
            .with_cache_scope(scope))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let mut traced = Traced::start(&self.gateway, "resources/read", None, &cx);
        let live = self.live(&cx, None)?;
        self.wait_for_servers().await;
        let _in_flight = self.gateway.inner.registry.call_started();
        let what = format!("resources/read {}", request.uri);
        let resume = self.resume(&cx, &what, &request.input_responses, &request.request_state)?;
        let read = traced.wrap(live.session.read_resource(&request.uri));
        let relayed = self.relay(&cx, &live.session, &what, resume, read).await;
        let relayed = relayed.map_err(|e| crate::context::not_found_names(e, &request.uri));
        let mut result = match relayed? {
            Ok(result) => result,
            Err(asked) => return Ok(asked.into()),
        };
        result.result_type.get_or_insert(ResultType::COMPLETE);
        crate::context::cache_read(&mut result);
        let result = crate::context::redacted(result, self.gateway.inner.host.redactor());
        let response = Ok(result.into());
        traced.finish(&response);
        response
    }

    #[allow(deprecated)] // legacy subscriptions, which clients below 2026-07-28 speak
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = self.caller(&cx)?.trust_level;
        let fresh = self
            .subscribed
            .lock()
            .is_ok_and(|mut s| s.insert(request.uri.clone()));
        if !fresh {
            return Ok(());
        }
        let subscribed = self
            .gateway
            .inner
            .host
            .subscribe_resource(level, &request.uri)
            .await;
        if subscribed.is_err()
            && let Ok(mut s) = self.subscribed.lock()
        {
            s.remove(&request.uri);
        }
        subscribed
            .map_err(|e| crate::context::protocol_error(e, self.gateway.inner.host.redactor()))
    }

    #[allow(deprecated)] // legacy subscriptions, which clients below 2026-07-28 speak
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let held = self
            .subscribed
            .lock()
            .is_ok_and(|mut s| s.remove(&request.uri));
        if !held {
            return Ok(());
        }
        self.gateway
            .inner
            .host
            .unsubscribe_resource(&request.uri)
            .await
            .map_err(|e| crate::context::protocol_error(e, self.gateway.inner.host.redactor()))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let level = self.caller(&cx)?.trust_level;
        self.wait_for_servers().await;
        let prompts = self.gateway.inner.host.prompts(level).await;
        let (ttl, scope) = crate::context::cache_hints();
        Ok(ListPromptsResult::with_all_items(prompts)
            .with_ttl_ms(ttl)
            .with_cache_scope(scope))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let mut traced = Traced::start(&self.gateway, "prompts/get", Some(&request.name), &cx);
        let live = self.live(&cx, None)?;
        self.wait_for_servers().await;
        let what = format!("prompts/get {}", request.name);
        let resume = self.resume(&cx, &what, &request.input_responses, &request.request_state)?;
        let get = traced.wrap(live.session.get_prompt(&request.name, request.arguments));
        let mut result = match self.relay(&cx, &live.session, &what, resume, get).await? {
            Ok(result) => result,
            Err(asked) => return Ok(asked.into()),
        };
        result.result_type.get_or_insert(ResultType::COMPLETE);
        let result = crate::context::redacted(result, self.gateway.inner.host.redactor());
        let response = Ok(result.into());
        traced.finish(&response);
        response
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let level = self.caller(&cx)?.trust_level;
        self.wait_for_servers().await;
        let mut result = self
            .gateway
            .inner
            .host
            .complete(level, request)
            .await
            .map_err(|e| crate::context::protocol_error(e, self.gateway.inner.host.redactor()))?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let live = self.live(&cx, None)?;
        // Clients that list once, right after starting us, should see the
        // servers that start quickly; a slow one's tools follow with
        // `tools/list_changed` when it is ready.
        let host = &self.gateway.inner.host;
        if !host.all_started() {
            let _ =
                tokio::time::timeout(self.gateway.inner.options.list_wait, host.wait_all()).await;
        }
        // A backend whose listing went past its `ttlMs` is listed again;
        // what it finds reaches the client as `tools/list_changed`.
        host.revalidate();
        let originals = originals(host);
        let tools = host
            .tool_reports(live.session.trust_level())
            .into_iter()
            .map(|report| served(report, &originals))
            .collect();
        let (ttl, scope) = crate::context::cache_hints();
        Ok(ListToolsResult::with_all_items(tools)
            .with_ttl_ms(ttl)
            .with_cache_scope(scope))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut traced = Traced::start(&self.gateway, "tools/call", Some(&request.name), &cx);
        // The retry of a backend's question relayed to this client carries
        // the gateway's sealed state: the gate allowed the call already.
        let relayed = match (&self.gateway.inner.relay_key, &request.request_state) {
            (Some(key), Some(state)) if sessionless(&cx) => match key.open(&request.name, state) {
                Some(relayed) => Some(relayed),
                // Only this gateway's sealed states come back to it: one
                // that does not open was changed (or made up).
                None => {
                    return Err(ErrorData::invalid_params(
                        "requestState failed its integrity check: send back the one this call's result gave",
                        None,
                    ));
                }
            },
            _ => None,
        };
        let answered = match &relayed {
            Some(_) => Some(true),
            None => approval_answer(request.input_responses.as_ref()),
        };
        let live = self.live(&cx, answered)?;
        let _in_flight = self.gateway.inner.registry.call_started();
        // While it runs, the backend's own elicitations come to this client.
        let _on = match &self.gateway.inner.options.elicitations {
            Some(router) => self
                .gateway
                .inner
                .host
                .catalog()
                .get(&request.name)
                .map(|entry| {
                    router.enter(
                        &entry.server,
                        &live.record.id,
                        &cx.peer,
                        Some(live.session.clone()),
                    )
                }),
            None => None,
        };
        live.record.count_call();
        let arguments = request.arguments.unwrap_or_default();
        // Without sessions the approval is asked in the result, and answered
        // on the retry: kept here in case the gate asks.
        let asked_about = (sessionless(&cx) && answered.is_none()).then(|| arguments.clone());
        // Progress the backend sends about this call goes to the client, in
        // order, before the result.
        let relay = cx.meta.get_progress_token().map(|token| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
            let peer = cx.peer.clone();
            let task = tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let mut note = ProgressNotificationParam::new(token.clone(), p.progress);
                    note.total = p.total;
                    note.message = p.message;
                    if peer.notify_progress(note).await.is_err() {
                        break;
                    }
                }
            });
            let sink: ProgressSink = Arc::new(move |p| {
                let _ = tx.send(p);
            });
            (sink, task)
        });
        // A client's `notifications/cancelled` fires the token; dropping the
        // call cancels the backend request.
        let call = async {
            match &relay {
                Some((sink, _)) => {
                    live.session
                        .call_with_progress(&request.name, arguments, sink)
                        .await
                }
                None => live.session.call(&request.name, arguments).await,
            }
        };
        // A client without sessions hears a backend's questions in the
        // result, and answers them on its retry.
        let relaying = sessionless(&cx) && self.gateway.inner.relay_key.is_some();
        let resume = match relayed {
            Some(r) => Some(core_agent_mcp_transport::Resume::new(
                for_backend(request.input_responses.as_ref()),
                r.backend,
            )),
            // Answers given without a round of ours (a backend that asks
            // with no state lets a client answer up front): the backend
            // reads them; the gate's own answer is not for it.
            None if relaying => for_backend(request.input_responses.as_ref())
                .map(|answers| core_agent_mcp_transport::Resume::new(Some(answers), None)),
            None => None,
        };
        let call = async {
            if relaying {
                core_agent_mcp_transport::relaying(resume, call).await
            } else {
                call.await
            }
        };
        // A backend that acts for each user gets this caller's exchanged token.
        let call =
            crate::exchange::as_caller(&self.gateway.inner.exchanger, &cx, &live.caller, call);
        let outcome = tokio::select! {
            outcome = traced.wrap(call) => outcome,
            () = cx.ct.cancelled() => {
                return Err(ErrorData::internal_error("the client cancelled the call", None));
            }
        };
        if let Some((sink, task)) = relay {
            drop(sink);
            let _ = task.await;
        }
        let response = match outcome {
            Ok(result) => Ok(complete(result)),
            Err(HostError::Call(core_agent_mcp_transport::Error::InputRequired {
                mut asked,
                server,
                ..
            })) => match &self.gateway.inner.relay_key {
                Some(key) => {
                    // What the client did not declare it cannot answer:
                    // those requests are left out, and when nothing is
                    // left the call fails naming the capabilities.
                    if let Some(missing) = undeclared(&mut asked, &cx) {
                        return Err(ErrorData::missing_required_client_capability(missing));
                    }
                    // Nor does a backend use the client's model unless the
                    // gate allows it.
                    gate_sampling(&mut asked, &server, &live.session).await?;
                    asked.request_state =
                        Some(key.seal(&request.name, asked.request_state.as_deref()));
                    Ok((*asked).into())
                }
                None => Err(ErrorData::internal_error(
                    "a backend asked for input that cannot be relayed",
                    None,
                )),
            },
            Err(HostError::Denied {
                unanswered_ask: true,
                ..
            }) if asked_about.is_some() && elicits(&cx) => {
                let arguments = asked_about.unwrap_or_default();
                match approval_request(&request.name, &arguments) {
                    Some(ask) => Ok(ask.into()),
                    None => Err(ErrorData::internal_error(
                        "cannot build the approval form",
                        None,
                    )),
                }
            }
            Err(e) => refusal(&e, elicits(&cx), self.gateway.inner.host.redactor()),
        };
        traced.finish(&response);
        response
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        let watched = self.changes.lock().ok().and_then(|mut c| c.take());
        let mut changes = watched.unwrap_or_else(|| {
            let mut changes = self.gateway.inner.host.subscribe();
            changes.borrow_and_update();
            changes
        });
        let peer = cx.peer.clone();
        let task = tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
        let warner = tokio::spawn(send_warnings(
            self.gateway.inner.host.clone(),
            cx.peer.clone(),
            self.warnings_wanted.clone(),
        ));
        let notices = self.fixed.as_ref().map(|c| c.trust_level).or_else(|| {
            cx.extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Caller>())
                .map(|c| c.trust_level)
        });
        let listener = notices.map(|level| {
            tokio::spawn(
                crate::context::Listener {
                    host: self.gateway.inner.host.clone(),
                    peer: cx.peer.clone(),
                    level,
                    session: self.record_id.clone(),
                    router: self.gateway.inner.options.elicitations.clone(),
                    subscribed: self.subscribed.clone(),
                    log_level: self.log_level.clone(),
                }
                .run(),
            )
        });
        if let Ok(mut watchers) = self.watchers.lock() {
            for old in watchers.drain(..) {
                old.abort();
            }
            watchers.push(task);
            watchers.push(warner);
            watchers.extend(listener);
            watchers.extend(self.list_roots(&cx.peer));
        }
    }

    async fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) {
        if let Some(task) = self.list_roots(&cx.peer)
            && let Ok(mut watchers) = self.watchers.lock()
        {
            watchers.retain(|t| !t.is_finished());
            watchers.push(task);
        }
    }

    #[allow(deprecated)] // MCP logging (SEP-2577), which clients still read
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.warnings_wanted
            .store(warning_passes(request.level), Ordering::SeqCst);
        self.log_level
            .store(crate::context::rank(request.level), Ordering::SeqCst);
        // The backends send what the most verbose session asks for.
        self.gateway
            .inner
            .log_levels
            .set(&self.gateway.inner.host, self.number, request.level)
            .await;
        Ok(())
    }
}

/// Whether a client whose log level is `level` hears a warning.
#[allow(deprecated)] // MCP logging (SEP-2577)
fn warning_passes(level: LoggingLevel) -> bool {
    matches!(
        level,
        LoggingLevel::Debug | LoggingLevel::Info | LoggingLevel::Notice | LoggingLevel::Warning
    )
}

/// Sends the host's warnings to a client as `notifications/message` at
/// level `warning`, each once: those known when every server has started,
/// then the new ones after each rebuild of the catalog. Ends when the client
/// goes away or the host stops.
#[allow(deprecated)] // MCP logging (SEP-2577), which clients still read
async fn send_warnings(
    host: Arc<core_agent_host::Host>,
    peer: rmcp::Peer<RoleServer>,
    wanted: Arc<AtomicBool>,
) {
    let mut changes = host.subscribe();
    changes.borrow_and_update();
    host.wait_all().await;
    let mut sent = std::collections::HashSet::new();
    loop {
        for warning in host.warnings() {
            if !sent.insert(warning.clone()) || !wanted.load(Ordering::SeqCst) {
                continue;
            }
            let mut note = LoggingMessageNotificationParam::new(
                LoggingLevel::Warning,
                serde_json::Value::String(warning),
            );
            note.logger = Some("core-agent".to_owned());
            if peer.notify_logging_message(note).await.is_err() {
                return;
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_given_up_front_reach_the_backend_without_the_gates_own() {
        let approval = serde_json::json!({"action": "accept", "content": {"approve": "yes"}});
        let answer = serde_json::json!({"action": "accept", "content": {"name": "Alice"}});
        let both: rmcp::model::InputResponses = [
            (crate::prompt::APPROVAL_KEY.to_owned(), approval.clone()),
            ("user_name".to_owned(), answer.clone()),
        ]
        .into();
        let passed = for_backend(Some(&both));
        assert_eq!(passed, Some([("user_name".to_owned(), answer)].into()));
        let ours: rmcp::model::InputResponses =
            [(crate::prompt::APPROVAL_KEY.to_owned(), approval)].into();
        assert_eq!(for_backend(Some(&ours)), None);
        assert_eq!(for_backend(None), None);
    }

    #[test]
    #[allow(deprecated)] // MCP logging (SEP-2577)
    fn a_client_hears_warnings_unless_its_level_is_above_warning() {
        let heard: Vec<bool> = [
            LoggingLevel::Debug,
            LoggingLevel::Info,
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Error,
            LoggingLevel::Critical,
            LoggingLevel::Alert,
            LoggingLevel::Emergency,
        ]
        .into_iter()
        .map(warning_passes)
        .collect();
        assert_eq!(heard, [true, true, true, true, false, false, false, false]);
    }
}
