//! A tiny stdio MCP server for this crate's integration tests.
//!
//! Tools:
//! - `echo {text}`: answers `text` (annotated read-only);
//! - `env {name}`: answers the value of that environment variable of this
//!   process, or the empty string when it is not set;
//! - `sleep {ms}`: sleeps, then answers `slept <ms> ms`; when
//!   `ECHO_SERVER_SLEEPING_FILE` is set, it first creates that file, so a
//!   test can act once the call is in the server;
//! - `ask`: asks for a form elicitation (`name` defaults to `John`, `age` to
//!   30, `note` has no default) and answers with the client's reply as JSON:
//!   on protocol 2026-07-28 as an `input_required` result (input `who`),
//!   answered by the client's retry; on older ones as an `elicitation/create`
//!   request in the middle of the call.
//!
//! When `ECHO_SERVER_PID_FILE` is set, the server writes its pid to that file
//! before it serves, so a test can check that the process is gone later.
//! When that file already existed (the server was started again), it also
//! lists the tool `reborn`, which answers `reborn`.

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::InputResponses;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, Implementation, InputRequest, InputRequests, InputRequiredResult,
    ServerCapabilities, ServerConfig, ServerRequest,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::json;

#[derive(Clone)]
struct EchoServer {
    tool_router: ToolRouter<EchoServer>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct TextArgs {
    /// The text to answer with.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct NameArgs {
    /// The environment variable to read.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct SleepArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[tool_router]
impl EchoServer {
    #[tool(
        description = "Echo the text back.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn echo(&self, Parameters(args): Parameters<TextArgs>) -> String {
        args.text
    }

    #[tool(description = "The value of an environment variable of this server process.")]
    async fn env(&self, Parameters(args): Parameters<NameArgs>) -> String {
        std::env::var(&args.name).unwrap_or_default()
    }

    #[tool(description = "Sleep, then answer.")]
    async fn sleep(&self, Parameters(args): Parameters<SleepArgs>) -> Result<String, ErrorData> {
        if let Some(path) = std::env::var_os("ECHO_SERVER_SLEEPING_FILE") {
            std::fs::write(path, "sleeping")
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        }
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        Ok(format!("slept {} ms", args.ms))
    }

    #[tool(description = "Listed only by a server started again: answers `reborn`.")]
    async fn reborn(&self) -> String {
        "reborn".to_owned()
    }

    #[tool(description = "Ask the client for a name and an age; answer with its reply.")]
    async fn ask(
        &self,
        InputResponses(responses): InputResponses,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let answered =
            |reply: String| CallToolResult::success(vec![ContentBlock::text(reply)]).into();
        if let Some(reply) = responses.as_ref().and_then(|r| r.get("who")) {
            return Ok(answered(reply.to_string()));
        }
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form",
            "message": "Who are you?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John"},
                    "age": {"type": "integer", "default": 30},
                    "note": {"type": "string"}
                }
            }
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let request = ElicitRequest::new(params);
        // No requests to the client mid-call from 2026-07-28 on: the call
        // answers what it needs, and the client calls again with it.
        if context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize())
        {
            let mut asked = InputRequests::new();
            asked.insert("who".to_owned(), InputRequest::Elicitation(request));
            return Ok(InputRequiredResult::from_input_requests(asked).into());
        }
        let reply = context
            .peer
            .send_request(ServerRequest::ElicitRequest(request))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        match reply {
            ClientResult::ElicitResult(result) => serde_json::to_string(&result)
                .map(answered)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None)),
            _ => Err(ErrorData::internal_error(
                "the client answered the elicitation with something else",
                None,
            )),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("echo-server", "0.0.0"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut tool_router = EchoServer::tool_router();
    let mut reborn = false;
    if let Some(path) = std::env::var_os("ECHO_SERVER_PID_FILE") {
        reborn = std::path::Path::new(&path).exists();
        std::fs::write(path, std::process::id().to_string())?;
    }
    if !reborn {
        tool_router.remove_route("reborn");
    }
    let service = EchoServer { tool_router }
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
