//! `auth.google_oauth` end to end: the binary finds Application Default
//! Credentials in a temporary home, gets tokens from the fixture's loopback
//! stand-in for Google (`fixture-server google`), and calls the fixture's MCP
//! server, which accepts only the tokens it issued (or a self-signed JWT of
//! the test-only service-account key) while they are valid.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use core_agent_e2e::{Background, Project, Run, bin, root};
use serde_json::{Value, json};

use crate::{by_name, demo_server};

const SCOPE: &str = "https://www.googleapis.com/auth/container.read-only";

/// The fake Google, with its token and grant logs in `dir`.
struct Google {
    server: Background,
    dir: tempfile::TempDir,
}

impl Google {
    fn start(ttl_secs: u64) -> Google {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(bin("fixture-server"));
        cmd.arg("google")
            .env("FIXTURE_TOKENS", dir.path().join("tokens"))
            .env("FIXTURE_GRANTS", dir.path().join("grants"))
            .env("FIXTURE_TOKEN_TTL", ttl_secs.to_string());
        Google {
            server: Background::start(cmd),
            dir,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.server.port)
    }

    /// The MCP endpoint.
    fn mcp(&self) -> String {
        format!("http://{}/mcp", self.host())
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every token it issued or accepted.
    fn tokens(&self) -> Vec<String> {
        self.lines("tokens")
    }

    /// One line per grant: `user <scope>` or `mds <scopes>`.
    fn grants(&self) -> Vec<String> {
        self.lines("grants")
    }

    /// gcloud's file after `gcloud auth application-default login`, with
    /// the token endpoint on loopback.
    fn authorized_user(&self, quota_project: Option<&str>) -> String {
        let mut file = json!({
            "type": "authorized_user",
            "client_id": "fixture-client.apps.googleusercontent.com",
            "client_secret": "fixture-client-secret",
            "refresh_token": "fixture-refresh-token",
            "token_uri": format!("http://{}/token", self.host()),
        });
        if let Some(project) = quota_project {
            file["quota_project_id"] = json!(project);
        }
        file.to_string()
    }
}

/// A project with one Google-authenticated server, `gke`, whose tools the
/// gate allows.
fn project(google: &Google, extra: Value) -> Project {
    let mut servers = json!({"gke": {
        "transport": "http",
        "url": google.mcp(),
        "auth": {"google_oauth": {"scopes": [SCOPE]}},
    }});
    if let (Some(servers), Value::Object(more)) = (servers.as_object_mut(), extra) {
        servers.extend(more);
    }
    let p = Project::new(&json!({"version": 1, "servers": servers}));
    p.write(
        ".agents/config.json",
        &json!({"permissions": {"allow": ["mcp:gke_*"]}}).to_string(),
    );
    p
}

/// `core-agent ARGS` with only the given Google variables (`Project::command`
/// keeps the developer's own credentials, if any, out) and no metadata
/// server but the fake one, if given.
fn command(p: &Project, args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut cmd = p.command(args);
    // Where nothing else is given, the metadata server is a closed port.
    cmd.env("GCE_METADATA_HOST", "127.0.0.1:9");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

fn whoami(run: &Run) -> Value {
    run.expect_code(0);
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// No token, refresh token, client secret or private key in any output.
fn assert_no_secret(google: &Google, outputs: &[&str]) {
    let tokens = google.tokens();
    assert!(!tokens.is_empty(), "the fixture issued no token");
    let mut secrets: Vec<String> = tokens;
    secrets.extend(
        [
            "fixture-refresh-token",
            "fixture-client-secret",
            "PRIVATE KEY",
        ]
        .map(str::to_owned),
    );
    for out in outputs {
        for secret in &secrets {
            assert!(!out.contains(secret.as_str()), "`{secret}` leaked:\n{out}");
        }
    }
}

#[test]
fn an_authorized_users_token_is_fetched_at_start_and_sent_with_its_quota_project() {
    let google = Google::start(3600);
    let p = project(&google, json!({}));
    let adc = p.write(
        "home/.config/gcloud/application_default_credentials.json",
        &google.authorized_user(Some("quota-from-adc")),
    );

    let call = p.run_with(command(&p, &["call", "gke_whoami"], &[]));
    assert_eq!(
        whoami(&call),
        json!({"token": "user-1", "scope": SCOPE, "quota_project": "quota-from-adc"}),
        "{}",
        call.stderr
    );
    // One grant, with the configured scope, fetched before the first request.
    assert_eq!(google.grants(), [format!("user {SCOPE}")]);

    let list = p.run_with(command(&p, &["mcp", "list"], &[]));
    list.expect_code(0);
    assert_eq!(
        list.stdout,
        format!(
            "{:<20} {:<6} {:<8} {:<10} 1 tool; auth: google-adc (authorized user {})\n",
            "gke",
            "http",
            "project",
            "connected",
            adc.display()
        )
    );
    let json = p.run_with(command(&p, &["mcp", "list", "--json"], &[]));
    assert_eq!(
        by_name(&json.json(), "gke")["auth"],
        json!({"kind": "google-adc", "detail": format!("authorized user {}", adc.display())})
    );
    assert_no_secret(
        &google,
        &[
            &call.stdout,
            &call.stderr,
            &list.stdout,
            &list.stderr,
            &json.stdout,
            &json.stderr,
        ],
    );
}

#[test]
fn a_service_account_key_signs_its_own_token_and_cloudsdk_config_is_honoured() {
    let google = Google::start(3600);
    let p = project(&google, json!({}));
    let key = root().join("tests/fixture/google-service-account.test-only.json");
    let key = key.to_str().unwrap();

    // The key named by GOOGLE_APPLICATION_CREDENTIALS: a self-signed JWT
    // with the scope, no token endpoint; the quota project from the variable.
    let vars = [
        ("GOOGLE_APPLICATION_CREDENTIALS", key),
        ("GOOGLE_CLOUD_QUOTA_PROJECT", "quota-from-env"),
    ];
    let call = p.run_with(command(&p, &["call", "gke_whoami"], &vars));
    assert_eq!(
        whoami(&call),
        json!({"token": "jwt", "scope": SCOPE, "quota_project": "quota-from-env"}),
        "{}",
        call.stderr
    );
    assert!(google.grants().is_empty(), "{:?}", google.grants());

    let doctor = p.run_with(command(&p, &["mcp", "doctor"], &vars));
    doctor.expect_code(0);
    assert!(
        doctor
            .stdout
            .contains("server  gke (http): connected, 1 tool in "),
        "{}",
        doctor.stdout
    );
    let auth = format!(
        "\n        auth: google-adc (service account key {key}, from GOOGLE_APPLICATION_CREDENTIALS)\n"
    );
    assert!(doctor.stdout.contains(&auth), "{}", doctor.stdout);

    // gcloud's file under $CLOUDSDK_CONFIG rather than ~/.config/gcloud.
    let gcloud = p.path().join("gcloud-config");
    p.write(
        "gcloud-config/application_default_credentials.json",
        &google.authorized_user(None),
    );
    let call_user = p.run_with(command(
        &p,
        &["call", "gke_whoami"],
        &[("CLOUDSDK_CONFIG", gcloud.to_str().unwrap())],
    ));
    assert_eq!(
        whoami(&call_user),
        json!({"token": "user-1", "scope": SCOPE, "quota_project": null})
    );
    assert_no_secret(
        &google,
        &[
            &call.stdout,
            &call.stderr,
            &doctor.stdout,
            &doctor.stderr,
            &call_user.stdout,
            &call_user.stderr,
        ],
    );
}

#[test]
fn without_files_the_metadata_server_gives_the_token_for_the_scopes() {
    let google = Google::start(3600);
    let p = project(&google, json!({}));
    let host = google.host();
    let vars = [("GCE_METADATA_HOST", host.as_str())];
    let call = p.run_with(command(&p, &["call", "gke_whoami"], &vars));
    assert_eq!(
        whoami(&call),
        json!({"token": "mds-1", "scope": SCOPE, "quota_project": null}),
        "{}",
        call.stderr
    );
    assert_eq!(google.grants(), [format!("mds {SCOPE}")]);
    let json = p.run_with(command(&p, &["mcp", "list", "--json"], &vars));
    assert_eq!(
        by_name(&json.json(), "gke")["auth"],
        json!({"kind": "google-adc", "detail": format!("metadata server {host}")})
    );
    assert_no_secret(
        &google,
        &[&call.stdout, &call.stderr, &json.stdout, &json.stderr],
    );
}

#[test]
fn with_no_credentials_that_server_fails_with_the_login_command_and_the_others_start() {
    let google = Google::start(3600);
    let p = project(
        &google,
        json!({
            "demo": demo_server(),
            // A token pasted into headers, which this server never issued.
            "pasted": {
                "transport": "http",
                "url": google.mcp(),
                "headers": {"Authorization": "Bearer ${env:PASTED_TOKEN}"},
            },
        }),
    );
    let vars = [("PASTED_TOKEN", "pasted-by-hand")];
    let run = p.run_with(command(&p, &["mcp", "list", "--json"], &vars));
    run.expect_code(0);
    let list = run.json();
    assert_eq!(by_name(&list, "demo")["status"], "connected");
    let gke = by_name(&list, "gke");
    assert_eq!(gke["status"], "error");
    let home = p.path().join("home");
    assert_eq!(
        gke["error"],
        format!(
            "cannot get a token: no credentials found (GOOGLE_APPLICATION_CREDENTIALS is not set, {}/.config/gcloud/application_default_credentials.json does not exist, and the metadata server at 127.0.0.1:9 gave no token: Connection refused (os error 111)); run `gcloud auth application-default login --scopes=https://www.googleapis.com/auth/cloud-platform,{SCOPE}`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file",
            home.display()
        ),
        "{gke:#}"
    );
    assert_eq!(
        gke["auth"],
        json!({"kind": "google-adc", "detail": "metadata server 127.0.0.1:9"})
    );
    // The MCP server was never asked with a token of Google's.
    assert!(google.tokens().is_empty());
    let pasted = by_name(&list, "pasted");
    assert_eq!(pasted["status"], "error");
    assert_eq!(pasted["auth"], json!({"kind": "static", "detail": null}));
    assert_eq!(
        by_name(&list, "demo")["auth"],
        json!({"kind": "none", "detail": null})
    );
    let text = p.run_with(command(&p, &["mcp", "list"], &vars));
    assert!(
        text.stdout.contains("; auth: static\n") && !text.stdout.contains("pasted-by-hand"),
        "{}",
        text.stdout
    );

    // Doctor says the same, as an error finding.
    let doctor = p.run_with(command(&p, &["mcp", "doctor"], &vars));
    doctor.expect_code(1);
    assert!(
        doctor.stdout.contains("error:   connect [gke]\n        cannot get a token: no credentials found (GOOGLE_APPLICATION_CREDENTIALS is not set"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains("server  demo (stdio): connected"),
        "{}",
        doctor.stdout
    );
}

#[test]
fn a_grant_the_token_endpoint_refuses_fails_that_server_with_its_answer() {
    let google = Google::start(3600);
    let p = project(&google, json!({}));
    let mut file: Value = serde_json::from_str(&google.authorized_user(None)).unwrap();
    file["refresh_token"] = json!("revoked-refresh-token");
    let adc = p.write(
        "home/.config/gcloud/application_default_credentials.json",
        &file.to_string(),
    );
    let run = p.run_with(command(&p, &["mcp", "list", "--json"], &[]));
    let gke = by_name(&run.json(), "gke");
    assert_eq!(gke["status"], "error");
    assert_eq!(
        gke["error"],
        format!(
            "cannot get a token: google-adc (authorized user {}) refused to issue a token: HTTP status client error (400 Bad Request) for url (http://{}/token); run `gcloud auth application-default login --scopes=https://www.googleapis.com/auth/cloud-platform,{SCOPE}`, or set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file",
            adc.display(),
            google.host()
        ),
        "{gke:#}"
    );
    assert!(
        !run.stdout.contains("revoked-refresh-token")
            && !run.stderr.contains("revoked-refresh-token")
    );
}

#[test]
fn a_token_that_expires_mid_session_is_replaced_and_the_call_goes_through() {
    // Tokens live 2 s; the gateway keeps one session open across expiry.
    let google = Google::start(2);
    let p = project(&google, json!({}));
    p.write(
        "home/.config/gcloud/application_default_credentials.json",
        &google.authorized_user(None),
    );
    let mut cmd = command(&p, &["serve"], &[]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut client = Client {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        seen: String::new(),
        id: 0,
    };
    client.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}}),
    );
    client.notify("notifications/initialized");
    // Wait until the backend has started and its tool is listed.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tools = client.request("tools/list", json!({}));
        let listed = tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "gke_whoami"));
        if listed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gke_whoami never listed: {tools}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let first = client.whoami();
    assert_eq!(first["token"], "user-1", "{first}");
    // The first token expires; the next call gets a new one.
    std::thread::sleep(Duration::from_secs(3));
    let second = client.whoami();
    assert_eq!(second["token"], "user-2", "{second}");
    assert_eq!(google.grants().len(), 2, "{:?}", google.grants());

    let seen = std::mem::take(&mut client.seen);
    drop(client);
    child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert_no_secret(&google, &[&seen, &stderr]);
}

/// A line-by-line MCP client of `core-agent serve` on stdio.
struct Client {
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    /// Every line read, to look for secrets in.
    seen: String,
    id: u64,
}

impl Client {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        loop {
            let mut reply = String::new();
            assert!(
                self.stdout.read_line(&mut reply).unwrap() > 0,
                "serve closed stdout"
            );
            self.seen.push_str(&reply);
            let reply: Value = serde_json::from_str(&reply).unwrap();
            if reply["id"] == self.id {
                return reply;
            }
        }
    }

    fn notify(&mut self, method: &str) {
        let line = json!({"jsonrpc": "2.0", "method": method});
        writeln!(self.stdin, "{line}").unwrap();
    }

    /// Calls `gke_whoami`; its answer, or the whole reply when it has none.
    fn whoami(&mut self) -> Value {
        let reply = self.request("tools/call", json!({"name": "gke_whoami", "arguments": {}}));
        let text = reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        serde_json::from_str(text).unwrap_or(reply)
    }
}
