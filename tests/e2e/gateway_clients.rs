//! `core-agent serve` driven by real MCP clients, not only our own: the
//! official TypeScript SDK (`@modelcontextprotocol/sdk`) and the Python SDK
//! (`mcp`), each over stdio (the client spawns `core-agent serve`) and over
//! streamable HTTP with a bearer token. Each client lists the tools, calls a
//! backend tool, gets a digest for a large result and fetches its raw payload
//! with `retrieve_raw`, is refused by a deny pattern, and approves the
//! elicitation an ask becomes. The scenarios are `tests/fixture/gateway_client.{mjs,py}`;
//! they print what they saw as JSON and the assertions are here.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_agent_e2e::{
    Project, bin, group_members, hermetic, node, processes_mentioning, python, root, ts_sdk,
};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::demo_server;

/// The bearer token of the HTTP tests (at least 16 characters).
pub(crate) const TOKEN: &str = "e2e-gateway-token-0123456789abcdef";

/// How long a whole client scenario may take.
const CLIENT_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
pub(crate) enum Sdk {
    TypeScript,
    Python,
}

impl Sdk {
    fn label(self) -> &'static str {
        match self {
            Sdk::TypeScript => "ts",
            Sdk::Python => "py",
        }
    }

    /// The interpreter and script, with what the script needs to find its SDK.
    fn command(self) -> Command {
        match self {
            Sdk::TypeScript => {
                let mut cmd = Command::new(node());
                hermetic(&mut cmd)
                    .arg(root().join("tests/fixture/gateway_client.mjs"))
                    .env("MCP_SDK_DIR", ts_sdk());
                cmd
            }
            Sdk::Python => {
                let mut cmd = Command::new(python());
                hermetic(&mut cmd).arg(root().join("tests/fixture/gateway_client.py"));
                cmd
            }
        }
    }
}

/// The demo server behind the gateway, with a digest threshold well under
/// `demo_list_inventory`'s 47 KB, and a gate that allows the lookups and the
/// listing, denies `demo_divide`, and asks about everything else.
fn project() -> Project {
    let p = Project::new(&json!({
        "version": 1,
        "agentic_wrap_threshold": 2000,
        "servers": {"demo": demo_server()},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {
            "mode": "ask",
            "allow": ["mcp:demo_lookup_item", "mcp:demo_list_inventory", "builtin:retrieve_raw"],
            "deny": ["mcp:demo_divide"],
        }})
        .to_string(),
    );
    p
}

/// `core-agent --agents-dir <project>/.agents`: the project's absolute path
/// on the command line lets a guard find the process whoever spawned it.
fn agents_dir(p: &Project) -> String {
    p.path().join(".agents").to_str().unwrap().to_owned()
}

/// Every client's scenario: wait until the demo server's tools are listed
/// (the gateway answers at once and lists a backend's tools when it has
/// started, with `notifications/tools/list_changed`), then make these calls.
fn scenario(sdk: Sdk) -> Value {
    json!({
        "wait_for_tools": ["demo_lookup_item", "demo_list_inventory", "demo_divide", "demo_add_note"],
        "calls": [
            {"name": "demo_lookup_item", "arguments": {"sku": "SKU-0042"}},
            {"name": "demo_list_inventory", "arguments": {}},
            {"name": "demo_divide", "arguments": {"a": 1, "b": 4}},
            {"name": "demo_add_note", "arguments": {"text": format!("approved by {}", sdk.label())}},
        ],
    })
}

/// A process started by a test, in its own process group. Dropping it (the
/// test passed or panicked) kills the group, waits for the child, and kills
/// whatever still mentions `needle` on its command line (the `core-agent
/// serve` a stdio client spawned, which the Python SDK puts in a session of
/// its own).
struct Guard {
    child: Child,
    needle: Option<String>,
    /// Ask politely first (SIGTERM, then up to 10 s) before SIGKILL.
    graceful: bool,
}

impl Guard {
    fn spawn(mut cmd: Command, needle: Option<String>, graceful: bool) -> Guard {
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        Guard {
            child,
            needle,
            graceful,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for the exit at most `limit`; `None` when it is still running.
    fn wait_for(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // A death by signal N reads as -N.
                return Some(
                    status
                        .code()
                        .unwrap_or_else(|| -status.signal().unwrap_or(0)),
                );
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.graceful && matches!(self.child.try_wait(), Ok(None)) {
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGTERM);
            let _ = self.wait_for(Duration::from_secs(10));
        }
        let _ = killpg(Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.wait();
        if let Some(needle) = &self.needle {
            for (pid, _) in processes_mentioning(needle) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Collects a pipe into a string on a thread of its own.
fn collect(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// What a client scenario printed, parsed, with its stderr for the messages.
pub(crate) struct Observed {
    pub(crate) json: Value,
    stderr: String,
    /// The processes the client spawned that were still running 15 s after
    /// it exited (before the guard killed them).
    left_behind: Vec<(i32, String)>,
}

/// Runs `sdk`'s scenario with `target` (`stdio DIR CMD…` or `http URL TOKEN`)
/// to completion, at most [`CLIENT_LIMIT`]; then kills what is left of it,
/// and whatever mentions `spawned` (what the client spawned).
fn run_client(p: &Project, sdk: Sdk, target: &[String], spawned: Option<String>) -> Observed {
    run_scenario(p, sdk, &scenario(sdk), target, spawned)
}

pub(crate) fn run_scenario(
    p: &Project,
    sdk: Sdk,
    scenario: &Value,
    target: &[String],
    spawned: Option<String>,
) -> Observed {
    let mut cmd = sdk.command();
    cmd.arg(scenario.to_string())
        .args(target)
        .current_dir(p.path())
        .env("HOME", p.path().join("home"))
        .env_remove("CORE_AGENT_LOG")
        .env_remove("CORE_AGENT_GATEWAY_TOKEN");
    let mut client = Guard::spawn(cmd, spawned, false);
    let stdout = collect(client.child.stdout.take().unwrap());
    let stderr = collect(client.child.stderr.take().unwrap());
    let code = client.wait_for(CLIENT_LIMIT);
    let left_behind = match (&code, &client.needle) {
        (Some(_), Some(needle)) => still_running(needle, Duration::from_secs(15)),
        _ => Vec::new(),
    };
    drop(client);
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    let code = code.unwrap_or_else(|| {
        panic!("the {sdk:?} client ran over {CLIENT_LIMIT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}")
    });
    let json: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("the {sdk:?} client printed no JSON ({e}), exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}")
    });
    assert!(
        code == 0 && json.get("fatal").is_none(),
        "the {sdk:?} client failed (exit {code}): {}\nstderr:\n{stderr}",
        json["fatal"]
    );
    Observed {
        json,
        stderr,
        left_behind,
    }
}

/// The processes mentioning `needle` that are still running after `limit`.
fn still_running(needle: &str, limit: Duration) -> Vec<(i32, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `core-agent serve --http 127.0.0.1:0` in the project, with its address
/// read from the line it prints, and its stderr kept.
pub(crate) struct HttpGateway {
    guard: Guard,
    pub(crate) url: String,
    stderr: Arc<Mutex<String>>,
}

impl HttpGateway {
    pub(crate) fn start(p: &Project) -> HttpGateway {
        HttpGateway::start_with(p, &[], &[])
    }

    /// [`HttpGateway::start`] with more arguments to `serve` and more
    /// environment variables.
    pub(crate) fn start_with(p: &Project, args: &[&str], env: &[(&str, &str)]) -> HttpGateway {
        let agents = agents_dir(p);
        let mut all = vec!["--agents-dir", &agents, "serve", "--http", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut cmd = p.command(&all);
        cmd.env("CORE_AGENT_GATEWAY_TOKEN", TOKEN);
        cmd.envs(env.iter().copied());
        let mut guard = Guard::spawn(cmd, None, true);
        let _stdout = collect(guard.child.stdout.take().unwrap());
        let pipe = guard.child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, address) = mpsc::channel();
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("serving MCP at ").nth(1) {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = found.send(url.to_owned());
                }
                let mut all = kept.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        let url = address
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "core-agent serve printed no address within 30 s:\n{}",
                    stderr.lock().unwrap()
                )
            });
        assert!(
            url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
            "{url}"
        );
        HttpGateway { guard, url, stderr }
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The process id of `core-agent serve`.
    pub(crate) fn pid(&self) -> i32 {
        self.guard.pid()
    }

    /// Stops it as an operator would (SIGTERM) and returns its exit code.
    pub(crate) fn stop(mut self) -> i32 {
        let _ = kill(Pid::from_raw(self.guard.pid()), Signal::SIGTERM);
        let code = self.guard.wait_for(Duration::from_secs(20));
        code.unwrap_or_else(|| panic!("core-agent serve ignored SIGTERM:\n{}", self.stderr()))
    }
}

fn over_stdio(sdk: Sdk) {
    let p = project();
    let agents = agents_dir(&p);
    let target = [
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        bin("core-agent").to_str().unwrap().to_owned(),
        "--agents-dir".to_owned(),
        agents.clone(),
        "serve".to_owned(),
    ];
    let observed = run_client(&p, sdk, &target, Some(agents));
    check(sdk, &observed, "");
    // Closing the session stopped the gateway (and so its backends).
    assert!(
        observed.left_behind.is_empty(),
        "core-agent serve still ran after its client closed: {:?}\nclient stderr:\n{}",
        observed.left_behind,
        observed.stderr
    );
}

fn over_http(sdk: Sdk) {
    let p = project();
    let gateway = HttpGateway::start(&p);
    let target = ["http".to_owned(), gateway.url.clone(), TOKEN.to_owned()];
    let observed = run_client(&p, sdk, &target, None);
    check(sdk, &observed, &gateway.stderr());
    let pid = gateway.guard.pid();
    let stderr = Arc::clone(&gateway.stderr);
    let code = gateway.stop();
    assert_eq!(code, 130, "stopped by SIGTERM:\n{}", stderr.lock().unwrap());
    assert!(
        group_members(pid).is_empty(),
        "serve left its process group behind"
    );
}

/// `value` with every long string cut, for failure messages.
fn brief(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > 400 => {
            let cut = (0..=400)
                .rev()
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0);
            Value::String(format!("{}… ({} bytes)", &s[..cut], s.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(brief).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), brief(v))).collect())
        }
        other => other.clone(),
    }
}

/// The assertions every client × transport shares.
fn check(sdk: Sdk, observed: &Observed, gateway_stderr: &str) {
    let o = &observed.json;
    let context = || {
        format!(
            "{sdk:?} client saw:\n{:#}\nclient stderr:\n{}\ngateway stderr:\n{gateway_stderr}",
            brief(o),
            observed.stderr
        )
    };
    assert_eq!(o["server"]["name"], "core-agent", "{}", context());

    // A listing that came before the demo server had started was followed
    // by a list_changed and a listing with its tools.
    let listings = o["listings"].as_u64().unwrap();
    assert!(
        listings >= 1 && o["list_changed"].as_u64().unwrap() >= listings - 1,
        "{}",
        context()
    );

    // tools/list: the namespaced backend tools and the built-ins, each with
    // the read-only class core-agent decided.
    let mut tools: Vec<(String, Value)> = o["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["readOnlyHint"].clone(),
            )
        })
        .collect();
    tools.sort_by(|a, b| a.0.cmp(&b.0));
    let expected: Vec<(String, Value)> = [
        ("demo_add_note", false),
        ("demo_divide", true),
        ("demo_list_inventory", true),
        ("demo_lookup_item", true),
        ("glob", true),
        ("grep", true),
        ("list_dir", true),
        ("read_many_files", true),
        ("record_plan", false),
        ("retrieve_raw", true),
        ("wait_and_verify", false),
    ]
    .into_iter()
    .map(|(name, ro)| (name.to_owned(), Value::Bool(ro)))
    .collect();
    assert_eq!(tools, expected, "{}", context());
    for t in o["tools"].as_array().unwrap() {
        if t["readOnlyHint"] == true {
            assert_eq!(t["destructiveHint"], false, "{t}\n{}", context());
        }
    }

    let calls = o["calls"].as_array().unwrap();
    let call = |name: &str| -> &Value {
        calls
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no call of {name}\n{}", context()))
    };

    // A small backend result comes back as it is.
    let lookup = call("demo_lookup_item");
    assert_eq!(lookup["isError"], false, "{}", context());
    assert!(lookup.get("envelope").is_none(), "{}", context());
    let item: Value = serde_json::from_str(lookup["text"].as_str().unwrap()).unwrap();
    assert_eq!(item["sku"], "SKU-0042", "{}", context());

    // A large one comes back as a digest envelope; retrieve_raw gives the
    // raw payload back whole.
    let listing = call("demo_list_inventory");
    assert_eq!(listing["isError"], false, "{}", context());
    let envelope = &listing["envelope"];
    let keys: Vec<&str> = envelope
        .as_object()
        .unwrap_or_else(|| panic!("no digest envelope\n{}", context()))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["digest", "raw_bytes", "method", "call_id"]);
    assert_eq!(envelope["method"], "structural_json");
    assert!(
        envelope["call_id"].as_str().unwrap().starts_with("call-"),
        "{envelope}"
    );
    let raw_bytes = envelope["raw_bytes"].as_u64().unwrap();
    assert!(raw_bytes > 2000, "{raw_bytes}");
    let raw = &listing["raw"];
    assert!(raw.get("error").is_none(), "{}", context());
    assert_eq!(raw["bytes"].as_u64(), Some(raw_bytes), "{}", context());
    assert_eq!(raw["pages"], 1, "47 KB fits one page of max_result_bytes");
    assert!(
        (envelope["digest"].as_str().unwrap().len() as u64) * 5 < raw_bytes,
        "the digest is at least 5× smaller"
    );
    let payload: Value = serde_json::from_str(raw["text"].as_str().unwrap()).unwrap();
    assert_eq!(payload["total"], 200);
    assert_eq!(payload["items"].as_array().unwrap().len(), 200);
    assert_eq!(payload["items"][41]["sku"], "SKU-0042");

    // A deny pattern refuses with a tool error that names it and its file.
    let divide = call("demo_divide");
    assert_eq!(divide["isError"], true, "{}", context());
    let refusal = divide["text"].as_str().unwrap();
    assert!(
        refusal.contains("`demo_divide` is denied by `mcp:demo_divide` in ")
            && refusal.contains(".agents/config.json"),
        "{}",
        context()
    );

    // The ask about the mutating tool reached the client as an elicitation
    // (the only one: the allowed and denied calls asked nothing); approved,
    // the call ran.
    let elicitations = o["elicitations"].as_array().unwrap();
    assert_eq!(elicitations.len(), 1, "{}", context());
    let message = elicitations[0]["message"].as_str().unwrap();
    assert!(
        message.contains("approve `demo_add_note`?"),
        "{}",
        context()
    );
    let schema = &elicitations[0]["requestedSchema"];
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(schema["required"], json!(["answer"]), "{schema}");
    assert_eq!(
        schema["properties"]["answer"]["enum"],
        json!(["yes", "no", "always"]),
        "{schema}"
    );
    let note = call("demo_add_note");
    assert_eq!(note["isError"], false, "{}", context());
    assert_eq!(
        note["text"],
        format!("saved note #1: approved by {}", sdk.label()),
        "{}",
        context()
    );
}

#[test]
fn typescript_sdk_client_over_stdio() {
    over_stdio(Sdk::TypeScript);
}

#[test]
fn typescript_sdk_client_over_http() {
    over_http(Sdk::TypeScript);
}

#[test]
fn python_sdk_client_over_stdio() {
    over_stdio(Sdk::Python);
}

#[test]
fn python_sdk_client_over_http() {
    over_http(Sdk::Python);
}

/// A backend's progress notifications reach the client that asked for them
/// (server-everything's long-running operation, 3 steps), before the result.
#[test]
fn progress_passes_through_to_the_client() {
    let p = Project::new(&json!({
        "version": 1,
        "servers": {"everything": crate::everything_stdio()},
    }));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"mode": "yolo"}}).to_string(),
    );
    let agents = agents_dir(&p);
    let tool = "everything_trigger_long_running_operation";
    let scenario = json!({
        "wait_for_tools": [tool],
        "calls": [{"name": tool, "arguments": {"duration": 0.6, "steps": 3}, "progress": true}],
    });
    let target = [
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        bin("core-agent").to_str().unwrap().to_owned(),
        "--agents-dir".to_owned(),
        agents.clone(),
        "serve".to_owned(),
    ];
    let observed = run_scenario(&p, Sdk::Python, &scenario, &target, Some(agents));
    let call = &observed.json["calls"][0];
    assert!(
        call["text"]
            .as_str()
            .unwrap_or_default()
            .contains("completed"),
        "{call}\n{}",
        observed.stderr
    );
    assert_eq!(
        call["progress"],
        json!([
            {"progress": 1.0, "total": 3.0},
            {"progress": 2.0, "total": 3.0},
            {"progress": 3.0, "total": 3.0},
        ]),
        "{call}"
    );
}

/// The catalog's warnings reach the people who can fix them: `serve` prints
/// each once on stderr, and a client (the Python SDK, over stdio) hears
/// each once as `notifications/message` at level `warning` — those of the
/// start (a `tool_notes` entry for a tool the demo server does not expose),
/// and those a rebuild brings (the fixture changes a pinned tool and adds
/// one, with `tools/list_changed`, once the client creates the file `go`).
#[test]
fn warnings_reach_a_client_and_stderr_once_each_also_after_a_rebuild() {
    let p = Project::empty();
    let go = p.path().join("go");
    let mut demo = demo_server();
    demo["tool_notes"] = json!({"nosuch": "A note for a tool the server does not have."});
    let mut fx = crate::fixture("grows");
    fx["pin"] = json!("warn");
    fx["env"] = json!({"FIXTURE_DESCRIPTION": "Answers questions."});
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"demo": demo.clone(), "fx": fx.clone()}}).to_string(),
    );
    // Pin `stable` as it is now.
    p.run(&["tools", "--json"]).expect_code(0);
    fx["env"]["FIXTURE_GROW_WHEN"] = json!(go);
    fx["env"]["FIXTURE_GROWN_DESCRIPTION"] = json!("Answers questions. Sends them on.");
    p.write(
        ".agents/mcp.json",
        &json!({"version": 1, "servers": {"demo": demo, "fx": fx}}).to_string(),
    );
    let agents = agents_dir(&p);
    let scenario = json!({
        "wait_for_tools": ["demo_divide", "fx_stable"],
        "warnings": 1,
        "touch": go,
        "then_wait_for_tools": ["fx_late"],
        "then_warnings": 2,
        "linger_ms": 500,
    });
    let target = [
        "stdio".to_owned(),
        p.path().to_str().unwrap().to_owned(),
        bin("core-agent").to_str().unwrap().to_owned(),
        "--agents-dir".to_owned(),
        agents.clone(),
        "serve".to_owned(),
    ];
    let observed = run_scenario(&p, Sdk::Python, &scenario, &target, Some(agents));
    let messages = observed.json["log_messages"].as_array().unwrap();
    let context = || format!("{messages:#?}\nstderr:\n{}", observed.stderr);
    assert_eq!(messages.len(), 2, "{}", context());
    let notes = &messages[0];
    assert_eq!(notes["level"], "warning", "{}", context());
    assert_eq!(notes["logger"], "core-agent", "{}", context());
    let notes = notes["data"].as_str().unwrap();
    assert!(
        notes.starts_with("mcp: demo: tool_notes names 1 ")
            && notes.contains("does not expose: nosuch"),
        "{}",
        context()
    );
    let changed = &messages[1];
    assert_eq!(changed["level"], "warning", "{}", context());
    let changed = changed["data"].as_str().unwrap();
    assert!(
        changed.contains("fx: tool `stable`") && changed.contains("Sends them on."),
        "{}",
        context()
    );
    // The gateway's stderr (the client's, which spawned it) has each once.
    for warning in [notes, changed] {
        let line = format!("core-agent: {warning}");
        assert_eq!(
            observed.stderr.lines().filter(|l| *l == line).count(),
            1,
            "{line}\n{}",
            context()
        );
    }
}
