//! One tool call: a slot, a timeout, the server's progress updates, and
//! `notifications/cancelled` when the caller stops waiting.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, JsonObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;

use crate::connect::transport_words;
use crate::error::{Error, Result};
use crate::handler::ProgressSink;
use crate::live::{Cancels, Connection, Live};

/// Calls `tool` on `server`, connected as `live`, with `arguments`, passing
/// each progress update the server sends about it to `progress`: waits
/// while the server restarts and for a slot, then runs under `timeout`,
/// and cancels the request on the server when the wait is abandoned.
pub(crate) async fn call(
    live: &Live,
    server: &str,
    tool: &str,
    arguments: JsonObject,
    timeout: Duration,
    progress: Option<&ProgressSink>,
) -> Result<CallToolResult> {
    // A call that comes in while the server is being restarted waits
    // for it (within its timeout); one to a server that is down fails.
    live.ready(server, timeout).await?;
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    // Wait for a slot first: the timeout covers the call itself.
    let Ok(_slot) = live.slots.clone().acquire_owned().await else {
        return Err(Error::NotConnected {
            server: server.to_owned(),
        });
    };
    let conn = live.connection();
    let timed_out = || Error::Timeout {
        server: server.to_owned(),
        tool: tool.to_owned(),
        after: timeout,
    };
    let Some(sink) = progress else {
        return match tokio::time::timeout(timeout, conn.peer.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(failed(server, &conn, tool, e).await),
            Err(_) => Err(timed_out()),
        };
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = match conn
        .peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
    {
        Ok(handle) => handle,
        Err(e) => return Err(failed(server, &conn, tool, e).await),
    };
    let token = handle.progress_token.clone();
    if let Ok(mut sinks) = live.progress.lock() {
        sinks.insert(token.clone(), sink.clone());
    }
    // Unregistered however the call ends, dropped mid-way included.
    let _registered = Unregister(&live.progress, token);
    // A request handle sends nothing when dropped: this guard tells the
    // server when the call's future is dropped (Ctrl-C) or times out.
    let mut abandoned = CancelOnDrop(Some((
        conn.peer.clone(),
        handle.id.clone(),
        live.cancels.clone(),
    )));
    let outcome = tokio::time::timeout(timeout, handle.await_response()).await;
    if outcome.is_ok() {
        abandoned.0 = None;
    }
    drop(abandoned);
    // Notifications are handled on their own tasks: let the last ones land.
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    match outcome {
        Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
        Ok(Ok(_)) => Err(failed(server, &conn, tool, rmcp::ServiceError::UnexpectedResponse).await),
        Ok(Err(e)) => Err(failed(server, &conn, tool, e).await),
        Err(_) => Err(timed_out()),
    }
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
