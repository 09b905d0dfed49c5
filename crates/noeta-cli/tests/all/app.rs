//! `open_app` through `noeta run`: the app's URL serves its `index.html` and passes an API path
//! to the app's own server; a `dir` without `index.html` or a `file:` target is refused with a
//! message naming it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// A one-route API server: `GET /api/hello` answers `hello from the api (QUERY)`.
fn api_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap_or_default();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let target = first.split(' ').nth(1).unwrap_or("").to_owned();
            let (status, body) = match target.split_once('?') {
                Some(("/api/hello", query)) => ("200 OK", format!("hello from the api ({query})")),
                None if target == "/api/hello" => ("200 OK", "hello from the api".to_owned()),
                _ => ("404 Not Found", format!("no route {target}")),
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A shell command that finds the task's latest app URL in its log (the open_app result, or
/// the notice of a mount made again) and fetches each of `paths` under it.
fn fetch_latest(paths: &[&str]) -> String {
    let mut command = format!(
        "task=$({NOETA} tasks --json | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"id\"])'); \
         url=$({NOETA} log --json \"$task\" | grep -o 'http://127.0.0.1:[0-9]*/apps/[^\\\" ]*' | tail -1);"
    );
    for path in paths {
        command.push_str(&format!(" curl -s \"${{url}}{path}\";"));
    }
    command
}

fn results(out: &std::process::Output) -> Vec<String> {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "call_finished")
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn open_app_serves_the_index_and_proxies_the_api() {
    let env = CliEnv::new(NOETA);
    let port = api_server();
    env.write("site/index.html", "<h1>Todo preview</h1>\n");
    env.write("notes/readme.txt", "no index here\n");
    env.write_trusted(
        ".noeta/config.toml",
        "[agents.main]\nadd_plugins = [\"app\"]\n",
    );
    let api = format!("http://127.0.0.1:{port}");
    // The URL is known only once the app is open: the shell reads it back from the task's log
    // (the open_app result is recorded before the shell command runs).
    let fetch = fetch_latest(&["", "api/hello?x=1"]);
    let provider = env.script(json!([
        { "calls": [{ "name": "open_app", "input": { "dir": "notes", "proxy_to": api } }] },
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": "file:///etc" } }] },
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": api } }] },
        { "calls": [{ "name": "Bash", "input": { "command": fetch } }] },
        { "text": "done" }
    ]));
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "preview the app",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&out);
    assert!(
        results[0].contains("`dir` `notes` has no `index.html`"),
        "{results:?}"
    );
    assert!(
        results[1].contains("`proxy_to` `file:///etc` must be an http:// or https:// URL"),
        "{results:?}"
    );
    assert!(
        results[2].starts_with("http://127.0.0.1:") && results[2].contains("/apps/"),
        "{results:?}"
    );
    assert!(results[3].contains("<h1>Todo preview</h1>"), "{results:?}");
    assert!(
        results[3].contains("hello from the api (x=1)"),
        "{results:?}"
    );
}

/// A task carried on by another process mounts its apps again on that process's gateway and
/// says where.
#[test]
fn a_task_carried_on_elsewhere_mounts_its_apps_again() {
    let env = CliEnv::new(NOETA);
    let port = api_server();
    env.write("site/index.html", "<h1>Again</h1>\n");
    env.write_trusted(
        ".noeta/config.toml",
        "[agents.main]\nadd_plugins = [\"app\"]\n",
    );
    let api = format!("http://127.0.0.1:{port}");
    let fetch = fetch_latest(&[""]);
    let provider = env.script(json!([
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": api } }] },
        { "text": "open" },
        { "calls": [{ "name": "Bash", "input": { "command": fetch } }] },
        { "text": "fetched" }
    ]));
    let first = env.run(&["run", "--provider", &provider, "open it"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let task = stderr(&first)
        .lines()
        .find_map(|l| {
            l.strip_prefix("task ")
                .map(|r| r.split([' ', ':']).next().unwrap_or("").to_owned())
        })
        .unwrap();
    let again = env.run_with(
        &[
            "chat",
            "--json",
            "--permission-mode",
            "bypassPermissions",
            "--task",
            &task,
        ],
        Some("fetch it\n/exit\n"),
        &[],
    );
    assert!(again.status.success(), "{}", stderr(&again));
    let events: Vec<Value> = stdout(&again)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events.iter().any(|e| e["kind"] == "notice"
            && e["data"]["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("app `site` is open again at http://127.0.0.1:")),
        "{}",
        stdout(&again)
    );
    assert!(
        results(&again).iter().any(|r| r.contains("<h1>Again</h1>")),
        "{}",
        stdout(&again)
    );
}

/// The gateway tried as an attacker would: the workspace root or an address outside this
/// machine's loopback as an app, dot-files, `..` and its encodings, a mount's address without
/// its secret, another site's `Host` and a cross-site POST — none of them reach a file or the
/// app.
#[test]
fn the_gateway_serves_no_dot_file_no_project_root_and_nothing_to_another_site() {
    let env = CliEnv::new(NOETA);
    let port = api_server();
    env.write("site/index.html", "<h1>Public</h1>\n");
    env.write("site/.env", "SITE_SECRET=1\n");
    env.write("site/.config/token", "SITE_SECRET=2\n");
    env.write(".env", "ROOT_SECRET=3\n");
    env.write("index.html", "<h1>root</h1>\n");
    env.write_trusted(
        ".noeta/config.toml",
        "[agents.main]\nadd_plugins = [\"app\"]\n",
    );
    let api = format!("http://127.0.0.1:{port}");
    let probe = format!(
        "task=$({NOETA} tasks --json | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"id\"])'); \
         url=$({NOETA} log --json \"$task\" | grep -o 'http://127.0.0.1:[0-9]*/apps/[^\\\" ]*' | tail -1); \
         base=${{url%%/apps/*}}; hostport=${{base#http://}}; gport=${{hostport#*:}}; \
         for p in .env .config/token %2e%2e/.env %2E%2E/%2e%2e/.env ..%2f.env; do \
           printf '%s:%s\\n' \"$p\" \"$(curl -s --path-as-is -w ' %{{http_code}}' \"${{url}}$p\")\"; done; \
         printf 'raw-dotdot:%s\\n' \"$(curl -s --path-as-is -w ' %{{http_code}}' \"${{url}}../../../.env\")\"; \
         printf 'no-secret:%s\\n' \"$(curl -s -w ' %{{http_code}}' \"$base/apps/$task/site/\")\"; \
         printf 'foreign-host:%s\\n' \"$(curl -s -w ' %{{http_code}}' -H \"Host: evil.example:$gport\" \"$url\")\"; \
         printf 'cross-site:%s\\n' \"$(curl -s -w ' %{{http_code}}' -X POST -H 'Origin: http://evil.example' \"${{url}}api/hello\")\"; \
         printf 'index:%s\\n' \"$(curl -s -w ' %{{http_code}}' \"$url\")\""
    );
    let provider = env.script(json!([
        { "calls": [{ "name": "open_app", "input": { "dir": ".", "proxy_to": api } }] },
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": "http://169.254.169.254/latest" } }] },
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": "http://10.1.2.3:80" } }] },
        { "calls": [{ "name": "open_app", "input": { "dir": "site", "proxy_to": api } }] },
        { "calls": [{ "name": "Bash", "input": { "command": probe } }] },
        { "text": "done" }
    ]));
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "preview the app",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&out);
    assert!(
        results[0].contains("is the workspace itself"),
        "{results:?}"
    );
    assert!(results[1].contains("a link-local address"), "{results:?}");
    assert!(results[2].contains("a private address"), "{results:?}");
    assert!(results[3].contains("/apps/"), "{results:?}");
    let probe = &results[4];
    assert!(!probe.contains("SECRET"), "a secret was served: {probe}");
    let line = |name: &str| {
        probe
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no `{name}` line in {probe}"))
            .to_owned()
    };
    for encoded in [
        "%2e%2e/.env",
        "%2E%2E/%2e%2e/.env",
        "..%2f.env",
        "raw-dotdot",
    ] {
        assert!(line(encoded).ends_with(" 400"), "{encoded}: {probe}");
    }
    assert!(line("no-secret").ends_with(" 404"), "{probe}");
    assert!(line("foreign-host").ends_with(" 421"), "{probe}");
    assert!(line("cross-site").ends_with(" 403"), "{probe}");
    assert!(line("index").contains("<h1>Public</h1>"), "{probe}");
}
