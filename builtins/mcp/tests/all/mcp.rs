//! The `mcp` plugin against real MCP servers: the official reference server
//! (`@modelcontextprotocol/server-everything`, from npm) over stdio and streamable HTTP —
//! listing, calls, images, error results, deadlines, a crash mid-call and a restart — and its
//! settings' errors.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use noeta_builtin_mcp::{Mcp, Settings, tool_name};
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::store::TaskId;
use noeta_core::{Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};

/// The reference server's launcher (`noeta_testkit::npm`).
fn everything() -> PathBuf {
    noeta_testkit::npm::reference_server("mcp-server-everything")
}

/// `[plugins.mcp]` with `servers`, the first offer waiting for them as long as they take (as a
/// test needs: each checks what a started server offers).
fn settings(servers: Value) -> Settings {
    Settings::parse(&json!({ "servers": servers, "startup_wait_ms": 60_000 })).unwrap()
}

fn stdio_server(extra: Value) -> Value {
    let mut server = json!({ "command": everything().display().to_string(), "args": ["stdio"] });
    if let (Some(server), Some(extra)) = (server.as_object_mut(), extra.as_object()) {
        server.extend(extra.clone());
    }
    server
}

/// The tools the extension offers now.
fn offered(mcp: &Mcp) -> Vec<Arc<dyn Tool>> {
    let task = TaskId::new("mcp-test").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);
    mcp.tools(&view).unwrap()
}

fn find(tools: &[Arc<dyn Tool>], name: &str) -> Arc<dyn Tool> {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
            panic!("no tool `{name}` among {names:?}")
        })
        .clone()
}

fn call(tool: &Arc<dyn Tool>, input: Value) -> Result<ToolOutput, String> {
    block_on(tool.run(input, &ToolContext::new("mcp-test", "call-1"))).map_err(|e| e.to_string())
}

#[test]
fn a_stdio_server_lists_its_tools_and_answers_calls() {
    let mcp = Mcp::new(settings(json!({ "everything": stdio_server(json!({})) })));
    let tools = offered(&mcp);
    let echo = find(&tools, "mcp__everything__echo");
    assert!(
        echo.description().contains("Echo"),
        "{}",
        echo.description()
    );
    assert_eq!(
        echo.input_schema()["properties"]["message"]["type"],
        "string"
    );
    // Its annotations say read-only and idempotent: low risk, safe to run again.
    let flags = echo.flags();
    assert!(flags.read_only && flags.retry_safe && flags.unchecked_input);

    let out = call(&echo, json!({ "message": "hello from noeta" })).unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text, "Echo: hello from noeta");

    // An image result is attached, and named in the text.
    let image = find(&tools, "mcp__everything__get-tiny-image");
    let out = call(&image, json!({})).unwrap();
    assert!(out.text.contains("[image: image/png,"), "{}", out.text);
    assert_eq!(out.attachments.len(), 1);
    assert_eq!(out.attachments[0].media_type, "image/png");
    assert!(out.attachments[0].data.starts_with(b"\x89PNG"));

    // Input the server refuses comes back as an error result the model reads.
    let out = call(&echo, json!({ "message": 42 })).unwrap();
    assert!(out.is_error, "{}", out.text);

    // The same names on a second listing (a resume offers what the task was offered).
    let again: Vec<String> = offered(&mcp).iter().map(|t| t.name().to_owned()).collect();
    let first: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(again, first);
}

#[test]
fn a_call_past_its_deadline_fails_naming_the_server_and_the_next_call_starts_it_again() {
    let mcp = Mcp::new(settings(json!({
        "slow": stdio_server(json!({ "call_timeout_ms": 700 })),
    })));
    let tools = offered(&mcp);
    let long = find(&tools, "mcp__slow__trigger-long-running-operation");
    let started = Instant::now();
    let err = call(&long, json!({ "duration": 30, "steps": 3 })).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        err.contains("mcp server `slow`") && err.contains("no answer within 0.7 s"),
        "{err}"
    );
    // After its back-off (one second), the next call starts the server afresh.
    std::thread::sleep(Duration::from_millis(1_100));
    let echo = find(&tools, "mcp__slow__echo");
    let out = call(&echo, json!({ "message": "back" })).unwrap();
    assert_eq!(out.text, "Echo: back");
}

#[test]
fn a_server_that_dies_mid_call_fails_that_call_and_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // The real server, started through a shell that says its process id first.
    let script = format!(
        "echo $$ > '{}'; exec '{}' stdio",
        pid_file.display(),
        everything().display()
    );
    let mcp = Mcp::new(settings(
        json!({ "crashy": { "command": "sh", "args": ["-c", script] } }),
    ));
    let tools = offered(&mcp);
    let long = find(&tools, "mcp__crashy__trigger-long-running-operation");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap();
    });
    let err = call(&long, json!({ "duration": 20, "steps": 2 })).unwrap_err();
    killer.join().unwrap();
    assert!(err.contains("mcp server `crashy`"), "{err}");
    std::thread::sleep(Duration::from_millis(1_100));
    let echo = find(&tools, "mcp__crashy__echo");
    let out = call(&echo, json!({ "message": "alive again" })).unwrap();
    assert_eq!(out.text, "Echo: alive again");
}

#[test]
fn a_server_that_cannot_start_is_named_with_its_stderr_and_others_still_work() {
    let mcp = Mcp::new(settings(json!({
        "broken": { "command": "sh", "args": ["-c", "echo 'cannot find my config' >&2; exit 3"] },
        "missing": { "command": "/nonexistent/mcp-server" },
        "fine": stdio_server(json!({})),
    })));
    let status = block_on(mcp.connect());
    let by: std::collections::BTreeMap<_, _> = status.into_iter().collect();
    let broken = by["broken"].clone().unwrap_err();
    assert!(
        broken.contains("mcp server `broken` did not start")
            && broken.contains("cannot find my config"),
        "{broken}"
    );
    let missing = by["missing"].clone().unwrap_err();
    assert!(
        missing.contains("cannot start `/nonexistent/mcp-server`"),
        "{missing}"
    );
    assert!(
        by["fine"]
            .as_ref()
            .unwrap()
            .contains(&"mcp__fine__echo".to_owned())
    );
    let tools = offered(&mcp);
    assert!(
        tools
            .iter()
            .filter(|t| t.name().starts_with("mcp__"))
            .all(|t| t.name().starts_with("mcp__fine__"))
    );
}

#[test]
fn a_streamable_http_server_lists_and_answers() {
    let server = noeta_testkit::npm::EverythingOverHttp::start();
    let url = server.url.clone();
    let mcp = Mcp::new(settings(json!({
        "web": { "url": url, "headers": { "X-Test": "noeta" } },
    })));
    let tools = offered(&mcp);
    let echo = find(&tools, "mcp__web__echo");
    let out = call(&echo, json!({ "message": "over http" })).unwrap();
    assert_eq!(out.text, "Echo: over http");
}

#[test]
fn long_and_odd_names_are_shortened_the_same_way_every_time() {
    assert_eq!(tool_name("git", "status"), "mcp__git__status");
    let long = tool_name(
        "a-server-with-a-long-alias",
        &"very_long_tool_name_".repeat(4),
    );
    assert_eq!(long.len(), 64);
    assert_eq!(
        long,
        tool_name(
            "a-server-with-a-long-alias",
            &"very_long_tool_name_".repeat(4)
        )
    );
    assert_ne!(
        long,
        tool_name(
            "a-server-with-a-long-alias",
            &"very_long_tool_name_".repeat(5)
        )
    );
    let odd = tool_name("docs", "search.pages");
    assert!(odd.starts_with("mcp__docs__search_pages_"), "{odd}");
    assert_ne!(odd, tool_name("docs", "search_pages"));
}

#[test]
fn bad_settings_name_the_server_and_the_key() {
    let err = |servers: Value| Settings::parse(&json!({ "servers": servers })).unwrap_err();
    assert!(
        err(json!({ "x": {} })).contains("servers.x.command: a server needs a `command`"),
        "{}",
        err(json!({ "x": {} }))
    );
    assert!(err(json!({ "x": { "command": "a", "url": "http://h" } })).contains("not both"));
    assert!(err(json!({ "x": { "url": "http://h", "type": "sse" } })).contains("HTTP+SSE"));
    assert!(err(json!({ "x": { "url": "ftp://h" } })).contains("is not an http(s) URL"));
    assert!(err(json!({ "x": { "command": "a", "colour": "red" } })).contains("colour"));
    assert!(err(json!({ "a b": { "command": "a" } })).contains("servers.a b"));
    assert!(err(json!({ "x": { "command": "a", "headers": {} } })).contains("headers"));
    // A server switched off is not there at all.
    let off = Settings::parse(&json!({ "servers": { "x": { "command": "a", "enabled": false } } }))
        .unwrap();
    assert!(off.servers.is_empty());
    assert!(
        Settings::parse(&json!({ "server": {} }))
            .unwrap_err()
            .contains("server")
    );
}

#[test]
fn a_server_with_many_tools_or_marked_deferred_is_offered_through_tool_search() {
    let deferred_of = |config: Value| {
        let mut config = config;
        config["startup_wait_ms"] = json!(60_000);
        let mcp = Mcp::new(Settings::parse(&config).unwrap());
        let echo = find(&offered(&mcp), "mcp__e__echo");
        let flags = echo.flags();
        (flags.deferred, flags.search_hint)
    };
    // The reference server lists thirteen tools: under the default of forty, offered up front.
    let (deferred, _) = deferred_of(json!({ "servers": { "e": stdio_server(json!({})) } }));
    assert!(!deferred);
    let (deferred, hint) = deferred_of(json!({
        "defer_above": 5,
        "servers": { "e": stdio_server(json!({})) },
    }));
    assert!(deferred);
    assert_eq!(hint.as_deref(), Some("mcp e server"));
    let (deferred, _) = deferred_of(json!({
        "defer_above": 5,
        "servers": { "e": stdio_server(json!({ "deferred": false })) },
    }));
    assert!(!deferred, "a server's own `deferred = false` wins");
    let (deferred, _) =
        deferred_of(json!({ "servers": { "e": stdio_server(json!({ "deferred": true })) } }));
    assert!(deferred);
}

#[test]
fn a_dropped_call_tells_the_server_it_was_cancelled() {
    use std::future::Future;
    use std::task::{Context, Poll};
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("stdin.log");
    // The real server behind a `tee` that keeps everything it is sent.
    let script = format!(
        "tee '{}' | exec '{}' stdio",
        seen.display(),
        everything().display()
    );
    let mcp = Mcp::new(settings(
        json!({ "slow": { "command": "sh", "args": ["-c", script] } }),
    ));
    let tools = offered(&mcp);
    let long = find(&tools, "mcp__slow__trigger-long-running-operation");
    let ctx = ToolContext::new("mcp-test", "call-1");
    let mut call = Box::pin(long.run(json!({ "duration": 30, "steps": 3 }), &ctx));
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(matches!(call.as_mut().poll(&mut cx), Poll::Pending));
    std::thread::sleep(Duration::from_millis(500));
    assert!(matches!(call.as_mut().poll(&mut cx), Poll::Pending));
    drop(call);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sent = std::fs::read_to_string(&seen).unwrap_or_default();
        if sent.contains("notifications/cancelled") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no cancellation was sent: {sent}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server is still there for the next call.
    let echo = find(&tools, "mcp__slow__echo");
    assert_eq!(
        call_ok(&echo, json!({ "message": "still here" })),
        "Echo: still here"
    );
}

fn call_ok(tool: &Arc<dyn Tool>, input: Value) -> String {
    call(tool, input).unwrap().text
}

#[test]
fn the_reference_filesystem_server_reads_inside_its_directory_and_refuses_outside() {
    let bin = noeta_testkit::npm::reference_server("mcp-server-filesystem");
    assert!(
        bin.exists(),
        "the filesystem reference server is missing at {}",
        bin.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("shared");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::write(allowed.join("notes.txt"), "kept in the shared directory\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "outside\n").unwrap();
    let mcp = Mcp::new(settings(json!({
        "files": { "command": bin.display().to_string(), "args": [allowed.display().to_string()] },
    })));
    let tools = offered(&mcp);
    let read = find(&tools, "mcp__files__read_text_file");
    assert!(read.flags().read_only, "its annotations say read-only");
    let out = call(
        &read,
        json!({ "path": allowed.join("notes.txt").display().to_string() }),
    )
    .unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.contains("kept in the shared directory"),
        "{}",
        out.text
    );
    let out = call(
        &read,
        json!({ "path": dir.path().join("secret.txt").display().to_string() }),
    )
    .unwrap();
    assert!(
        out.is_error,
        "a path outside is the server's error: {}",
        out.text
    );
    assert!(
        out.text.to_lowercase().contains("access denied"),
        "{}",
        out.text
    );
    // Writing is high risk; the server calls it idempotent, so a crash re-runs it.
    let flags = find(&tools, "mcp__files__write_file").flags();
    assert!(!flags.read_only && flags.retry_safe && flags.risk == noeta_core::Risk::High);
}

#[test]
fn resources_are_listed_and_read_through_two_tools_offered_only_when_a_server_has_some() {
    let mcp = Mcp::new(settings(json!({ "everything": stdio_server(json!({})) })));
    let tools = offered(&mcp);
    let list = find(&tools, "ListMcpResources");
    let listing = call(&list, json!({})).unwrap().text;
    let uri = "demo://resource/static/document/architecture.md";
    assert!(listing.contains(&format!("everything: {uri}")), "{listing}");
    let read = find(&tools, "ReadMcpResource");
    assert!(read.flags().read_only);
    let out = call(&read, json!({ "server": "everything", "uri": uri })).unwrap();
    assert!(!out.is_error, "{}", out.text);
    assert!(
        out.text.starts_with(&format!("{uri} (text/markdown):\n")),
        "{}",
        out.text
    );
    assert!(out.text.len() > 200, "{}", out.text);
    let err = call(&read, json!({ "server": "nowhere", "uri": uri })).unwrap_err();
    assert!(
        err.contains("no server `nowhere` is configured (known: everything)"),
        "{err}"
    );
    let err = call(
        &read,
        json!({ "server": "everything", "uri": "demo://no/such" }),
    )
    .unwrap_err();
    assert!(
        err.contains("mcp server `everything`: reading `demo://no/such` failed"),
        "{err}"
    );

    // A server without resources brings no resource tools.
    let bin = noeta_testkit::npm::reference_server("mcp-server-filesystem");
    let dir = tempfile::tempdir().unwrap();
    let mcp = Mcp::new(settings(json!({
        "files": { "command": bin.display().to_string(), "args": [dir.path().display().to_string()] },
    })));
    let names: Vec<String> = offered(&mcp).iter().map(|t| t.name().to_owned()).collect();
    assert!(!names.iter().any(|n| n.contains("Resource")), "{names:?}");
}

#[test]
fn a_servers_prompts_are_slash_commands_sending_the_prompt_with_its_arguments() {
    use noeta_core::extension::CommandReply;
    let mcp = Mcp::new(settings(json!({ "everything": stdio_server(json!({})) })));
    let task = TaskId::new("mcp-test").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);
    let commands = mcp.commands(&view).unwrap();
    let args = commands
        .iter()
        .find(|c| c.name == "mcp__everything__args-prompt")
        .unwrap_or_else(|| panic!("no args-prompt among {commands:?}"));
    assert!(
        args.description
            .ends_with("(MCP prompt of `everything`; arguments: <city> [state])"),
        "{}",
        args.description
    );
    let run = |name: &str, args: &str| block_on(mcp.run_command(&view, name, args));
    assert_eq!(
        run("mcp__everything__args-prompt", "Paris").unwrap(),
        CommandReply::Send("What's weather in Paris?".to_owned())
    );
    assert_eq!(
        run("mcp__everything__args-prompt", "'New York' New York State").unwrap(),
        CommandReply::Send("What's weather in New York, New York State?".to_owned())
    );
    assert_eq!(
        run("mcp__everything__simple-prompt", "").unwrap(),
        CommandReply::Send("This is a simple prompt without arguments.".to_owned())
    );
    let err = run("mcp__everything__args-prompt", "")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "/mcp__everything__args-prompt needs `city`: /mcp__everything__args-prompt <city> [state]"
    );
    let err = run("mcp__everything__simple-prompt", "extra")
        .unwrap_err()
        .to_string();
    assert_eq!(err, "/mcp__everything__simple-prompt takes no arguments");
    let err = run("mcp__everything__args-prompt", "'unclosed")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unclosed quote"), "{err}");
}

#[test]
fn a_server_that_never_starts_costs_the_first_offer_at_most_the_startup_wait() {
    // It never answers `initialize`; its startup deadline (30 s) is far off.
    let mcp = Mcp::new(
        Settings::parse(&json!({
            "servers": { "mute": { "command": "sleep", "args": ["60"] } },
            "startup_wait_ms": 300,
        }))
        .unwrap(),
    );
    let started = std::time::Instant::now();
    let tools = offered(&mcp);
    let waited = started.elapsed();
    assert!(tools.is_empty());
    // The wait is the configured one (with room for a loaded machine), not the deadline.
    assert!(
        waited >= std::time::Duration::from_millis(250)
            && waited < std::time::Duration::from_secs(5),
        "the first offer waited {waited:?}"
    );
    // Later offers do not wait at all.
    let started = std::time::Instant::now();
    assert!(offered(&mcp).is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn a_server_up_after_the_first_offer_joins_with_its_tools_deferred() {
    // It sleeps before it starts: the first offer waits 200 ms for it, and it is late.
    let slow = format!("sleep 1.5; exec '{}' stdio", everything().display());
    let mcp = Mcp::new(
        Settings::parse(&json!({
            "servers": { "slow": { "command": "sh", "args": ["-c", slow] } },
            "startup_wait_ms": 200,
        }))
        .unwrap(),
    );
    let first = offered(&mcp);
    assert!(
        !first.iter().any(|t| t.name().starts_with("mcp__slow__")),
        "the slow server was not up yet"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let echo = loop {
        if let Some(echo) = offered(&mcp)
            .into_iter()
            .find(|t| t.name() == "mcp__slow__echo")
        {
            break echo;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slow server never came up"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        echo.flags().deferred,
        "a late server's tools join deferred, leaving the request's tools as they were"
    );
    assert_eq!(
        call(&echo, json!({ "message": "late" })).unwrap().text,
        "Echo: late"
    );
}

/// Answers every request for input with its form's defaults and a name, noting what it saw.
struct Form {
    seen: std::sync::Mutex<Vec<(String, String)>>,
}

#[async_trait::async_trait]
impl noeta_builtin_mcp::Elicitor for Form {
    async fn elicit(
        &self,
        server: &str,
        message: &str,
        schema: &Value,
    ) -> noeta_builtin_mcp::Elicited {
        self.seen
            .lock()
            .unwrap()
            .push((server.to_owned(), message.to_owned()));
        let mut values = noeta_builtin_mcp::elicitation_defaults(schema);
        values.insert("name".to_owned(), json!("Ada Lovelace"));
        noeta_builtin_mcp::Elicited::Accept(values)
    }
}

#[test]
fn a_servers_request_for_input_goes_to_the_hosts_elicitor_or_is_declined() {
    let form = Arc::new(Form {
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let mcp = Mcp::with_host(
        settings(json!({ "everything": stdio_server(json!({})) })),
        None,
        Some(form.clone()),
        None,
    );
    let tool = find(
        &offered(&mcp),
        "mcp__everything__trigger-elicitation-request",
    );
    let out = call(&tool, json!({})).unwrap();
    assert!(
        out.text.contains("User provided the requested information")
            && out.text.contains("- Name: Ada Lovelace")
            && out.text.contains("- Favorite Integer: 42"),
        "{}",
        out.text
    );
    assert_eq!(
        form.seen.lock().unwrap().as_slice(),
        [(
            "everything".to_owned(),
            "Please provide inputs for the following fields:".to_owned()
        )]
    );

    // Nobody to ask: declined.
    let mcp = Mcp::new(settings(json!({ "everything": stdio_server(json!({})) })));
    let tool = find(
        &offered(&mcp),
        "mcp__everything__trigger-elicitation-request",
    );
    let out = call(&tool, json!({})).unwrap();
    assert!(out.text.contains("User declined"), "{}", out.text);
}
