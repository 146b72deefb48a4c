//! The survey tools: listing, refusals, digests, timeouts, cancellation.

use super::*;

/// The survey tools over `root`, with the default limits.
fn survey_over(root: &std::path::Path) -> Option<core_agent_host::SurveyOptions> {
    Some(core_agent_host::SurveyOptions::new(root))
}

/// Host options with the survey tools over `root` and the digest on (a
/// store in memory).
fn digested_survey_over(root: &std::path::Path) -> HostOptions {
    HostOptions::default()
        .with_survey(survey_over(root))
        .with_digest(Some(DigestOptions::new(std::sync::Arc::new(
            core_agent_digest::MemoryStore::new(),
        ))))
}

const SURVEY_TOOLS: [&str; 4] = ["list_dir", "glob", "grep", "read_many_files"];

#[tokio::test]
async fn survey_tools_are_listed_and_grep_returns_json_records() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() {\n    serve();\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "# Demo\n").unwrap();
    let options = HostOptions::default().with_survey(survey_over(dir.path()));
    let host = start(Vec::new(), options).await;
    let reports = host.tool_reports(TrustLevel::Public);
    for name in SURVEY_TOOLS {
        let report = reports.iter().find(|r| r.name == name).unwrap();
        assert!(report.read_only && report.server.is_none(), "{name}");
        assert_eq!(report.trust_levels.len(), 4, "{name} is open to all");
        let tool = core_agent_survey::Tool::from_name(name).unwrap();
        assert_eq!(report.description, tool.description());
        assert_eq!(report.input_schema, core_agent_survey::input_schema(tool));
    }

    let found = host
        .call(
            "grep",
            args(json!({"pattern": r"serve\("})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_ne!(found.is_error, Some(true), "{found:?}");
    let value: Value = serde_json::from_str(&text(&found)).unwrap();
    assert_eq!(
        value["matches"],
        json!([{"path": "src/main.rs", "line": 2, "text": "    serve();"}])
    );
    assert_eq!((&value["total"], &value["files"]), (&json!(1), &json!(1)));

    let listed = host
        .call("list_dir", args(json!({"path": "."})), TrustLevel::Public)
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&listed)).unwrap();
    assert_eq!(value["entries"][0]["path"], "src");

    let read = host
        .call(
            "read_many_files",
            args(json!({"paths": ["README.md"]})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&read)).unwrap();
    assert_eq!(value["files"][0]["text"], "# Demo\n");
    host.shutdown().await;
}

#[tokio::test]
async fn survey_refusals_are_tool_errors_naming_the_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let options = HostOptions::default().with_survey(survey_over(dir.path()));
    let host = start(Vec::new(), options).await;
    let root = dir.path().canonicalize().unwrap();
    let escape = host
        .call(
            "read_many_files",
            args(json!({"paths": ["../secret"]})),
            TrustLevel::Public,
        )
        .await
        .unwrap();
    assert_eq!(escape.is_error, Some(true));
    let message = text(&escape);
    assert!(message.contains("outside the root"), "{message}");
    assert!(message.contains(&root.display().to_string()), "{message}");

    for (tool, arguments, says) in [
        ("grep", json!({"pattern": "("}), "bad regex"),
        ("glob", json!({"pattern": "[z-a]"}), "bad glob"),
        (
            "list_dir",
            json!({"depth": "deep"}),
            "bad arguments for `list_dir`",
        ),
        (
            "glob",
            json!({"pattern": "*", "extra": 1}),
            "bad arguments for `glob`",
        ),
    ] {
        let result = host
            .call(tool, args(arguments), TrustLevel::Public)
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(true), "{tool}");
        assert!(text(&result).contains(says), "{tool}: {}", text(&result));
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_large_grep_is_digested_and_retrieve_raw_returns_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..5000).map(|i| format!("needle {i}\n")).collect();
    std::fs::write(dir.path().join("hay.txt"), lines).unwrap();
    let host = start(Vec::new(), digested_survey_over(dir.path())).await;
    let session = host.host.session(approving());
    let found = session
        .call("grep", args(json!({"pattern": "needle"})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&found)).unwrap();
    let call_id = envelope["call_id"].as_str().expect("a digest envelope");
    assert!(envelope["raw_bytes"].as_u64().unwrap() > 8000, "{envelope}");
    let raw = session
        .call("retrieve_raw", args(json!({"call_id": call_id})))
        .await
        .unwrap();
    let value: Value = serde_json::from_str(&text(&raw)).unwrap();
    assert_eq!(value["total"], 5000);
    assert_eq!(value["matches"].as_array().unwrap().len(), 500);
    assert_eq!(value["matches"][0]["text"], "needle 0");
    let total = session
        .call(
            "retrieve_raw",
            args(json!({"call_id": call_id, "pointer": "/total"})),
        )
        .await
        .unwrap();
    assert_eq!(text(&total), "5000");
    host.shutdown().await;
}

#[tokio::test]
async fn with_the_survey_off_its_tools_are_unknown() {
    let host = start(Vec::new(), HostOptions::default()).await;
    let names: Vec<String> = host
        .tool_reports(TrustLevel::Creator)
        .into_iter()
        .map(|r| r.name)
        .collect();
    for name in SURVEY_TOOLS {
        assert!(!names.iter().any(|n| n == name), "{name} is listed");
        let err = host
            .call(name, args(json!({"pattern": "x"})), TrustLevel::Creator)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnknownTool { .. }), "{name}: {err}");
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_survey_call_past_the_call_timeout_is_cancelled_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        let lines: String = (0..200).map(|j| format!("line {j} of {i}\n")).collect();
        std::fs::write(dir.path().join(format!("f{i}.txt")), lines).unwrap();
    }
    let options = HostOptions::default()
        .with_survey(survey_over(dir.path()))
        .with_call_timeout(Some(Duration::ZERO));
    let host = start(Vec::new(), options).await;
    let err = host
        .call(
            "grep",
            args(json!({"pattern": "line"})),
            TrustLevel::Creator,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimedOut { .. }), "{err}");
    assert!(
        err.to_string().contains("did not finish within 0 ms"),
        "{err}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_survey_root_that_cannot_be_used_turns_the_tools_off_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let options = HostOptions::default().with_survey(survey_over(&dir.path().join("missing")));
    let host = start(Vec::new(), options).await;
    assert_eq!(host.survey_root(), None);
    let warnings = host.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("survey: the survey tools are off")),
        "{warnings:?}"
    );
    host.shutdown().await;
}

/// A digest of a grep with thousands of matches keeps what the model needs
/// to act on it: the first and the last records returned, each with its
/// path and line number whole, and the counts.
#[tokio::test]
async fn a_digested_grep_keeps_the_first_and_last_matches_with_paths_and_lines() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..20 {
        let sub = dir.path().join(format!("pkg{f:02}/src"));
        std::fs::create_dir_all(&sub).unwrap();
        let lines: String = (1..=300)
            .map(|i| format!("let needle_{i} = compute({f}, {i}); // padding to make a line\n"))
            .collect();
        std::fs::write(sub.join("lib.rs"), lines).unwrap();
    }
    let host = start(Vec::new(), digested_survey_over(dir.path())).await;
    let session = host.host.session(approving());
    let found = session
        .call("grep", args(json!({"pattern": "needle_"})))
        .await
        .unwrap();
    let envelope: Value = serde_json::from_str(&text(&found)).unwrap();
    assert_eq!(envelope["method"], "structural_json", "{envelope}");
    let digest = envelope["digest"].as_str().unwrap();
    assert!(digest.len() < 8000, "{} bytes: {digest}", digest.len());
    let pruned: Value = serde_json::from_str(digest).unwrap_or_else(|e| panic!("{e}: {digest}"));
    // 6,000 matching lines; the first 500 records come back (20 files of
    // 300: pkg00 lines 1..=300, then pkg01 lines 1..=200).
    assert_eq!(pruned["total"], 6000, "{pruned:#}");
    assert_eq!(pruned["files"], 20, "{pruned:#}");
    let records = pruned["matches"].as_array().unwrap();
    let first = &records[0];
    assert_eq!(
        (&first["path"], &first["line"]),
        (&json!("pkg00/src/lib.rs"), &json!(1)),
        "{pruned:#}"
    );
    let last = records
        .iter()
        .rev()
        .find(|r| r.get("path").is_some())
        .unwrap();
    assert_eq!(
        (&last["path"], &last["line"]),
        (&json!("pkg01/src/lib.rs"), &json!(200)),
        "{pruned:#}"
    );
    host.shutdown().await;
}

/// Dropping a survey call's future stops its walk: with one blocking
/// thread, a second survey call can only run once the first has let go of
/// it, so it finishes long before the first walk would have ended.
#[test]
fn a_dropped_survey_call_stops_its_walk() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Two million matching lines: every one is a cancellation check.
    let lines: String = (0..2_000).map(|i| format!("hay {i}\n")).collect();
    for d in 0..10 {
        let sub = dir.path().join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(sub.join(format!("f{f}.txt")), &lines).unwrap();
        }
    }
    std::fs::write(dir.path().join("small.txt"), "x\n").unwrap();
    runtime.block_on(async {
        let options = HostOptions::default().with_survey(survey_over(dir.path()));
        let host = start(Vec::new(), options).await;
        let grep = || host.call("grep", args(json!({"pattern": "hay"})), TrustLevel::Creator);

        let started = std::time::Instant::now();
        let whole = grep().await.unwrap();
        let full = started.elapsed();
        let value: Value = serde_json::from_str(&text(&whole)).unwrap();
        assert_eq!(value["total"], 2_000_000);

        // Start the same walk, let it run a little, then drop its future.
        let dropped = tokio::time::timeout(full / 10, grep()).await;
        assert!(dropped.is_err(), "the walk ended before it was dropped");
        let after_drop = std::time::Instant::now();
        let small = host
            .call(
                "read_many_files",
                args(json!({"paths": ["small.txt"]})),
                TrustLevel::Creator,
            )
            .await
            .unwrap();
        let waited = after_drop.elapsed();
        assert_ne!(small.is_error, Some(true), "{small:?}");
        // Had the walk gone on, the read would have waited ~90 % of `full`.
        assert!(
            waited < full / 3,
            "the next survey call waited {waited:?}; a whole walk takes {full:?}"
        );
        host.shutdown().await;
    });
}
