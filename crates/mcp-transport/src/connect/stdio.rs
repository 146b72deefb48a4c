//! A stdio server: spawned in a process group of its own, then the
//! handshake over its pipes.

use std::collections::BTreeMap;
use std::time::Duration;

use core_agent_mcp_config::ServerEntry;

use super::handshake::{HandshakeError, Lifecycle, Started, handshake};
use super::words::init_message;
use crate::child::ChildProcess;
use crate::error::StartError;
use crate::handler::Handler;
use crate::options::StartOptions;
use crate::supervise::Ended;

pub(crate) async fn start_stdio(
    entry: &ServerEntry,
    handler: Handler,
    command: &str,
    args: &[String],
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    options: &StartOptions,
) -> Started {
    let began = tokio::time::Instant::now();
    match start_once(
        entry,
        handler.clone(),
        command,
        args,
        env,
        options,
        options.timeout,
        Lifecycle::Probe,
    )
    .await
    {
        // It speaks 2026-07-28 but answered the probe after rmcp gave up on
        // it (a slow start, as a Python server's on a loaded machine): once
        // more, with discover alone, in what is left of the start's time.
        Err(Retry::LateDiscover(first)) => {
            let left = options.timeout.saturating_sub(began.elapsed());
            if left.is_zero() {
                return Err(first);
            }
            tracing::debug!(server = %entry.name, "answered server/discover late; starting it again with discover alone");
            match start_once(
                entry,
                handler,
                command,
                args,
                env,
                options,
                left,
                Lifecycle::Discover,
            )
            .await
            {
                Ok(started) => Ok(started),
                Err(Retry::LateDiscover(e) | Retry::Failed(e)) => Err(e),
            }
        }
        Err(Retry::Failed(e)) => Err(e),
        Ok(started) => Ok(started),
    }
}

/// A failed start, and whether one with [`Lifecycle::Discover`] may work.
enum Retry {
    LateDiscover(StartError),
    Failed(StartError),
}

#[allow(clippy::too_many_arguments)]
async fn start_once(
    entry: &ServerEntry,
    handler: Handler,
    command: &str,
    args: &[String],
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    options: &StartOptions,
    timeout: Duration,
    lifecycle: Lifecycle,
) -> Result<
    (
        rmcp::service::RunningService<rmcp::RoleClient, Handler>,
        Option<ChildProcess>,
    ),
    Retry,
> {
    let (mut child, stdout, stdin) = ChildProcess::spawn(
        &entry.name,
        command,
        args,
        env,
        options.supervisor.as_ref(),
        &options.redactor,
        options.kill_grace,
        entry.spec.limits.max_message_bytes,
    )
    .await
    .map_err(Retry::Failed)?;
    // The filter already stops at the limit; rmcp's own cap (16 MiB by
    // default) must not drop a line the limit allows.
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin)
        .with_max_line_length(entry.spec.limits.max_message_bytes.saturating_add(2));
    let mut late = false;
    let error = match handshake(handler, transport, timeout, lifecycle).await {
        Some(Ok(service)) => return Ok((service, Some(child))),
        Some(Err(e)) => {
            late = matches!(e, HandshakeError::LateDiscover(_));
            // A child that died explains the failure better than the broken pipe did.
            let exited = match child.exited() {
                Some(status) => Some(status),
                None => child.wait_exit(Duration::from_millis(200)).await,
            };
            let mut stderr = child.stderr_lines().await;
            let stdout = child.stdout_noise();
            match (exited, e) {
                // It was stopped for a message past the limit: say so.
                (_, _) if child.stdout_overflow().is_some() => StartError::Initialize {
                    message: child.stdout_overflow().unwrap_or_default(),
                    stdout,
                    stderr,
                },
                // The supervisor could not start the command: it said why.
                (Some(Ended::Code(crate::supervise::NOT_FOUND)), _) if child.supervised() => {
                    StartError::NotFound {
                        command: command.to_owned(),
                    }
                }
                (Some(Ended::Code(crate::supervise::CANNOT_START)), _) if child.supervised() => {
                    StartError::Spawn {
                        command: command.to_owned(),
                        message: stderr.pop().unwrap_or_default(),
                    }
                }
                (Some(ended), _) => StartError::Exited {
                    status: ended.status(),
                    stdout,
                    stderr,
                },
                (None, HandshakeError::Init(e) | HandshakeError::LateDiscover(e)) => {
                    StartError::Initialize {
                        message: init_message(&e, None, &entry.name),
                        stdout,
                        stderr,
                    }
                }
                (None, HandshakeError::List(e)) => StartError::ListTools {
                    message: e.to_string(),
                },
            }
        }
        None => StartError::Timeout {
            after: options.timeout,
            stdout: child.stdout_noise(),
            stderr: child.stderr_lines().await,
        },
    };
    child.terminate(options.kill_grace).await;
    Err(if late {
        Retry::LateDiscover(error)
    } else {
        Retry::Failed(error)
    })
}
