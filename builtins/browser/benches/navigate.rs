//! What the browser costs a task, printed as `name: value unit`: starting a task's headless
//! Chromium (its first call), and `browser_navigate` to a page of a local server, snapshot
//! included, once the browser runs.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;

use futures::executor::block_on;
use noeta_builtin_browser::{Backend, Config};
use noeta_core::ToolContext;
use noeta_testkit::bench;
use serde_json::{Value, json};

const RUNS: usize = 30;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

/// A server answering every request with a small page naming its path.
fn server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| fail(&e.to_string()));
    let port = listener.local_addr().map_or(0, |a| a.port());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(match stream.try_clone() {
                Ok(s) => s,
                Err(_) => continue,
            });
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let path = first.split(' ').nth(1).unwrap_or("/").to_owned();
            let body = format!(
                "<title>Page {path}</title><h1>{path}</h1><p>Some text.</p><a href=\"/next\">Next</a>\
                 <form><input name=q><button>Go</button></form>"
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn navigate(tool: &Arc<dyn noeta_core::Tool>, url: &str) -> f64 {
    let ctx = ToolContext::new("bench-task", "call");
    let start = Instant::now();
    let out =
        block_on(tool.run(json!({ "url": url }), &ctx)).unwrap_or_else(|e| fail(&e.to_string()));
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    if !out.text.contains("Page /") {
        fail(&format!("the page did not open: {}", out.text));
    }
    elapsed
}

fn main() {
    let profiles = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    let config = Config::parse(&Value::Null, profiles.path())
        .unwrap_or_else(|e| fail(&e))
        .unwrap_or_else(|| fail("no chromium on PATH (apt-get install chromium)"));
    let base = format!("http://127.0.0.1:{}", server());
    // Each start is a new backend, so a new Chromium; the last one stays for the navigations.
    let mut last: Option<(Arc<Backend>, Arc<dyn noeta_core::Tool>)> = None;
    let starts = bench::sampled(bench::runs(5), || {
        if let Some((backend, _)) = last.take() {
            backend.close_all();
        }
        let backend = Arc::new(Backend::new(config.clone()));
        let tools = noeta_builtin_browser::tools(&backend);
        let Some(navigate_tool) = tools.into_iter().find(|t| t.name() == "browser_navigate") else {
            fail("no browser_navigate");
        };
        let first = navigate(&navigate_tool, &format!("{base}/start"));
        last = Some((backend, navigate_tool));
        first
    });
    let Some((backend, navigate_tool)) = last else {
        fail("no browser was started")
    };
    let mut i = 0;
    let samples = bench::sampled(RUNS, || {
        i += 1;
        navigate(&navigate_tool, &format!("{base}/page{}", i % 2))
    });
    backend.close_all();
    bench::report("browser_start_and_navigate_ms", "ms", 1, &starts);
    bench::report(
        "browser_navigate_ms",
        "ms",
        2,
        &bench::run_medians(&samples, bench::runs(5)),
    );
}
