//! The servers a host starts and the catalog of their tools.

use super::*;

#[tokio::test]
async fn start_reports_every_server_in_config_order() {
    let ready = Mutex::new(Vec::new());
    let env: BTreeMap<String, String> = BTreeMap::new();
    let host = Host::start(
        &config(vec![
            demo("demo"),
            stdio("missing", "/nonexistent/mcp-server", &[]),
        ]),
        &env,
        HostOptions::default(),
        &|s, summary| {
            let tools = summary.map(ToString::to_string);
            ready
                .lock()
                .unwrap()
                .push(format!("{} {tools:?}", s.name()))
        },
    )
    .await;
    let mut heard = ready.into_inner().unwrap();
    heard.sort();
    assert_eq!(heard, ["demo Some(\"4 tools\")", "missing None"]);
    let names: Vec<&str> = host.servers().map(|s| s.name()).collect();
    assert_eq!(names, ["demo", "missing"]);

    let reports = host.server_reports(TrustLevel::Creator);
    assert_eq!(
        reports,
        [
            ServerReport {
                name: "demo".into(),
                transport: core_agent_host::TransportKind::Stdio,
                scope: core_agent_mcp_config::Scope::Project,
                status: core_agent_host::ServerStatus::Connected,
                tools: 4,
                listed: 4,
                left_out: Default::default(),
                error: None,
                restricted: 0,
                restricted_tools: vec![],
                warnings: vec![],
                auth: AuthStatus {
                    kind: "none".into(),
                    detail: None,
                },
                source: ".agents/mcp.json".into(),
            },
            ServerReport {
                name: "missing".into(),
                transport: core_agent_host::TransportKind::Stdio,
                scope: core_agent_mcp_config::Scope::Project,
                status: core_agent_host::ServerStatus::Error,
                tools: 0,
                listed: 0,
                left_out: Default::default(),
                error: Some("command not found: `/nonexistent/mcp-server`; install it or fix `command` (PATH is searched when it has no `/`)".into()),
                restricted: 0,
                restricted_tools: vec![],
                warnings: vec![],
                auth: AuthStatus {
                    kind: "none".into(),
                    detail: None,
                },
                source: ".agents/mcp.json".into(),
            },
        ]
    );
    // The JSON shape `core-agent mcp list --json` prints.
    expect![[r#"
        [
          {
            "name": "demo",
            "transport": "stdio",
            "scope": "project",
            "status": "connected",
            "tools": 4,
            "listed": 4,
            "left_out": {},
            "error": null,
            "restricted": 0,
            "restricted_tools": [],
            "warnings": [],
            "auth": {
              "kind": "none",
              "detail": null
            },
            "source": ".agents/mcp.json"
          },
          {
            "name": "missing",
            "transport": "stdio",
            "scope": "project",
            "status": "error",
            "tools": 0,
            "listed": 0,
            "left_out": {},
            "error": "command not found: `/nonexistent/mcp-server`; install it or fix `command` (PATH is searched when it has no `/`)",
            "restricted": 0,
            "restricted_tools": [],
            "warnings": [],
            "auth": {
              "kind": "none",
              "detail": null
            },
            "source": ".agents/mcp.json"
          }
        ]"#]]
    .assert_eq(&serde_json::to_string_pretty(&reports).unwrap());
    host.shutdown().await;
}

#[tokio::test]
async fn the_catalog_namespaces_every_connected_servers_tools() {
    let host = start(
        vec![
            demo("demo"),
            demo("inv.demo"),
            stdio("missing", "/nonexistent/mcp-server", &[]),
        ],
        HostOptions::default(),
    )
    .await;
    let catalog = host.catalog();
    assert!(catalog.warnings().is_empty());
    let routes: Vec<String> = catalog
        .entries()
        .iter()
        .map(|e| format!("{} -> {} / {}", e.name, e.server, e.tool))
        .collect();
    expect![[r#"
        demo_add_note -> demo / add_note
        demo_divide -> demo / divide
        demo_list_inventory -> demo / list_inventory
        demo_lookup_item -> demo / lookup_item
        inv_demo_add_note -> inv.demo / add_note
        inv_demo_divide -> inv.demo / divide
        inv_demo_list_inventory -> inv.demo / list_inventory
        inv_demo_lookup_item -> inv.demo / lookup_item"#]]
    .assert_eq(&routes.join("\n"));

    let reports = host.tool_reports(TrustLevel::Creator);
    let names: Vec<&str> = reports.iter().map(|r| r.name.as_str()).collect();
    let catalog_names: Vec<&str> = catalog.entries().iter().map(|e| e.name.as_str()).collect();
    // The built-ins come first, then the catalog.
    assert_eq!(names[..2], ["record_plan", "wait_and_verify"]);
    assert_eq!(names[2..], catalog_names);
    let divide = reports.iter().find(|r| r.name == "demo_divide").unwrap();
    assert_eq!(
        (
            divide.server.as_deref().unwrap_or_default(),
            divide.tool.as_str()
        ),
        ("demo", "divide")
    );
    assert_eq!(divide.description, "Divide a by b. Fails when b is zero.");
    assert_eq!(divide.input_schema["type"], "object");
    assert_eq!(
        divide.input_schema["properties"]["b"]["description"],
        "The divisor; must not be zero."
    );
    let keys: Vec<String> = serde_json::to_value(divide)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "server",
            "tool",
            "description",
            "input_schema",
            "read_only",
            "trust_levels",
            "why_restricted"
        ]
    );

    // Calls go to the server that published the name: each process counts its own notes.
    for (tool, want) in [
        ("demo_add_note", "saved note #1: a"),
        ("demo_add_note", "saved note #2: a"),
        ("inv_demo_add_note", "saved note #1: a"),
    ] {
        let result = host
            .call(tool, args(json!({"text": "a"})), TrustLevel::Creator)
            .await
            .unwrap();
        assert_eq!(text(&result), want, "{tool}");
    }
    host.shutdown().await;
}
