//! The permission gate's asks, put to the MCP client as an elicitation.

use std::time::Duration;

use core_agent_permissions::{Answer, AskFuture, Prompter};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, EnumSchema};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde::Deserialize;

/// The client's answer to "Approve <tool>?".
#[derive(Debug, Deserialize)]
struct Approval {
    answer: Choice,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Choice {
    Yes,
    No,
    Always,
}

/// The form of the ask: one required property, `answer`, a plain string
/// enum. Built by hand: the schema `schemars` derives for an enum field is a
/// `$ref` to a definition, which is not one of the primitive property schemas
/// elicitation allows, so rmcp refused to send it and no client was ever asked.
fn approval_schema() -> Result<ElicitationSchema, &'static str> {
    let answer = EnumSchema::builder(vec!["yes".into(), "no".into(), "always".into()])
        .title("Approve?")
        .description(
            "`yes` runs this call, `always` every call of this tool for the rest of the \
             session, `no` refuses it.",
        )
        .build();
    ElicitationSchema::builder()
        .required_enum_schema("answer", answer)
        .build()
}

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
            let requested_schema = match approval_schema() {
                Ok(schema) => schema,
                Err(e) => {
                    tracing::warn!("the approval form of {tool} could not be built: {e}");
                    return Answer::No;
                }
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            };
            let result = match self
                .peer
                .create_elicitation_with_timeout(params, Some(self.timeout))
                .await
            {
                Ok(result) => result,
                Err(e) => {
                    tracing::info!("the approval of {tool} could not be asked: {e}");
                    return Answer::No;
                }
            };
            if result.action != ElicitationAction::Accept {
                return Answer::No;
            }
            match result.content.map(serde_json::from_value::<Approval>) {
                Some(Ok(Approval {
                    answer: Choice::Yes,
                })) => Answer::Yes,
                Some(Ok(Approval {
                    answer: Choice::Always,
                })) => Answer::Always,
                Some(Ok(Approval { answer: Choice::No })) => Answer::No,
                Some(Err(e)) => {
                    tracing::info!("the approval of {tool} came back unreadable: {e}");
                    Answer::No
                }
                None => {
                    tracing::info!("the approval of {tool} was accepted with no answer");
                    Answer::No
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_form_is_one_required_string_enum() {
        let schema = serde_json::to_value(approval_schema().unwrap()).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], serde_json::json!(["answer"]));
        let answer = &schema["properties"]["answer"];
        assert_eq!(answer["type"], "string");
        assert_eq!(answer["enum"], serde_json::json!(["yes", "no", "always"]));
        assert!(!schema.to_string().contains("$ref"), "{schema}");
    }
}
