//! The gate step: the permission gate's decision, asking where it asks.

use std::sync::RwLock;

use core_agent_permissions::{Answer, Decision, Gate, Prompter, Request, Rule};

use crate::observe::Verdict;
use crate::{Error, Result};

/// The gate step: the session's gate decides the call, and the `prompter`
/// answers where the gate asks ("always" allows the tool for the rest of
/// the session). The gate is only read unless an answer changes it. The
/// verdict says which rule decided, or what the answer was.
pub(crate) async fn gate(
    gate: &RwLock<Gate>,
    prompter: &dyn Prompter,
    request: Request<'_>,
) -> (Verdict, Result<()>) {
    let (decision, rule) = match gate.read() {
        Ok(gate) => gate.decide_with_rule(request),
        Err(_) => (
            Decision::Deny {
                reason: "the permission gate is unavailable".into(),
                advice: "retry".into(),
            },
            Rule::NotAllowed,
        ),
    };
    let Request {
        namespace, name, ..
    } = request;
    match decision {
        Decision::Allow => (Verdict::Allowed { rule: Some(rule) }, Ok(())),
        Decision::Deny { reason, advice } => (
            Verdict::Denied { rule },
            Err(Error::Denied {
                name: name.to_owned(),
                reason,
                advice,
                unanswered_ask: false,
            }),
        ),
        Decision::Ask { detail } => match prompter.ask(name, &detail).await {
            answer @ Answer::Yes => (Verdict::Asked { answer }, Ok(())),
            answer @ Answer::Always => {
                if let Ok(mut gate) = gate.write() {
                    gate.allow_for_session(name);
                }
                (Verdict::Asked { answer }, Ok(()))
            }
            answer @ Answer::No => {
                let config_file = gate.read().map(|g| g.config_file()).unwrap_or_default();
                (
                    Verdict::Asked { answer },
                    Err(Error::Denied {
                        name: name.to_owned(),
                        reason: format!(
                            "`{name}` needs approval (permissions.mode is \"ask\") and was not approved"
                        ),
                        advice: format!(
                            "approve it when asked, or add \"{namespace}:{name}\" to permissions.allow in {config_file}"
                        ),
                        unanswered_ask: true,
                    }),
                )
            }
        },
    }
}
