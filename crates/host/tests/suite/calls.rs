//! Calls: results, tool errors, unknown names, timeouts, shutdown, options.

use super::*;

#[tokio::test]
async fn calls_return_the_tools_results() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table = [
        ("demo_divide", json!({"a": 1, "b": 4}), "0.25"),
        ("demo_divide", json!({"a": -9, "b": 3}), "-3"),
        (
            "demo_add_note",
            json!({"text": "buy milk"}),
            "saved note #1: buy milk",
        ),
    ];
    for (tool, arguments, want) in table {
        let result = host
            .call(tool, args(arguments.clone()), TrustLevel::Creator)
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{tool} {arguments}");
        assert_eq!(text(&result), want, "{tool} {arguments}");
    }

    let result = host
        .call(
            "demo_lookup_item",
            args(json!({"sku": "SKU-0042"})),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    let item: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(
        (item["id"].as_u64(), item["sku"].as_str()),
        (Some(42), Some("SKU-0042"))
    );

    let result = host
        .call(
            "demo_list_inventory",
            JsonObject::new(),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    let listing = text(&result);
    assert!(listing.len() > 8000, "{} bytes", listing.len());
    let listing: Value = serde_json::from_str(&listing).unwrap();
    assert_eq!(listing["total"], 200);
    assert_eq!(listing["items"].as_array().map(Vec::len), Some(200));
    host.shutdown().await;
}

#[tokio::test]
async fn a_tool_that_reports_failure_is_ok_with_is_error() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table = [
        (
            "demo_divide",
            json!({"a": 1, "b": 0}),
            "cannot divide by zero; pass a non-zero `b`",
        ),
        (
            "demo_lookup_item",
            json!({"sku": "SKU-9999"}),
            "no item with SKU `SKU-9999`; SKUs run from SKU-0001 to SKU-0200",
        ),
    ];
    for (tool, arguments, want) in table {
        let result = host
            .call(tool, args(arguments), TrustLevel::Creator)
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert_eq!(text(&result), want, "{tool}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn an_unknown_name_suggests_close_ones() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    let table: [(&str, &[&str], &str); 6] = [
        (
            "demo_divid",
            &["demo_divide"],
            "no tool named `demo_divid`; did you mean `demo_divide`?",
        ),
        (
            "add_note",
            &["demo_add_note"],
            "no tool named `add_note`; did you mean `demo_add_note`?",
        ),
        (
            "add-note",
            &["demo_add_note"],
            "no tool named `add-note`; did you mean `demo_add_note`?",
        ),
        (
            "divide",
            &["demo_divide"],
            "no tool named `divide`; did you mean `demo_divide`?",
        ),
        (
            "frobnicate",
            &[],
            "no tool named `frobnicate`; list the tools with tools/list",
        ),
        ("", &[], "no tool named ``; list the tools with tools/list"),
    ];
    for (name, want, message) in table {
        let err = host
            .call(name, JsonObject::new(), TrustLevel::Creator)
            .await
            .unwrap_err();
        match &err {
            Error::UnknownTool {
                name: got,
                suggestions,
            } => {
                assert_eq!(got, name);
                assert_eq!(suggestions, want, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(err.to_string(), message);
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_call_to_a_stuck_server_times_out_as_a_call_error() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "echo $$ > '{}'; exec '{}'",
        pid_file.display(),
        demo_server()
    );
    let options = HostOptions::default().with_call_timeout(Some(Duration::from_millis(300)));
    let host = start(vec![stdio("demo", "sh", &["-c", &script])], options).await;
    assert_eq!(host.catalog().entries().len(), 4);
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let number: i32 = pid.parse().unwrap();

    // A stopped server reads nothing and answers nothing. Wait until the
    // kernel reports it stopped before calling.
    signal(&pid, "-STOP");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let state = core_agent_e2e::state(number);
        if state == Some('T') {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "server {pid} is not stopped 5 s after SIGSTOP (state {state:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    signal(&pid, "-CONT");
    assert!(
        matches!(
            &err,
            Error::Call(core_agent_mcp_transport::Error::Timeout { server, tool, .. })
                if server == "demo" && tool == "divide"
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`divide` on server `demo` did not answer within 300 ms; the request was cancelled"
    );
    // Once it runs again, so do calls.
    let result = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap();
    assert_eq!(text(&result), "0.5");
    host.shutdown().await;
}

#[tokio::test]
async fn after_shutdown_nothing_is_published() {
    let host = start(vec![demo("demo")], HostOptions::default()).await;
    assert_eq!(host.catalog().entries().len(), 4);
    // Built once: the same catalog until the tools change.
    assert!(std::sync::Arc::ptr_eq(&host.catalog(), &host.catalog()));
    let mut changes = host.subscribe();
    changes.mark_unchanged();
    host.shutdown().await;
    assert!(
        changes.has_changed().unwrap(),
        "subscribers hear of the change"
    );
    assert!(host.catalog().entries().is_empty());
    let reports = host.server_reports(TrustLevel::Creator);
    assert_eq!(reports.len(), 1);
    assert_ne!(reports[0].status, core_agent_host::ServerStatus::Connected);
    assert_eq!(reports[0].tools, 0);
    let err = host
        .call(
            "demo_divide",
            args(json!({"a": 1, "b": 2})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownTool { suggestions, .. } if suggestions.is_empty()),
        "{err:?}"
    );
    // Shutting down twice is harmless.
    host.shutdown().await;
}

#[test]
fn host_options_default_as_documented() {
    let options = HostOptions::default();
    assert_eq!(
        options.call_timeout, None,
        "each server's call_timeout_ms applies"
    );
    assert_eq!(options.start.timeout, Duration::from_secs(30));
}
