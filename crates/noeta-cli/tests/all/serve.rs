//! `noeta mcp serve` driven by an outside MCP client, the `mcp` package from PyPI
//! (`tests/fixtures/mcp_client.py`): over stdio and streamable HTTP it lists `main`'s file
//! tools, calls them, gets images as images, and is refused what would ask a person unless the
//! permission mode allows it; every call is in the task's log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;
use std::process::Output;

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// A 1×1 PNG.
const PNG: [u8; 67] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

fn client_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp_client.py")
        .display()
        .to_string()
}

/// Runs the Python client: `mode` `stdio` (then the command line to start) or `http` (then the
/// URL), making `calls`; its JSON report.
fn client(env: &CliEnv, mode: &str, calls: &Value, target: &[&str]) -> Value {
    client_bearing(env, mode, calls, target, None)
}

/// [`client`], its HTTP requests carrying `Authorization: Bearer <bearer>`.
fn client_bearing(
    env: &CliEnv,
    mode: &str,
    calls: &Value,
    target: &[&str],
    bearer: Option<&str>,
) -> Value {
    let mut command = env.program(noeta_testkit::pypi::mcp_python());
    command
        .arg(client_script())
        .arg(mode)
        .arg(calls.to_string())
        .args(target);
    if let Some(bearer) = bearer {
        command.env("MCP_BEARER", bearer);
    }
    let out: Output = command.output().unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed:\n{}",
        stderr(&out)
    );
    serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("the client's report is not JSON ({e}): {}", stdout(&out)))
}

fn serve_stdio(env: &CliEnv, calls: &Value, flags: &[&str]) -> Value {
    let mut target = vec![NOETA, "mcp", "serve"];
    target.extend_from_slice(flags);
    client(env, "stdio", calls, &target)
}

fn names(report: &Value) -> Vec<&str> {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn only_task(env: &CliEnv) -> (String, String) {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let tasks: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tasks.len(), 1, "{listed}");
    let id = tasks[0]["id"].as_str().unwrap().to_owned();
    let log = stdout(&env.run(&["log", "--json", &id]));
    (id, log)
}

#[test]
fn a_client_lists_mains_file_tools_and_calls_them_over_stdio() {
    let env = CliEnv::new(NOETA);
    env.write("notes.txt", "first line\nsecond line\n");
    std::fs::write(env.workspace.join("dot.png"), PNG).unwrap();
    let calls = json!([
        { "name": "Read", "input": { "file_path": env.workspace.join("notes.txt") } },
        { "name": "Glob", "input": { "pattern": "*.txt" } },
        { "name": "Read", "input": { "file_path": env.workspace.join("dot.png") } },
        { "name": "Read", "input": { "file_path": 7 } },
        { "name": "Bash", "input": { "command": "true" } },
    ]);
    let report = serve_stdio(&env, &calls, &[]);
    assert_eq!(names(&report), ["Read", "Glob", "Grep", "Edit", "Write"]);
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools[0]["read_only"], json!(true), "{report}");
    assert_eq!(tools[4]["read_only"], json!(false), "{report}");
    assert!(
        tools.iter().all(|t| t["schema_type"] == "object"),
        "{report}"
    );

    let results = report["calls"].as_array().unwrap();
    assert_eq!(results[0]["is_error"], json!(false), "{report}");
    assert!(
        results[0]["text"].as_str().unwrap().contains("second line"),
        "{report}"
    );
    assert_eq!(results[1]["text"], json!("notes.txt"), "{report}");
    assert_eq!(results[2]["images"], json!(["image/png"]), "{report}");
    // Bad input is the tool's error, as the model would see it.
    assert_eq!(results[3]["is_error"], json!(true), "{report}");
    assert!(
        results[3]["text"]
            .as_str()
            .unwrap()
            .starts_with("Read: invalid input"),
        "{report}"
    );
    assert_eq!(results[4]["is_error"], json!(true), "{report}");
    assert!(
        results[4]["text"]
            .as_str()
            .unwrap()
            .starts_with("no tool named `Bash` is served here"),
        "{report}"
    );

    // One task holds the calls, and its turn ended when the client left.
    let (_, log) = only_task(&env);
    assert_eq!(
        log.matches("\"kind\":\"call_finished\"").count(),
        4,
        "{log}"
    );
    assert!(log.contains("\"call_id\":\"direct-"), "{log}");
    assert!(
        log.contains("\"data\":{\"reason\":\"the MCP client left\"}"),
        "{log}"
    );
}

#[test]
fn a_call_that_would_ask_is_refused_unless_the_permission_mode_allows_it() {
    let env = CliEnv::new(NOETA);
    let target = env.workspace.join("written.txt");
    let calls = json!([{ "name": "Write", "input": { "file_path": target, "content": "hi\n" } }]);

    let refused = serve_stdio(&env, &calls, &[]);
    let result = &refused["calls"][0];
    assert_eq!(result["is_error"], json!(true), "{refused}");
    let text = result["text"].as_str().unwrap();
    assert!(text.starts_with("refused: `Write` is a"), "{text}");
    assert!(text.contains("--permission-mode acceptEdits"), "{text}");
    assert!(!target.exists(), "a refused call writes nothing");

    let allowed = serve_stdio(&env, &calls, &["--permission-mode", "accept-edits"]);
    assert_eq!(allowed["calls"][0]["is_error"], json!(false), "{allowed}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
}

#[test]
fn a_named_agent_serves_every_tool_and_tools_picks_some() {
    let env = CliEnv::new(NOETA);
    let all = serve_stdio(&env, &json!([]), &["--agent", "main"]);
    let all = names(&all);
    assert!(all.contains(&"Bash") && all.contains(&"Read"), "{all:?}");
    let picked = serve_stdio(&env, &json!([]), &["--tools", "Grep,Read"]);
    assert_eq!(names(&picked), ["Read", "Grep"]);
}

#[test]
fn a_client_calls_over_streamable_http_and_ctrl_c_stops_the_server() {
    let env = CliEnv::new(NOETA);
    env.write("notes.txt", "over http\n");
    let (mut server, url) = noeta_testkit::serve::mcp_serve_http(&env);
    assert!(url.ends_with("/mcp"), "{url}");
    let token = noeta_testkit::serve::kept_token(&env).expect("a token in ~/.noeta/serve-token");
    let calls =
        json!([{ "name": "Read", "input": { "file_path": env.workspace.join("notes.txt") } }]);
    let report = client_bearing(&env, "http", &calls, &[&url], Some(&token));
    assert_eq!(names(&report), ["Read", "Glob", "Grep", "Edit", "Write"]);
    assert!(
        report["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains("over http"),
        "{report}"
    );

    // A web page cannot reach it: another site's Origin, or a rebound Host, is refused before
    // any MCP message is read (the MCP transport specification's Origin check).
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let port = authority.rsplit(':').next().unwrap().to_owned();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}"#;
    // Another user of the machine, without the token: nothing.
    {
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        use std::io::{Read as _, Write as _};
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{initialize}",
            initialize.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    for (host, origin) in [
        (authority.clone(), "http://evil.example".to_owned()),
        (authority.clone(), "null".to_owned()),
        (
            format!("evil.example:{port}"),
            format!("http://evil.example:{port}"),
        ),
    ] {
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        use std::io::{Read as _, Write as _};
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{initialize}",
            initialize.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 403"),
            "Host {host}, Origin {origin}: {answer}"
        );
    }

    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let (_, log) = only_task(&env);
    assert_eq!(
        log.matches("\"kind\":\"call_finished\"").count(),
        1,
        "{log}"
    );
    assert!(log.contains("\"kind\":\"turn_ended\""), "{log}");
}

#[test]
fn bad_choices_are_named_before_anything_is_served() {
    let env = CliEnv::new(NOETA);
    let out = env.run(&["mcp", "serve", "--tools", "Read,Nope"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--tools names `Nope` that agent `main` does not have; its tools are: "),
        "{err}"
    );
    assert!(err.contains("Read"), "{err}");
    let listed = stdout(&env.run(&["tasks", "--json"]));
    assert!(
        listed.trim().is_empty(),
        "a refused start leaves no task: {listed}"
    );

    let out = env.run(&["mcp", "serve", "--permission-mode", "yolo"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--permission-mode `yolo` is not one of"),
        "{}",
        stderr(&out)
    );

    let out = env.run(&["mcp", "serve", "--http", "not-an-address"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--http not-an-address: cannot listen there"),
        "{}",
        stderr(&out)
    );

    let out = env.run(&["mcp", "serve", "--agent", "nobody"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("nobody"), "{}", stderr(&out));
}

/// What noeta trusts in the workspace is never written for a client: `acceptEdits` allows
/// file edits, not a change to the settings, `.mcp.json`, `.claude/` or git's hooks.
#[test]
fn a_client_cannot_write_what_noeta_trusts_short_of_bypassing_permissions() {
    let env = CliEnv::new(NOETA);
    let planted = "[plugins.mcp.servers.evil]\ncommand = \"sh\"\n";
    let calls = json!([
        { "name": "Write", "input": { "file_path": env.workspace.join(".noeta/config.toml"), "content": planted } },
        { "name": "Write", "input": { "file_path": ".mcp.json", "content": "{}" } },
        { "name": "Write", "input": { "file_path": ".git/hooks/pre-commit", "content": "id" } },
        { "name": "Write", "input": { "file_path": "notes.txt", "content": "fine\n" } }
    ]);
    let report = serve_stdio(&env, &calls, &["--permission-mode", "acceptEdits"]);
    for (i, place) in [".noeta", ".mcp.json", ".git"].iter().enumerate() {
        let result = &report["calls"][i];
        assert_eq!(result["is_error"], json!(true), "{report}");
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .contains(&format!("would change `{place}` in the workspace")),
            "{report}"
        );
    }
    assert_eq!(report["calls"][3]["is_error"], json!(false), "{report}");
    assert!(!env.workspace.join(".mcp.json").exists());
    assert!(!env.workspace.join(".git/hooks/pre-commit").exists());
    assert!(
        !std::fs::read_to_string(env.workspace.join(".noeta/config.toml"))
            .unwrap_or_default()
            .contains("evil")
    );
    let bypass = serve_stdio(&env, &calls, &["--permission-mode", "bypassPermissions"]);
    assert_eq!(bypass["calls"][1]["is_error"], json!(false), "{bypass}");
}
