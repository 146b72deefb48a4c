//! MCP OAuth end to end: `core-agent mcp login` against the OAuth fixture
//! (an MCP server and its authorization server on 127.0.0.1), with the test
//! as the browser; then calls, refreshes, two processes at once, logout,
//! and a server that needs a login beside one that works.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use core_agent_e2e::{Background, Project, Run, bin};
use serde_json::{Value, json};

use crate::fixture;

fn oauth_server() -> Background {
    Background::start(Command::new(bin("oauth-fixture")))
}

/// One HTTP/1.1 request without following redirects: (status, Location, body).
fn http(method: &str, url: &str) -> (u16, Option<String>, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let location = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("location")
            .then(|| v.trim().to_owned())
    });
    (status, location, body.to_owned())
}

fn stats(server: &Background) -> Value {
    let (_, _, body) = http(
        "GET",
        &format!("http://127.0.0.1:{}/admin/stats", server.port),
    );
    serde_json::from_str(&body).unwrap()
}

fn admin(server: &Background, what: &str) {
    let (status, _, _) = http(
        "POST",
        &format!("http://127.0.0.1:{}/admin/{what}", server.port),
    );
    assert_eq!(status, 200);
}

fn project(server: &Background) -> Project {
    Project::new(&json!({"servers": {
        "secure": {"transport": "http", "url": server.url(), "auth": {"oauth": {}}}
    }}))
}

/// Runs `core-agent mcp login secure --no-browser` and plays the browser:
/// reads the printed authorization URL, requests it, and delivers the
/// redirect to the CLI's loopback listener.
fn login(p: &Project) -> Run {
    let mut cmd = p.command(&["mcp", "login", "secure", "--no-browser", "--timeout", "30"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let url = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("login printed no authorization URL:\n{seen}");
        }
        seen.push_str(&line);
        let line = line.trim();
        if line.starts_with("http://") && line.contains("/authorize") {
            break line.to_owned();
        }
    };
    let (status, location, _) = http("GET", &url);
    assert_eq!(status, 302, "the authorization endpoint approves at once");
    let (status, _, page) = http("GET", &location.unwrap());
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("You can close this tab"), "{page}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    seen.push_str(&rest);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr: seen,
        elapsed: std::time::Duration::ZERO,
    }
}

fn credentials_file(p: &Project) -> PathBuf {
    let dir = p.path().join("home/.agents/credentials");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.retain(|f| f.extension().is_some_and(|e| e == "json"));
    assert_eq!(
        files.len(),
        1,
        "one credentials file in {}: {files:?}",
        dir.display()
    );
    files.remove(0)
}

/// (access token, refresh token) stored in the file.
fn stored_tokens(p: &Project) -> (String, String) {
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(credentials_file(p)).unwrap()).unwrap();
    let response = &file["credentials"]["token_response"];
    (
        response["access_token"].as_str().unwrap().to_owned(),
        response["refresh_token"].as_str().unwrap().to_owned(),
    )
}

fn call(p: &Project) -> Run {
    p.run(&["call", "--yes", "secure_whoami", "{}"])
}

#[test]
fn login_stores_a_private_file_and_no_command_prints_the_token() {
    let server = oauth_server();
    let p = project(&server);
    let mut outputs = Vec::new();

    let before = p.run(&["mcp", "list"]);
    assert!(
        before
            .stdout
            .contains("auth: oauth (login needed: core-agent mcp login secure)"),
        "{}",
        before.stdout
    );
    outputs.push(before);

    let run = login(&p);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("logged in to `secure` (dynamic client registration"),
        "{}",
        run.stdout
    );
    let file = credentials_file(&p);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    outputs.push(run);

    let run = call(&p);
    run.expect_code(0);
    assert!(run.stdout.contains("authorized caller"), "{}", run.stdout);
    outputs.push(run);

    let list = p.run(&["mcp", "list"]);
    assert!(
        list.stdout
            .contains("auth: oauth (logged in, expires in 59 min)"),
        "{}",
        list.stdout
    );
    outputs.push(list);
    let json = p.run(&["mcp", "list", "--json"]);
    assert_eq!(
        json.json()[0]["auth"],
        json!({"kind": "oauth", "detail": "logged in, expires in 59 min"})
    );
    outputs.push(json);
    let doctor = p.run(&["mcp", "doctor"]);
    assert!(
        doctor.stdout.contains("auth: oauth (logged in"),
        "{}",
        doctor.stdout
    );
    outputs.push(doctor);
    let show = p.run(&["config", "show"]);
    assert!(
        show.stdout.lines().any(|l| l.trim() == "auth: oauth"
            || l.trim().starts_with("auth") && l.trim().ends_with("oauth")),
        "{}",
        show.stdout
    );
    outputs.push(show);
    outputs.push(p.run(&["mcp", "doctor", "--json"]));

    let (access, refresh) = stored_tokens(&p);
    let prefix = stats(&server)["token_prefix"].as_str().unwrap().to_owned();
    for run in &outputs {
        for secret in [&access, &refresh, &prefix] {
            assert!(
                !run.stdout.contains(secret.as_str()) && !run.stderr.contains(secret.as_str()),
                "a token leaked:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
    }
}

#[test]
fn a_401_mid_session_refreshes_once_and_a_rejected_refresh_token_means_login_needed() {
    let server = oauth_server();
    let p = project(&server);
    login(&p).expect_code(0);
    let (first, _) = stored_tokens(&p);

    // The server stops accepting the access token: one refresh, one retry.
    admin(&server, "revoke-access");
    call(&p).expect_code(0);
    let s = stats(&server);
    assert_eq!(s["refreshes"], 1, "{s}");
    assert_eq!(s["rejected_refreshes"], 0, "{s}");
    let (second, _) = stored_tokens(&p);
    assert_ne!(first, second, "the refreshed token was saved");

    // Now the refresh token is dead too: one refresh attempt, then the
    // login command; never a loop.
    admin(&server, "revoke-access");
    admin(&server, "revoke-refresh");
    let run = call(&p);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("core-agent mcp login secure"),
        "{}",
        run.stderr
    );
    let s = stats(&server);
    assert_eq!(s["rejected_refreshes"], 1, "{s}");
    let list = p.run(&["mcp", "list"]);
    assert!(
        list.stdout
            .contains("auth: oauth (login needed: core-agent mcp login secure)"),
        "{}",
        list.stdout
    );
}

#[test]
fn two_processes_refreshing_at_once_keep_one_valid_refresh_token() {
    let server = oauth_server();
    let p = project(&server);
    login(&p).expect_code(0);
    admin(&server, "revoke-access");
    // Both start with the same rejected access token and the same refresh
    // token; the credentials lock makes the second wait and use the rotated one.
    let spawn = || {
        let mut cmd = p.command(&["call", "--yes", "secure_whoami", "{}"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = stats(&server);
    assert_eq!(
        s["rejected_refreshes"], 0,
        "no spent refresh token was used: {s}"
    );
    let valid = s["valid_refresh_tokens"].as_array().unwrap();
    assert_eq!(valid.len(), 1, "{s}");
    let (_, refresh) = stored_tokens(&p);
    assert_eq!(
        valid[0],
        refresh.as_str(),
        "the stored refresh token is the valid one"
    );
    // And it still works in a third process.
    admin(&server, "revoke-access");
    call(&p).expect_code(0);
}

#[test]
fn logout_removes_the_credentials() {
    let server = oauth_server();
    let p = project(&server);
    login(&p).expect_code(0);
    let file = credentials_file(&p);
    let run = p.run(&["mcp", "logout", "secure"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("logged out of `secure`"),
        "{}",
        run.stdout
    );
    assert!(!file.exists());
    let again = p.run(&["mcp", "logout", "secure"]);
    assert!(again.stdout.contains("no credentials stored for `secure`"));
}

#[test]
fn a_server_that_needs_a_login_is_reported_while_another_works() {
    let server = oauth_server();
    let p = Project::new(&json!({"servers": {
        "secure": {"transport": "http", "url": server.url(), "auth": {"oauth": {}}},
        "fx": fixture("ok"),
    }}));
    let list = p.run(&["mcp", "list", "--json"]);
    let reports = list.json();
    let by_name = |name: &str| {
        reports
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    let secure = by_name("secure");
    assert_eq!(secure["status"], "error");
    assert_eq!(
        secure["error"],
        "cannot get a token: server `secure` needs a login: run `core-agent mcp login secure`"
    );
    assert_eq!(by_name("fx")["status"], "connected");
    let run = p.run(&["call", "--yes", "fx_echo", r#"{"text": "hi"}"#]);
    run.expect_code(0);
    // Nothing was sent to the protected server without a token.
    assert_eq!(stats(&server)["unauthorized"], 0);
}
