//! One tool call: a slot, a timeout, the server's progress updates,
//! `notifications/cancelled` when the caller stops waiting, and the rounds
//! of a server that answers `input_required` (SEP-2322) before its result.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, InputRequest,
    InputRequiredResult, InputResponses, JsonObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;

use crate::connect::transport_words;
use crate::error::{Error, Result};
use crate::handler::ProgressSink;
use crate::live::{Cancels, Connection, Live};

/// At most this many `input_required` answers to one call before it
/// counts as failed: a server that keeps asking never gets a loop.
pub(crate) const MAX_INPUT_ROUNDS: usize = 8;

/// Calls `tool` on `server`, connected as `live`, with `arguments`, passing
/// each progress update the server sends about it to `progress`: waits
/// while the server restarts and for a slot, then runs under `timeout`,
/// and cancels the request on the server when the wait is abandoned. A
/// server that answers `input_required` gets its input requests answered
/// (elicitations by the connection's [`Elicitor`]) and the call sent again
/// with the answers and its `requestState` echoed unchanged, each round a
/// new request, all within `timeout`.
pub(crate) async fn call(
    live: &Live,
    server: &str,
    tool: &str,
    arguments: JsonObject,
    timeout: Duration,
    progress: Option<&ProgressSink>,
) -> Result<CallToolResult> {
    // One deadline covers the whole call: the wait while the server is
    // restarted, the wait for a slot and every round.
    let deadline = tokio::time::Instant::now() + timeout;
    // A call that comes in while the server is being restarted waits
    // for it (within its timeout); one to a server that is down fails.
    live.ready(server, timeout).await?;
    let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    // Wait for a slot first, within the same timeout: a call queued behind
    // busy slots is never sent once its time is up.
    let slot = tokio::time::timeout_at(deadline, live.slots.clone().acquire_owned()).await;
    let _slot = match slot {
        Ok(Ok(slot)) => slot,
        Ok(Err(_)) => {
            return Err(Error::NotConnected {
                server: server.to_owned(),
            });
        }
        Err(_) => {
            return Err(Error::Busy {
                server: server.to_owned(),
                tool: tool.to_owned(),
                after: timeout,
            });
        }
    };
    let conn = live.connection();
    let timed_out = || Error::Timeout {
        server: server.to_owned(),
        tool: tool.to_owned(),
        after: timeout,
    };
    // Under `relaying`, the server's questions go back to the caller, and
    // a retry's answers come with the first request.
    let relay = crate::relay::relayed();
    if let Some(Some(resume)) = &relay {
        params.input_responses = resume.responses.clone();
        params.request_state = resume.state.clone();
    }
    let rounds = async {
        for _ in 0..MAX_INPUT_ROUNDS {
            match round(live, &conn, server, tool, params.clone(), progress).await? {
                ServerResult::CallToolResult(result) => return Ok(bound_blocks(result)),
                ServerResult::InputRequiredResult(asked) if relay.is_some() => {
                    return Err(Error::InputRequired {
                        server: server.to_owned(),
                        tool: tool.to_owned(),
                        asked: Box::new(asked),
                    });
                }
                ServerResult::InputRequiredResult(asked) => {
                    let (responses, state) = answer(&conn, server, tool, asked).await?;
                    params.input_responses = responses;
                    params.request_state = state;
                }
                // An empty result (`{}`): a call that produced no content.
                ServerResult::EmptyResult(_) => return Ok(CallToolResult::default()),
                _ => {
                    return Err(failed(
                        server,
                        &conn,
                        tool,
                        rmcp::ServiceError::UnexpectedResponse,
                    )
                    .await);
                }
            }
        }
        Err(Error::Call {
            server: server.to_owned(),
            tool: tool.to_owned(),
            message: format!(
                "the server still asked for input after {MAX_INPUT_ROUNDS} rounds of answers"
            ),
        })
    };
    // The time a person spends answering the server's elicitations does
    // not count: the deadline moves out by it, for as long as one waits.
    let asking = conn.handler.asking.clone();
    let waited_before = asking.waited();
    let mut rounds = std::pin::pin!(rounds);
    let mut until = deadline;
    loop {
        match tokio::time::timeout_at(until, &mut rounds).await {
            Ok(outcome) => return outcome,
            Err(_) => {
                let moved = deadline + asking.waited().saturating_sub(waited_before);
                let now = tokio::time::Instant::now();
                if moved <= now {
                    return Err(timed_out());
                }
                // While a form is open the deadline keeps moving: look again
                // at most every 100 ms, not in a spin.
                until = moved.max(now + Duration::from_millis(100));
            }
        }
    }
}

/// At most this many content blocks of a result are kept: a server's
/// answer of many small blocks costs a bounded number of per-block
/// structures (each block's digest, size and copy) past this step.
pub(crate) const MAX_CONTENT_BLOCKS: usize = 1000;

/// `result` with at most [`MAX_CONTENT_BLOCKS`] content blocks: the blocks
/// past the limit are dropped, and a last text block says how many.
fn bound_blocks(mut result: CallToolResult) -> CallToolResult {
    let total = result.content.len();
    if total > MAX_CONTENT_BLOCKS {
        result.content.truncate(MAX_CONTENT_BLOCKS - 1);
        result.content.shrink_to_fit();
        result.content.push(rmcp::model::ContentBlock::text(format!(
            "core-agent left out {} of the {total} content blocks the server sent (at most {MAX_CONTENT_BLOCKS} are kept)",
            total - (MAX_CONTENT_BLOCKS - 1)
        )));
    }
    result
}

/// One `tools/call` request of a call, with the progress sink registered
/// for its token and the request cancelled on the server when it is
/// dropped unanswered (the caller's timeout, Ctrl-C).
async fn round(
    live: &Live,
    conn: &Connection,
    server: &str,
    tool: &str,
    params: CallToolRequestParams,
    progress: Option<&ProgressSink>,
) -> Result<ServerResult> {
    // On 2026-07-28 the log level travels with each request.
    let mut params = params;
    if conn.listener.is_some()
        && let Some(level) = live.log_level.lock().ok().and_then(|l| *l)
    {
        params
            .meta
            .get_or_insert_with(Default::default)
            .set_log_level(level);
    }
    crate::meta::extend(&mut params.meta);
    let mut request = CallToolRequest::new(params);
    // A server that acts for each user gets this call's user's token.
    if let Some(exchange) = &live.exchange {
        match crate::behalf::credential(exchange).await {
            Ok(credential) => {
                request.extensions.insert(credential);
            }
            Err(error) => {
                return Err(Error::CallerToken {
                    server: server.to_owned(),
                    what: tool.to_owned(),
                    error: Box::new(error),
                });
            }
        }
    }
    let request = ClientRequest::CallToolRequest(request);
    let handle = match conn
        .peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(e) => return Err(failed(server, conn, tool, e).await),
    };
    let token = handle.progress_token.clone();
    if let Some(sink) = progress
        && let Ok(mut sinks) = live.progress.lock()
    {
        sinks.insert(token.clone(), sink.clone());
    }
    // Unregistered however the call ends, dropped mid-way included.
    let _registered = progress.map(|_| Unregister(&live.progress, token));
    // A request handle sends nothing when dropped: this guard tells the
    // server when the call's future is dropped (Ctrl-C) or times out.
    let mut abandoned = CancelOnDrop(Some((
        conn.peer.clone(),
        handle.id.clone(),
        live.cancels.clone(),
    )));
    let outcome = handle.await_response().await;
    abandoned.0 = None;
    drop(abandoned);
    if progress.is_some() {
        // Notifications are handled on their own tasks: let the last ones land.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
    match outcome {
        Ok(result) => Ok(result),
        Err(e) => Err(failed(server, conn, tool, e).await),
    }
}

/// The answers to an `input_required` result and the state to echo: each
/// elicitation answered by the connection's elicitor, a roots request by
/// its `Roots` (no roots without one), sampling by its `Sampler` (without
/// one, it fails the call). A result that asks for nothing and carries no
/// state is a protocol error (a retry would be the same request again).
#[allow(deprecated)] // sampling and roots (SEP-2577), which servers still use
pub(crate) async fn answer(
    conn: &Connection,
    server: &str,
    tool: &str,
    asked: InputRequiredResult,
) -> Result<(Option<InputResponses>, Option<String>)> {
    let refused = |message: String| Error::Call {
        server: server.to_owned(),
        tool: tool.to_owned(),
        message,
    };
    let requests = asked.input_requests.unwrap_or_default();
    if requests.is_empty() && asked.request_state.is_none() {
        return Err(refused(
            "the server answered input_required without input requests or request state".to_owned(),
        ));
    }
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let value = match request {
            InputRequest::Elicitation(request) => {
                let result = conn.elicitor.elicit(server, request.params).await;
                serde_json::to_value(result)
            }
            InputRequest::ListRoots(_) => {
                let roots = match &conn.roots {
                    Some(roots) => roots.roots(server).await,
                    None => Vec::new(),
                };
                serde_json::to_value(rmcp::model::ListRootsResult::new(roots))
            }
            InputRequest::CreateMessage(request) => match &conn.sampler {
                Some(sampler) => match sampler.sample(server, request.params).await {
                    Ok(result) => serde_json::to_value(result),
                    Err(e) => {
                        return Err(refused(format!(
                            "the server asked for sampling, which was refused: {}",
                            e.message
                        )));
                    }
                },
                None => {
                    return Err(refused(
                        "the server asked for sampling (sampling/createMessage), which this client does not offer"
                            .to_owned(),
                    ));
                }
            },
            // A kind of input this rmcp release knows and this client does not.
            _ => {
                return Err(refused(format!(
                    "the server asked for input `{key}` of a kind this client does not offer"
                )));
            }
        }
        .map_err(|e| refused(format!("cannot encode the answer to `{key}`: {e}")))?;
        responses.insert(key, value);
    }
    Ok((
        (!responses.is_empty()).then_some(responses),
        asked.request_state,
    ))
}

/// The error for a call that failed with `e`: when the connection ended
/// under it (a crash), what happened to the server, else `e` itself.
pub(crate) async fn failed(
    server: &str,
    conn: &Connection,
    tool: &str,
    e: rmcp::ServiceError,
) -> Error {
    // A stdio server that cannot be written to is gone; over HTTP a
    // send error is one request's (a 500, a body past the limit) and
    // the connection goes on.
    let stdio = conn.exit.is_some();
    let lost = match &e {
        rmcp::ServiceError::TransportClosed => true,
        rmcp::ServiceError::TransportSend(_) => stdio,
        _ => false,
    };
    if !stdio && let rmcp::ServiceError::TransportSend(send) = &e {
        return Error::Call {
            server: server.to_owned(),
            tool: tool.to_owned(),
            message: transport_words(send),
        };
    }
    // Stopping a crashed child and reading its stderr takes a moment.
    if lost && let Some((ending, next)) = conn.ending(Duration::from_secs(5)).await {
        return Error::Crashed {
            server: server.to_owned(),
            tool: tool.to_owned(),
            how: ending.how,
            next,
            stderr: ending.stderr,
        };
    }
    Error::Call {
        server: server.to_owned(),
        tool: tool.to_owned(),
        message: e.to_string(),
    }
}

/// Removes a call's progress sink when the call ends.
struct Unregister<'a>(
    &'a crate::handler::ProgressSinks,
    rmcp::model::ProgressToken,
);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        if let Ok(mut sinks) = self.0.lock() {
            sinks.remove(&self.1);
        }
    }
}

/// Sends `notifications/cancelled` for a request whose caller stopped
/// waiting (its future dropped, or its timeout passed), unless disarmed.
struct CancelOnDrop(Option<(rmcp::Peer<RoleClient>, rmcp::model::RequestId, Cancels)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, id, cancels)) = self.0.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let notification =
            rmcp::model::CancelledNotification::new(rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("request abandoned by the caller".to_owned()),
            ));
        // Drop cannot await: the send runs on a task of its own, which
        // ends once the notification is written (or the connection is gone).
        let send = async move {
            let notification = rmcp::model::ClientNotification::CancelledNotification(notification);
            let _ =
                tokio::time::timeout(Duration::from_secs(1), peer.send_notification(notification))
                    .await;
        };
        if let Ok(mut cancels) = cancels.lock() {
            cancels.spawn_on(send, &runtime);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_keeps_at_most_so_many_blocks_and_says_how_many_were_left_out() {
        let many = CallToolResult::success(vec![rmcp::model::ContentBlock::text(""); 500_000]);
        let bounded = bound_blocks(many);
        assert_eq!(bounded.content.len(), MAX_CONTENT_BLOCKS);
        let last = serde_json::to_value(&bounded.content[MAX_CONTENT_BLOCKS - 1]).unwrap();
        assert_eq!(
            last["text"],
            "core-agent left out 499001 of the 500000 content blocks the server sent (at most 1000 are kept)"
        );
        let few = CallToolResult::success(vec![rmcp::model::ContentBlock::text("a"); 3]);
        assert_eq!(bound_blocks(few).content.len(), 3);
    }
}
