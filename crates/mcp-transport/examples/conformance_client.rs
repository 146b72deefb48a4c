//! A minimal MCP client on this crate, for the official client conformance
//! suite (`cargo xtask conformance`).
//!
//! The harness runs `conformance_client <server-url>` with the scenario in
//! `MCP_CONFORMANCE_SCENARIO`. The client connects over streamable HTTP,
//! lists the tools, calls each tool it knows how to call (accepting
//! elicitations with the schema's defaults), and shuts down. Exit 0 when
//! every step worked.
//!
//! For the `auth/*` scenarios it first logs in the way `core-agent mcp
//! login` does ([`oauth::login`], into a temporary credentials directory),
//! with the [`oauth::Headless`] browser, which follows the harness's
//! auto-approving `/authorize` redirect; the session then gets its tokens
//! (and any scope step-up) from the stored credentials. A pre-registered
//! client comes from `MCP_CONFORMANCE_CONTEXT`; the client ID metadata
//! document URL is the one the harness expects.

#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use core_agent_mcp_config::{
    AuthSpec, Dialect, HttpSpec, OAuthSpec, ProcessEnv, Scope, ServerEntry, ServerSpec, Template,
    Transport,
};
use core_agent_mcp_transport::model::JsonObject;
use core_agent_mcp_transport::oauth::{
    self, CredentialsDir, Headless, LoginOptions, OAuthSettings,
};
use core_agent_mcp_transport::{AcceptDefaults, Servers, StartOptions, Status};
use serde_json::{Value, json};

/// The client ID metadata document URL `auth/basic-cimd` expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

#[tokio::main]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance_client <server-url>");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let mut options = StartOptions::default().with_elicitor(Arc::new(AcceptDefaults));
    let mut auth = None;
    // Lives until the end of main: the credentials are removed with it.
    let mut _credentials = None;
    if scenario.starts_with("auth/") {
        let Ok(dir) = tempfile::tempdir() else {
            eprintln!("{scenario}: cannot create a temporary directory");
            return ExitCode::FAILURE;
        };
        let spec = oauth_spec();
        let credentials = CredentialsDir::new(dir.path());
        let file = credentials.file("conformance", &url);
        let settings = OAuthSettings::from_spec(&spec, &ProcessEnv);
        if let Err(e) = oauth::login(&file, &settings, &Headless, &LoginOptions::default()).await {
            eprintln!("{scenario}: login failed: {e}");
            return ExitCode::FAILURE;
        }
        options = options
            .with_credentials(Some(credentials))
            .with_browser(Some(Arc::new(Headless)));
        auth = Some(AuthSpec::OAuth(spec));
        _credentials = Some(dir);
    }
    let entry = ServerEntry {
        name: "conformance".into(),
        scope: Scope::Project,
        source: PathBuf::from("<conformance>"),
        dialect: Dialect::Core,
        spec: ServerSpec::new(Transport::Http(HttpSpec {
            url,
            headers: Default::default(),
            auth,
        })),
    };
    let servers =
        Servers::start(std::slice::from_ref(&entry), &ProcessEnv, &options, &|_| {}).await;
    let mut ok = true;
    if let Some(server) = servers.get("conformance") {
        if server.status() == Status::Connected {
            // The calls the scenario asks for, else one of each listed tool.
            let calls = context_calls().unwrap_or_else(|| {
                server
                    .tools()
                    .iter()
                    .map(|tool| {
                        let args = match tool.name.as_ref() {
                            "add_numbers" => json!({"a": 5, "b": 3}),
                            _ => json!({}),
                        };
                        (tool.name.to_string(), object(args))
                    })
                    .collect()
            });
            for (name, args) in calls {
                match server.call_tool(&name, args, options.timeout).await {
                    Ok(result) if result.is_error != Some(true) => {}
                    Ok(result) => {
                        eprintln!("{scenario}: {name} reported an error: {:?}", result.content);
                        ok = false;
                    }
                    Err(e) => {
                        eprintln!("{scenario}: {e}");
                        ok = false;
                    }
                }
            }
        } else {
            eprintln!(
                "{scenario}: {}",
                server.error().map(ToString::to_string).unwrap_or_default()
            );
            ok = false;
        }
    }
    servers.shutdown().await;
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The harness's context (`MCP_CONFORMANCE_CONTEXT`), `null` without one.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null)
}

/// The tool calls the scenario's context names (`toolCalls`: name and
/// arguments), in order.
fn context_calls() -> Option<Vec<(String, JsonObject)>> {
    let calls = context().get("toolCalls")?.as_array()?.clone();
    Some(
        calls
            .into_iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?.to_owned();
                let args = call.get("arguments").cloned().unwrap_or(json!({}));
                Some((name, object(args)))
            })
            .collect(),
    )
}

fn object(value: Value) -> JsonObject {
    value.as_object().cloned().unwrap_or_default()
}

/// `auth.oauth` for the harness: its pre-registered client, if it gives one
/// in `MCP_CONFORMANCE_CONTEXT`, and the metadata document URL it expects.
fn oauth_spec() -> OAuthSpec {
    let context = context();
    let field = |name: &str| context.get(name).and_then(Value::as_str).map(str::to_owned);
    let mut spec = OAuthSpec {
        client_id: field("client_id"),
        client_metadata_url: Some(CLIENT_METADATA_URL.to_owned()),
        ..OAuthSpec::default()
    };
    spec.client_secret =
        field("client_secret").and_then(|s| Template::parse(&s.replace("${", "$${")).ok());
    spec
}
