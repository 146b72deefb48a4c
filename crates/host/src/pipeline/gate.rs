//! The gate step: the permission gate's decision, asking where it asks.

use std::sync::RwLock;

use core_agent_permissions::{Answer, Decision, Gate, Prompter, Request, Rule};

use crate::memory::{Fact, SessionMemory};
use crate::observe::Verdict;
use crate::{Error, Result};

/// A session's memory and its id, for the gate step.
#[derive(Clone, Copy)]
pub(crate) struct Remembering<'a> {
    pub(crate) memory: &'a dyn SessionMemory,
    pub(crate) session: &'a str,
}

impl Remembering<'_> {
    /// Applies what the memory holds for the session to `gate`: `true`
    /// when it holds anything (another process may have been answered since).
    pub(crate) fn recall_into(self, gate: &RwLock<Gate>) -> bool {
        let recalled = match self.memory.recall(self.session) {
            Ok(recalled) => recalled,
            Err(e) => {
                tracing::warn!(
                    "cannot recall session {}'s answers and plan ({e}); the gate decides without them",
                    self.session
                );
                return false;
            }
        };
        let Ok(mut gate) = gate.write() else {
            return false;
        };
        for tool in &recalled.always {
            gate.allow_for_session(tool);
        }
        if recalled.plan.is_some() {
            gate.record_plan();
        }
        !recalled.always.is_empty() || recalled.plan.is_some()
    }

    fn remember(self, fact: Fact<'_>) {
        if let Err(e) = self.memory.remember(self.session, fact) {
            tracing::warn!(
                "cannot keep session {}'s answer ({e}); another process continuing it will ask again",
                self.session
            );
        }
    }
}

/// The gate step: the session's gate decides the call, and the `prompter`
/// answers where the gate asks ("always" allows the tool for the rest of
/// the session). The gate is only read unless an answer changes it. The
/// verdict says which rule decided, or what the answer was.
#[cfg(test)]
pub(crate) async fn gate(
    gate: &RwLock<Gate>,
    prompter: &dyn Prompter,
    request: Request<'_>,
) -> (Verdict, Result<()>) {
    gate_remembering(gate, prompter, request, None).await
}

/// [`gate`], with the session's memory: before the gate asks, or refuses
/// for want of a plan, it recalls what another process continuing the
/// session was told; an "always" answer is kept there.
pub(crate) async fn gate_remembering(
    gate: &RwLock<Gate>,
    prompter: &dyn Prompter,
    request: Request<'_>,
    memory: Option<Remembering<'_>>,
) -> (Verdict, Result<()>) {
    let decide = || match gate.read() {
        Ok(gate) => gate.decide_with_rule(request),
        Err(_) => (
            Decision::Deny {
                reason: "the permission gate is unavailable".into(),
                advice: "retry".into(),
            },
            Rule::NotAllowed,
        ),
    };
    let (mut decision, mut rule) = decide();
    if let Some(memory) = memory
        && matches!(rule, Rule::Ask | Rule::PlanFirst)
        && memory.recall_into(gate)
    {
        (decision, rule) = decide();
    }
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
                if let Some(memory) = memory {
                    memory.remember(Fact::Always(name));
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
