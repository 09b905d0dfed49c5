//! `noeta run` with MCP servers: a server configured in the settings (the official reference
//! server, from npm) is called by the model and its answer is in the task's log; a workspace's
//! `.mcp.json` starts nothing until the workspace is trusted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::PathBuf;

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

/// The reference server's launcher (`noeta_testkit::npm`).
fn everything() -> PathBuf {
    noeta_testkit::npm::reference_server("mcp-server-everything")
}

/// The workspace settings: the reference server as `everything`, then `more` lines. The first
/// offer waits for it as long as it takes (a test checks what a started server offers).
fn with_everything(env: &CliEnv, more: &str) {
    env.write_trusted(
        ".noeta/config.toml",
        &format!(
            "[plugins.mcp]\nstartup_wait_ms = 60000\n\n\
             [plugins.mcp.servers.everything]\ncommand = \"{}\"\nargs = [\"stdio\"]\n{more}",
            everything().display()
        ),
    );
}

/// A model that calls `tool` with `input`, then says it is done.
fn calling(env: &CliEnv, tool: &str, input: serde_json::Value) -> String {
    env.script(json!([
        { "calls": [{ "name": tool, "input": input }] },
        { "text": "done" }
    ]))
}

fn last_task(env: &CliEnv) -> String {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let last = listed.lines().last().unwrap();
    serde_json::from_str::<serde_json::Value>(last).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_server_in_the_settings_is_called_and_its_answer_is_in_the_log() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let provider = calling(
        &env,
        "mcp__everything__echo",
        json!({ "message": "hello through MCP" }),
    );
    // `echo` says it is read-only: it runs without asking, even in the default mode.
    let out = env.run(&["run", "--provider", &provider, "echo something"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    assert!(
        log.contains("\"tool\":\"mcp__everything__echo\"")
            && log.contains("Echo: hello through MCP"),
        "{log}"
    );
}

#[test]
fn a_workspace_mcp_json_starts_nothing_until_the_workspace_is_trusted() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let marker = env.workspace.join("server-started");
    let start = format!(
        "touch '{}'; exec '{}' stdio",
        marker.display(),
        everything().display()
    );
    env.write(
        ".mcp.json",
        &json!({ "mcpServers": { "local": { "command": "sh", "args": ["-c", start] } } })
            .to_string(),
    );
    let provider = calling(
        &env,
        "mcp__local__echo",
        json!({ "message": "trusted now" }),
    );
    let out = env.run(&["run", "--provider", &provider, "try it"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!marker.exists(), "an untrusted workspace started a server");
    assert!(
        stderr(&out).contains(".mcp.json: not read, since the workspace is not trusted"),
        "{}",
        stderr(&out)
    );
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    assert!(
        log.contains("no tool named"),
        "the call could not be made: {log}"
    );

    let trusted = env.run(&["trust", "."]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    let out = env.run(&["run", "--provider", &provider, "again"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        marker.exists(),
        "the trusted workspace's server did not start"
    );
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    assert!(log.contains("Echo: trusted now"), "{log}");
}

#[test]
fn mcp_list_starts_each_server_and_names_its_tools_or_its_error() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let out = env.run(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("no MCP servers are configured"),
        "{}",
        stdout(&out)
    );

    with_everything(
        &env,
        "\n[plugins.mcp.servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo no config >&2; exit 2\"]\n",
    );
    let out = env.run(&["mcp", "list"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "one server is down: {text}");
    assert!(
        text.contains(&format!(
            "everything  (stdio: {} stdio)",
            everything().display()
        )),
        "{text}"
    );
    assert!(text.contains("    mcp__everything__echo\n"), "{text}");
    assert!(
        text.contains("broken  (stdio: sh -c echo no config >&2; exit 2)")
            && text.contains("  error: mcp server `broken` did not start")
            && text.contains("no config"),
        "{text}"
    );
    let out = env.run(&["mcp", "list", "--json"]);
    let rows: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let broken = rows.iter().find(|r| r["alias"] == "broken").unwrap();
    assert_eq!(broken["status"], "error");
    let good = rows.iter().find(|r| r["alias"] == "everything").unwrap();
    assert_eq!(good["status"], "ok");
    assert!(
        good["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__everything__echo"))
    );
}

#[test]
fn doctor_names_the_servers_and_starts_them_only_online() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let marker = env.workspace.join("server-started");
    let provider = env.script(json!([{ "text": "hi" }]));
    env.write_trusted(
        ".noeta/config.toml",
        &format!(
            "[plugins.providers]\nprovider = \"{provider}\"\n\n[plugins.mcp.servers.local]\n\
             command = \"sh\"\nargs = [\"-c\", \"touch '{}'; exec '{}' stdio\"]\n",
            marker.display(),
            everything().display()
        ),
    );
    let out = env.run(&["doctor"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("mcp: server local (stdio: sh -c touch"),
        "{}",
        stdout(&out)
    );
    assert!(!marker.exists(), "doctor started a server without --online");
    let out = env.run(&["doctor", "--online"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("mcp: server local is up with"),
        "{}",
        stdout(&out)
    );
    assert!(marker.exists());
}

#[test]
fn a_deferred_server_tool_is_loaded_by_tool_search_and_then_called() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "deferred = true\n");
    let provider = env.script(json!([
        { "calls": [{ "name": "ToolSearch", "input": { "query": "select:mcp__everything__echo" } }] },
        { "calls": [{ "name": "mcp__everything__echo", "input": { "message": "found by search" } }] },
        { "text": "done" }
    ]));
    let out = env.run(&["run", "--provider", &provider, "find the echo tool"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    // ToolSearch is offered only because a tool is held back, and its call loads it.
    assert!(
        log.lines().any(|l| l.contains("\"kind\":\"call_finished\"")
            && l.contains("\"tool\":\"ToolSearch\"")
            && l.contains("\"outcome\":\"ok\"")),
        "{log}"
    );
    assert!(log.contains("Echo: found by search"), "{log}");
}

#[test]
fn a_task_killed_mid_call_resumes_with_the_same_tool_names_and_runs_a_read_only_call_again() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let provider = calling(
        &env,
        "mcp__everything__trigger-long-running-operation",
        json!({ "duration": 3, "steps": 3 }),
    );
    let mut child = noeta_testkit::reap::Reaped::new(
        env.command(&["run", "--provider", &provider, "take a while"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Killed once the call is recorded as started (and before it can end). The deadline is
    // generous: under a loaded machine the server's start alone can take many seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before its call was recorded as started");
        }
        let listed = stdout(&env.run(&["tasks", "--json"]));
        if let Some(line) = listed.lines().last() {
            let id = serde_json::from_str::<serde_json::Value>(line).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned();
            if stdout(&env.run(&["log", &id, "--json"])).contains("\"kind\":\"call_started\"") {
                break;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // The new process offers the same name, and the read-only call (retry-safe by its
    // annotations) runs again to its end.
    let out = env.run(&["resume", "--last", "--provider", &provider]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    let finished: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"call_finished\""))
        .collect();
    assert_eq!(finished.len(), 1, "{log}");
    assert!(
        finished[0].contains("\"outcome\":\"ok\"")
            && finished[0].contains("mcp__everything__trigger-long-running-operation")
            && finished[0].contains("Long running operation completed"),
        "{log}"
    );
}

#[test]
fn mcp_add_writes_the_users_settings_list_starts_it_and_remove_takes_it_out() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let config = env.home.join(".noeta/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# mine\n[plugins.providers]\nmax_retries = 2\n").unwrap();
    let server = everything();
    let added = env.run(&[
        "mcp",
        "add",
        "-e",
        "GREETING=hi",
        "everything",
        "--",
        server.to_str().unwrap(),
        "stdio",
    ]);
    assert!(added.status.success(), "{}", stderr(&added));
    assert!(
        stdout(&added).starts_with("added MCP server `everything` (stdio: "),
        "{}",
        stdout(&added)
    );
    assert!(!stderr(&added).contains("warning"), "{}", stderr(&added));
    // A program that is not there is added (it may be installed later), with a warning.
    let missing = env.run(&["mcp", "add", "git", "--", "git-mcp-nowhere", "--repo", "."]);
    assert!(missing.status.success(), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains(
            "warning: `git-mcp-nowhere` is not on the PATH here: the server will not start \
             until it is installed (or give its full path)"
        ),
        "{}",
        stderr(&missing)
    );
    assert!(env.run(&["mcp", "remove", "git"]).status.success());
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with("# mine\n[plugins.providers]\nmax_retries = 2\n"),
        "{text}"
    );
    assert!(
        text.contains("args = [\"stdio\"]\nenv = { GREETING = \"hi\" }"),
        "{text}"
    );

    let listed = env.run(&["mcp", "list", "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let entry: serde_json::Value = serde_json::from_str(stdout(&listed).trim()).unwrap();
    assert_eq!(entry["status"], json!("ok"), "{entry}");
    assert_eq!(
        entry["from"],
        json!([config.display().to_string()]),
        "{entry}"
    );
    assert!(
        entry["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__everything__echo")),
        "{entry}"
    );

    let again = env.run(&["mcp", "add", "everything", "other-command"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already configured here"),
        "{}",
        stderr(&again)
    );

    let removed = env.run(&["mcp", "remove", "everything"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains("everything"), "{text}");
    let gone = env.run(&["mcp", "remove", "everything"]);
    assert!(!gone.status.success());
    assert!(
        stderr(&gone).contains("no MCP server `everything` is configured here"),
        "{}",
        stderr(&gone)
    );
    let bad = env.run(&[
        "mcp",
        "add",
        "--transport",
        "sse",
        "old",
        "http://localhost:1/sse",
    ]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("HTTP+SSE transport is not supported"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn a_servers_prompt_typed_as_a_slash_command_in_chat_is_sent_as_the_message() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let provider = env.script(json!([{ "text": "sunny" }, { "text": "still sunny" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/mcp__everything__args-prompt Paris\n/mcp__everything__args-prompt\n/mcp__everything__simple-prompt\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("sunny\nstill sunny\n"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out)
            .contains("/mcp__everything__args-prompt: /mcp__everything__args-prompt needs `city`"),
        "{}",
        stderr(&out)
    );
    let task = last_task(&env);
    let log = stdout(&env.run(&["log", &task]));
    assert!(log.contains("> What's weather in Paris?\n"), "{log}");
    assert!(
        log.contains("> This is a simple prompt without arguments.\n"),
        "{log}"
    );
}

#[test]
fn agents_list_starts_no_server() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let marker = env.workspace.join("server-started");
    env.write_trusted(
        ".noeta/config.toml",
        &format!(
            "[plugins.mcp.servers.local]\ncommand = \"sh\"\nargs = [\"-c\", \"touch '{}'; exec '{}' stdio\"]\n",
            marker.display(),
            everything().display()
        ),
    );
    let out = env.run(&["agents", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!marker.exists(), "`agents list` started an MCP server");
}

/// Whether process `pid` still runs (a zombie waiting to be reaped does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn sigterm_and_sigint_alike_stop_every_server_the_run_started() {
    for signal in ["TERM", "INT"] {
        let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
        let pid_file = env.workspace.join("server.pid");
        with_everything(
            &env,
            &format!(
                "\n[plugins.mcp.servers.tracked]\ncommand = \"sh\"\nargs = [\"-c\", \"echo $$ > '{}'; exec '{}' stdio\"]\n",
                pid_file.display(),
                everything().display()
            ),
        );
        // The run sits in a long command while the signal comes.
        let provider = env.script(json!([
            { "calls": [{ "name": "Bash", "input": { "command": "sleep 30", "timeout": 60000 } }] },
            { "text": "done" }
        ]));
        let mut child = env
            .command(&[
                "run",
                "--store",
                "memory:",
                "--permission-mode",
                "bypassPermissions",
                "--provider",
                &provider,
                "wait",
            ])
            .env("NOETA_KILL_GRACE_MS", "200")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let server = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // Let the run reach its command.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let _ = std::process::Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status();
        let _ = child.wait();
        let settle = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while alive(server) && std::time::Instant::now() < settle {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let survived = alive(server);
        if survived {
            let _ = std::process::Command::new("kill")
                .args(["-9", &server.to_string()])
                .status();
        }
        assert!(
            !survived,
            "SIG{signal}: MCP server {server} outlived `noeta run`"
        );
    }
}

#[test]
fn a_servers_request_for_input_is_answered_by_the_person_at_the_terminal() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let provider = calling(
        &env,
        "mcp__everything__trigger-elicitation-request",
        json!({}),
    );
    // Answer, then the required `name`, then the other fields by name: birthdate, check,
    // email, firstLine, homepage, integer, legacyTitledEnum, number, titledMultipleSelectEnum,
    // titledSingleSelectEnum, untitledMultipleSelectEnum, untitledSingleSelectEnum — a wrong
    // integer first, which is asked again.
    let answers = "y\nAda Lovelace\n\ny\n\n\n\nmany\n7\n\n\n\nhero-2\n\n\n";
    let out = env.run_with(
        &[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
            "ask me",
        ],
        Some(answers),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "? MCP server `everything` asks: Please provide inputs for the following fields:"
        ),
        "{err}"
    );
    assert!(err.contains("answer a whole number"), "{err}");
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    assert!(
        log.contains("- Name: Ada Lovelace")
            && log.contains("- Agreed to terms: true")
            && log.contains("- Favorite Integer: 7"),
        "{log}"
    );

    // Standard input closed: declined, and the run goes on.
    let provider = calling(
        &env,
        "mcp__everything__trigger-elicitation-request",
        json!({}),
    );
    let out = env.run_with(
        &[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
            "ask me",
        ],
        Some(""),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stdout(&env.run(&["log", &last_task(&env), "--json"]));
    assert!(log.contains("User declined"), "{log}");
}

#[test]
fn mcp_call_calls_one_tool_of_a_configured_server_and_names_what_is_wrong() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let out = env.run(&[
        "mcp",
        "call",
        "everything",
        "echo",
        r#"{"message": "by hand"}"#,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "Echo: by hand");
    let out = env.run(&["mcp", "call", "everything"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).lines().any(|l| l == "echo"),
        "{}",
        stdout(&out)
    );
    for (args, want) in [
        (
            &["mcp", "call", "everything", "echo", "{not json"][..],
            "the arguments `{not json` are not JSON",
        ),
        (
            &["mcp", "call", "everything", "echo", "[1]"][..],
            "the arguments must be a JSON object",
        ),
        (
            &["mcp", "call", "nowhere", "echo"][..],
            "no MCP server `nowhere` is configured (configured: everything)",
        ),
        (
            &["mcp", "call", "everything", "no-such-tool"][..],
            "mcp server `everything` has no tool `no-such-tool` (it offers: ",
        ),
    ] {
        let out = env.run(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn mcp_login_refuses_what_it_cannot_sign_in_to_naming_it() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    with_everything(&env, "");
    let fails = |args: &[&str]| {
        let out = env.command(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        stderr(&out)
    };
    let err = fails(&["mcp", "login", "nowhere"]);
    assert!(
        err.contains("no MCP server `nowhere` is configured (configured: everything)"),
        "{err}"
    );
    let err = fails(&["mcp", "login", "everything"]);
    assert!(
        err.contains("`everything` is not a streamable-HTTP server (stdio:")
            && err.contains("only those sign in"),
        "{err}"
    );
    let err = fails(&[
        "mcp",
        "login",
        "http://127.0.0.1:9/mcp",
        "--client-id",
        "c",
        "--client-secret-env",
        "NOETA_TEST_UNSET_SECRET",
    ]);
    assert!(
        err.contains("`NOETA_TEST_UNSET_SECRET`, which is not set"),
        "{err}"
    );
    // Nothing listens on the discard port: the step and the server are named, nothing kept.
    let err = fails(&["mcp", "login", "http://127.0.0.1:9/mcp"]);
    assert!(
        err.contains(
            "signing in to http://127.0.0.1:9/mcp: discovering its authorization server failed"
        ),
        "{err}"
    );
    assert!(!env.home.join(".noeta/mcp-sign-in").exists());
    let out = env
        .command(&["mcp", "logout", "http://127.0.0.1:9/mcp"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("no sign-in is kept for http://127.0.0.1:9/mcp"),
        "{}",
        stdout(&out)
    );
}
