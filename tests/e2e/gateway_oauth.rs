//! Signing in to `core-agent serve --http` with a real identity provider:
//! npm `oidc-provider` on loopback (`tests/fixture/oidc_provider.mjs`), its
//! JWT access tokens checked by the gateway against the provider's keys.
//! The official TypeScript SDK client signs in headlessly from the gateway's
//! 401 (`tests/fixture/oauth_client.mjs`); two users with different claims
//! see different catalogs and cannot read each other's payloads; tokens for
//! another audience or issuer, forged, expired or unsigned are refused; a
//! rotated key is picked up; keys already fetched outlive the provider, and
//! without one the answer is 503 with `Retry-After`.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use core_agent_e2e::{Project, bin, deps, hermetic, node, root, ts_sdk};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// The static token the gateway also accepts (creator, `default`).
pub(crate) const TOKEN: &str = "e2e-oauth-static-token-0123456789";

/// A process in its own group, killed with its group when dropped.
pub(crate) struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts `cmd`, and waits for a stdout or stderr line that `ready`
    /// turns into a value.
    pub(crate) fn start(
        mut cmd: Command,
        what: &str,
        ready: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> (Proc, String) {
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, said) = mpsc::channel();
        let ready = Arc::new(ready);
        for pipe in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let (found, ready, kept) = (found.clone(), ready.clone(), stderr.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Some(v) = ready(&line) {
                        let _ = found.send(v);
                    }
                    let mut all = kept.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        let proc = Proc { child, stderr };
        let value = said
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what} did not start within 30 s:\n{}", proc.output()));
        (proc, value)
    }

    pub(crate) fn output(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether its output holds `needle` within `limit`.
    pub(crate) fn waits_for(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.output().contains(needle) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    fn kill(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The OpenID provider.
pub(crate) struct Idp {
    proc: Proc,
    pub(crate) issuer: String,
}

impl Idp {
    pub(crate) fn start() -> Idp {
        let mut cmd = Command::new(node());
        hermetic(&mut cmd)
            .arg(root().join("tests/fixture/oidc_provider.mjs"))
            .env("NODE_MODULES", deps().join("npm/node_modules"));
        let (proc, line) = Proc::start(cmd, "oidc-provider", |line| {
            serde_json::from_str::<Value>(line).ok()?["issuer"]
                .as_str()
                .map(str::to_owned)
        });
        Idp { proc, issuer: line }
    }

    /// A token of `claims` signed with `key` (`k1`: the provider's own,
    /// `k2`: the next one, `forge`: one it never published, under `k1`'s kid).
    pub(crate) async fn sign(&self, key: &str, kid: Option<&str>, claims: Value) -> String {
        let body = json!({"claims": claims, "key": key, "kid": kid});
        let answer = http()
            .post(format!("{}/test/sign", self.issuer))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        v["token"].as_str().unwrap().to_owned()
    }

    async fn rotate(&self) {
        let r = http()
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    async fn jwks_fetches(&self) -> u64 {
        let r = http()
            .get(format!("{}/test/stats", self.issuer))
            .send()
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        v["jwks_fetches"].as_u64().unwrap()
    }
}

pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// A free loopback port (the gateway's audience names it before it listens).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The demo server behind a gateway that takes `issuer`'s tokens: group
/// `admins` → creator, `eng` → user, anyone else public; `demo_add_note`
/// only for creators; every token must grant `mcp:tools`.
fn project(issuer: &str, audience: &str) -> Project {
    project_with(issuer, audience, None)
}

/// [`project`], with `gateway.oauth.introspection` when given.
fn project_with(issuer: &str, audience: &str, introspection: Option<Value>) -> Project {
    let p = Project::empty();
    p.write(
        ".agents/mcp.json",
        &json!({
            "mcpServers": {"demo": {"command": bin("core-agent"), "args": ["demo-server"]}},
            "auggy": {"servers": {"demo": {"toolPolicies": {"add_note": {"allowedTrustLevels": ["creator"]}}}}}
        })
        .to_string(),
    );
    let mut oauth = json!({
        "issuer": issuer,
        "audience": audience,
        "leeway_secs": 5,
        "jwks_refresh_secs": 1,
        "scopes_supported": ["mcp:tools"],
        "required_scopes": ["mcp:tools"],
        "trust": [
            {"claim": "groups", "value": "admins", "level": "creator"},
            {"claim": "groups", "value": "eng", "level": "user"}
        ],
        "default": "public"
    });
    if let Some(introspection) = introspection {
        oauth["introspection"] = introspection;
    }
    p.write(
        ".agents/config.json",
        &json!({
            "permissions": {"mode": "ask", "allow": ["mcp:demo_*", "builtin:retrieve_raw"]},
            "gateway": {"oauth": oauth}
        })
        .to_string(),
    );
    p
}

/// `core-agent serve --http 127.0.0.1:PORT` in `p`, with the static token too.
pub(crate) fn gateway(p: &Project, port: u16) -> Proc {
    gateway_with(p, port, &[])
}

/// [`gateway`] with more environment variables.
pub(crate) fn gateway_with(p: &Project, port: u16, vars: &[(&str, &str)]) -> Proc {
    let agents = p.path().join(".agents");
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = p.command(&[
        "--agents-dir",
        agents.to_str().unwrap(),
        "serve",
        "--http",
        &addr,
        "--audit-log",
        p.path().join("audit.jsonl").to_str().unwrap(),
    ]);
    // Info lines too: each refusal's reason, each fetch of the keys (the
    // tests check that no token is among them).
    cmd.env("CORE_AGENT_GATEWAY_TOKEN", TOKEN)
        .env("CORE_AGENT_LOG", "info,rmcp=off")
        .envs(vars.iter().copied());
    Proc::start(cmd, "core-agent serve", |line| {
        line.contains("serving MCP at ").then(|| line.to_owned())
    })
    .0
}

/// The audit trail's lines once `enough` says they are all there (the
/// writer flushes as soon as its queue is empty; at most 10 s).
fn audit_lines(p: &Project, enough: impl Fn(&[Value]) -> bool) -> (String, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(p.path().join("audit.jsonl")).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if enough(&lines) || Instant::now() > deadline {
            return (text, lines);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the TypeScript SDK client as `user` with `scenario`.
fn ts_client(url: &str, user: &str, scenario: &Value) -> Value {
    let mut cmd = Command::new(node());
    hermetic(&mut cmd)
        .arg(root().join("tests/fixture/oauth_client.mjs"))
        .args([url, user, &scenario.to_string()])
        .env("MCP_SDK_DIR", ts_sdk())
        .stdin(Stdio::null());
    let started = Instant::now();
    let out = cmd.output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success() && v.get("fatal").is_none(),
        "the client failed as {user}: {}\n{}",
        v["fatal"],
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// An `initialize` POST to `url` with `authorization`: the status, the
/// `WWW-Authenticate` and `Retry-After` headers, and how long it took.
async fn initialize(
    url: &str,
    authorization: Option<&str>,
) -> (u16, String, Option<String>, Duration) {
    let mut r = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "e2e", "version": "0"}}})
            .to_string(),
        );
    if let Some(a) = authorization {
        r = r.header("authorization", a);
    }
    let started = Instant::now();
    let response = r.send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (www, retry) = (
        header("www-authenticate").unwrap_or_default(),
        header("retry-after"),
    );
    (response.status().as_u16(), www, retry, started.elapsed())
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a good access token for `aud` from `iss`, plus `extra`.
pub(crate) fn claims(iss: &str, aud: &str, extra: Value) -> Value {
    let mut c = json!({"iss": iss, "aud": aud, "sub": "dave", "exp": now() + 300, "iat": now(),
                       "scope": "mcp:tools", "groups": ["eng"], "client_id": "mcp-client"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_signs_in_from_the_401_and_users_see_their_own_catalog_and_payloads() {
    let idp = Idp::start();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let p = project(&idp.issuer, &audience);
    let gw = gateway(&p, port);
    assert!(
        gw.waits_for(
            &format!("clients sign in at {}", idp.issuer),
            Duration::from_secs(10)
        ),
        "{}",
        gw.output()
    );
    let all = ["demo_add_note", "demo_list_inventory", "demo_lookup_item"];
    let alice = ts_client(
        &audience,
        "alice",
        &json!({"wait_for_tools": all, "calls": [
            {"name": "demo_lookup_item", "arguments": {"sku": "SKU-0042"}},
            {"name": "demo_list_inventory"},
            {"name": "demo_add_note", "arguments": {"text": "from alice"}},
        ]}),
    );
    // Discovery from the 401, login, a token for the gateway's audience.
    let meta = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(alice["unauthorized"]["status"], 401, "{alice:#}");
    assert!(
        alice["unauthorized"]["www_authenticate"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Bearer resource_metadata=\"{meta}\"")),
        "{alice:#}"
    );
    assert_eq!(alice["authorize"]["resource"], audience.as_str());
    assert_eq!(alice["authorize"]["scope"], "mcp:tools");
    assert_eq!(
        (
            &alice["token"]["iss"],
            &alice["token"]["aud"],
            &alice["token"]["sub"]
        ),
        (&json!(idp.issuer), &json!(audience), &json!("alice"))
    );
    // alice is in `admins`: creator, so she sees and calls demo_add_note.
    let names: Vec<&str> = alice["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in all {
        assert!(names.contains(&t), "{names:?}");
    }
    let calls = alice["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert!(calls.iter().all(|c| c["isError"] == false), "{calls:#?}");
    assert!(
        calls[0]["text"].as_str().unwrap().contains("SKU-0042"),
        "{calls:#?}"
    );
    let call_id = calls[1]["envelope"]["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no digest envelope: {:#}", calls[1]))
        .to_owned();

    // bob (sales) is public: demo_add_note is not his, nor alice's payload.
    let bob = ts_client(
        &audience,
        "bob",
        &json!({"wait_for_tools": ["demo_lookup_item"], "calls": [
            {"name": "retrieve_raw", "arguments": {"call_id": call_id}},
            {"name": "demo_add_note", "arguments": {"text": "from bob"}},
        ]}),
    );
    assert_eq!(bob["token"]["sub"], "bob");
    let names: Vec<&str> = bob["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"demo_lookup_item") && !names.contains(&"demo_add_note"),
        "{names:?}"
    );
    let refused = &bob["calls"][0];
    assert!(
        refused["isError"] == true || refused.get("error").is_some(),
        "bob read alice's payload: {refused:#}"
    );
    assert!(
        !refused["text"]
            .as_str()
            .unwrap_or_default()
            .contains("SKU-0042"),
        "{refused:#}"
    );
    let not_his = &bob["calls"][1];
    assert!(
        not_his["isError"] == true || not_his.get("error").is_some(),
        "{not_his:#}"
    );

    // alice's own later session may read it.
    let again = ts_client(
        &audience,
        "alice",
        &json!({"calls": [{"name": "retrieve_raw", "arguments": {"call_id": call_id}}]}),
    );
    let read = &again["calls"][0];
    assert_eq!(read["isError"], false, "{read:#}");
    assert!(read["text"].as_str().unwrap().contains("SKU-"), "{read:#}");

    // /sessions (the static token is creator) shows who signed in.
    let sessions = http()
        .get(format!("http://127.0.0.1:{port}/sessions"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    let sessions: Value = serde_json::from_str(&sessions.text().await.unwrap()).unwrap();
    let owners: Vec<(&str, &str, &str)> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["identity"]["subject"].as_str().unwrap_or_default(),
                s["identity"]["email"].as_str().unwrap_or_default(),
                s["trust_level"].as_str().unwrap(),
            )
        })
        .collect();
    for want in [
        ("alice", "alice@example.com", "creator"),
        ("bob", "bob@example.com", "public"),
    ] {
        assert!(owners.contains(&want), "{want:?} not in {sessions:#}");
    }
    let owner = format!("oauth:{}#alice", idp.issuer);
    assert!(sessions.to_string().contains(&owner), "{sessions:#}");

    // The audit trail names each user, with the identity the provider gave.
    let call_of = |lines: &[Value], user: &str, tool: &str| -> Option<Value> {
        lines
            .iter()
            .find(|l| l["caller"]["identity"]["subject"] == user && l["name"] == tool)
            .cloned()
    };
    let (text, lines) = audit_lines(&p, |lines| {
        call_of(lines, "bob", "demo_add_note").is_some()
            && call_of(lines, "alice", "demo_add_note").is_some()
    });
    let alice_note = call_of(&lines, "alice", "demo_add_note")
        .unwrap_or_else(|| panic!("no line for alice's demo_add_note:\n{text}"));
    assert_eq!(
        alice_note["caller"]["trust_level"], "creator",
        "{alice_note}"
    );
    assert_eq!(
        alice_note["caller"]["identity"]["issuer"],
        idp.issuer.as_str()
    );
    assert_eq!(
        alice_note["caller"]["identity"]["email"],
        "alice@example.com"
    );
    assert_eq!(alice_note["outcome"], "ok", "{alice_note}");
    let bob_note = call_of(&lines, "bob", "demo_add_note")
        .unwrap_or_else(|| panic!("no line for bob's demo_add_note:\n{text}"));
    assert_eq!(bob_note["caller"]["trust_level"], "public");
    assert_eq!(bob_note["decision"], "restricted", "{bob_note}");
    drop(gw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_get_401_a_missing_scope_403_and_the_metadata_is_open() {
    let idp = Idp::start();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let p = project(&idp.issuer, &audience);
    let gw = gateway(&p, port);
    let iss = idp.issuer.as_str();

    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = http()
            .get(format!("http://127.0.0.1:{port}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let doc: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        assert_eq!(doc["resource"], audience.as_str());
        assert_eq!(doc["authorization_servers"], json!([iss]));
        assert_eq!(doc["scopes_supported"], json!(["mcp:tools"]));
    }

    let good = idp
        .sign("k1", None, claims(iss, &audience, json!({})))
        .await;
    let (status, ..) = initialize(&audience, Some(&format!("Bearer {good}"))).await;
    assert_eq!(status, 200);
    // Static tokens keep working beside the provider's.
    let (status, ..) = initialize(&audience, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(status, 200);

    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "at+jwt", "kid": "k1"})),
        b64(&claims(iss, &audience, json!({})))
    );
    let bad = [
        (
            "wrong audience",
            idp.sign("k1", None, claims(iss, "http://127.0.0.1:1/mcp", json!({})))
                .await,
        ),
        (
            "wrong issuer",
            idp.sign(
                "k1",
                None,
                claims("http://127.0.0.1:1", &audience, json!({})),
            )
            .await,
        ),
        (
            "bad signature",
            idp.sign("forge", None, claims(iss, &audience, json!({})))
                .await,
        ),
        (
            "expired",
            idp.sign(
                "k1",
                None,
                claims(iss, &audience, json!({"exp": now() - 120})),
            )
            .await,
        ),
        ("alg none", unsigned),
        ("malformed", "not-a-token".to_owned()),
    ];
    for (what, token) in &bad {
        let (status, www, _, took) = initialize(&audience, Some(&format!("Bearer {token}"))).await;
        assert_eq!(status, 401, "{what}");
        assert!(
            www.contains("error=\"invalid_token\"") && www.contains("resource_metadata="),
            "{what}: {www}"
        );
        assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    }
    let huge = format!("Bearer {}", "a".repeat(20_000));
    let (status, www, ..) = initialize(&audience, Some(&huge)).await;
    assert_eq!(status, 401);
    assert!(www.contains("invalid_token"), "{www}");
    let (status, www, ..) = initialize(&audience, None).await;
    assert_eq!(status, 401);
    assert!(!www.contains("error="), "no token, no error: {www}");

    // A good token without the required scope: 403 naming it.
    let scopeless = idp
        .sign(
            "k1",
            None,
            claims(iss, &audience, json!({"scope": "openid"})),
        )
        .await;
    let (status, www, ..) = initialize(&audience, Some(&format!("Bearer {scopeless}"))).await;
    assert_eq!(status, 403);
    assert!(
        www.contains("error=\"insufficient_scope\"") && www.contains("scope=\"mcp:tools\""),
        "{www}"
    );

    // The log says what happened, never the token.
    for reason in [
        "wrong audience",
        "wrong issuer",
        "bad signature",
        "expired",
        "malformed JWT header",
    ] {
        assert!(
            gw.waits_for(reason, Duration::from_secs(10)),
            "no {reason:?} in:\n{}",
            gw.output()
        );
    }
    let log = gw.output();
    for (_, token) in &bad {
        assert!(!log.contains(token.as_str()), "a token in the log:\n{log}");
    }
    assert!(!log.contains(&good) && !log.contains(TOKEN), "{log}");

    // Each refusal is a line of the audit trail, which holds no token either.
    let refusals = bad.len() + 3;
    let (text, lines) = audit_lines(&p, |lines| {
        lines.iter().filter(|l| l["event"] == "sign_in").count() >= refusals
    });
    for (_, token) in &bad {
        assert!(
            !text.contains(token.as_str()),
            "a token in the audit trail:\n{text}"
        );
    }
    assert!(!text.contains(&good) && !text.contains(TOKEN) && !text.contains(&scopeless));
    let statuses: Vec<u64> = lines
        .iter()
        .filter(|l| l["event"] == "sign_in")
        .map(|l| l["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 401).count(),
        bad.len() + 2,
        "{text}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 403).count(), 1, "{text}");
    let expired = lines
        .iter()
        .find(|l| l["reason"].as_str().is_some_and(|r| r.contains("expired")));
    assert!(expired.is_some(), "no line says the token expired:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_picked_up_and_held_keys_outlive_the_provider() {
    let mut idp = Idp::start();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let iss = idp.issuer.clone();
    let p = project(&iss, &audience);
    let gw = gateway(&p, port);
    let bearer = |t: &str| format!("Bearer {t}");

    let k1 = idp
        .sign("k1", None, claims(&iss, &audience, json!({})))
        .await;
    assert_eq!(initialize(&audience, Some(&bearer(&k1))).await.0, 200);
    assert_eq!(idp.jwks_fetches().await, 1, "fetched once, at start");
    // The provider rotates to k2: its first token makes the gateway refetch.
    idp.rotate().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let k2 = idp
        .sign("k2", None, claims(&iss, &audience, json!({})))
        .await;
    assert_eq!(initialize(&audience, Some(&bearer(&k2))).await.0, 200);
    assert_eq!(initialize(&audience, Some(&bearer(&k2))).await.0, 200);
    assert_eq!(idp.jwks_fetches().await, 2, "one refetch for the new kid");

    // The provider goes away: held keys keep working; an unknown kid is 503.
    let unknown = idp
        .sign("forge", Some("k3"), claims(&iss, &audience, json!({})))
        .await;
    idp.proc.kill();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(initialize(&audience, Some(&bearer(&k1))).await.0, 200);
    assert_eq!(initialize(&audience, Some(&bearer(&k2))).await.0, 200);
    let (status, _, retry, took) = initialize(&audience, Some(&bearer(&unknown))).await;
    assert_eq!(status, 503);
    assert!(
        retry
            .as_ref()
            .is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)),
        "{retry:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The log says so (read as the gateway's stderr arrives).
    assert!(
        gw.waits_for(
            "cannot fetch the identity provider's keys",
            Duration::from_secs(10)
        ),
        "{}",
        gw.output()
    );

    // A gateway that never reached the provider has no key: 503, not 401.
    let port2 = free_port();
    let audience2 = format!("http://127.0.0.1:{port2}/mcp");
    let p2 = project(&iss, &audience2);
    let cold = gateway(&p2, port2);
    assert!(
        cold.waits_for("cannot be reached now", Duration::from_secs(10)),
        "{}",
        cold.output()
    );
    let (status, _, retry, _) = initialize(&audience2, Some(&bearer(&k1))).await;
    assert_eq!(status, 503, "{}", cold.output());
    assert!(retry.is_some());
}

/// An opaque access token for `resource`, by the client credentials grant
/// of `opaque-client`.
async fn opaque_token(issuer: &str, resource: &str) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let r = http()
        .post(format!("{issuer}/token"))
        .basic_auth("opaque-client", Some("opaque-secret"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=client_credentials&scope=mcp%3Atools&resource={}",
            encode(resource)
        ))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let token = v["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {text}"))
        .to_owned();
    assert!(!token.contains('.'), "not opaque: {text}");
    token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_tokens_are_checked_at_the_providers_introspection_endpoint() {
    let idp = Idp::start();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let secret = "gateway-rs-secret";
    let p = project_with(
        &idp.issuer,
        &audience,
        Some(
            json!({"client_id": "gateway-rs", "client_secret": "${env:E2E_INTROSPECTION_SECRET}"}),
        ),
    );
    let gw = gateway_with(&p, port, &[("E2E_INTROSPECTION_SECRET", secret)]);
    let good = opaque_token(&idp.issuer, &audience).await;
    let (status, www, ..) = initialize(&audience, Some(&format!("Bearer {good}"))).await;
    assert_eq!(status, 200, "{www}\n{}", gw.output());
    // Issued for another resource, or made up: refused.
    let elsewhere = opaque_token(&idp.issuer, "http://127.0.0.1:1/mcp").await;
    for (what, token) in [
        ("another audience", elsewhere.as_str()),
        ("made up", "abcdefghijklmnopqrstuvwxyz012345"),
    ] {
        let (status, www, ..) = initialize(&audience, Some(&format!("Bearer {token}"))).await;
        assert_eq!(status, 401, "{what}");
        assert!(www.contains("invalid_token"), "{what}: {www}");
    }
    // JWTs still work beside them.
    let jwt = idp
        .sign("k1", None, claims(&idp.issuer, &audience, json!({})))
        .await;
    assert_eq!(
        initialize(&audience, Some(&format!("Bearer {jwt}")))
            .await
            .0,
        200
    );
    let log = gw.output();
    assert!(!log.contains(secret) && !log.contains(&good), "{log}");
}

/// A JSON-RPC POST to `url` with `authorization`, in session `session`:
/// the status and the session id the answer names.
async fn post(
    url: &str,
    authorization: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>) {
    let mut r = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", authorization)
        .body(body.to_string());
    if let Some(id) = session {
        r = r
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = r.send().await.unwrap();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status().as_u16(), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_the_signed_in_user_not_to_one_token() {
    let idp = Idp::start();
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let iss = idp.issuer.clone();
    let p = project(&iss, &audience);
    let _gw = gateway(&p, port);
    let token = |sub: &'static str, jti: &'static str| {
        let claims = claims(&iss, &audience, json!({"sub": sub, "jti": jti}));
        let idp = &idp;
        async move { format!("Bearer {}", idp.sign("k1", None, claims).await) }
    };
    let (alice, alice_again, bob) = (
        token("alice", "one").await,
        token("alice", "two").await,
        token("bob", "three").await,
    );
    assert_ne!(alice, alice_again);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "0"}}});
    let (status, session) = post(&audience, &alice, None, init).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    // alice's refreshed token (another token, the same issuer and subject) keeps her session…
    let (status, _) = post(&audience, &alice_again, Some(&session), initialized).await;
    assert_eq!(status, 202);
    let (status, _) = post(&audience, &alice_again, Some(&session), list.clone()).await;
    assert_eq!(status, 200);
    // …and nobody else may use it: another user, or the operator's static token.
    let (status, _) = post(&audience, &bob, Some(&session), list.clone()).await;
    assert_eq!(status, 403);
    let (status, _) = post(&audience, &format!("Bearer {TOKEN}"), Some(&session), list).await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audience_whose_host_the_gateway_would_refuse_is_called_out_at_start() {
    let idp = Idp::start();
    let port = free_port();
    let p = project(&idp.issuer, "https://gateway.example.com/mcp");
    let gw = gateway(&p, port);
    assert!(
        gw.waits_for(
            "gateway.oauth.audience names host `gateway.example.com`, which is not an allowed Host: clients that connect there get 403; add --allow-host gateway.example.com",
            Duration::from_secs(10)
        ),
        "{}",
        gw.output()
    );
    // A loopback audience is allowed as it is.
    let port = free_port();
    let p = project(&idp.issuer, &format!("http://127.0.0.1:{port}/mcp"));
    let gw = gateway(&p, port);
    assert!(gw.waits_for("clients sign in at", Duration::from_secs(10)));
    assert!(
        !gw.output().contains("not an allowed Host"),
        "{}",
        gw.output()
    );
}
