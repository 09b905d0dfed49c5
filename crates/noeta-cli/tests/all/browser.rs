//! The `browser` built-in through `noeta run` with real Chromium (Debian's `chromium`) against a
//! local HTTP server: navigate and snapshot, type into a form and submit, click a link,
//! extract, a screenshot kept as a PNG of the viewport's size, a refused `file:` URL and host,
//! the ask under the default permission mode, and a task killed with SIGKILL whose resumed
//! browser goes back to its page.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// Fails, naming what is missing, when Chromium is not installed.
fn require_chromium() {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("chromium").is_file()));
    assert!(
        found,
        "these tests need Chromium: apt-get install chromium (`cargo xtask test` installs it)"
    );
}

/// A small site: `/` (a heading, a link, a search form), `/about`, `/search?q=…` (echoes
/// the query) and `/files` (a link to `/report.csv`, served as an attachment).
fn site() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
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
                let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                let mut headers = "content-type: text/html".to_owned();
                let (status, body) = match path {
                    "/" => (
                        "200 OK",
                        "<!doctype html><title>Home</title><h1>Welcome</h1>\
                        <p>A page for the browser tests.</p><a href=\"/about\">About us</a>\
                        <form action=\"/search\"><input name=\"q\" placeholder=\"Search\">\
                        <button>Go</button></form><p hidden>invisible words</p>"
                            .to_owned(),
                    ),
                    "/about" => (
                        "200 OK",
                        "<title>About</title><p>We make widgets.</p>".to_owned(),
                    ),
                    "/files" => (
                        "200 OK",
                        "<title>Files</title><p>The report:</p>\
                        <a href=\"/report.csv\" download>Report</a>"
                            .to_owned(),
                    ),
                    "/report.csv" => {
                        headers = "content-type: text/csv\r\ncontent-disposition: attachment; \
                                   filename=\"report.csv\""
                            .to_owned();
                        ("200 OK", "month,widgets\njanuary,12\n".to_owned())
                    }
                    "/search" => (
                        "200 OK",
                        format!(
                            "<title>Results</title><p>Results for {}</p>",
                            query.strip_prefix("q=").unwrap_or("")
                        ),
                    ),
                    _ => ("404 Not Found", "<title>Missing</title>".to_owned()),
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\n{headers}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

fn env_with_browser(extra: &str) -> CliEnv {
    require_chromium();
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".noeta/config.toml",
        &format!("[agents.main]\nadd_plugins = [\"browser\"]\n{extra}"),
    );
    env
}

fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

fn results(text: &str) -> Vec<Value> {
    events(text)
        .into_iter()
        .filter(|e| e["kind"] == "call_finished")
        .map(|e| e["data"].clone())
        .collect()
}

fn call(name: &str, input: Value) -> Value {
    json!({ "calls": [{ "name": name, "input": input }] })
}

/// Kills any Chromium still running on a profile under `home` (one a killed `noeta` left).
fn end_browsers(home: &Path) {
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-f", &home.display().to_string()])
        .status();
}

/// Whether a Chromium runs on a profile under `home`.
fn browsers_running(home: &Path) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", &format!("user-data-dir={}", home.display())])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
}

/// Decodes a PNG (8-bit RGB or RGBA, as Chromium writes screenshots) with Python's zlib: its
/// width and height, once every row has been inflated and counted.
fn decoded_size(png: &Path) -> (u64, u64) {
    let script = r#"
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, width, height, channels = 8, b'', 0, 0, 0
while pos < len(data):
    length, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b'IHDR':
        width, height, depth, colour = struct.unpack('>IIBB', body[:10])
        assert depth == 8, depth
        channels = {2: 3, 6: 4}[colour]
    elif kind == b'IDAT':
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
assert len(raw) == height * (1 + width * channels), (len(raw), width, height)
print(width, height)
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &png.display().to_string()])
        .output()
        .expect("python3 decodes the PNG");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    (words.next().unwrap(), words.next().unwrap())
}

/// The bytes of a content-store body of the workspace's store.
fn content(env: &CliEnv, reference: &Value) -> Vec<u8> {
    let paths = noeta::HostPaths {
        home: Some(env.home.clone()),
        workspace: env.workspace.clone(),
    };
    let stores = noeta::open_store(&paths, None).unwrap();
    let reference: noeta_core::store::ContentRef =
        serde_json::from_value(reference.clone()).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(stores.content.get(&reference))
        .unwrap()
}

#[test]
fn the_browser_navigates_types_clicks_extracts_and_takes_a_screenshot() {
    let env = env_with_browser("[plugins.browser]\nwidth = 1024\nheight = 700\n");
    let base = format!("http://127.0.0.1:{}", site());
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/") })),
        call("browser_type", json!({ "index": 2, "text": "blue widgets", "submit": true })),
        call("browser_navigate", json!({ "url": format!("{base}/") })),
        call("browser_click", json!({ "index": 1 })),
        call("browser_extract", json!({})),
        call("browser_screenshot", json!({})),
        call("browser_navigate", json!({ "url": "file:///etc/passwd" })),
        call("browser_click", json!({ "index": 9 })),
        { "text": "done" }
    ]));
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "browse the site",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("WARN"), "{}", stderr(&out));
    let results = results(&stdout(&out));
    let text = |i: usize| results[i]["text"].as_str().unwrap_or_default().to_owned();
    // The snapshot: title, URL, visible text, numbered elements; hidden text left out.
    let home = text(0);
    assert!(
        home.starts_with(&format!(
            "Opened {base}/.\n\nPage: Home\nURL: {base}/\n3 interactive elements"
        )),
        "{home}"
    );
    assert!(
        home.contains("# Welcome\nA page for the browser tests."),
        "{home}"
    );
    assert!(home.contains("[1] link \"About us\" -> /about"), "{home}");
    assert!(
        home.contains("[2] input[text] name=\"q\" placeholder=\"Search\" value=\"\""),
        "{home}"
    );
    assert!(home.contains("[3] button \"Go\""), "{home}");
    assert!(!home.contains("invisible words"), "{home}");
    // Typed and submitted: the form went to the results page.
    let typed = text(1);
    assert!(
        typed.starts_with("Typed into [2] and pressed Enter."),
        "{typed}"
    );
    assert!(
        typed.contains(&format!("URL: {base}/search?q=blue+widgets")),
        "{typed}"
    );
    assert!(typed.contains("Results for blue+widgets"), "{typed}");
    // Clicked the link.
    let clicked = text(3);
    assert!(
        clicked.contains("Page: About") && clicked.contains("We make widgets."),
        "{clicked}"
    );
    let extracted = text(4);
    assert!(
        extracted.starts_with(&format!("Page: About\nURL: {base}/about")),
        "{extracted}"
    );
    // The screenshot: an image/png artifact of the viewport's size.
    let shot = &results[5];
    assert!(
        shot["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Screenshot of {base}/about (1024×700 PNG")),
        "{shot}"
    );
    let tasks = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(tasks.lines().last().unwrap()).unwrap();
    let log = stdout(&env.run(&["log", "--json", task["id"].as_str().unwrap()]));
    let recorded: Vec<Value> = events(&log)
        .into_iter()
        .filter(|e| e["extension"] == "browser")
        .collect();
    let screenshot = recorded.iter().find(|e| e["kind"] == "screenshot").unwrap();
    let artifact = &screenshot["data"]["artifact"];
    assert_eq!(artifact["media_type"], "image/png", "{screenshot}");
    assert_eq!(screenshot["data"]["width"], 1024);
    let png = content(&env, artifact);
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let file = env.root().join("shot.png");
    std::fs::write(&file, &png).unwrap();
    assert_eq!(decoded_size(&file), (1024, 700));
    // Refused and wrong calls are told to the model.
    assert!(text(6).contains("file: URLs are refused"), "{}", text(6));
    assert_eq!(results[6]["outcome"], "error", "{:?}", results[6]);
    assert!(
        text(7).contains("there is no element [9] on the page now"),
        "{}",
        text(7)
    );
    // The page state is recorded with each call.
    let pages: Vec<&Value> = recorded.iter().filter(|e| e["kind"] == "page").collect();
    assert_eq!(pages.len(), 6, "{log}");
    assert_eq!(pages[0]["data"]["url"], format!("{base}/"));
    assert_eq!(pages[0]["data"]["elements"], 3);
    assert_eq!(
        pages[0]["data"]["elements_hash"].as_str().unwrap().len(),
        16
    );
}

#[test]
fn hosts_off_the_allow_list_are_refused_and_the_default_mode_asks_first() {
    let env = env_with_browser("[plugins.browser]\nallowed_hosts = [\"localhost\"]\n");
    let base = format!("http://127.0.0.1:{}", site());
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/") })),
        { "text": "refused" }
    ]));
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "go",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let refused = results(&stdout(&out));
    assert!(
        refused[0]["text"].as_str().unwrap().contains("the host `127.0.0.1` is not on the browser's allow-list ([plugins.browser] allowed_hosts: localhost)"),
        "{refused:?}"
    );

    // Under the default mode every browser call is asked for: refused with no answer, run
    // once allowed.
    let env = env_with_browser("");
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/about") })),
        { "text": "declined" },
        call("browser_navigate", json!({ "url": format!("{base}/about") })),
        { "text": "opened" }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "open about"], None, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("`browser_navigate` is a high risk tool — allow this call?"),
        "{said}"
    );
    assert!(said.contains("browser_navigate failed: declined"), "{said}");
    let out = env.run_with(
        &["run", "--json", "--provider", &provider, "open about"],
        Some("y\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let allowed = results(&stdout(&out));
    assert!(
        allowed[0]["text"]
            .as_str()
            .unwrap()
            .contains("We make widgets."),
        "{allowed:?}"
    );
}

#[test]
fn a_task_killed_mid_browse_goes_back_to_its_page_when_resumed() {
    let env = env_with_browser("");
    let base = format!("http://127.0.0.1:{}", site());
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/about") })),
        call("Bash", json!({ "command": "touch started; sleep 30" })),
        call("browser_extract", json!({})),
        { "text": "done" }
    ]));
    let mut child = env
        .command(&[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
            "browse",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = env.workspace.join("started");
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the shell command never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "noeta ended before the step"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The killed process's browser dies with it.
    let start = Instant::now();
    while browsers_running(&env.home) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a browser outlived the process that started it"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = env.run(&[
        "resume",
        "--last",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
    ]);
    end_browsers(&env.home);
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&stdout(&out));
    let extracted = results
        .iter()
        .filter_map(|r| r["text"].as_str())
        .find(|t| t.contains("went back to"))
        .unwrap_or_else(|| panic!("{results:?}"));
    assert!(
        extracted.starts_with(&format!(
            "(The browser was started again and went back to {base}/about, where this task was.)\nPage: About"
        )),
        "{extracted}"
    );
    assert!(extracted.contains("We make widgets."), "{extracted}");
}

#[test]
fn backend_none_offers_no_browser_and_a_bad_setting_is_named() {
    let env = env_with_browser("[plugins.browser]\nbackend = \"none\"\n");
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": "http://127.0.0.1:1/" })),
        { "text": "done" }
    ]));
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "go",
    ]);
    let results = results(&stdout(&out));
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .contains("browser_navigate"),
        "{results:?}"
    );
    assert_eq!(results[0]["outcome"], "denied", "{results:?}");
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("no tool named `browser_navigate` is available"),
        "{results:?}"
    );

    let env = env_with_browser("[plugins.browser]\nbackend = \"firefox\"\n");
    let out = env.run(&["run", "--provider", &provider, "go"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "[plugins.browser] backend: `firefox` is not a browser backend (known: chromium, none)"
        ),
        "{}",
        stderr(&out)
    );
}

/// The main browser processes on a profile under `home`: their pids.
fn browser_pids(home: &Path) -> Vec<u32> {
    let marker = format!("user-data-dir={}", home.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.first().is_some_and(|a| a.ends_with("/chromium"))
                && args.iter().any(|a| a.contains(&marker))
                && !args.iter().any(|a| a.starts_with("--type="))
        })
        .collect()
}

/// With the namespace sandbox chosen for commands, the browser runs in it too: its own mount
/// namespace, where a hidden path is empty, and pages still open (the network is shared).
#[test]
fn under_the_namespace_sandbox_the_browser_runs_in_it_too() {
    let env = env_with_browser(
        "[plugins.sandbox]\nprovider = \"bubblewrap\"\nhidden_paths = [\"~/secret.txt\"]\n",
    );
    std::fs::write(env.home.join("secret.txt"), "the secret\n").unwrap();
    let base = format!("http://127.0.0.1:{}", site());
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/about") })),
        call("Bash", json!({ "command": "touch started; sleep 20" })),
        { "text": "done" }
    ]));
    let mut child = env
        .command(&[
            "run",
            "--json",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            &provider,
            "browse",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = env.workspace.join("started");
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the shell command never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "noeta ended before the step"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = browser_pids(&env.home);
    assert!(!pids.is_empty(), "no browser runs");
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    for pid in &pids {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
        assert_ne!(
            theirs, ours,
            "the browser {pid} shares this mount namespace"
        );
        let seen = std::fs::read_to_string(format!(
            "/proc/{pid}/root{}",
            env.home.join("secret.txt").display()
        ))
        .unwrap_or_default();
        assert_eq!(seen, "", "the browser {pid} reads a hidden path");
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let results = results(&String::from_utf8_lossy(&out.stdout));
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .contains("We make widgets."),
        "{results:?}"
    );
}

#[test]
fn a_download_lands_in_the_workspace_only_through_browser_download_when_allowed() {
    let env = env_with_browser("");
    let base = format!("http://127.0.0.1:{}", site());
    let provider = env.script(json!([
        call("browser_navigate", json!({ "url": format!("{base}/files") })),
        call("browser_click", json!({ "index": 1 })),
        call("browser_download", json!({ "index": 1, "path": "data/report.csv" })),
        call("browser_download", json!({ "index": 1, "path": "data/report.csv" })),
        call("browser_download", json!({ "index": 1, "path": "../outside.csv" })),
        { "text": "done" }
    ]));
    std::fs::create_dir_all(env.workspace.join("data")).unwrap();
    let out = env.run(&[
        "run",
        "--json",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "get the report",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let results = results(&stdout(&out));
    let text = |i: usize| results[i]["text"].as_str().unwrap_or_default().to_owned();
    // A plain click downloads nothing.
    assert!(text(1).starts_with("Clicked [1]."), "{}", text(1));
    let saved = text(2);
    assert!(
        saved.starts_with(
            "Clicked [1] and saved the download `report.csv` (25 bytes) as data/report.csv."
        ),
        "{saved}"
    );
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("data/report.csv")).unwrap(),
        "month,widgets\njanuary,12\n"
    );
    let files: Vec<String> = std::fs::read_dir(env.workspace.join("data"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["report.csv"]);
    assert!(text(3).contains("exists already"), "{}", text(3));
    assert!(
        text(4).contains("must be a relative path inside the workspace"),
        "{}",
        text(4)
    );
    assert!(!env.root().join("outside.csv").exists());

    // Under the default mode a download is asked for like every browser call: declined, no
    // file.
    let env = env_with_browser("");
    let provider = env.script(json!([
        call("browser_download", json!({ "index": 1, "path": "report.csv" })),
        { "text": "declined" }
    ]));
    let out = env.run_with(&["run", "--provider", &provider, "get it"], None, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("`browser_download` is a high risk tool — allow this call?"),
        "{said}"
    );
    assert!(!env.workspace.join("report.csv").exists());
}
