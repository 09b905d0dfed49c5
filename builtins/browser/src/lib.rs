//! The `browser` built-in plugin: a real browser the agent drives. Its session pack (band 700)
//! offers `browser_navigate`, `browser_click`, `browser_type`, `browser_extract`,
//! `browser_screenshot` and `browser_download` — all high risk, so asked for unless the mode bypasses permissions —
//! when the host hands it a backend (the host value [`BACKEND`], a [`Backend`]): a headless
//! Chromium per task over the DevTools Protocol (`chromium.rs`), with the settings of
//! `[plugins.browser]` (`config.rs`).
//!
//! The text tools answer with a page snapshot (`page.js`, `snapshot.rs`): the page's visible
//! text with each interactive element numbered in place; past 30,000 characters the runtime
//! keeps the full text and shows the start. A screenshot is kept as an `image/png` artifact in
//! the task's content store (recorded as `screenshot`, with its ref). Each call records where
//! the page is (`page`: URL, title, the numbered element map's hash), so a task carried on by
//! another process opens its browser on that page again.

mod chromium;
mod config;
mod snapshot;

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::Extension;
use noeta_core::{
    HostValue, LinkedPlugin, PackContribution, RefTable, Resolved, Risk, SessionBuildContext,
    SessionPackFactory, Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
};
use serde_json::{Value, json};

pub use chromium::Backend;
pub use config::{Config, Launch};

use chromium::Opened;
use snapshot::Snapshot;

/// The plugin's name, and the extension whose records hold the page state.
pub const PLUGIN: &str = "browser";

/// The host value under which a host hands the plugin its backend (an `Arc<Backend>`).
pub const BACKEND: &str = "browser_backend";

/// Text results longer than this are cut inline (the full text is kept).
const MAX_RESULT_CHARS: usize = 30_000;

/// `backend` as the host value the plugin reads (set it under [`BACKEND`]).
pub fn host_value(backend: Arc<Backend>) -> HostValue {
    HostValue::new(backend)
}

/// The six tools over `backend`, as the pack offers them (for hosts and benchmarks that call
/// them directly).
pub fn tools(backend: &Arc<Backend>) -> Vec<Arc<dyn Tool>> {
    [
        Action::Navigate,
        Action::Click,
        Action::Type,
        Action::Extract,
        Action::Screenshot,
        Action::Download,
    ]
    .into_iter()
    .map(|action| {
        Arc::new(BrowserTool {
            action,
            backend: Arc::clone(backend),
        }) as Arc<dyn Tool>
    })
    .collect()
}

struct Pack;

impl SessionPackFactory for Pack {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        let mut pack = PackContribution::empty();
        // No backend, no browser: the tools are not offered.
        let Some(backend) = ctx.host_values.get::<Arc<Backend>>(BACKEND) else {
            return Ok(pack);
        };
        pack.tools = tools(backend);
        pack.extensions.push(Arc::new(PageState));
        Ok(pack)
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_browser::browser", |_| {
            Ok(Resolved::SessionPack(Arc::new(Pack)))
        }),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Navigate,
    Click,
    Type,
    Extract,
    Screenshot,
    Download,
}

/// One of the six tools.
struct BrowserTool {
    action: Action,
    backend: Arc<Backend>,
}

/// What a call asks, checked.
enum Request {
    Navigate(String),
    Click(u32),
    Type {
        index: u32,
        text: String,
        submit: bool,
    },
    Extract,
    Screenshot,
    /// Click `index` and keep the file it downloads, for `path` in the workspace.
    Download {
        index: u32,
        dir: std::path::PathBuf,
    },
}

/// What a call did, before its snapshot.
struct Done {
    said: String,
    snapshot: Snapshot,
    png: Option<Vec<u8>>,
    /// The file a download left (outside the workspace, still to be moved in).
    downloaded: Option<std::path::PathBuf>,
}

fn index_of(input: &Value) -> Result<u32, String> {
    input
        .get("index")
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            "`index` (the number of an element in the snapshot, from 1) is required".to_owned()
        })
}

impl BrowserTool {
    fn request(&self, input: &Value) -> Result<Request, String> {
        Ok(match self.action {
            Action::Navigate => {
                let url = input
                    .get("url")
                    .and_then(Value::as_str)
                    .ok_or("`url` (a string) is required")?
                    .trim()
                    .to_owned();
                self.backend.config().allows(&url)?;
                Request::Navigate(url)
            }
            Action::Click => Request::Click(index_of(input)?),
            Action::Type => Request::Type {
                index: index_of(input)?,
                text: input
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("`text` (a string) is required")?
                    .to_owned(),
                submit: input
                    .get("submit")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            Action::Extract => Request::Extract,
            Action::Screenshot => Request::Screenshot,
            Action::Download => Request::Download {
                index: index_of(input)?,
                dir: std::path::PathBuf::new(),
            },
        })
    }
}

/// The workspace file a download is saved as: `path`, relative, inside the workspace, not
/// there yet, its directory existing.
fn download_target(
    input: &Value,
    workspace: &std::path::Path,
) -> Result<std::path::PathBuf, String> {
    let path = input
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .ok_or("`path` (where in the workspace to save the file) is required")?;
    let relative = std::path::Path::new(path);
    let inside = relative.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    if !inside {
        return Err(format!(
            "`path` `{path}` must be a relative path inside the workspace (no `..`, not absolute)"
        ));
    }
    let root = noeta_core::exec::real_root(workspace)
        .map_err(|err| format!("the workspace {}: {err}", workspace.display()))?;
    let target = root.join(relative);
    let parent = target.parent().unwrap_or(&root);
    let real_parent = std::fs::canonicalize(parent)
        .map_err(|_| format!("`path` `{path}`: its directory does not exist in the workspace"))?;
    if !real_parent.starts_with(&root) {
        return Err(format!("`path` `{path}` leads outside the workspace"));
    }
    if std::fs::symlink_metadata(&target).is_ok() {
        return Err(format!(
            "`path` `{path}` exists already: choose a new name (a download never replaces a file)"
        ));
    }
    Ok(target)
}

/// Runs `request` on `page`; a page that ends up on a refused address is left for a blank one.
async fn perform(
    page: chromiumoxide::Page,
    config: Config,
    request: Request,
) -> Result<Done, String> {
    let mut downloaded = None;
    let said = match &request {
        Request::Navigate(url) => {
            chromium::navigate(&page, url, &config).await?;
            format!("Opened {url}.")
        }
        Request::Click(index) => {
            chromium::click(&page, *index, &config).await?;
            format!("Clicked [{index}].")
        }
        Request::Type {
            index,
            text,
            submit,
        } => {
            chromium::type_text(&page, *index, text, *submit, &config).await?;
            if *submit {
                format!("Typed into [{index}] and pressed Enter.")
            } else {
                format!("Typed into [{index}].")
            }
        }
        Request::Download { index, dir } => {
            let file = chromium::download(&page, *index, dir, &config).await?;
            downloaded = Some(file);
            format!("Clicked [{index}]; it downloaded a file.")
        }
        Request::Extract | Request::Screenshot => String::new(),
    };
    if let Some(url) = chromium::current_url(&page).await
        && let Err(why) = config.allows(&url)
    {
        let _ = chromium::navigate(&page, "about:blank", &config).await;
        return Err(format!("the page went on to a refused address: {why}"));
    }
    let snapshot = chromium::snapshot(&page).await?;
    let png = match request {
        Request::Screenshot => Some(chromium::screenshot(&page).await?),
        _ => None,
    };
    Ok(Done {
        said,
        snapshot,
        png,
        downloaded,
    })
}

#[async_trait]
impl Tool for BrowserTool {
    fn name(&self) -> &str {
        match self.action {
            Action::Navigate => "browser_navigate",
            Action::Click => "browser_click",
            Action::Type => "browser_type",
            Action::Extract => "browser_extract",
            Action::Screenshot => "browser_screenshot",
            Action::Download => "browser_download",
        }
    }

    fn description(&self) -> &str {
        match self.action {
            Action::Navigate => {
                "Opens a web page (an http:// or https:// URL) in the browser and returns its \
                 snapshot: the page's visible text with every link, button and form field \
                 numbered in place, like [3]. Use the numbers with browser_click and \
                 browser_type."
            }
            Action::Click => {
                "Clicks the element numbered `index` in the latest snapshot, waits for the page \
                 to settle, and returns the new snapshot."
            }
            Action::Type => {
                "Types `text` into the form field numbered `index` in the latest snapshot \
                 (replacing what it holds); with `submit` true, presses Enter after. Returns the \
                 new snapshot."
            }
            Action::Extract => {
                "Returns the snapshot of the page the browser is on: its visible text with the \
                 interactive elements numbered."
            }
            Action::Screenshot => {
                "Takes a PNG screenshot of what the browser shows and keeps it as an artifact \
                 of the task; returns where it is kept and the page's snapshot."
            }
            Action::Download => {
                "Clicks the element numbered `index` in the latest snapshot (a link or button \
                 that downloads a file), waits for the download, and saves the file at `path` \
                 in the workspace (a new file). Downloads happen only through this tool: \
                 browser_click refuses them."
            }
        }
    }

    fn input_schema(&self) -> Value {
        let index = json!({ "type": "integer", "minimum": 1, "description": "The element's number in the latest snapshot" });
        match self.action {
            Action::Navigate => json!({
                "type": "object",
                "properties": { "url": { "type": "string", "description": "The page's http:// or https:// URL" } },
                "required": ["url"],
                "additionalProperties": false
            }),
            Action::Click => json!({
                "type": "object",
                "properties": { "index": index },
                "required": ["index"],
                "additionalProperties": false
            }),
            Action::Type => json!({
                "type": "object",
                "properties": {
                    "index": index,
                    "text": { "type": "string", "description": "What to type" },
                    "submit": { "type": "boolean", "description": "Press Enter after typing" }
                },
                "required": ["index", "text"],
                "additionalProperties": false
            }),
            Action::Download => json!({
                "type": "object",
                "properties": {
                    "index": index,
                    "path": { "type": "string", "description": "Where to save the file, relative to the workspace (a new file)" }
                },
                "required": ["index", "path"],
                "additionalProperties": false
            }),
            Action::Extract | Action::Screenshot => json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }),
        }
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .with_risk(Risk::High)
            .with_max_result_chars(MAX_RESULT_CHARS)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = self.name().to_owned();
        let mut request = self
            .request(&input)
            .map_err(|why| ToolError::RespondToModel(format!("{name}: {why}")))?;
        // A download is checked before anything is clicked: where it goes, and that this
        // browser's files can be reached.
        let target = match &mut request {
            Request::Download { dir, .. } => {
                let refuse = |why: String| ToolError::RespondToModel(format!("{name}: {why}"));
                let workspace = ctx
                    .exec_env()
                    .map(|env| env.workspace().to_path_buf())
                    .ok_or_else(|| refuse("this host gives tools no workspace".to_owned()))?;
                let target = download_target(&input, &workspace).map_err(refuse)?;
                *dir = chromium::download_dir(self.backend.config(), ctx.task_id()).ok_or_else(
                    || {
                        refuse(
                            "downloads need a browser noeta starts; this one is attached by \
                             `cdp_url` and keeps its files on its own machine"
                                .to_owned(),
                        )
                    },
                )?;
                Some(target)
            }
            _ => None,
        };
        // Where the task's browser was, for a browser started again in this process.
        let resume_url = ctx
            .state(PLUGIN)
            .and_then(|s| s.get("url"))
            .and_then(Value::as_str)
            .filter(|url| *url != "about:blank")
            .map(str::to_owned);
        let (opened, done) = self
            .backend
            .with_page(ctx.task_id(), resume_url, move |page, config| {
                perform(page, config, request)
            })
            .await
            .map_err(|why| ToolError::RespondToModel(format!("{name}: {why}")))?;
        ctx.record(PLUGIN, "page", done.snapshot.record());
        let mut text = String::new();
        if let Opened::Started(Some(url)) = &opened {
            text.push_str(&format!(
                "(The browser was started again and went back to {url}, where this task was.)\n"
            ));
        }
        let mut data = done.snapshot.record();
        if let Some(png) = done.png {
            let (width, height) = png_size(&png).unwrap_or_default();
            let stored = match ctx.put_content("image/png", &png).await {
                Some(Ok(reference)) => reference,
                Some(Err(err)) => {
                    return Err(ToolError::RespondToModel(format!(
                        "{name}: the screenshot could not be kept: {err}"
                    )));
                }
                None => {
                    return Err(ToolError::RespondToModel(format!(
                        "{name}: this host keeps no artifacts"
                    )));
                }
            };
            text.push_str(&format!(
                "Screenshot of {} ({width}×{height} PNG, {} bytes) kept as artifact \
                 sha256:{}.\n\n",
                done.snapshot.url, stored.len, stored.sha256
            ));
            let shot = json!({
                "url": done.snapshot.url,
                "artifact": stored,
                "width": width,
                "height": height,
            });
            ctx.record(PLUGIN, "screenshot", shot.clone());
            data["screenshot"] = shot;
        } else if let (Some(file), Some(target)) = (&done.downloaded, &target) {
            let bytes = save_download(file, target)
                .map_err(|why| ToolError::RespondToModel(format!("{name}: {why}")))?;
            let path = input
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let offered = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            text.push_str(&format!(
                "Clicked [{}] and saved the download `{offered}` ({bytes} bytes) as {path}.\n\n",
                index_of(&input).unwrap_or_default()
            ));
            let download = json!({ "path": path, "name": offered, "bytes": bytes });
            ctx.record(PLUGIN, "download", download.clone());
            data["download"] = download;
        } else if !done.said.is_empty() {
            text.push_str(&done.said);
            text.push_str("\n\n");
        }
        text.push_str(&done.snapshot.render());
        let mut output = ToolOutput::text(text);
        output.data = Some(data);
        Ok(output)
    }
}

/// Moves a finished download to `target` in the workspace (copied when they are on different
/// file systems): its size.
fn save_download(file: &std::path::Path, target: &std::path::Path) -> Result<u64, String> {
    let bytes = std::fs::metadata(file)
        .map_err(|err| format!("the download {}: {err}", file.display()))?
        .len();
    if std::fs::rename(file, target).is_err() {
        std::fs::copy(file, target)
            .map_err(|err| format!("cannot save the download as {}: {err}", target.display()))?;
        let _ = std::fs::remove_file(file);
    }
    Ok(bytes)
}

/// A PNG's width and height, from its header.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    if png.len() < 24 || !png.starts_with(SIGNATURE) || &png[12..16] != b"IHDR" {
        return None;
    }
    let word = |at: usize| {
        png.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
    };
    Some((word(16)?, word(20)?))
}

/// Folds the `page` records: where the task's browser is.
struct PageState;

#[async_trait]
impl Extension for PageState {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            "page" => {
                let Some(page) = data
                    .as_object()
                    .filter(|d| d.get("url").is_some_and(Value::is_string))
                else {
                    return Err(format!("a `page` record without `url` ({data})"));
                };
                if !state.is_object() {
                    *state = json!({});
                }
                for (key, value) in page {
                    state[key] = value.clone();
                }
                Ok(())
            }
            // The latest screenshot, by its artifact; the latest download, by its path.
            "screenshot" | "download" => {
                if !state.is_object() {
                    *state = json!({});
                }
                state[kind] = data.clone();
                Ok(())
            }
            other => Err(format!("unknown record kind `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_png_header_gives_its_size() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend(1280u32.to_be_bytes());
        png.extend(800u32.to_be_bytes());
        assert_eq!(png_size(&png), Some((1280, 800)));
        assert_eq!(png_size(b"GIF89a"), None);
    }

    #[test]
    fn a_page_record_needs_a_url() {
        let mut state = Value::Null;
        let err = PageState
            .reduce(&mut state, "page", &json!({ "title": "x" }))
            .unwrap_err();
        assert!(err.contains("without `url`"), "{err}");
        assert!(
            PageState
                .reduce(&mut state, "page", &json!({ "url": "http://a/" }))
                .is_ok()
        );
        assert_eq!(state["url"], "http://a/");
    }
}
