//! `noeta serve` over real HTTP: create a task, follow its events as Server-Sent Events and
//! reconnect with `Last-Event-ID` (nothing lost, nothing twice), answer an ask, send the next
//! message, cancel; the token rules; bad requests named.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stderr};
use noeta_testkit::serve::Server;
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

fn serve(env: &CliEnv, vars: &[(&str, &str)]) -> Server {
    noeta_testkit::serve::serve(env, "sqlite:api.db", vars, Stdio::null())
}

/// One request with the server's token; the status and the body parsed as JSON.
fn call(server: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    server.call(method, path, body.as_ref())
}

fn get(server: &Server, path: &str) -> Value {
    let (status, body) = call(server, "GET", path, None);
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Waits until the task's status starts with `prefix`.
fn wait_status(server: &Server, task: &str, prefix: &str) -> Value {
    let start = Instant::now();
    loop {
        let row = get(server, &format!("/v1/tasks/{task}"));
        if row["status"].as_str().unwrap().starts_with(prefix) {
            return row;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "task never reached `{prefix}`: {row}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Follows a task's events as SSE until `until` says stop; the sequence numbers and kinds seen,
/// with reply text streamed between them as `(0, "text: …")`.
fn follow(
    server: &Server,
    task: &str,
    last_id: Option<u64>,
    until: impl Fn(&Value) -> bool,
) -> Vec<(u64, String)> {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let resume = last_id
        .map(|id| format!("Last-Event-ID: {id}\r\n"))
        .unwrap_or_default();
    // HTTP/1.0: the stream comes unchunked, one line at a time.
    write!(
        stream,
        "GET /v1/tasks/{task}/events HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n{resume}\r\n",
        server.addr,
        server.token.as_deref().unwrap()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut seen = Vec::new();
    let mut id = None;
    let mut text = false;
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        let line = line.trim_end();
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.parse::<u64>().unwrap());
        } else if line == "event: text" {
            text = true;
        } else if let Some(data) = line.strip_prefix("data: ")
            && std::mem::take(&mut text)
        {
            let piece: Value = serde_json::from_str(data).unwrap();
            seen.push((0, format!("text: {}", piece["text"].as_str().unwrap())));
        } else if let Some(data) = line.strip_prefix("data: ") {
            let event: Value = serde_json::from_str(data).unwrap();
            assert_eq!(Some(event["seq"].as_u64().unwrap()), id, "{event}");
            seen.push((id.unwrap(), event["kind"].as_str().unwrap().to_owned()));
            if until(&event) {
                return seen;
            }
        }
    }
}

fn bash_script(env: &CliEnv, delay_ms: u64) -> String {
    env.script_file(json!({ "turns": [
        { "calls": [{ "name": "Bash", "input": { "command": "echo ran >> effects.txt" } }] },
        { "text": "first done", "delay_ms": delay_ms },
        { "text": "second done" }
    ] }))
}

#[test]
fn tasks_are_created_followed_answered_messaged_and_cancelled_over_http() {
    let env = CliEnv::new(NOETA);
    let server = serve(&env, &[]);
    let provider = bash_script(&env, 1_000);

    // Create in the default mode: the command waits for a person.
    let (status, created) = call(
        &server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": "run the command", "provider": provider })),
    );
    assert_eq!(status, 201, "{created}");
    let task = created["id"].as_str().unwrap().to_owned();
    let row = wait_status(&server, &task, "waiting");
    let call_id = row["waiting"]["call_id"].as_str().unwrap().to_owned();

    // Follow from the start; stop partway, at the park.
    let first = follow(&server, &task, None, |e| e["kind"] == "call_parked");
    assert_eq!(first[0], (1, "task_started".to_owned()));
    let last_seen = first.last().unwrap().0;

    // A question-less ask takes `allow`; an answer about another call is refused.
    let (status, refused) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{task}/answer"),
        Some(json!({ "call_id": "other", "allow": true })),
    );
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains(&call_id),
        "{refused}"
    );
    let (status, answered) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{task}/answer"),
        Some(json!({ "allow": true })),
    );
    assert_eq!(status, 202, "{answered}");

    // Reconnect with Last-Event-ID: the rest, from the next event, to the turn's end.
    let rest = follow(&server, &task, Some(last_seen), |e| {
        e["kind"] == "turn_ended"
    });
    // The reply's text streamed in before the reply was recorded (display only: no id).
    let streamed: String = rest
        .iter()
        .filter_map(|(_, k)| k.strip_prefix("text: "))
        .collect();
    assert!(
        streamed.ends_with("done") && "first done".ends_with(&streamed),
        "{rest:?}"
    );
    let replied = rest
        .iter()
        .rposition(|(_, k)| k == "assistant_reply")
        .unwrap();
    let last_piece = rest.iter().rposition(|(s, _)| *s == 0).unwrap();
    assert!(last_piece < replied, "{rest:?}");
    let seqs: Vec<u64> = first
        .iter()
        .chain(&rest)
        .map(|(s, _)| *s)
        .filter(|s| *s > 0)
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "no loss, no repeat"
    );
    assert!(rest.iter().any(|(_, k)| k == "ask_answered"), "{rest:?}");
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("effects.txt")).unwrap(),
        "ran\n"
    );

    // The next message starts another turn, run by the server's workers.
    let (status, sent) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{task}/messages"),
        Some(json!({ "text": "and again" })),
    );
    assert_eq!(status, 202, "{sent}");
    let start = Instant::now();
    loop {
        let events = get(
            &server,
            &format!("/v1/tasks/{task}/events?after={}", seqs.len()),
        );
        let ended = events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "turn_ended");
        if ended {
            assert!(
                events
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["kind"] == "user_message"),
                "{events}"
            );
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{events}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A task cancelled while its model answers slowly fails, and stays failed.
    let slow = env.write(
        "slow.json",
        &json!({ "turns": [{ "text": "late", "delay_ms": 20_000 }] }).to_string(),
    );
    let slow = format!("scripted:{}", slow.display());
    let (_, created) = call(
        &server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": "take your time", "provider": slow })),
    );
    let slow_task = created["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    while get(&server, &format!("/v1/tasks/{slow_task}"))["worker"].is_null() {
        assert!(start.elapsed() < Duration::from_secs(30), "never taken");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, cancelled) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{slow_task}/cancel"),
        None,
    );
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["cancelled"], true);
    let row = wait_status(&server, &slow_task, "failed");
    assert!(
        row["reason"].as_str().unwrap().starts_with("cancelled: "),
        "{row}"
    );
    let (_, again) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{slow_task}/cancel"),
        None,
    );
    assert_eq!(again["cancelled"], false, "{again}");

    // The list holds them all.
    let all = get(&server, "/v1/tasks");
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
}

#[test]
fn bad_requests_are_named() {
    let env = CliEnv::new(NOETA);
    let server = serve(&env, &[]);
    let provider = bash_script(&env, 0);
    let cases = [
        (
            "POST",
            "/v1/tasks".to_owned(),
            Some(json!({ "goal": "x", "bogus": 1 })),
            400,
            "unknown field `bogus`",
        ),
        (
            "POST",
            "/v1/tasks".to_owned(),
            Some(json!({ "goal": "  " })),
            400,
            "`goal` is empty",
        ),
        (
            "POST",
            "/v1/tasks".to_owned(),
            Some(json!({})),
            400,
            "missing field `goal`",
        ),
        (
            "POST",
            "/v1/tasks".to_owned(),
            Some(json!({ "goal": "x", "provider": provider, "permission_mode": "yolo" })),
            400,
            "`permission_mode`: --permission-mode `yolo` is not one of",
        ),
        (
            "GET",
            "/v1/tasks/nobody".to_owned(),
            None,
            404,
            "no task `nobody` in this store",
        ),
        (
            "POST",
            "/v1/tasks/nobody/cancel".to_owned(),
            None,
            404,
            "no task `nobody`",
        ),
        ("GET", "/v1/nothing".to_owned(), None, 404, "no such route"),
    ];
    for (method, path, body, want, says) in cases {
        let (status, answer) = call(&server, method, &path, body);
        assert_eq!(status, want, "{method} {path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(says),
            "{method} {path}: {answer}"
        );
    }
    let (_, created) = call(
        &server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": "x", "provider": provider, "permission_mode": "plan" })),
    );
    let task = created["id"].as_str().unwrap().to_owned();
    wait_status(&server, &task, "");
    let (status, answer) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{task}/answer"),
        Some(json!({ "allow": true })),
    );
    assert!(status == 409 || status == 400, "{answer}");
    // A Last-Event-ID that is not a number.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "GET /v1/tasks/{task}/events HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nLast-Event-ID: soon\r\n\r\n",
        server.addr,
        server.token.as_deref().unwrap()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 400"), "{response}");
    assert!(
        response.contains("Last-Event-ID `soon` is not a sequence number"),
        "{response}"
    );
}

#[test]
fn a_token_is_required_made_and_kept_when_unset_and_any_other_address_needs_one() {
    let env = CliEnv::new(NOETA);
    let out = env.run(&["serve", "--addr", "0.0.0.0:0", "--workers", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a loopback address, without a token: set [plugins.serve] token"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["serve", "--addr", "here"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--addr `here` is not an address"),
        "{}",
        stderr(&out)
    );

    // No token in the settings: one is made, kept for the user alone, and asked of every
    // request; the next server keeps it.
    let server = serve(&env, &[]);
    let kept =
        noeta_testkit::serve::kept_token(&env).expect("a token kept in ~/.noeta/serve-token");
    assert_eq!(kept.len(), 64, "{kept}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(env.home.join(".noeta/serve-token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let (status, refused) = server.call_as("GET", "/v1/tasks", None, None);
    assert_eq!(status, 401, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer <token>"),
        "{refused}"
    );
    let (status, _) = server.call_as("GET", "/v1/tasks", None, Some("wrong"));
    assert_eq!(status, 401);
    let (status, listed) = server.call_as("GET", "/v1/tasks", None, Some(&kept));
    assert_eq!(status, 200, "{listed}");
    drop(server);
    let again = serve(&env, &[]);
    assert_eq!(
        again.token.as_deref(),
        Some(kept.as_str()),
        "the token is kept"
    );
    drop(again);

    // A token in the user's settings is the one asked for.
    std::fs::write(
        env.home.join(".noeta/config.toml"),
        "[plugins.serve]\ntoken = \"{env:NOETA_SERVE_TOKEN}\"\n",
    )
    .unwrap();
    let short = env.run_with(
        &["serve", "--addr", "127.0.0.1:0"],
        None,
        &[("NOETA_SERVE_TOKEN", "short")],
    );
    assert_eq!(short.status.code(), Some(1));
    assert!(
        stderr(&short).contains("must be a string of at least 16 characters"),
        "{}",
        stderr(&short)
    );
    let unset = env.run(&["serve", "--addr", "127.0.0.1:0"]);
    assert_eq!(unset.status.code(), Some(1));
    assert!(
        stderr(&unset).contains("[plugins.serve] token cannot be resolved"),
        "{}",
        stderr(&unset)
    );
    let server = serve(&env, &[("NOETA_SERVE_TOKEN", "s3cret-token-0123456789")]);
    let (status, _) = server.call_as("GET", "/v1/tasks", None, Some(&kept));
    assert_eq!(status, 401, "the settings' token replaces the kept one");
    let (status, listed) =
        server.call_as("GET", "/v1/tasks", None, Some("s3cret-token-0123456789"));
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed, json!([]));
}

#[test]
fn a_server_without_any_api_key_accepts_tasks_that_a_worker_then_runs() {
    let env = CliEnv::new(NOETA);
    let script = env.write(
        "model.json",
        &json!({ "turns": [{ "text": "Ran on a worker." }] }).to_string(),
    );
    let provider = format!("scripted:{}", script.display());
    // No worker slots in the server, and no model key anywhere: it only records and queues.
    let mut command = env.command(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--store",
        "sqlite:api.db",
        "--workers",
        "0",
        "--provider",
        &provider,
    ]);
    let server = Server::start(command.stderr(Stdio::null())).unwrap_or_else(|e| panic!("{e}"));
    let server = server.with_token(noeta_testkit::serve::kept_token(&env).unwrap());
    let (status, created) = call(
        &server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": "hello" })),
    );
    assert_eq!(status, 201, "{created}");
    let task = created["id"].as_str().unwrap().to_owned();
    // A provider whose key only a worker elsewhere may have is accepted too.
    let (status, elsewhere) = call(
        &server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": "later", "provider": "anthropic" })),
    );
    assert_eq!(status, 201, "{elsewhere}");
    let elsewhere = elsewhere["id"].as_str().unwrap().to_owned();
    let (status, cancelled) = call(
        &server,
        "POST",
        &format!("/v1/tasks/{elsewhere}/cancel"),
        None,
    );
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(
        get(&server, &format!("/v1/tasks/{task}"))["status"],
        "running (or interrupted)",
        "queued, not run"
    );

    // A worker process on the same store runs it with the recorded scripted model.
    let mut worker = noeta_testkit::reap::Reaped::new(
        env.command(&["worker", "--store", "sqlite:api.db", "-n", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let row = wait_status(&server, &task, "turn ended");
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(row["status"], "turn ended", "{row}");
    let events = get(&server, &format!("/v1/tasks/{task}/events"));
    assert!(events.to_string().contains("Ran on a worker."), "{events}");
    let started = &events[0]["data"]["host"];
    assert_eq!(started["provider"], json!(provider), "{started}");
    assert_eq!(started["queued"], json!(true), "{started}");
}

#[test]
fn agents_are_listed_with_the_permission_modes_a_request_may_ask_for() {
    let env = CliEnv::new(NOETA);
    let server = serve(&env, &[]);
    let agents = get(&server, "/v1/agents");
    let main = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "main")
        .unwrap_or_else(|| panic!("{agents}"));
    assert_eq!(main["permission_mode"], json!("default"), "{main}");
    assert_eq!(
        main["permission_modes"],
        json!(["plan", "default"]),
        "{main}"
    );
    assert!(
        agents
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "explore"),
        "{agents}"
    );
    // Without the token, nothing.
    let (status, _) = server.call_as("GET", "/v1/agents", None, None);
    assert_eq!(status, 401);
}
