//! The `fs` extension: folds the read registry (file → digest last read or written).
//!
//! Records, all under `fs`:
//! - `read` `{path, digest}`: `Read` saw the file with this SHA-256 digest;
//! - `edit` `{path, before, after, applied, replacements, diff}`: an `Edit`, written or not;
//! - `write` `{path, before, after, applied, created, bytes, diff}`: a `Write`, written or not;
//! - `shell` `{command, cwd, status, timed_out}`: a `Bash` command and the directory it left
//!   the shell in;
//! - `shell_background` `{id, command, cwd}`: a background shell started (its id joins `jobs`);
//!   `shell_polled` `{id, status}` and `shell_killed` `{id, status}`: read and stopped;
//! - `monitor` `{id, description, command, cwd, timeout_ms}`: a monitored background shell
//!   started (its id joins `jobs`, and `monitors` with its description); `monitor_ended`
//!   `{id, status}`: its end was told (it leaves `monitors`);
//! - `reminder` `{}`: the runner's record of a notification the extension's `reminders`
//!   returned (its text is in the conversation).
//!
//! A written edit or write moves the file's digest to `after`, so the agent may edit again
//! without reading the file anew. The state is `{"files": {path: digest}, "cwd": dir,
//! "jobs": [id], "monitors": {id: description}}`. Before every model request the extension
//! streams the monitored shells' new lines (`monitor.rs`). With `background_ends_with_turn`,
//! `before_finish` kills the task's background shells still running (`jobs.rs`); it never
//! refuses the end.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::ToolContext;
use noeta_core::extension::{Extension, HookResult, StepSignal, View};
use noeta_core::records::ERASED_KIND;
use serde_json::{Map, Value, json};

use crate::jobs::{self, Jobs};
use crate::monitor;
use crate::paths::fail;

/// The extension's name; the tools' records live under it.
pub(crate) const EXTENSION: &str = "fs";

/// Folds the `fs` records, streams the task's monitored shells and, with
/// `background_ends_with_turn`, stops its background shells when its turn ends.
pub(crate) struct FsState {
    jobs: Arc<Jobs>,
    background_ends_with_turn: bool,
}

impl FsState {
    pub(crate) fn new(jobs: Arc<Jobs>, background_ends_with_turn: bool) -> Self {
        Self {
            jobs,
            background_ends_with_turn,
        }
    }
}

/// `state` as an object, made one (with no files) when it is not.
fn object(state: &mut Value) -> &mut Map<String, Value> {
    if !state.is_object() {
        *state = json!({ "files": {} });
    }
    match state {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// Appends `id` to the state's `jobs`.
fn add_job(state: &mut Value, id: &str) {
    let jobs = object(state).entry("jobs").or_insert_with(|| json!([]));
    if let Some(jobs) = jobs.as_array_mut() {
        jobs.push(json!(id));
    }
}

#[async_trait]
impl Extension for FsState {
    fn name(&self) -> &str {
        EXTENSION
    }

    async fn reminders(&self, view: &View<'_>) -> Result<Vec<String>, StepSignal> {
        Ok(monitor::notifications(&self.jobs, view))
    }

    async fn before_finish(&self, view: &View<'_>) -> HookResult<Option<String>> {
        // Never refuses: the turn's end is only the moment the shells are stopped.
        if self.background_ends_with_turn {
            jobs::end_with_turn(&self.jobs, view).await;
        }
        Ok(None)
    }

    fn continue_state(&self, state: &Value) -> Value {
        // The monitored shells run for the source task; a continuation does not hear them.
        let mut state = state.clone();
        if let Some(map) = state.as_object_mut() {
            map.remove("monitors");
        }
        state
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let field = |name: &str| {
            data.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a `{kind}` record has no string `{name}` ({data})"))
        };
        let (path, digest) = match kind {
            "read" => (field("path")?, field("digest")?),
            "edit" | "write" => {
                if data.get("applied").and_then(Value::as_bool) != Some(true) {
                    return Ok(());
                }
                (field("path")?, field("after")?)
            }
            "shell_background" => {
                add_job(state, field("id")?);
                return Ok(());
            }
            "monitor" => {
                let (id, description) = (field("id")?, field("description")?);
                add_job(state, id);
                let monitors = object(state).entry("monitors").or_insert_with(|| json!({}));
                if let Some(monitors) = monitors.as_object_mut() {
                    monitors.insert(id.to_owned(), json!(description));
                }
                return Ok(());
            }
            "monitor_ended" => {
                let id = field("id")?;
                if let Some(monitors) = object(state)
                    .get_mut("monitors")
                    .and_then(Value::as_object_mut)
                {
                    monitors.remove(id);
                }
                return Ok(());
            }
            "shell_polled" | "shell_killed" | "reminder" => return Ok(()),
            "shell" => {
                let cwd = field("cwd")?.to_owned();
                object(state).insert("cwd".to_owned(), json!(cwd));
                return Ok(());
            }
            ERASED_KIND => return Ok(()),
            other => return Err(format!("unknown record kind `{other}`")),
        };
        let files = object(state)
            .entry("files")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(files) = files.as_object_mut() {
            files.insert(path.to_owned(), json!(digest));
        }
        Ok(())
    }
}

/// The digest `path` had when the agent last read or wrote it, as of the call's start.
fn last_seen<'a>(ctx: &'a ToolContext, path: &str) -> Option<&'a str> {
    ctx.state(EXTENSION)?.get("files")?.get(path)?.as_str()
}

/// The read-first precondition of the write tools: the file was read and has not changed since.
pub(crate) fn check_read(
    ctx: &ToolContext,
    tool: &str,
    path: &str,
    digest: &str,
) -> Result<(), noeta_core::ToolError> {
    match last_seen(ctx, path) {
        None => Err(fail(
            tool,
            format!("File has not been read yet. Read `{path}` first before writing to it."),
        )),
        Some(seen) if seen != digest => Err(fail(
            tool,
            format!(
                "File has been modified since it was read, either by the user or by a linter. Read `{path}` again before attempting to write it."
            ),
        )),
        Some(_) => Ok(()),
    }
}
