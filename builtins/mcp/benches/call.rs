//! The MCP client benchmark, printed as `name: value unit`: connecting to the reference stdio
//! server (start, `initialize`, `tools/list`) and the round trip of a trivial call (`echo`) to
//! it, through the tool the model would call. The server is the one the tests use
//! (`$NOETA_TEST_NPM`, default `~/.cache/noeta-test-npm`, installed by `cargo xtask test`).

use std::path::PathBuf;
use std::time::Instant;

use futures::executor::block_on;
use noeta_builtin_mcp::{Mcp, Settings};
use noeta_core::ToolContext;
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::store::TaskId;
use noeta_testkit::bench;
use serde_json::json;

const CONNECTS: usize = 6;
const CALLS: usize = 200;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn server() -> PathBuf {
    noeta_testkit::npm::reference_server("mcp-server-everything")
}

fn main() {
    let config = json!({ "servers": { "e": { "command": server().display().to_string(), "args": ["stdio"] } } });
    let task = TaskId::new("bench").unwrap_or_else(|e| fail(&e.to_string()));
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);

    let mut connects = Vec::new();
    let mut last = None;
    for _ in 0..CONNECTS {
        let mcp = Mcp::new(Settings::parse(&config).unwrap_or_else(|e| fail(&e)));
        let start = Instant::now();
        let tools = mcp.tools(&view).unwrap_or_else(|e| fail(&e.to_string()));
        connects.push(start.elapsed().as_secs_f64() * 1e3);
        if tools.is_empty() {
            fail("the server listed no tools");
        }
        last = Some((mcp, tools));
    }
    // Each connection starts its own server process, so the first is the warm-up.
    bench::report("mcp_connect_ms", "ms", 1, &connects[1..]);

    let Some((_mcp, tools)) = last else {
        fail("no connection")
    };
    let echo = tools
        .iter()
        .find(|t| t.name() == "mcp__e__echo")
        .unwrap_or_else(|| fail("no echo tool"));
    let ctx = ToolContext::new("bench", "call");
    let mut calls = Vec::new();
    for n in 0..CALLS {
        let start = Instant::now();
        let out = block_on(echo.run(json!({ "message": format!("ping {n}") }), &ctx))
            .unwrap_or_else(|e| fail(&e.to_string()));
        calls.push(start.elapsed().as_secs_f64() * 1e6);
        if out.is_error {
            fail(&out.text);
        }
    }
    bench::report(
        "mcp_stdio_call_us",
        "us",
        0,
        &bench::run_medians(&calls[CALLS / 10..], bench::runs(5)),
    );
}
