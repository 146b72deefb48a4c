//! What the commands that start servers share: how stdio servers are
//! supervised, when a crashed server is restarted, the elicitor used
//! without a terminal.

use std::time::Duration;

use core_agent_mcp_transport::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use core_agent_mcp_transport::{BoxFuture, Elicitor, describe_request};

use crate::render::clean;

/// How stdio servers are launched: through `core-agent __supervise`, so a
/// `kill -9` of core-agent still stops them (directly when the binary's
/// path cannot be found).
pub(crate) fn supervisor() -> Option<core_agent_mcp_transport::Supervisor> {
    match core_agent_mcp_transport::Supervisor::current_exe() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!(
                "core-agent: cannot find its own path ({e}); stdio servers are started without a supervisor"
            );
            None
        }
    }
}

/// Restarting crashed servers, for long-lived runs (`serve`, `call --batch`):
/// 1 s, 2 s, 4 s … at most 5 restarts in 10 minutes. The first delay can be
/// set in milliseconds with `CORE_AGENT_RESTART_DELAY_MS` (the tests do).
pub(crate) fn restart_policy() -> core_agent_mcp_transport::RestartPolicy {
    let mut policy = core_agent_mcp_transport::RestartPolicy::default();
    if let Some(ms) = std::env::var("CORE_AGENT_RESTART_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        policy.first_delay = Duration::from_millis(ms);
    }
    policy
}

pub(crate) fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s))
}

/// Declines every elicitation with a one-line notice on stderr.
pub(crate) struct NoticeDecline;

impl Elicitor for NoticeDecline {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        eprintln!(
            "core-agent: mcp: {server}: declined an elicitation request ({}); no terminal to ask on",
            clean(&describe_request(&request))
        );
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}
