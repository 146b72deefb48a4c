//! What a server offers beside tools: resources, resource templates,
//! prompts, argument completion and logging, each asked for under the
//! server's call timeout and its concurrency limit, and what it tells
//! outside any request (`Notice`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, JsonObject, PaginatedRequestParams, Prompt, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities,
};
#[allow(deprecated)]
// MCP logging (SEP-2577) and legacy subscriptions, which servers still speak
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};

use crate::error::{Error, Result};
use crate::live::Connection;
use crate::server::Server;

/// Something a server said outside the result of a request: a resource it
/// changed, a list that changed, a log message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
pub enum Notice {
    /// `notifications/resources/updated`: a resource a subscription is
    /// about changed.
    ResourceUpdated {
        /// The server.
        server: String,
        /// The resource, as the server names it.
        uri: String,
    },
    /// `notifications/resources/list_changed`.
    ResourcesChanged {
        /// The server.
        server: String,
    },
    /// `notifications/prompts/list_changed`.
    PromptsChanged {
        /// The server.
        server: String,
    },
    /// `notifications/message`: a log message.
    Log {
        /// The server.
        server: String,
        /// The message, as the server sent it.
        message: LoggingMessageNotificationParam,
    },
}

impl Notice {
    /// The server that said it.
    pub fn server(&self) -> &str {
        match self {
            Notice::ResourceUpdated { server, .. }
            | Notice::ResourcesChanged { server }
            | Notice::PromptsChanged { server }
            | Notice::Log { server, .. } => server,
        }
    }
}

/// Hears every [`Notice`] of every server, from the connection's own task:
/// it must not block (send it on to a channel).
pub type NoticeSink = Arc<dyn Fn(Notice) + Send + Sync>;

/// One listing: the items of at most `max_pages` pages, and whether the
/// server had more.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Listing<T> {
    /// What the server listed.
    pub items: Vec<T>,
    /// The listing stopped at `max_pages` while the server had more.
    pub truncated: bool,
    /// How long the server said the list stays fresh (`ttlMs`, the
    /// shortest of its pages'); `None` when a page said nothing, or said 0
    /// while the server declared it tells when the list changes (what SDKs
    /// send when the server set none): fresh until it says so.
    pub fresh_for: Option<std::time::Duration>,
}

/// One page of a list: its items, the next cursor, and its `ttlMs`.
type Page<T> = (Vec<T>, Option<String>, Option<u64>);

/// How a request run by `Server::request` went wrong.
enum Failure {
    /// The request failed (a JSON-RPC error, the transport).
    Service(rmcp::ServiceError),
    /// The server asked for input, under `relaying`.
    Asked(rmcp::model::InputRequiredResult),
    /// Answering the server's questions failed.
    Ours(Error),
}

/// Puts a relayed retry's answers and state into a request's `responses`
/// and `state`; true when the calls are relayed (a server's questions go
/// back to the caller rather than being answered here).
fn resume(responses: &mut Option<rmcp::model::InputResponses>, state: &mut Option<String>) -> bool {
    match crate::relay::relayed() {
        Some(Some(resume)) => {
            *responses = resume.responses;
            *state = resume.state;
            true
        }
        Some(None) => true,
        None => false,
    }
}

/// One answer to a request that may ask for input (SEP-2322).
enum Round<T> {
    /// The result.
    Done(T),
    /// The server's questions.
    Asked(rmcp::model::InputRequiredResult),
}

/// Sends a request (`send`, given the answers and state of the round
/// before) until the server gives its result: its questions answered here
/// (the elicitor, sampler and roots), or, under `relaying`, handed back.
/// At most `MAX_INPUT_ROUNDS` rounds.
async fn rounds<T, F, Fut>(
    conn: &Connection,
    server: &str,
    what: &str,
    mut send: F,
) -> std::result::Result<T, Failure>
where
    F: FnMut(Option<rmcp::model::InputResponses>, Option<String>) -> Fut,
    Fut: Future<Output = std::result::Result<Round<T>, rmcp::ServiceError>>,
{
    let (mut responses, mut state) = (None, None);
    let relay = resume(&mut responses, &mut state);
    for _ in 0..crate::call::MAX_INPUT_ROUNDS {
        match send(responses.take(), state.take())
            .await
            .map_err(Failure::Service)?
        {
            Round::Done(result) => return Ok(result),
            Round::Asked(asked) if relay => return Err(Failure::Asked(asked)),
            Round::Asked(asked) => {
                (responses, state) = crate::call::answer(conn, server, what, asked)
                    .await
                    .map_err(Failure::Ours)?;
            }
        }
    }
    Err(Failure::Ours(too_many_rounds(server, what)))
}

fn too_many_rounds(server: &str, what: &str) -> Error {
    Error::Call {
        server: server.to_owned(),
        tool: what.to_owned(),
        message: format!(
            "the server still asked for input after {} rounds of answers",
            crate::call::MAX_INPUT_ROUNDS
        ),
    }
}

/// Which part of a server's capabilities a request needs.
#[derive(Debug, Clone, Copy)]
enum Offer {
    Resources,
    Subscriptions,
    Prompts,
    Completions,
    Logging,
}

impl Offer {
    fn word(self) -> &'static str {
        match self {
            Offer::Resources => "resources",
            Offer::Subscriptions => "resource subscriptions",
            Offer::Prompts => "prompts",
            Offer::Completions => "completions",
            Offer::Logging => "logging",
        }
    }

    /// Whether the server declared it tells when this list changes.
    fn notifies(self, capabilities: &ServerCapabilities) -> bool {
        let declared = match self {
            Offer::Resources => capabilities.resources.as_ref().and_then(|r| r.list_changed),
            Offer::Prompts => capabilities.prompts.as_ref().and_then(|p| p.list_changed),
            _ => None,
        };
        declared == Some(true)
    }

    #[allow(deprecated)] // `logging`: MCP logging (SEP-2577)
    fn offered(self, capabilities: &ServerCapabilities) -> bool {
        match self {
            Offer::Resources => capabilities.resources.is_some(),
            Offer::Subscriptions => capabilities
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true)),
            Offer::Prompts => capabilities.prompts.is_some(),
            Offer::Completions => capabilities.completions.is_some(),
            Offer::Logging => capabilities.logging.is_some(),
        }
    }
}

impl Server {
    /// What the server declared it offers in its handshake (`None` until
    /// it has connected).
    pub fn capabilities(&self) -> Option<ServerCapabilities> {
        self.live().map(|l| l.connection().capabilities.clone())
    }

    /// Whether the server declared `resources`.
    pub fn offers_resources(&self) -> bool {
        self.offers(Offer::Resources)
    }

    /// Whether the server declared `resources.subscribe`.
    pub fn offers_subscriptions(&self) -> bool {
        self.offers(Offer::Subscriptions)
    }

    /// Whether the server declared `prompts`.
    pub fn offers_prompts(&self) -> bool {
        self.offers(Offer::Prompts)
    }

    /// Whether the server declared `completions`.
    pub fn offers_completions(&self) -> bool {
        self.offers(Offer::Completions)
    }

    /// Whether the server declared `logging`.
    pub fn offers_logging(&self) -> bool {
        self.offers(Offer::Logging)
    }

    fn offers(&self, offer: Offer) -> bool {
        self.capabilities().is_some_and(|c| offer.offered(&c))
    }

    /// `resources/list`, every page up to the server's `max_pages`.
    pub async fn list_resources(&self) -> Result<Listing<Resource>> {
        self.pages(
            "resources/list",
            Offer::Resources,
            |peer, cursor| async move {
                let page = peer.list_resources(Some(cursor)).await?;
                Ok((page.resources, page.next_cursor, page.ttl_ms))
            },
        )
        .await
    }

    /// `resources/templates/list`, every page up to the server's `max_pages`.
    pub async fn list_resource_templates(&self) -> Result<Listing<ResourceTemplate>> {
        self.pages(
            "resources/templates/list",
            Offer::Resources,
            |peer, cursor| async move {
                let page = peer.list_resource_templates(Some(cursor)).await?;
                Ok((page.resource_templates, page.next_cursor, page.ttl_ms))
            },
        )
        .await
    }

    /// `resources/read` of `uri` (the server's own).
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let params = ReadResourceRequestParams::new(uri.to_owned());
        let what = format!("resources/read {uri}");
        self.not_per_user(&what)?;
        let server = self.name().to_owned();
        self.request(what.clone(), Offer::Resources, |conn| async move {
            rounds(&conn, &server, &what, |responses, state| {
                let mut params = params.clone();
                params.input_responses = responses;
                params.request_state = state;
                crate::meta::extend(&mut params.meta);
                let peer = conn.peer.clone();
                async move {
                    match peer.read_resource_once(params).await? {
                        ReadResourceResponse::Complete(result) => Ok(Round::Done(result)),
                        ReadResourceResponse::InputRequired(asked) => Ok(Round::Asked(asked)),
                        _ => Err(rmcp::ServiceError::UnexpectedResponse),
                    }
                }
            })
            .await
        })
        .await
    }

    /// Subscribes to updates of `uri` (the server's own): with
    /// `resources/subscribe` on older revisions, with a
    /// `subscriptions/listen` stream of its own on 2026-07-28.
    #[allow(deprecated)] // legacy subscriptions, which servers below 2026-07-28 speak
    pub async fn subscribe(&self, uri: &str) -> Result<()> {
        if let Some(live) = self.live() {
            let conn = live.connection();
            if let Some(handler) = &conn.listener {
                if !Offer::Subscriptions.offered(&conn.capabilities) {
                    return Err(Error::NotOffered {
                        server: self.name().to_owned(),
                        what: Offer::Subscriptions.word(),
                    });
                }
                let stream = crate::listen::resource(handler.clone(), conn.peer.clone(), uri);
                if let Ok(mut streams) = conn.resource_streams.lock()
                    && let Some(old) = streams.insert(uri.to_owned(), stream)
                {
                    old.abort();
                }
                return Ok(());
            }
        }
        let params = SubscribeRequestParams::new(uri.to_owned());
        self.request(
            format!("resources/subscribe {uri}"),
            Offer::Subscriptions,
            |conn| async move { conn.peer.subscribe(params).await.map_err(Failure::Service) },
        )
        .await
    }

    /// Ends the subscription to `uri` (the server's own).
    #[allow(deprecated)] // legacy subscriptions, which servers below 2026-07-28 speak
    pub async fn unsubscribe(&self, uri: &str) -> Result<()> {
        if let Some(live) = self.live() {
            let conn = live.connection();
            if conn.listener.is_some() {
                if let Ok(mut streams) = conn.resource_streams.lock()
                    && let Some(stream) = streams.remove(uri)
                {
                    stream.abort();
                }
                return Ok(());
            }
        }
        let params = UnsubscribeRequestParams::new(uri.to_owned());
        self.request(
            format!("resources/unsubscribe {uri}"),
            Offer::Subscriptions,
            |conn| async move {
                conn.peer
                    .unsubscribe(params)
                    .await
                    .map_err(Failure::Service)
            },
        )
        .await
    }

    /// `prompts/list`, every page up to the server's `max_pages`.
    pub async fn list_prompts(&self) -> Result<Listing<Prompt>> {
        self.pages("prompts/list", Offer::Prompts, |peer, cursor| async move {
            let page = peer.list_prompts(Some(cursor)).await?;
            Ok((page.prompts, page.next_cursor, page.ttl_ms))
        })
        .await
    }

    /// `prompts/get` of `name` (the server's own) with `arguments`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult> {
        let mut params = GetPromptRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let what = format!("prompts/get {name}");
        self.not_per_user(&what)?;
        let server = self.name().to_owned();
        self.request(what.clone(), Offer::Prompts, |conn| async move {
            rounds(&conn, &server, &what, |responses, state| {
                let mut params = params.clone();
                params.input_responses = responses;
                params.request_state = state;
                crate::meta::extend(&mut params.meta);
                let peer = conn.peer.clone();
                async move {
                    match peer.get_prompt_once(params).await? {
                        GetPromptResponse::Complete(result) => Ok(Round::Done(result)),
                        GetPromptResponse::InputRequired(asked) => Ok(Round::Asked(asked)),
                        _ => Err(rmcp::ServiceError::UnexpectedResponse),
                    }
                }
            })
            .await
        })
        .await
    }

    /// `completion/complete`, with the reference in the server's own names.
    pub async fn complete(&self, params: CompleteRequestParams) -> Result<CompleteResult> {
        self.request(
            "completion/complete".to_owned(),
            Offer::Completions,
            |conn| async move { conn.peer.complete(params).await.map_err(Failure::Service) },
        )
        .await
    }

    /// `logging/setLevel`: the server sends log messages at `level` and
    /// above. On 2026-07-28, which has no `logging/setLevel`, the level goes
    /// in the `_meta` of each later tool call instead.
    #[allow(deprecated)] // MCP logging (SEP-2577), which servers still speak
    pub async fn set_log_level(&self, level: LoggingLevel) -> Result<()> {
        if let Some(live) = self.live() {
            if let Ok(mut kept) = live.log_level.lock() {
                *kept = Some(level);
            }
            if live.connection().listener.is_some() {
                return Ok(());
            }
        }
        let params = SetLevelRequestParams::new(level);
        self.request(
            "logging/setLevel".to_owned(),
            Offer::Logging,
            |conn| async move { conn.peer.set_level(params).await.map_err(Failure::Service) },
        )
        .await
    }

    /// Lists page by page: `page` asks for the page at a cursor and returns
    /// its items and the next cursor; at most `max_pages` pages.
    async fn pages<T, F, Fut>(&self, what: &str, offer: Offer, page: F) -> Result<Listing<T>>
    where
        F: Fn(rmcp::Peer<RoleClient>, PaginatedRequestParams) -> Fut,
        Fut: Future<Output = std::result::Result<Page<T>, rmcp::ServiceError>>,
    {
        let max_pages = self.limits().max_pages.max(1);
        self.request(what.to_owned(), offer, |conn| async move {
            let peer = conn.peer.clone();
            let mut items = Vec::new();
            let mut cursor = None;
            let mut fresh = None;
            let mut truncated = true;
            for _ in 0..max_pages {
                let params = PaginatedRequestParams::default().with_cursor(cursor);
                let (more, next, ttl_ms) =
                    page(peer.clone(), params).await.map_err(Failure::Service)?;
                fresh = Some(crate::tools::shortest(fresh, ttl_ms));
                items.extend(more);
                cursor = next;
                if cursor.is_none() {
                    truncated = false;
                    break;
                }
            }
            let notifies = offer.notifies(&conn.capabilities);
            Ok(Listing {
                items,
                truncated,
                fresh_for: crate::tools::freshness(fresh.flatten(), notifies),
            })
        })
        .await
    }

    /// Runs `request` on the current connection, when the server offers
    /// `offer`: waits while it restarts and for a call slot, then under the
    /// server's call timeout.
    /// Refuses `what` on a server that acts for each user
    /// (`auth.token_exchange`): only its tool calls carry a user's token,
    /// and its content is never read with the connection's own credentials.
    fn not_per_user(&self, what: &str) -> Result<()> {
        match self.live() {
            Some(live) if live.exchange.is_some() => Err(Error::CallerToken {
                server: self.name().to_owned(),
                what: what.to_owned(),
                error: Box::new(crate::AuthError::Other(
                    "the server acts for each user (auth.token_exchange), and only its tools are called for a user; read its resources and prompts through its tools".to_owned(),
                )),
            }),
            _ => Ok(()),
        }
    }

    async fn request<T, F, Fut>(&self, what: String, offer: Offer, request: F) -> Result<T>
    where
        F: FnOnce(Arc<Connection>) -> Fut,
        Fut: Future<Output = std::result::Result<T, Failure>>,
    {
        let server = self.name().to_owned();
        let Some(live) = self.live() else {
            return Err(Error::NotConnected { server });
        };
        let timeout = Duration::from_millis(self.limits().call_timeout_ms);
        live.ready(&server, timeout).await?;
        let conn = live.connection();
        if !offer.offered(&conn.capabilities) {
            return Err(Error::NotOffered {
                server,
                what: offer.word(),
            });
        }
        let Ok(_slot) = live.slots.clone().acquire_owned().await else {
            return Err(Error::NotConnected { server });
        };
        match tokio::time::timeout(timeout, request(conn.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Failure::Ours(e))) => Err(e),
            Ok(Err(Failure::Asked(asked))) => Err(Error::InputRequired {
                server,
                tool: what,
                asked: Box::new(asked),
            }),
            Ok(Err(Failure::Service(rmcp::ServiceError::McpError(e)))) => Err(Error::Refused {
                server,
                what,
                code: e.code.0,
                message: e.message.into_owned(),
                data: e.data.map(Box::new),
            }),
            // A connection lost under it says what happened to the server.
            Ok(Err(Failure::Service(e))) => {
                Err(crate::call::failed(&server, &conn, &what, e).await)
            }
            Err(_) => Err(Error::Timeout {
                server,
                tool: what,
                after: timeout,
            }),
        }
    }
}
