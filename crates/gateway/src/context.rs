//! Resources, prompts, completion and logging for a gateway session: the
//! handshake's capabilities from what the backends offer, host errors as
//! protocol errors, and the backends' notices forwarded to each session
//! that may hear them.

#![allow(deprecated)] // MCP logging (SEP-2577) and legacy subscriptions, which clients still speak

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_host::{Error as HostError, Host, Offered, Offers};
use core_agent_mcp_config::{Redactor, TrustLevel};
use core_agent_mcp_transport::{Error as CallError, Notice};
use rmcp::model::{
    CacheScope, ErrorCode, LoggingLevel, LoggingMessageNotificationParam, PromptsCapability,
    ReadResourceResult, ResourceUpdatedNotificationParam, ResourcesCapability, ServerCapabilities,
};
use rmcp::service::SubscriptionContext;
use rmcp::{ErrorData, Peer, RoleServer};

use crate::elicit::ElicitRouter;

/// At most this many log messages and resource updates a second reach one
/// session; the rest are dropped and counted (a backend that floods them
/// costs the client one line saying so).
const MAX_NOTICES_PER_SECOND: u32 = 50;

/// The gateway's capabilities: tools and logging always, and what the
/// backends offer of resources, prompts and completion.
pub(crate) fn capabilities(offers: Offers) -> ServerCapabilities {
    let mut capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_tool_list_changed()
        .enable_logging()
        .build();
    if offers.resources {
        let mut resources = ResourcesCapability::default();
        resources.list_changed = Some(true);
        resources.subscribe = offers.subscriptions.then_some(true);
        capabilities.resources = Some(resources);
    }
    if offers.prompts {
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
    }
    if offers.completions {
        capabilities.completions = Some(Default::default());
    }
    capabilities
}

/// The caching hints (SEP-2549) on the lists the gateway serves: fresh for
/// no time, and for the requesting user only. The lists are the catalog of
/// the moment, which changes whenever a backend's does (a backend tells of
/// a change after it happened, never before): any positive time could keep
/// a client on a list past its change. Clients that want to cache listen
/// instead (`tools/list_changed` and the like, on their session or on
/// `subscriptions/listen`); what a caller sees depends on its token's
/// trust level, hence `private`.
pub(crate) fn cache_hints() -> (u64, CacheScope) {
    (0, CacheScope::Private)
}

/// A backend's `resources/read` result with the gateway's caching hints: the
/// backend's freshness when it gave one (it owns the resource), else none;
/// always `private` (what a caller may read depends on its token).
pub(crate) fn cache_read(result: &mut ReadResourceResult) {
    let (ttl, scope) = cache_hints();
    result.ttl_ms = Some(result.ttl_ms.unwrap_or(ttl));
    result.cache_scope = Some(scope);
}

/// Serves one `subscriptions/listen` (2026-07-28) for a caller at `level`:
/// `tools/list_changed` when the catalog changes, the prompt and resource
/// list changes of the backends it may see, and updates of the public
/// resource URIs it subscribed to (each subscribed at its backend while the
/// stream lives), each as the accepted filter allows; until the client
/// cancels or goes away, or the host stops.
pub(crate) async fn listen(host: &Arc<Host>, level: TrustLevel, context: SubscriptionContext) {
    let accepted = context.accepted().clone();
    let sink = context.sink().clone();
    let mut changes = host.subscribe();
    changes.borrow_and_update();
    let mut notices = host.notices();
    let mut subscribed = Vec::new();
    for uri in accepted.resource_subscriptions.iter().flatten() {
        match host.subscribe_resource(level, uri).await {
            Ok(()) => subscribed.push(uri.clone()),
            Err(e) => tracing::debug!("subscriptions/listen: cannot subscribe to {uri}: {e}"),
        }
    }
    let tools = accepted.tools_list_changed == Some(true);
    let prompts = accepted.prompts_list_changed == Some(true);
    let resources = accepted.resources_list_changed == Some(true);
    let mut tools_open = true;
    loop {
        let sent = tokio::select! {
            () = context.cancelled() => break,
            changed = changes.changed(), if tools_open => match changed {
                Ok(()) if tools => sink.notify_tool_list_changed().await,
                Ok(()) => Ok(()),
                Err(_) => {
                    tools_open = false;
                    Ok(())
                }
            },
            notice = notices.recv() => match notice {
                Ok(notice) => {
                    let offered = |what| host.offers_to(notice.server(), level, what);
                    match &notice {
                        Notice::PromptsChanged { .. } if prompts && offered(Offered::Prompts) => {
                            sink.notify_prompt_list_changed().await
                        }
                        Notice::ResourcesChanged { .. }
                            if resources && offered(Offered::Resources) =>
                        {
                            sink.notify_resource_list_changed().await
                        }
                        Notice::ResourceUpdated { server, uri } => {
                            let public = host.resource_uri(server, uri);
                            if subscribed.contains(&public) {
                                sink.notify_resource_updated(public).await
                            } else {
                                Ok(())
                            }
                        }
                        _ => Ok(()),
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Ok(()),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
        };
        if sent.is_err() {
            break;
        }
    }
    for uri in subscribed {
        let _ = host.unsubscribe_resource(&uri).await;
    }
}

/// A host error on a resources, prompts or completion request, as the
/// protocol error the client gets: what the client asked wrong is invalid
/// params (an unknown resource is the spec's -32002), a backend's own
/// JSON-RPC error passes through with its code, the rest is internal.
/// Known secret values (`redactor`) are replaced in its message and data.
pub(crate) fn protocol_error(e: HostError, redactor: &Redactor) -> ErrorData {
    let message = redactor.redact(&e.to_string()).into_owned();
    let mut error = match e {
        HostError::UnknownResource { uri, .. } => ErrorData::new(
            ErrorCode(-32002),
            message,
            Some(serde_json::json!({ "uri": uri })),
        ),
        HostError::UnknownPrompt { .. } | HostError::BadArguments { .. } => {
            ErrorData::invalid_params(message, None)
        }
        HostError::Call(CallError::Refused { code, data, .. }) => {
            ErrorData::new(ErrorCode(code), message, data.map(|d| *d))
        }
        HostError::Call(CallError::NotOffered { .. }) => {
            ErrorData::new(ErrorCode::METHOD_NOT_FOUND, message, None)
        }
        _ => ErrorData::internal_error(message, None),
    };
    if let Some(data) = &mut error.data {
        redactor.redact_json(data);
    }
    error
}

/// `value` with every known secret value (`redactor`) replaced, in any
/// string it holds: what a backend returns to a resources or prompts
/// request, before a client sees it. Free when there is nothing to redact.
pub(crate) fn redacted<T>(value: T, redactor: &Redactor) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    if redactor.is_empty() {
        return value;
    }
    let Ok(mut json) = serde_json::to_value(&value) else {
        return value;
    };
    if !redactor.redact_json(&mut json) {
        return value;
    }
    serde_json::from_value(json).unwrap_or(value)
}

/// A backend's error for a read of the public URI `uri` names that URI
/// where the backend's named its own (`data.uri`; a backend of 2026-07-28
/// says "not found" as -32602), and a "resource not found" (-32002) that
/// named none names it too.
pub(crate) fn not_found_names(mut e: ErrorData, uri: &str) -> ErrorData {
    let names = e
        .data
        .as_ref()
        .and_then(|d| d.as_object())
        .is_some_and(|d| d.contains_key("uri"));
    if names || e.code == ErrorCode(-32002) {
        let mut data = match e.data.take() {
            Some(serde_json::Value::Object(data)) => data,
            _ => serde_json::Map::new(),
        };
        data.insert("uri".to_owned(), serde_json::Value::String(uri.to_owned()));
        e.data = Some(serde_json::Value::Object(data));
    }
    e
}

/// The log levels the sessions asked for, so the backends are asked for
/// the most verbose of them.
#[derive(Debug, Default)]
pub(crate) struct LogLevels {
    levels: Mutex<HashMap<u64, u8>>,
    /// The level the backends were last asked for (`u8::MAX`: never).
    sent: AtomicU8,
}

impl LogLevels {
    /// Session `id` asks for `level`: the backends are asked for the most
    /// verbose level any session wants, when that changed.
    pub(crate) async fn set(&self, host: &Host, id: u64, level: LoggingLevel) {
        let wanted = {
            let Ok(mut levels) = self.levels.lock() else {
                return;
            };
            levels.insert(id, rank(level));
            levels.values().copied().min().unwrap_or(rank(level))
        };
        let before = self.sent.swap(wanted, Ordering::SeqCst);
        if before != wanted {
            host.set_log_level(level_of(wanted)).await;
        }
    }

    /// Session `id` is gone.
    pub(crate) fn forget(&self, id: u64) {
        if let Ok(mut levels) = self.levels.lock() {
            levels.remove(&id);
        }
    }
}

impl LogLevels {
    pub(crate) fn new() -> LogLevels {
        LogLevels {
            levels: Mutex::default(),
            sent: AtomicU8::new(u8::MAX),
        }
    }
}

/// 0 for `debug` up to 7 for `emergency`.
pub(crate) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn level_of(rank: u8) -> LoggingLevel {
    match rank {
        0 => LoggingLevel::Debug,
        1 => LoggingLevel::Info,
        2 => LoggingLevel::Notice,
        3 => LoggingLevel::Warning,
        4 => LoggingLevel::Error,
        5 => LoggingLevel::Critical,
        6 => LoggingLevel::Alert,
        _ => LoggingLevel::Emergency,
    }
}

/// What one session hears of the backends' notices.
pub(crate) struct Listener {
    pub(crate) host: Arc<Host>,
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) level: TrustLevel,
    /// The session's id in the elicitation router (its record id), once open.
    pub(crate) session: Arc<Mutex<Option<String>>>,
    pub(crate) router: Option<Arc<ElicitRouter>>,
    /// The public URIs this session subscribed to.
    pub(crate) subscribed: Arc<Mutex<HashSet<String>>>,
    /// The least log level this session hears (`0`: all).
    pub(crate) log_level: Arc<AtomicU8>,
}

impl Listener {
    /// Forwards notices until the client goes away or the host stops.
    pub(crate) async fn run(self) {
        let mut notices = self.host.notices();
        let mut window = Window::new();
        loop {
            let notice = match notices.recv().await {
                Ok(notice) => notice,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    window.dropped += n;
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if self.deliver(notice, &mut window).await.is_err() {
                return;
            }
        }
    }

    async fn deliver(&self, notice: Notice, window: &mut Window) -> Result<(), ()> {
        let offered = |what| self.host.offers_to(notice.server(), self.level, what);
        match &notice {
            Notice::ResourcesChanged { .. } if offered(Offered::Resources) => {
                self.peer.notify_resource_list_changed().await.map_err(drop)
            }
            Notice::PromptsChanged { .. } if offered(Offered::Prompts) => {
                self.peer.notify_prompt_list_changed().await.map_err(drop)
            }
            Notice::ResourceUpdated { server, uri } => {
                let public = self.host.resource_uri(server, uri);
                let wanted = self
                    .subscribed
                    .lock()
                    .is_ok_and(|subs| subs.contains(&public));
                if !wanted || !window.admit() {
                    return self.report_dropped(window).await;
                }
                self.peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(public))
                    .await
                    .map_err(drop)
            }
            Notice::Log { server, message } if offered(Offered::Logging) => {
                if rank(message.level) < self.log_level.load(Ordering::SeqCst)
                    || !self.hears_from(server)
                {
                    return Ok(());
                }
                if !window.admit() {
                    return self.report_dropped(window).await;
                }
                let mut message = message.clone();
                self.host.redactor().redact_json(&mut message.data);
                message.logger = Some(match &message.logger {
                    Some(logger) => format!("{server}/{logger}"),
                    None => server.clone(),
                });
                self.peer
                    .notify_logging_message(message)
                    .await
                    .map_err(drop)
            }
            _ => Ok(()),
        }
    }

    /// Whether this session hears `server`'s log messages: the session
    /// whose call is in flight on it does; when no session's is, all do.
    fn hears_from(&self, server: &str) -> bool {
        let Some(router) = &self.router else {
            return true;
        };
        let calling = router.sessions_on(server);
        if calling.is_empty() {
            return true;
        }
        let me = self.session.lock().ok().and_then(|s| s.clone());
        me.is_some_and(|me| calling.contains(&me))
    }

    /// Once a second at most, tells the client how many notices were
    /// dropped since the last time it was told.
    async fn report_dropped(&self, window: &mut Window) -> Result<(), ()> {
        let Some(dropped) = window.take_report() else {
            return Ok(());
        };
        let mut note = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            serde_json::Value::String(format!(
                "core-agent: {dropped} notification(s) from the servers were dropped (more than {MAX_NOTICES_PER_SECOND} a second)"
            )),
        );
        note.logger = Some("core-agent".to_owned());
        self.peer.notify_logging_message(note).await.map_err(drop)
    }
}

/// A one-second window of forwarded notices.
struct Window {
    started: Instant,
    sent: u32,
    dropped: u64,
    reported: Option<Instant>,
}

impl Window {
    fn new() -> Window {
        Window {
            started: Instant::now(),
            sent: 0,
            dropped: 0,
            reported: None,
        }
    }

    /// Whether one more notice may go now.
    fn admit(&mut self) -> bool {
        if self.started.elapsed() >= Duration::from_secs(1) {
            self.started = Instant::now();
            self.sent = 0;
        }
        if self.sent < MAX_NOTICES_PER_SECOND {
            self.sent += 1;
            true
        } else {
            self.dropped += 1;
            false
        }
    }

    /// The count to report, when there is one and the last report was over
    /// a second ago.
    fn take_report(&mut self) -> Option<u64> {
        if self.dropped == 0
            || self
                .reported
                .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
        {
            return None;
        }
        self.reported = Some(Instant::now());
        Some(std::mem::take(&mut self.dropped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backends_not_found_names_the_public_uri_and_keeps_its_other_data() {
        let backend = ErrorData::new(
            ErrorCode(-32002),
            "no such resource",
            Some(serde_json::json!({"uri": "test://missing", "hint": "x"})),
        );
        let public = "core-agent://ref/test://missing";
        let named = not_found_names(backend, public);
        assert_eq!(
            named.data,
            Some(serde_json::json!({"uri": public, "hint": "x"}))
        );
        // Without data, the URI is added; another error is left alone.
        let bare = not_found_names(ErrorData::new(ErrorCode(-32002), "gone", None), public);
        assert_eq!(bare.data, Some(serde_json::json!({"uri": public})));
        let other = not_found_names(ErrorData::invalid_params("bad", None), public);
        assert_eq!(other.data, None);
        // A 2026-07-28 backend's not-found is -32602: its URI is still
        // the backend's own, so it is replaced.
        let newer = ErrorData::invalid_params(
            "no such resource",
            Some(serde_json::json!({"uri": "test://missing"})),
        );
        let named = not_found_names(newer, public);
        assert_eq!(named.data, Some(serde_json::json!({"uri": public})));
    }

    #[test]
    fn a_window_admits_its_share_then_counts_the_rest_and_reports_once() {
        let mut window = Window::new();
        let admitted = (0..80).filter(|_| window.admit()).count();
        assert_eq!(admitted, MAX_NOTICES_PER_SECOND as usize);
        assert_eq!(window.take_report(), Some(30));
        window.dropped = 5;
        assert_eq!(window.take_report(), None, "at most one report a second");
    }

    #[test]
    fn levels_rank_from_debug_to_emergency_and_back() {
        for r in 0..8 {
            assert_eq!(rank(level_of(r)), r);
        }
    }
}
