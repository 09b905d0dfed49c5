//! The web frontend's first paint, printed as `name: value unit`:
//!
//! - `web_tasks_1000_first_paint_ms`: a store of 1,000 tasks served by `noeta serve` (release
//!   binary, no workers), the page opened in headless Chromium: the time from the navigation's
//!   start to the first frame painted after the task list was drawn (`performance.mark`), the
//!   median of seven loads;
//! - `web_assets_bytes`: the size of every file the page is made of, as embedded in the binary.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use futures::StreamExt;
use noeta::frontends::Frontend;
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::Runtime;
use noeta_core::store::TaskId;
use noeta_testkit::bench;
use noeta_testkit::serve::{Server, chromium, is_root};
use serde_json::json;

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");
const TASKS: usize = 1_000;
const LOADS: usize = 7;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn ok<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    result.unwrap_or_else(|e| fail(&e.to_string()))
}

/// A store of `TASKS` one-turn tasks, as `noeta run` leaves them.
async fn store(dir: &std::path::Path) -> String {
    let url = format!("sqlite:{}", dir.join("web.db").display());
    let paths = noeta::HostPaths {
        home: Some(dir.to_owned()),
        workspace: dir.to_owned(),
    };
    let stores = ok(noeta::open_store(&paths, Some(&url)));
    let model = Arc::new(ok(ScriptedProvider::from_json(
        &json!({ "turns": [{ "text": "done" }] }).to_string(),
        "bench",
    )));
    let runtime = Runtime::new(stores.log.clone(), stores.content.clone(), model);
    let session = noeta_core::session::bare_session("main", "Answer.");
    for n in 0..TASKS {
        let task = ok(TaskId::new(format!("task-{n:04}")));
        ok(runtime
            .create(&session, &task, &format!("goal number {n}: look into it"))
            .await);
        ok(runtime.run(&session, &task).await);
    }
    url
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = ok(tempfile::tempdir());
    let url = store(dir.path()).await;
    let server = ok(Server::start(
        Command::new(NOETA)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "0",
                "--store",
                &url,
            ])
            .env("HOME", dir.path())
            .current_dir(dir.path())
            .stderr(Stdio::null()),
    ));
    // The page takes the token `noeta serve` made and keeps, as its printed address carries it.
    let token = ok(std::fs::read_to_string(
        dir.path().join(".noeta/serve-token"),
    ));
    let server = server.with_token(token.trim());
    let page_url = server.page();

    let profile = ok(tempfile::tempdir());
    let mut config = BrowserConfig::builder()
        .chrome_executable(
            chromium()
                .unwrap_or_else(|| fail("Chromium is not installed: apt-get install chromium")),
        )
        .user_data_dir(profile.path())
        .window_size(1000, 800)
        .arg("--disable-gpu")
        .arg("--disable-dev-shm-usage");
    if is_root() {
        config = config.no_sandbox();
    }
    let (browser, mut handler) = ok(Browser::launch(ok(config.build())).await);
    tokio::spawn(async move { while handler.next().await.is_some() {} });
    let mut samples = Vec::new();
    // The first load warms up (the browser's caches, the server's first list).
    for load in 0..=LOADS {
        let page = ok(browser.new_page(page_url.as_str()).await);
        let mut painted = None;
        for _ in 0..600 {
            let at: Option<f64> = ok(page
                .evaluate("performance.getEntriesByName('tasks-painted')[0]?.startTime ?? null")
                .await)
            .into_value()
            .ok()
            .flatten();
            if at.is_some() {
                painted = at;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let listed: Option<String> = ok(page.evaluate("document.body.dataset.listed").await)
            .into_value()
            .ok();
        if listed.as_deref() != Some("1000") {
            fail(&format!("the list shows {listed:?} tasks, not {TASKS}"));
        }
        let painted = painted.unwrap_or_else(|| fail("the list was never painted"));
        if load > 0 {
            samples.push(painted);
        }
        ok(page.close().await);
    }
    bench::report("web_tasks_1000_first_paint_ms", "ms", 1, &samples);
    let bytes: usize = noeta::frontends::Web
        .assets()
        .iter()
        .map(|a| a.body.len())
        .sum();
    println!("web_assets_bytes: {bytes} bytes");
    drop(browser);
    drop(server);
}
