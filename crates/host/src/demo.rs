//! A small MCP server for trying core-agent with nothing installed:
//! `core-agent demo-server` serves it on stdin/stdout.
//!
//! Its tools cover the cases a host must handle: a read-only lookup, a
//! mutating call, a tool that reports an error, and a large JSON listing.
//! Beside them it offers one resource (`demo://inventory/summary`) and one
//! prompt (`restock`, argument `sku`), for the gateway's resources and
//! prompts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorData, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerCapabilities,
    ServerConfig,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::json;

/// How many items `list_inventory` returns.
pub const INVENTORY_ITEMS: usize = 200;

/// The demo's one resource: a short summary of the inventory.
pub const SUMMARY_URI: &str = "demo://inventory/summary";

/// The demo server's state: the notes added this session.
#[derive(Clone)]
pub struct DemoServer {
    notes: Arc<AtomicUsize>,
    tool_router: ToolRouter<DemoServer>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct LookupArgs {
    /// The SKU to look up, such as `SKU-0042`.
    sku: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct NoteArgs {
    /// The note's text.
    text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct DivideArgs {
    /// The dividend.
    a: f64,
    /// The divisor; must not be zero.
    b: f64,
}

#[tool_router]
impl DemoServer {
    /// A fresh demo server with no notes.
    pub fn new() -> Self {
        DemoServer {
            notes: Arc::new(AtomicUsize::new(0)),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Look up one inventory item by SKU.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn lookup_item(&self, Parameters(args): Parameters<LookupArgs>) -> CallToolResult {
        match inventory()
            .into_iter()
            .find(|item| item["sku"] == args.sku.as_str())
        {
            Some(item) => CallToolResult::success(vec![ContentBlock::text(item.to_string())]),
            None => CallToolResult::error(vec![ContentBlock::text(format!(
                "no item with SKU `{}`; SKUs run from SKU-0001 to SKU-{INVENTORY_ITEMS:04}",
                args.sku
            ))]),
        }
    }

    #[tool(
        description = "List every inventory item with its details (a large JSON document).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_inventory(&self) -> String {
        json!({ "items": inventory(), "total": INVENTORY_ITEMS }).to_string()
    }

    #[tool(
        description = "Add a note to this session's notebook.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn add_note(&self, Parameters(args): Parameters<NoteArgs>) -> String {
        let n = self.notes.fetch_add(1, Ordering::SeqCst) + 1;
        format!("saved note #{n}: {}", args.text)
    }

    #[tool(
        description = "Divide a by b. Fails when b is zero.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn divide(&self, Parameters(args): Parameters<DivideArgs>) -> CallToolResult {
        if args.b == 0.0 {
            CallToolResult::error(vec![ContentBlock::text(
                "cannot divide by zero; pass a non-zero `b`",
            )])
        } else {
            CallToolResult::success(vec![ContentBlock::text((args.a / args.b).to_string())])
        }
    }
}

impl Default for DemoServer {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "core-agent-demo",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("A demo inventory: look items up, list them all, take notes.")
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let summary = Resource::new(SUMMARY_URI, "inventory summary")
            .with_description("How many items the demo inventory holds, by status.")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![summary]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != SUMMARY_URI {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}; the demo has {SUMMARY_URI}", request.uri),
                None,
            ));
        }
        let items = inventory();
        let count = |status: &str| items.iter().filter(|i| i["status"] == status).count();
        let text = format!(
            "{} items: {} in stock, {} backordered, {} discontinued",
            items.len(),
            count("in_stock"),
            count("backordered"),
            count("discontinued")
        );
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, SUMMARY_URI)]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let sku = PromptArgument::new("sku")
            .with_description("The SKU to restock, such as `SKU-0042`.")
            .with_required(true);
        let restock = Prompt::new(
            "restock",
            Some("Plan the restocking of one inventory item."),
            Some(vec![sku]),
        );
        Ok(ListPromptsResult::with_all_items(vec![restock]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "restock" {
            return Err(ErrorData::invalid_params(
                format!("no prompt {}; the demo has restock", request.name),
                None,
            ));
        }
        let sku = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("sku"))
            .and_then(|v| v.as_str())
            .ok_or_else(|| ErrorData::invalid_params("restock needs the argument `sku`", None))?;
        let message = PromptMessage::new_text(
            Role::User,
            format!("Look up {sku} with lookup_item, then plan how many to order."),
        );
        Ok(GetPromptResult::new(vec![message]).into())
    }
}

/// The demo inventory: deterministic, about 47 KB as JSON.
fn inventory() -> Vec<serde_json::Value> {
    const COLORS: [&str; 5] = ["red", "green", "blue", "black", "white"];
    const STATUS: [&str; 3] = ["in_stock", "backordered", "discontinued"];
    (1..=INVENTORY_ITEMS)
        .map(|i| {
            json!({
                "id": i,
                "sku": format!("SKU-{i:04}"),
                "name": format!("Widget {i}"),
                "status": STATUS[i % STATUS.len()],
                "color": COLORS[i % COLORS.len()],
                "price_cents": 199 + (i * 37) % 5000,
                "stock": (i * 7) % 120,
                "tags": ["demo", COLORS[i % COLORS.len()]],
                "description": format!("Widget {i} is a demo item used to show how core-agent handles large tool results."),
            })
        })
        .collect()
}

/// Serves the demo server on stdin/stdout until the client disconnects.
pub async fn serve_stdio() -> std::io::Result<()> {
    let service = DemoServer::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

impl std::fmt::Debug for DemoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoServer")
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(result: &CallToolResult) -> String {
        let value = serde_json::to_value(result).unwrap();
        value["content"][0]["text"].as_str().unwrap().to_owned()
    }

    #[test]
    fn the_inventory_is_deterministic_and_large() {
        let items = inventory();
        assert_eq!(items, inventory());
        assert_eq!(items.len(), INVENTORY_ITEMS);
        let skus: Vec<&str> = items.iter().map(|i| i["sku"].as_str().unwrap()).collect();
        let want: Vec<String> = (1..=INVENTORY_ITEMS)
            .map(|i| format!("SKU-{i:04}"))
            .collect();
        assert_eq!(skus, want);
        let bytes = serde_json::to_string(&items).unwrap().len();
        // Large enough to be digested (> 8000 bytes), about 47 KB as documented.
        assert!((40_000..55_000).contains(&bytes), "{bytes} bytes");
    }

    #[test]
    fn tools_are_annotated_for_the_host() {
        let server = DemoServer::new();
        let mut tools: Vec<(String, Option<bool>, Option<bool>)> = server
            .tool_router
            .list_all()
            .into_iter()
            .map(|t| {
                let a = t.annotations.unwrap_or_default();
                (t.name.to_string(), a.read_only_hint, a.destructive_hint)
            })
            .collect();
        tools.sort();
        assert_eq!(
            tools,
            [
                ("add_note".to_owned(), Some(false), Some(false)),
                ("divide".to_owned(), Some(true), None),
                ("list_inventory".to_owned(), Some(true), None),
                ("lookup_item".to_owned(), Some(true), None),
            ]
        );
    }

    #[tokio::test]
    async fn divide_fails_only_on_zero() {
        let server = DemoServer::new();
        let table = [
            (1.0, 4.0, Some(false), "0.25"),
            (-9.0, 3.0, Some(false), "-3"),
            (0.0, 5.0, Some(false), "0"),
            (
                1.0,
                0.0,
                Some(true),
                "cannot divide by zero; pass a non-zero `b`",
            ),
            (
                1.0,
                -0.0,
                Some(true),
                "cannot divide by zero; pass a non-zero `b`",
            ),
        ];
        for (a, b, is_error, want) in table {
            let result = server.divide(Parameters(DivideArgs { a, b })).await;
            assert_eq!(result.is_error, is_error, "{a} / {b}");
            assert_eq!(text(&result), want, "{a} / {b}");
        }
    }

    #[tokio::test]
    async fn lookup_finds_skus_in_range_only() {
        let server = DemoServer::new();
        let table = [
            ("SKU-0001", Some(1)),
            ("SKU-0200", Some(200)),
            ("SKU-0000", None),
            ("SKU-0201", None),
            ("sku-0001", None),
            ("", None),
        ];
        for (sku, id) in table {
            let result = server
                .lookup_item(Parameters(LookupArgs { sku: sku.into() }))
                .await;
            match id {
                Some(id) => {
                    assert_eq!(result.is_error, Some(false), "{sku}");
                    let item: serde_json::Value = serde_json::from_str(&text(&result)).unwrap();
                    assert_eq!(item["id"], id, "{sku}");
                }
                None => {
                    assert_eq!(result.is_error, Some(true), "{sku}");
                    assert_eq!(
                        text(&result),
                        format!("no item with SKU `{sku}`; SKUs run from SKU-0001 to SKU-0200")
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn notes_are_numbered_per_server_and_shared_by_clones() {
        let server = DemoServer::new();
        let clone = server.clone();
        let other = DemoServer::default();
        let note = |text: &str| Parameters(NoteArgs { text: text.into() });
        assert_eq!(server.add_note(note("a")).await, "saved note #1: a");
        assert_eq!(clone.add_note(note("b")).await, "saved note #2: b");
        assert_eq!(other.add_note(note("c")).await, "saved note #1: c");
    }

    #[tokio::test]
    async fn the_listing_holds_every_item() {
        let listing: serde_json::Value =
            serde_json::from_str(&DemoServer::new().list_inventory().await).unwrap();
        assert_eq!(listing["total"], INVENTORY_ITEMS);
        assert_eq!(listing["items"], serde_json::Value::Array(inventory()));
    }
}
