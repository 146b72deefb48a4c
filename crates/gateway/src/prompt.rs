//! The permission gate's asks, put to the MCP client as an elicitation.

use std::time::Duration;

use core_agent_permissions::{Answer, AskFuture, Prompter};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, EnumSchema, InputRequest,
    InputRequiredResult, InputResponses,
};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};

/// The key of the approval in an input-required result (protocol 2026-07-28).
pub(crate) const APPROVAL_KEY: &str = "core-agent-approval";

/// The question put to the client about `tool`.
fn question(tool: &str, detail: &str) -> String {
    format!("core-agent: approve `{tool}`? (yes / no / always for this session)\n{detail}")
}

/// The approval form: one required field, `answer`, one of yes / no / always.
fn approval_form(tool: &str, detail: &str) -> Option<ElicitRequestParams> {
    let answers = EnumSchema::builder(["yes", "no", "always"].map(str::to_owned).to_vec())
        .description("yes runs this call; always also every later call of this tool in this session; no refuses it")
        .build();
    let schema = ElicitationSchema::builder()
        .required_enum_schema("answer", answers)
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question(tool, detail),
        requested_schema: schema,
    })
}

/// The gate's answer in a client's elicitation result (`ElicitResult` as JSON).
fn answer_of(result: &serde_json::Value) -> Answer {
    if result.get("action").and_then(serde_json::Value::as_str) != Some("accept") {
        return Answer::No;
    }
    match result
        .pointer("/content/answer")
        .and_then(serde_json::Value::as_str)
    {
        Some("yes") => Answer::Yes,
        Some("always") => Answer::Always,
        _ => Answer::No,
    }
}

/// For clients without sessions (2026-07-28): the approval asked for in an
/// input-required result, the client answering on its retry of the call.
pub(crate) fn approval_request(
    tool: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> Option<InputRequiredResult> {
    let form = approval_form(tool, &core_agent_permissions::detail(tool, arguments))?;
    let request = InputRequest::Elicitation(ElicitRequest::new(form));
    Some(InputRequiredResult::new(
        Some([(APPROVAL_KEY.to_owned(), request)].into()),
        None,
    ))
}

/// The client's answer in a retried call's `inputResponses`: `Some(true)`
/// for yes or always, `Some(false)` for anything else, `None` when absent.
pub(crate) fn approval_answer(responses: Option<&InputResponses>) -> Option<bool> {
    let response = responses?.get(APPROVAL_KEY)?;
    Some(answer_of(response) != Answer::No)
}

/// The answer given in advance, for a client without sessions: each of its
/// requests is a session of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered(pub(crate) bool);

impl Prompter for Answered {
    fn ask<'a>(&'a self, _tool: &'a str, _detail: &'a str) -> AskFuture<'a> {
        Box::pin(std::future::ready(if self.0 {
            Answer::Yes
        } else {
            Answer::No
        }))
    }
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
            let Some(form) = approval_form(tool, detail) else {
                return Answer::No;
            };
            match self
                .peer
                .create_elicitation_with_timeout(form, Some(self.timeout))
                .await
            {
                Ok(result) => answer_of(&serde_json::to_value(result).unwrap_or_default()),
                Err(e) => {
                    tracing::info!("the approval of {tool} could not be asked: {e}");
                    Answer::No
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_approval_asks_for_one_answer_and_reads_it_back() {
        let request = approval_request(
            "demo_divide",
            &serde_json::Map::from_iter([("a".to_owned(), json!(1))]),
        )
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .unwrap_or_default();
        let form = &request["inputRequests"][APPROVAL_KEY]["params"];
        assert_eq!(form["mode"], "form");
        assert_eq!(form["requestedSchema"]["required"], json!(["answer"]));
        assert!(
            form["message"]
                .as_str()
                .unwrap_or_default()
                .contains("demo_divide")
        );
        let answer =
            |v: serde_json::Value| approval_answer(Some(&[(APPROVAL_KEY.to_owned(), v)].into()));
        assert_eq!(
            answer(json!({"action": "accept", "content": {"answer": "yes"}})),
            Some(true)
        );
        assert_eq!(
            answer(json!({"action": "accept", "content": {"answer": "always"}})),
            Some(true)
        );
        assert_eq!(
            answer(json!({"action": "accept", "content": {"answer": "no"}})),
            Some(false)
        );
        assert_eq!(answer(json!({"action": "decline"})), Some(false));
        assert_eq!(approval_answer(None), None);
    }
}
