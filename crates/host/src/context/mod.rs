//! MCP's other primitives through the host: resources, resource templates,
//! prompts, argument completion and logging, from every server a caller may
//! see, under public names that route back to their server (prompts
//! `<server>_<prompt>` like tools, resources `core-agent://<server>/<uri>`,
//! see [`public_uri`]).
//!
//! Who sees what: a server's resources and prompts reach a caller when the
//! server is up, declared them, its entry does not switch them off
//! (`resources: false`, `prompts: false`), and the caller's trust level is
//! among the server's `allowedTrustLevels` (every level when it sets none:
//! resources and prompts are read, never run, so the rule for mutating
//! tools does not apply to them).

mod prompts;
mod resources;
mod uri;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use core_agent_mcp_config::TrustLevel;
#[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
use core_agent_mcp_transport::model::LoggingLevel;
use core_agent_mcp_transport::model::{
    CompleteRequestParams, CompleteResult, Prompt, Reference, Resource, ResourceTemplate,
};
use core_agent_mcp_transport::{Notice, NoticeSink, Server};

use core_agent_mcp_policy::Naming;

use crate::{Error, Host, Result};

pub use uri::{URI_PREFIX, origin_of, public_uri};

/// What a resource read's raw payload is recorded as coming from (then
/// the server's URI): `resources/read demo://x`.
pub(crate) const READ_RESOURCE: &str = "resources/read ";

/// How many notices wait for a slow listener before the oldest are dropped
/// (a server flooding log messages costs a bounded buffer, not memory
/// without end).
const NOTICE_BUFFER: usize = 1024;

/// The longest resource URI a caller may send (8 KiB, the request-line
/// length most HTTP servers accept): a longer one is refused before any
/// lookup or did-you-mean.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;

/// What a caller may be offered of a server beside its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Offered {
    /// Its resources and resource templates (and their completions).
    Resources,
    /// Its prompts (and their completions).
    Prompts,
    /// Its log messages.
    Logging,
}

/// What the servers offer together, for a gateway's handshake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offers {
    /// Some server offers resources.
    pub resources: bool,
    /// Some server offers resource subscriptions.
    pub subscriptions: bool,
    /// Some server offers prompts.
    pub prompts: bool,
    /// Some server offers completions of resources or prompts it offers.
    pub completions: bool,
    /// Some server offers logging.
    pub logging: bool,
}

/// A server's prompts as listed, and until when they are fresh (`None`:
/// until the server says they changed).
pub(crate) type CachedPrompts = (Arc<Vec<Prompt>>, Option<std::time::Instant>);

/// What the host keeps about resources and prompts across sessions.
pub(crate) struct ContextState {
    /// Every server's notices, for whoever listens.
    notices: tokio::sync::broadcast::Sender<Notice>,
    /// Each server's prompts as last listed, until it says they changed or
    /// the freshness it gave them (`ttlMs`) has passed.
    prompts: Arc<Mutex<HashMap<String, CachedPrompts>>>,
    /// Subscriptions to each (server, URI), counted across sessions: the
    /// server hears the first subscribe and the last unsubscribe.
    subscriptions: Mutex<HashMap<(String, String), usize>>,
}

impl std::fmt::Debug for ContextState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextState").finish_non_exhaustive()
    }
}

impl ContextState {
    /// The state, and the sink servers are started with: it forgets a
    /// server's prompts when it says they changed, passes every notice to
    /// the host's listeners, then to `theirs` (the embedder's own sink).
    pub(crate) fn new(theirs: Option<NoticeSink>) -> (ContextState, NoticeSink) {
        let (notices, _) = tokio::sync::broadcast::channel(NOTICE_BUFFER);
        let prompts: Arc<Mutex<HashMap<String, CachedPrompts>>> = Arc::default();
        let sink: NoticeSink = {
            let notices = notices.clone();
            let prompts = prompts.clone();
            Arc::new(move |notice: Notice| {
                if let Notice::PromptsChanged { server } = &notice
                    && let Ok(mut cache) = prompts.lock()
                {
                    cache.remove(server);
                }
                if let Some(theirs) = &theirs {
                    theirs(notice.clone());
                }
                let _ = notices.send(notice);
            })
        };
        let state = ContextState {
            notices,
            prompts,
            subscriptions: Mutex::default(),
        };
        (state, sink)
    }
}

impl Host {
    /// The URI a caller sees for `uri` of `server`: behind
    /// `core-agent://<server>/` ([`public_uri`]), or the server's own when
    /// the catalog names things as one server does ([`Naming::Bare`]).
    pub fn resource_uri(&self, server: &str, uri: &str) -> String {
        match self.options.naming {
            Naming::Bare => uri.to_owned(),
            _ => public_uri(server, uri),
        }
    }

    /// The server and its own URI behind a URI a caller sees.
    fn origin<'a>(&self, public: &'a str) -> Option<(String, &'a str)> {
        match self.options.naming {
            Naming::Bare => self
                .servers
                .iter()
                .next()
                .map(|s| (s.name().to_owned(), public)),
            _ => origin_of(public),
        }
    }

    /// What the servers say outside any request (resources and prompts
    /// that changed, log messages), from now on. A listener that falls
    /// more than 1024 notices behind loses the oldest
    /// ([`tokio::sync::broadcast::error::RecvError::Lagged`]).
    pub fn notices(&self) -> tokio::sync::broadcast::Receiver<Notice> {
        self.context.notices.subscribe()
    }

    /// Whether a caller at `level` is offered `what` of `server`: it is up
    /// and declared it, its entry does not switch it off, and `level` is
    /// among its `allowedTrustLevels` (any level when it names none).
    pub fn offers_to(&self, server: &str, level: TrustLevel, what: Offered) -> bool {
        self.servers
            .get(server)
            .is_some_and(|s| self.offers_of(s, level, what))
    }

    fn offers_of(&self, server: &Server, level: TrustLevel, what: Offered) -> bool {
        let Some(entry) = self.entries.iter().find(|e| e.name == server.name()) else {
            return false;
        };
        let allowed = entry
            .spec
            .allowed_trust_levels
            .as_ref()
            .is_none_or(|levels| levels.contains(&level));
        let on = match what {
            Offered::Resources => entry.spec.resources && server.offers_resources(),
            Offered::Prompts => entry.spec.prompts && server.offers_prompts(),
            Offered::Logging => server.offers_logging(),
        };
        allowed && on && server.status().publishes()
    }

    /// The servers that offer `what` to a caller at `level`, in config order.
    pub(crate) fn offering(&self, level: TrustLevel, what: Offered) -> Vec<&Server> {
        self.servers
            .iter()
            .filter(|s| self.offers_of(s, level, what))
            .collect()
    }

    /// What the servers that have started offer together, to any caller
    /// (a gateway advertises it in its handshake).
    pub fn offers(&self) -> Offers {
        let mut offers = Offers::default();
        for server in self.servers.iter().filter(|s| s.status().publishes()) {
            let Some(entry) = self.entries.iter().find(|e| e.name == server.name()) else {
                continue;
            };
            let resources = entry.spec.resources && server.offers_resources();
            let prompts = entry.spec.prompts && server.offers_prompts();
            offers.resources |= resources;
            offers.subscriptions |= resources && server.offers_subscriptions();
            offers.prompts |= prompts;
            offers.completions |= (resources || prompts) && server.offers_completions();
            offers.logging |= server.offers_logging();
        }
        offers
    }

    /// Every resource a caller at `level` may read, under its public URI
    /// (names, titles and descriptions as the server wrote them). A server
    /// that fails to list is left out; the others are not held up by it.
    pub async fn resources(&self, level: TrustLevel) -> Vec<Resource> {
        let servers = self.offering(level, Offered::Resources);
        let listed = futures::future::join_all(servers.iter().map(|s| s.list_resources())).await;
        let mut out = Vec::new();
        for (server, listing) in servers.iter().zip(listed) {
            match listing {
                Ok(listing) => out.extend(listing.items.into_iter().map(|mut r| {
                    r.uri = self.resource_uri(server.name(), &r.uri);
                    r
                })),
                Err(e) => tracing::warn!("resources of `{}` left out: {e}", server.name()),
            }
        }
        out
    }

    /// Every resource template a caller at `level` may use, under its
    /// public URI template.
    pub async fn resource_templates(&self, level: TrustLevel) -> Vec<ResourceTemplate> {
        let servers = self.offering(level, Offered::Resources);
        let listed =
            futures::future::join_all(servers.iter().map(|s| s.list_resource_templates())).await;
        let mut out = Vec::new();
        for (server, listing) in servers.iter().zip(listed) {
            match listing {
                Ok(listing) => out.extend(listing.items.into_iter().map(|mut t| {
                    t.uri_template = self.resource_uri(server.name(), &t.uri_template);
                    t
                })),
                Err(e) => tracing::warn!("resource templates of `{}` left out: {e}", server.name()),
            }
        }
        out
    }

    /// The server behind a public resource URI, and its own URI, when a
    /// caller at `level` may read it.
    pub(crate) fn resource_route<'a>(
        &self,
        level: TrustLevel,
        public: &'a str,
    ) -> Result<(&Server, &'a str)> {
        let unknown = |hint: String| Error::UnknownResource {
            uri: public.to_owned(),
            hint,
        };
        if public.len() > MAX_URI_BYTES {
            return Err(unknown(format!(
                "a resource URI is at most {} KiB; list the resources with resources/list",
                MAX_URI_BYTES / 1024
            )));
        }
        let Some((name, uri)) = self.origin(public) else {
            return Err(unknown(format!(
                "the gateway's resource URIs look like `{URI_PREFIX}<server>/<the server's own URI>`; list them with resources/list"
            )));
        };
        match self.servers.get(&name) {
            Some(server) if self.offers_of(server, level, Offered::Resources) => Ok((server, uri)),
            _ => {
                let name = core_agent_mcp_policy::elide(&name, 128);
                let names: Vec<&str> = self
                    .offering(level, Offered::Resources)
                    .into_iter()
                    .map(Server::name)
                    .collect();
                let hint = match core_agent_mcp_config::closest(&name, &names) {
                    Some(close) => {
                        format!("no server `{name}` offers resources; did you mean `{close}`?")
                    }
                    None if names.is_empty() => {
                        format!(
                            "no server `{name}` offers resources, and none offers any to this caller"
                        )
                    }
                    None => format!(
                        "no server `{name}` offers resources; these do: {}",
                        names.join(", ")
                    ),
                };
                Err(unknown(hint))
            }
        }
    }

    /// Subscribes to changes of the resource at `public` for a caller at
    /// `level`; the server hears only the first subscription to each URI.
    pub async fn subscribe_resource(&self, level: TrustLevel, public: &str) -> Result<()> {
        let (server, uri) = self.resource_route(level, public)?;
        let key = (server.name().to_owned(), uri.to_owned());
        let first = self
            .context
            .subscriptions
            .lock()
            .map(|mut subs| {
                let count = subs.entry(key.clone()).or_insert(0);
                *count += 1;
                *count == 1
            })
            .unwrap_or(true);
        if first && let Err(e) = server.subscribe(uri).await {
            if let Ok(mut subs) = self.context.subscriptions.lock() {
                forget_one(&mut subs, &key);
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Ends one subscription to `public`; the server hears the last one end.
    /// A URI without subscriptions is no error.
    pub async fn unsubscribe_resource(&self, public: &str) -> Result<()> {
        let Some((name, uri)) = self.origin(public) else {
            return Ok(());
        };
        let key = (name, uri.to_owned());
        let last = self
            .context
            .subscriptions
            .lock()
            .map(|mut subs| forget_one(&mut subs, &key))
            .unwrap_or(false);
        match self.servers.get(&key.0) {
            Some(server) if last => server.unsubscribe(uri).await.map_err(Into::into),
            _ => Ok(()),
        }
    }

    /// Asks the server that owns the prompt or resource template `params`
    /// refers to (by its public name) for completions of one argument.
    pub async fn complete(
        &self,
        level: TrustLevel,
        mut params: CompleteRequestParams,
    ) -> Result<CompleteResult> {
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let (server, name) = self.prompt_route(level, &prompt.name).await?;
                prompt.name = name;
                server
            }
            Reference::Resource(template) => {
                let (server, uri) = self.resource_route(level, &template.uri)?;
                template.uri = uri.to_owned();
                server
            }
            _ => {
                return Err(Error::BadArguments {
                    name: "completion/complete".to_owned(),
                    message: "`ref` is neither a prompt nor a resource template".to_owned(),
                });
            }
        };
        Ok(server.complete(params).await?)
    }

    /// Asks every server that offers logging to send messages at `level`
    /// and above. A server that refuses is passed over.
    #[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
    pub async fn set_log_level(&self, level: LoggingLevel) {
        let servers: Vec<&Server> = self
            .servers
            .iter()
            .filter(|s| s.status().publishes() && s.offers_logging())
            .collect();
        let done = futures::future::join_all(servers.iter().map(|s| s.set_log_level(level))).await;
        for (server, result) in servers.iter().zip(done) {
            if let Err(e) = result {
                tracing::warn!("log level of `{}` not set: {e}", server.name());
            }
        }
    }
}

/// The permission gate's namespace for servers using a caller's model
/// (`sampling:<server>` in `permissions.allow` / `deny`).
pub const SAMPLING: &str = "sampling";

impl crate::Session {
    /// Whether `server` may use this session's caller's model
    /// (`sampling/createMessage`): the session's gate decides
    /// `sampling:<server>` like a read-only call, asking the caller in
    /// `ask` mode (an "always" answer holds for the session).
    pub async fn approve_sampling(&self, server: &str) -> Result<()> {
        self.decide_sampling(server, self.prompter.as_ref()).await
    }

    /// Whether `server` may use this session's caller's model without the
    /// caller being asked: the gate must allow `sampling:<server>` by a
    /// rule, the mode, or an "always" answer the session remembers; where
    /// it would ask, this refuses (`Error::Denied` with `unanswered_ask`).
    /// For callers that cannot be asked in the middle of a request, such as
    /// clients without sessions whose answers come back on a retry.
    pub async fn sampling_allowed(&self, server: &str) -> Result<()> {
        self.decide_sampling(server, &core_agent_permissions::RefuseAll)
            .await
    }

    async fn decide_sampling(
        &self,
        server: &str,
        prompter: &dyn core_agent_permissions::Prompter,
    ) -> Result<()> {
        // What the ask shows beside the server's name.
        let mut arguments = serde_json::Map::new();
        arguments.insert(
            "asks".to_owned(),
            serde_json::Value::String("to use your model (sampling/createMessage)".to_owned()),
        );
        let request = core_agent_permissions::Request {
            namespace: SAMPLING,
            name: server,
            arguments: &arguments,
            read_only: true,
        };
        crate::pipeline::gate_remembering(&self.gate, prompter, request, self.remembering())
            .await
            .1
    }
}

impl Host {
    /// Tells every server that the roots changed (they list them again).
    pub async fn roots_changed(&self) {
        self.servers.notify_roots_changed().await;
    }
}

/// Takes one subscription to `key` away; true when it was the last.
fn forget_one(subs: &mut HashMap<(String, String), usize>, key: &(String, String)) -> bool {
    match subs.get_mut(key) {
        Some(count) if *count > 1 => {
            *count -= 1;
            false
        }
        Some(_) => {
            subs.remove(key);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_hears_the_first_subscription_and_the_last_unsubscription() {
        let mut subs = HashMap::new();
        let key = ("fs".to_owned(), "file:///a".to_owned());
        *subs.entry(key.clone()).or_insert(0) += 1;
        *subs.entry(key.clone()).or_insert(0) += 1;
        assert!(!forget_one(&mut subs, &key), "one session still subscribes");
        assert!(forget_one(&mut subs, &key), "the last one left");
        assert!(subs.is_empty());
        assert!(!forget_one(&mut subs, &key), "nothing to forget");
    }
}
