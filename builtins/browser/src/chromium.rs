//! The browser backend: a headless Chromium per task, driven over the DevTools Protocol.
//!
//! A task's browser starts on its first browser call (a task that never browses never starts
//! one), with a profile directory of its own (`<profiles>/<task>`), so cookies and storage
//! survive a resume. Chromium runs under `setpriv --pdeathsig KILL` where util-linux has it,
//! so it dies with the process that started it, even when that process is killed; a browser
//! left behind by a killed process is ended before its profile is used again. Instead of
//! starting Chromium, the backend can attach to a running one (`cdp_url`), opening a page of
//! its own per task.
//!
//! Every DevTools call runs on one runtime thread of the crate's own (the protocol client
//! needs tokio; the runner does not); the tools await its join handles from any executor.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::layout::Point;
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Mutex as AsyncMutex;

use crate::config::{Config, Launch};
use crate::snapshot::Snapshot;

/// The script that takes a snapshot (and numbers the page's elements).
const SNAPSHOT_JS: &str = include_str!("page.js");

/// How long Chromium may take to say where its DevTools endpoint is.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The runtime every DevTools call runs on: one thread, for the life of the process.
fn runtime() -> Result<&'static tokio::runtime::Handle, String> {
    static HANDLE: OnceLock<Result<tokio::runtime::Handle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|err| format!("browser: cannot start its runtime: {err}"))?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("noeta-browser".to_owned())
                .spawn(move || runtime.block_on(futures::future::pending::<()>()))
                .map_err(|err| format!("browser: cannot start its thread: {err}"))?;
            Ok(handle)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `work` on the browser runtime and waits for it from any executor.
async fn on_runtime<T, F>(work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    runtime()?
        .spawn(work)
        .await
        .map_err(|err| format!("browser: its call failed: {err}"))?
}

/// The backend the host hands the `browser` pack: its settings and each task's browser.
pub struct Backend {
    config: Config,
    tasks: Mutex<HashMap<String, Arc<AsyncMutex<Option<TaskBrowser>>>>>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a task's first browser call found.
pub(crate) enum Opened {
    /// The task's browser was already open in this process.
    Open,
    /// A new browser; `Some(url)` when it went back to the page the task was on.
    Started(Option<String>),
}

impl Backend {
    /// A backend with `config` (see [`Config::parse`]).
    pub fn new(config: Config) -> Self {
        Self {
            config,
            tasks: Mutex::default(),
        }
    }

    /// The settings it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn slot(&self, task: &str) -> Arc<AsyncMutex<Option<TaskBrowser>>> {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(tasks.entry(task.to_owned()).or_default())
    }

    /// Runs `act` on `task`'s page, opening the browser first when the task has none in this
    /// process (and going back to `resume_url`, the page the task was on, if any). One call
    /// at a time per task.
    pub(crate) async fn with_page<T, F, Fut>(
        &self,
        task: &str,
        resume_url: Option<String>,
        act: F,
    ) -> Result<(Opened, T), String>
    where
        T: Send + 'static,
        F: FnOnce(Page, Config) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
    {
        let slot = self.slot(task);
        let config = self.config.clone();
        let task = task.to_owned();
        on_runtime(async move {
            let mut guard = slot.lock().await;
            let mut opened = Opened::Open;
            let alive = match guard.as_ref() {
                Some(browser) => browser.alive().await,
                None => false,
            };
            if !alive {
                *guard = None;
                let browser = TaskBrowser::open(&config, &task).await?;
                let mut went_back = None;
                if let Some(url) = resume_url.filter(|u| config.allows(u).is_ok()) {
                    // Where the task was: a page that fails to load again is left to the
                    // model (the snapshot shows where the browser is).
                    if navigate(&browser.page, &url, &config).await.is_ok() {
                        went_back = Some(url);
                    }
                }
                opened = Opened::Started(went_back);
                *guard = Some(browser);
            }
            let page = guard
                .as_ref()
                .map(|b| b.page.clone())
                .ok_or("browser: no page")?;
            let value = act(page, config).await?;
            Ok((opened, value))
        })
        .await
    }

    /// Ends every browser this backend started (a process that ends kills them anyway).
    pub fn close_all(&self) {
        let slots: Vec<_> = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, slot)| slot)
            .collect();
        if let Ok(handle) = runtime() {
            handle.spawn(async move {
                for slot in slots {
                    if let Some(browser) = slot.lock().await.take() {
                        browser.close().await;
                    }
                }
            });
        }
    }
}

/// One task's browser: the Chromium it started (none when attached), the protocol client,
/// and the task's page.
struct TaskBrowser {
    child: Option<tokio::process::Child>,
    browser: Browser,
    page: Page,
}

impl TaskBrowser {
    async fn open(config: &Config, task: &str) -> Result<Self, String> {
        let (child, endpoint) = match &config.launch {
            Launch::Local { executable } => {
                let profile = config.profiles.join(profile_name(task));
                let (child, endpoint) = launch(executable, &profile, config).await?;
                (Some(child), endpoint)
            }
            Launch::Attach { url } => (None, url.clone()),
        };
        let handler_config = HandlerConfig {
            viewport: Some(Viewport {
                width: config.width,
                height: config.height,
                device_scale_factor: Some(1.0),
                ..Viewport::default()
            }),
            request_timeout: config.timeout,
            ..HandlerConfig::default()
        };
        let (browser, mut handler) = Browser::connect_with_config(&endpoint, handler_config)
            .await
            .map_err(|err| format!("browser: cannot connect to {endpoint}: {err}"))?;
        tokio::spawn(async move {
            // Errors of single messages do not end the connection; its end does.
            while handler.next().await.is_some() {}
        });
        // Downloads are refused: nothing a page offers lands on disk unasked.
        let _ = browser
            .execute(SetDownloadBehaviorParams::new(
                SetDownloadBehaviorBehavior::Deny,
            ))
            .await;
        let page = browser
            .new_page("about:blank")
            .await
            .map_err(|err| format!("browser: cannot open a page: {err}"))?;
        Ok(Self {
            child,
            browser,
            page,
        })
    }

    async fn alive(&self) -> bool {
        tokio::time::timeout(Duration::from_secs(5), self.browser.version())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    async fn close(mut self) {
        let _ = self.page.close().await;
        if let Some(mut child) = self.child.take() {
            let _ = self.browser.close().await;
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
    }
}

/// A task id as a directory name.
fn profile_name(task: &str) -> String {
    task.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether this process runs as root (Chromium's own sandbox refuses root).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Ends a Chromium a killed process left running on `profile` (its lock names its pid), so
/// the profile can be used again.
async fn end_left_behind(profile: &Path) {
    let Ok(target) = std::fs::read_link(profile.join("SingletonLock")) else {
        return;
    };
    let Some(pid) = target
        .to_string_lossy()
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let ours = String::from_utf8_lossy(&cmdline).contains(&profile.display().to_string());
    if ours {
        let _ = tokio::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .await;
        for _ in 0..50 {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for lock in ["SingletonLock", "SingletonSocket", "SingletonCookie"] {
        let _ = std::fs::remove_file(profile.join(lock));
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// Starts Chromium on `profile`: the child and its DevTools WebSocket URL.
async fn launch(
    executable: &Path,
    profile: &Path,
    config: &Config,
) -> Result<(tokio::process::Child, String), String> {
    std::fs::create_dir_all(profile).map_err(|err| {
        format!(
            "browser: cannot create the profile directory {}: {err}",
            profile.display()
        )
    })?;
    end_left_behind(profile).await;
    let mut args: Vec<String> = vec![
        "--headless".to_owned(),
        "--remote-debugging-port=0".to_owned(),
        format!("--user-data-dir={}", profile.display()),
        format!("--window-size={},{}", config.width, config.height),
        "--no-first-run".to_owned(),
        "--no-default-browser-check".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-default-apps".to_owned(),
        "--disable-extensions".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--hide-scrollbars".to_owned(),
        "--mute-audio".to_owned(),
        "--password-store=basic".to_owned(),
        "--use-mock-keychain".to_owned(),
    ];
    if is_root() {
        // Chromium's own sandbox does not run as root.
        args.push("--no-sandbox".to_owned());
    }
    args.push("about:blank".to_owned());
    // The browser's command line, under the sandbox's when the host gave one.
    let mut argv: Vec<String> = config.wrapper.clone();
    argv.push(executable.display().to_string());
    argv.extend(args);
    // Dies with this process (the thread that starts it lives as long as the process).
    if let Some(setpriv) = find_on_path("setpriv") {
        let mut with = vec![
            setpriv.display().to_string(),
            "--pdeathsig".to_owned(),
            "KILL".to_owned(),
            "--".to_owned(),
        ];
        with.extend(argv);
        argv = with;
    }
    let mut command = tokio::process::Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|err| {
        format!(
            "browser: cannot start `{}`: {err} (set [plugins.browser] executable, or \
             backend = \"none\")",
            executable.display()
        )
    })?;
    let stderr = child.stderr.take().ok_or("browser: no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let found = tokio::time::timeout(LAUNCH_TIMEOUT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.trim().strip_prefix("DevTools listening on ") {
                return Some(url.to_owned());
            }
            said.push(line);
        }
        None
    })
    .await;
    match found {
        Ok(Some(url)) => {
            // Chromium keeps writing to stderr: read it so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            Ok((child, url))
        }
        other => {
            let _ = child.kill().await;
            let why = if other.is_err() {
                format!(
                    "it gave no DevTools address in {}s",
                    LAUNCH_TIMEOUT.as_secs()
                )
            } else {
                "it exited".to_owned()
            };
            let tail: Vec<&str> = said
                .iter()
                .rev()
                .take(5)
                .rev()
                .map(String::as_str)
                .collect();
            Err(format!(
                "browser: `{}` did not start: {why}{}",
                executable.display(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", tail.join(" | "))
                }
            ))
        }
    }
}

/// Evaluates `expression` on `page`, its value back.
async fn evaluate(page: &Page, expression: &str) -> Result<Value, String> {
    let params = EvaluateParams::builder()
        .expression(expression)
        .return_by_value(true)
        .await_promise(true)
        .build()
        .map_err(|err| format!("browser: {err}"))?;
    let result = page
        .evaluate_expression(params)
        .await
        .map_err(|err| format!("browser: the page's script failed: {err}"))?;
    Ok(result.value().cloned().unwrap_or(Value::Null))
}

/// Waits until the page has loaded (after a click or a submit that may navigate).
async fn settle(page: &Page, config: &Config) {
    tokio::time::sleep(Duration::from_millis(150)).await;
    let deadline = tokio::time::Instant::now() + config.timeout;
    while tokio::time::Instant::now() < deadline {
        let state = tokio::time::timeout(
            Duration::from_secs(2),
            evaluate(page, "document.readyState"),
        )
        .await;
        if let Ok(Ok(Value::String(state))) = state
            && state == "complete"
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Goes to `url` and waits for it to load.
pub(crate) async fn navigate(page: &Page, url: &str, config: &Config) -> Result<(), String> {
    match tokio::time::timeout(config.timeout, page.goto(url)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(format!("cannot open {url}: {err}")),
        Err(_) => Err(format!(
            "{url} did not load in {} s",
            config.timeout.as_secs()
        )),
    }
}

/// The page's snapshot (which numbers its elements).
pub(crate) async fn snapshot(page: &Page) -> Result<Snapshot, String> {
    let value = evaluate(page, SNAPSHOT_JS).await?;
    serde_json::from_value(value)
        .map_err(|err| format!("browser: a snapshot it cannot read: {err}"))
}

/// Where element `index` of the last snapshot is on screen (scrolled into view), taking a
/// snapshot first when the page has none.
async fn element_point(page: &Page, index: u32) -> Result<Point, String> {
    let locate = format!(
        "(() => {{ const list = window.__noetaElements; if (!list) return 'none'; \
         const el = list[{index} - 1]; if (!el || !el.isConnected) return null; \
         el.scrollIntoView({{block: 'center', inline: 'center'}}); \
         const r = el.getBoundingClientRect(); \
         return {{x: r.left + r.width / 2, y: r.top + r.height / 2}}; }})()",
        index = index
    );
    let mut found = evaluate(page, &locate).await?;
    if found == Value::String("none".to_owned()) {
        snapshot(page).await?;
        found = evaluate(page, &locate).await?;
    }
    match (
        found.get("x").and_then(Value::as_f64),
        found.get("y").and_then(Value::as_f64),
    ) {
        (Some(x), Some(y)) => Ok(Point { x, y }),
        _ => Err(format!(
            "there is no element [{index}] on the page now: take a new snapshot \
             (browser_extract) and use its numbers"
        )),
    }
}

/// Clicks element `index` and waits for what it starts.
pub(crate) async fn click(page: &Page, index: u32, config: &Config) -> Result<(), String> {
    let point = element_point(page, index).await?;
    page.click(point)
        .await
        .map_err(|err| format!("cannot click [{index}]: {err}"))?;
    settle(page, config).await;
    Ok(())
}

/// Replaces element `index`'s text with `text` (as typed), pressing Enter after when `submit`.
pub(crate) async fn type_text(
    page: &Page,
    index: u32,
    text: &str,
    submit: bool,
    config: &Config,
) -> Result<(), String> {
    element_point(page, index).await?;
    let focus = format!(
        "(() => {{ const el = window.__noetaElements[{index} - 1]; el.focus(); \
         if ('value' in el && typeof el.select === 'function') {{ el.select(); }} \
         else if (el.isContentEditable) {{ document.execCommand('selectAll'); }} \
         return document.activeElement === el; }})()"
    );
    if evaluate(page, &focus).await? != Value::Bool(true) {
        return Err(format!("element [{index}] does not take typing"));
    }
    page.execute(InsertTextParams::new(text))
        .await
        .map_err(|err| format!("cannot type into [{index}]: {err}"))?;
    if submit {
        for kind in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
            let mut key = DispatchKeyEventParams::new(kind.clone());
            key.key = Some("Enter".to_owned());
            key.code = Some("Enter".to_owned());
            key.windows_virtual_key_code = Some(13);
            key.native_virtual_key_code = Some(13);
            if kind == DispatchKeyEventType::KeyDown {
                key.text = Some("\r".to_owned());
            }
            page.execute(key)
                .await
                .map_err(|err| format!("cannot press Enter in [{index}]: {err}"))?;
        }
        settle(page, config).await;
    }
    Ok(())
}

/// Where downloads wait for `task` before they are moved into the workspace: a directory in
/// its profile (the one place a sandboxed browser may write). `None` for a browser noeta did
/// not start (`cdp_url`), whose files land on its own machine.
pub(crate) fn download_dir(config: &Config, task: &str) -> Option<PathBuf> {
    match config.launch {
        Launch::Local { .. } => Some(
            config
                .profiles
                .join(profile_name(task))
                .join("noeta-downloads"),
        ),
        Launch::Attach { .. } => None,
    }
}

/// Clicks element `index` with downloads let into `dir`, waits for the one it starts to
/// finish, and refuses downloads again: the downloaded file (in `dir`).
pub(crate) async fn download(
    page: &Page,
    index: u32,
    dir: &Path,
    config: &Config,
) -> Result<PathBuf, String> {
    // A fresh directory: what is in it after the click is what the click downloaded.
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|err| {
        format!(
            "cannot make the download directory {}: {err}",
            dir.display()
        )
    })?;
    let behaviour = |allow: bool| {
        let mut params = SetDownloadBehaviorParams::new(if allow {
            SetDownloadBehaviorBehavior::Allow
        } else {
            SetDownloadBehaviorBehavior::Deny
        });
        if allow {
            params.download_path = Some(dir.display().to_string());
        }
        params
    };
    page.execute(behaviour(true))
        .await
        .map_err(|err| format!("cannot let the download in: {err}"))?;
    let clicked = click(page, index, config).await;
    let finished = match clicked {
        Ok(()) => finished_download(dir, config.timeout).await,
        Err(why) => Err(why),
    };
    // Refused again whatever happened: nothing else lands on disk.
    let _ = page.execute(behaviour(false)).await;
    finished
}

/// The file a download put in `dir`, once no part of it is still being written; an error
/// when none came, or it did not finish, within `timeout`.
async fn finished_download(dir: &Path, timeout: Duration) -> Result<PathBuf, String> {
    let until = tokio::time::Instant::now() + timeout;
    let mut last: Option<(PathBuf, u64)> = None;
    loop {
        let entries: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
            .map(|list| {
                list.flatten()
                    .filter_map(|e| Some((e.path(), e.metadata().ok()?.len())))
                    .collect()
            })
            .unwrap_or_default();
        let partial = entries
            .iter()
            .any(|(path, _)| path.extension().is_some_and(|x| x == "crdownload"));
        let done = entries.into_iter().find(|(path, _)| {
            path.extension().is_none_or(|x| x != "crdownload")
                && path
                    .file_name()
                    .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        });
        match (partial, done) {
            // The same file, the same size, twice in a row, with nothing partial left.
            (false, Some(now)) if last.as_ref() == Some(&now) => return Ok(now.0),
            (_, now) => last = now,
        }
        if tokio::time::Instant::now() >= until {
            return Err(if last.is_some() {
                format!("the download did not finish within {} s", timeout.as_secs())
            } else {
                format!(
                    "the click started no download within {} s (use browser_click for links \
                     and buttons that open pages)",
                    timeout.as_secs()
                )
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A PNG of the viewport.
pub(crate) async fn screenshot(page: &Page) -> Result<Vec<u8>, String> {
    page.screenshot(
        ScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .build(),
    )
    .await
    .map_err(|err| format!("cannot take a screenshot: {err}"))
}

/// The page's URL now.
pub(crate) async fn current_url(page: &Page) -> Option<String> {
    page.url().await.ok().flatten()
}
