//! The permission gate's asks, put to the MCP client as an elicitation.

use std::time::Duration;

use core_agent_permissions::{Answer, AskFuture, Prompter};
use rmcp::service::ElicitationError;
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde::Deserialize;

/// The client's answer to "Approve <tool>?".
#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct Approval {
    /// `yes` runs this call, `always` every call of this tool for the rest
    /// of the session, `no` refuses it.
    answer: Choice,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "lowercase")]
enum Choice {
    Yes,
    No,
    Always,
}

rmcp::elicit_safe!(Approval);

/// Asks the session's client, when it declared form elicitation; refuses
/// otherwise (the refusal's advice then says how to allow the tool).
pub(crate) struct ElicitPrompter {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for ElicitPrompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitPrompter")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Prompter for ElicitPrompter {
    fn ask<'a>(&'a self, tool: &'a str, detail: &'a str) -> AskFuture<'a> {
        Box::pin(async move {
            if !self
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                return Answer::No;
            }
            let message = format!(
                "core-agent: approve `{tool}`? (yes / no / always for this session)\n{detail}"
            );
            match self
                .peer
                .elicit_with_timeout::<Approval>(message, Some(self.timeout))
                .await
            {
                Ok(Some(Approval {
                    answer: Choice::Yes,
                })) => Answer::Yes,
                Ok(Some(Approval {
                    answer: Choice::Always,
                })) => Answer::Always,
                Ok(_) | Err(ElicitationError::UserDeclined | ElicitationError::UserCancelled) => {
                    Answer::No
                }
                Err(e) => {
                    tracing::info!("the approval of {tool} could not be asked: {e}");
                    Answer::No
                }
            }
        })
    }
}
