//! `noeta serve` tried as an attacker would, through the real binary: a web page after DNS
//! rebinding (a foreign `Host` and `Origin`), a request without the token, a client naming a
//! file as a model script or a looser permission mode than the server's, thousands of
//! connections that never finish their headers, an oversized body, and SIGTERM while a task's
//! model is slow.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use noeta_testkit::cli::CliEnv;
use noeta_testkit::serve::Server;
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// One raw request (`Connection: close` is added); the whole answer.
fn raw(addr: &str, head: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{head}Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

fn status(answer: &str) -> u16 {
    answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

fn user_settings(env: &CliEnv, text: &str) {
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(env.home.join(".noeta/config.toml"), text).unwrap();
}

/// A `noeta serve` with default settings and no model of its own (as a person would start it).
fn plain_server(env: &CliEnv) -> Server {
    let server = Server::start(
        env.command(&["serve", "--addr", "127.0.0.1:0", "--store", "sqlite:api.db"])
            .stderr(Stdio::null()),
    )
    .unwrap();
    let token = noeta_testkit::serve::kept_token(env).unwrap();
    server.with_token(token)
}

#[test]
fn a_rebound_web_page_gets_no_data_and_changes_nothing() {
    let env = CliEnv::new(NOETA);
    let server = noeta_testkit::serve::serve_with(
        &env,
        "sqlite:api.db",
        &[],
        Stdio::null(),
        &["--permission-mode", "bypassPermissions"],
    );
    let token = server.token.clone().unwrap();
    let script = env.write(
        "evil.json",
        &json!({ "turns": [
            { "calls": [{ "name": "Bash", "input": { "command": "echo pwned > pwned.txt" } }] },
            { "text": "done" }
        ] })
        .to_string(),
    );
    let port = server.addr.rsplit(':').next().unwrap().to_owned();
    let body = json!({
        "goal": "x",
        "provider": format!("scripted:{}", script.display()),
        "permission_mode": "bypassPermissions"
    })
    .to_string();
    // What a browser sends after DNS rebinding: the attacker's name as Host and Origin, and
    // Sec-Fetch-Site same-origin (with the token too, as a page that learnt it might).
    let rebound = format!(
        "Host: evil.example:{port}\r\nOrigin: http://evil.example:{port}\r\nSec-Fetch-Site: same-origin\r\nAuthorization: Bearer {token}\r\n"
    );
    let requests = [
        ("POST", "/v1/tasks", body.as_str()),
        ("GET", "/v1/tasks", ""),
        ("GET", "/", ""),
        ("GET", "/assets/app.js", ""),
    ];
    for (method, path, body) in requests {
        let answer = raw(
            &server.addr,
            &format!("{method} {path} HTTP/1.1\r\n{rebound}Content-Type: application/json\r\n"),
            body,
        );
        assert_eq!(status(&answer), 421, "{method} {path}: {answer}");
        assert!(
            answer.contains("does not answer to the `Host` `evil.example:"),
            "{answer}"
        );
        assert!(!answer.contains("\"id\""), "no data: {answer}");
    }
    // A request with no Host at all, and one for another port of this machine.
    let answer = raw(&server.addr, "GET /v1/tasks HTTP/1.0\r\n", "");
    assert_eq!(status(&answer), 421, "{answer}");
    let answer = raw(
        &server.addr,
        &format!(
            "GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1:1\r\nAuthorization: Bearer {token}\r\n"
        ),
        "",
    );
    assert_eq!(status(&answer), 421, "{answer}");
    // The server's own address with another site's Origin may not change anything.
    let answer = raw(
        &server.addr,
        &format!(
            "POST /v1/tasks HTTP/1.1\r\nHost: {}\r\nOrigin: http://evil.example:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n",
            server.addr
        ),
        &body,
    );
    assert_eq!(status(&answer), 403, "{answer}");
    assert!(answer.contains("origin `http://evil.example"), "{answer}");
    // Nothing was created and nothing ran.
    std::thread::sleep(Duration::from_millis(500));
    let (code, listed) = server.call("GET", "/v1/tasks", None);
    assert_eq!((code, listed), (200, json!([])));
    assert!(!env.workspace.join("pwned.txt").exists());
}

#[test]
fn a_request_without_the_token_gets_401_and_a_default_server_keeps_its_bounds() {
    let env = CliEnv::new(NOETA);
    let server = plain_server(&env);
    // No token: 401, for reading and for changing alike.
    let (code, refused) = server.call_as("GET", "/v1/tasks", None, None);
    assert_eq!(code, 401, "{refused}");
    let (code, _) = server.call_as("POST", "/v1/tasks", Some(&json!({ "goal": "x" })), None);
    assert_eq!(code, 401);
    // A file as a model script: refused, naming the field (the server runs no scripted model).
    for path in ["/dev/zero", "/etc/passwd"] {
        let (code, refused) = server.call(
            "POST",
            "/v1/tasks",
            Some(&json!({ "goal": "x", "provider": format!("scripted:{path}") })),
        );
        assert_eq!(code, 400, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(error.starts_with("`provider`: `scripted:"), "{error}");
        assert!(error.contains("test device"), "{error}");
    }
    let (code, refused) = server.call(
        "POST",
        "/v1/tasks",
        Some(&json!({ "goal": "x", "provider": "mine" })),
    );
    assert_eq!(code, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("`provider`: `mine` is not a provider this server runs"),
        "{refused}"
    );
    // A looser permission mode than the server's own.
    for mode in ["bypassPermissions", "acceptEdits"] {
        let (code, refused) = server.call(
            "POST",
            "/v1/tasks",
            Some(&json!({ "goal": "x", "permission_mode": mode })),
        );
        assert_eq!(code, 400, "{refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(&format!(
                "`permission_mode`: `{mode}` is looser than this server's own mode `default`"
            )),
            "{refused}"
        );
    }
    let (_, listed) = server.call("GET", "/v1/tasks", None);
    assert_eq!(listed, json!([]), "nothing was created");
}

#[test]
fn a_script_that_is_no_regular_file_is_refused_at_once_and_sigterm_stops_the_server() {
    let env = CliEnv::new(NOETA);
    let mut server = noeta_testkit::serve::serve(&env, "sqlite:api.db", &[], Stdio::null());
    let fifo = env.workspace.join("model.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, says) in [
        ("/dev/zero".to_owned(), "a device, not a regular file"),
        (
            fifo.display().to_string(),
            "a named pipe, not a regular file",
        ),
        (
            fifo.display().to_string(),
            "a named pipe, not a regular file",
        ),
    ] {
        let start = Instant::now();
        let (code, refused) = server.call(
            "POST",
            "/v1/tasks",
            Some(&json!({ "goal": "x", "provider": format!("scripted:{path}") })),
        );
        assert_eq!(code, 400, "{refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(says),
            "{refused}"
        );
        assert!(start.elapsed() < Duration::from_secs(5), "refused at once");
    }
    // A task whose model takes half a minute: SIGTERM still stops the server in seconds.
    let slow = env.write(
        "slow.json",
        &json!({ "turns": [{ "text": "late", "delay_ms": 30_000 }] }).to_string(),
    );
    let (code, created) = server.call(
        "POST",
        "/v1/tasks",
        Some(&json!({ "goal": "x", "provider": format!("scripted:{}", slow.display()) })),
    );
    assert_eq!(code, 201, "{created}");
    let task = created["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    while server.call("GET", &format!("/v1/tasks/{task}"), None).1["worker"].is_null() {
        assert!(start.elapsed() < Duration::from_secs(30), "never taken");
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    assert!(
        server.terminate(Duration::from_secs(8)),
        "noeta serve did not stop within 8 s of SIGTERM"
    );
    eprintln!("stopped in {:?}", start.elapsed());
}

/// The open descriptors of process `pid`.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

#[test]
fn connections_that_never_finish_their_headers_cannot_starve_the_server() {
    let env = CliEnv::new(NOETA);
    user_settings(
        &env,
        "[plugins.serve]\nmax_connections = 16\nheader_timeout_ms = 300\nmax_body_bytes = 4096\n",
    );
    let server = noeta_testkit::serve::serve(&env, "sqlite:api.db", &[], Stdio::null());
    let before = descriptors(server.pid());
    // Hundreds of connections, each a header never finished.
    let mut idle = Vec::new();
    for _ in 0..400 {
        let Ok(mut stream) = TcpStream::connect(&server.addr) else {
            break;
        };
        let _ = stream.write_all(b"GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
        idle.push(stream);
    }
    let most = descriptors(server.pid());
    assert!(
        most <= before + 16 + 4,
        "the server holds {most} descriptors ({before} before): more than its 16 connections"
    );
    // A real request still gets through while they are held open.
    let start = Instant::now();
    let (code, listed) = server.call("GET", "/v1/tasks", None);
    assert_eq!((code, listed), (200, json!([])));
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "answered in {:?}",
        start.elapsed()
    );
    drop(idle);
    // A body over the limit: 413 naming it.
    let big = json!({ "goal": "x".repeat(10_000) });
    let (code, refused) = server.call("POST", "/v1/tasks", Some(&big));
    assert_eq!(code, 413, "{refused}");
    assert!(
        refused.to_string().contains("over this server's limit"),
        "{refused}"
    );
    let _: Value = refused;
}

/// A task created without a permission mode runs in the server's own, not a looser one the
/// settings of the worker would give it.
#[test]
fn a_task_without_a_mode_runs_in_the_servers_own() {
    let env = CliEnv::new(NOETA);
    let server = noeta_testkit::serve::serve_with(
        &env,
        "sqlite:api.db",
        &[],
        Stdio::null(),
        &["--permission-mode", "plan"],
    );
    let script = env.write(
        "bash.json",
        &json!({ "turns": [
            { "calls": [{ "name": "Bash", "input": { "command": "echo ran > ran.txt" } }] },
            { "text": "done" }
        ] })
        .to_string(),
    );
    let (code, created) = server.call(
        "POST",
        "/v1/tasks",
        Some(&json!({ "goal": "x", "provider": format!("scripted:{}", script.display()) })),
    );
    assert_eq!(code, 201, "{created}");
    let task = created["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    loop {
        let (_, events) = server.call("GET", &format!("/v1/tasks/{task}/events"), None);
        let text = events.to_string();
        if text.contains("turn_ended") {
            assert!(text.contains("plan mode"), "{text}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!env.workspace.join("ran.txt").exists());
}
