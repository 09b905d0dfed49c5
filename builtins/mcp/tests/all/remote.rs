//! Remote servers the host resolves (`type = "host"`): the endpoint and its credentials come
//! from the host's resolver at every turn, by alias — against the reference server over
//! streamable HTTP, and a bare listener that records what a client sends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_builtin_mcp::{Mcp, Remote, RemoteResolver, Settings};
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::store::TaskId;
use noeta_core::{Tool, ToolContext};
use serde_json::json;

/// Answers from a list the test changes between turns, and counts the questions.
#[derive(Default)]
struct Scripted {
    answer: Mutex<Option<Result<Option<Remote>, String>>>,
    asked: Mutex<Vec<String>>,
}

impl Scripted {
    fn set(&self, answer: Result<Option<Remote>, String>) {
        *self.answer.lock().unwrap() = Some(answer);
    }

    fn asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

#[async_trait]
impl RemoteResolver for Scripted {
    async fn resolve(&self, alias: &str) -> Result<Option<Remote>, String> {
        self.asked.lock().unwrap().push(alias.to_owned());
        self.answer
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| Ok(None))
    }
}

fn host_server() -> Settings {
    Settings::parse(&json!({ "servers": { "crm": { "type": "host" } }, "startup_wait_ms": 60_000 }))
        .unwrap()
}

fn with_view<T>(f: impl FnOnce(&View<'_>) -> T) -> T {
    let task = TaskId::new("remote-test").unwrap();
    let state = TaskState::default();
    f(&View::new(&task, "main", &state, &[], &[]))
}

/// A new turn (the resolver is asked again), then the tools offered.
fn turn(mcp: &Mcp) -> Vec<Arc<dyn Tool>> {
    with_view(|view| {
        block_on(mcp.turn_intake(view, "go")).unwrap();
        mcp.tools(view).unwrap()
    })
}

fn names(tools: &[Arc<dyn Tool>]) -> Vec<String> {
    tools.iter().map(|t| t.name().to_owned()).collect()
}

#[test]
fn a_host_resolved_server_is_reached_where_the_resolver_says_at_every_turn() {
    let server = noeta_testkit::npm::EverythingOverHttp::start();
    let resolver = Arc::new(Scripted::default());
    resolver.set(Ok(Some(
        Remote::new(&server.url).with_header("Authorization", "Bearer t0k3n"),
    )));
    let mcp = Mcp::with_resolver(host_server(), Some(resolver.clone()));

    // A resumed task's first offer asks for what was never resolved.
    let first = with_view(|view| mcp.tools(view).unwrap());
    assert_eq!(resolver.asked(), 1);
    let echo = first
        .iter()
        .find(|t| t.name() == "mcp__crm__echo")
        .unwrap_or_else(|| panic!("no echo among {:?}", names(&first)))
        .clone();
    let out = block_on(echo.run(
        json!({ "message": "resolved" }),
        &ToolContext::new("remote-test", "c1"),
    ))
    .unwrap();
    assert_eq!(out.text, "Echo: resolved");

    // Every turn asks again; the same endpoint keeps the connection.
    let again = turn(&mcp);
    assert_eq!(resolver.asked(), 2);
    assert!(names(&again).contains(&"mcp__crm__echo".to_owned()));

    // No endpoint now: its tools are not offered.
    resolver.set(Ok(None));
    let none = turn(&mcp);
    assert!(
        !names(&none).iter().any(|n| n.starts_with("mcp__crm__")),
        "{:?}",
        names(&none)
    );
    let status = block_on(mcp.connect());
    let Err(why) = &status[0].1 else {
        panic!("{status:?}")
    };
    assert!(
        why.contains("mcp server `crm`") && why.contains("no endpoint"),
        "{why}"
    );

    // A failing resolver is named; the endpoint back brings the tools back at once (a changed
    // endpoint is a new server: no back-off).
    resolver.set(Err("the vault is sealed".to_owned()));
    let status = block_on(mcp.connect());
    let Err(why) = &status[0].1 else {
        panic!("{status:?}")
    };
    assert!(
        why.contains("the host's resolver failed: the vault is sealed"),
        "{why}"
    );
    resolver.set(Ok(Some(Remote::new(&server.url))));
    assert!(names(&turn(&mcp)).contains(&"mcp__crm__echo".to_owned()));
}

#[test]
fn the_resolvers_headers_reach_the_server_and_are_never_shown() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_owned());
        }
        stream
            .write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )
            .unwrap();
        head
    });
    let resolver = Arc::new(Scripted::default());
    let remote = Remote::new(format!("http://127.0.0.1:{port}/mcp"))
        .with_header("Authorization", "Bearer s3cret");
    assert!(!format!("{remote:?}").contains("s3cret"));
    resolver.set(Ok(Some(remote)));
    let mcp = Mcp::with_resolver(host_server(), Some(resolver));
    let status = block_on(mcp.connect());
    let head = seen.join().unwrap();
    assert!(
        head.iter()
            .any(|l| l.eq_ignore_ascii_case("authorization: Bearer s3cret")),
        "{head:?}"
    );
    let Err(why) = &status[0].1 else {
        panic!("{status:?}")
    };
    assert!(why.contains("mcp server `crm` did not start"), "{why}");
    assert!(!why.contains("s3cret"), "{why}");
}

#[test]
fn without_a_resolver_a_host_server_fails_saying_so_and_settings_cannot_hold_its_endpoint() {
    let mcp = Mcp::new(host_server());
    let status = block_on(mcp.connect());
    let Err(why) = &status[0].1 else {
        panic!("{status:?}")
    };
    assert!(
        why.contains("`crm`") && why.contains("this host has no MCP server resolver"),
        "{why}"
    );

    for (key, value) in [
        ("url", json!("https://crm.example/mcp")),
        ("headers", json!({ "Authorization": "Bearer x" })),
        ("command", json!("crm-mcp")),
    ] {
        let mut server = json!({ "type": "host" });
        server[key] = value;
        let err = Settings::parse(&json!({ "servers": { "crm": server } })).unwrap_err();
        assert!(
            err.contains("crm") && err.contains(key) && err.contains("host's resolver"),
            "{err}"
        );
    }
}
