//! The gate step: the permission gate's decision, asking where it asks.

use std::sync::RwLock;

use core_agent_permissions::{Answer, Decision, Gate, Prompter, Request};

use crate::{Error, Result};

/// The gate step: the session's gate decides the call, and the `prompter`
/// answers where the gate asks ("always" allows the tool for the rest of
/// the session). The gate is only read unless an answer changes it.
pub(crate) async fn gate(
    gate: &RwLock<Gate>,
    prompter: &dyn Prompter,
    request: Request<'_>,
) -> Result<()> {
    let decision = match gate.read() {
        Ok(gate) => gate.decide(request),
        Err(_) => Decision::Deny {
            reason: "the permission gate is unavailable".into(),
            advice: "retry".into(),
        },
    };
    let Request {
        namespace, name, ..
    } = request;
    match decision {
        Decision::Allow => Ok(()),
        Decision::Deny { reason, advice } => Err(Error::Denied {
            name: name.to_owned(),
            reason,
            advice,
            unanswered_ask: false,
        }),
        Decision::Ask { detail } => match prompter.ask(name, &detail).await {
            Answer::Yes => Ok(()),
            Answer::Always => {
                if let Ok(mut gate) = gate.write() {
                    gate.allow_for_session(name);
                }
                Ok(())
            }
            Answer::No => {
                let config_file = gate.read().map(|g| g.config_file()).unwrap_or_default();
                Err(Error::Denied {
                    name: name.to_owned(),
                    reason: format!(
                        "`{name}` needs approval (permissions.mode is \"ask\") and was not approved"
                    ),
                    advice: format!(
                        "approve it when asked, or add \"{namespace}:{name}\" to permissions.allow in {config_file}"
                    ),
                    unanswered_ask: true,
                })
            }
        },
    }
}
