//! The chat's own slash commands that need more than a line of the chat loop: `/diff` (what
//! the task's writes changed in the workspace) and `/model` (show or switch the model).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;
use noeta::HostPaths;
use noeta_core::records::{CallOutcome, CoreRecord};
use noeta_core::store::TaskId;
use serde_json::Value;

use crate::agent::{AgentArgs, AgentHost};
use crate::stdio::{eoutln, outln};

/// Tools whose `file_path` a call changes.
const WRITING: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// `/diff`: the files this task's writes changed, as a diff — against git's `HEAD` in a git
/// work tree (a new file as all added), else each `Edit`'s change as it was made.
pub(crate) async fn diff(host: &AgentHost, task: Option<&TaskId>, workspace: &Path) -> Result<()> {
    let Some(task) = task else {
        eoutln!("no task yet: your next message starts one");
        return Ok(());
    };
    let calls = writes(host, task).await?;
    if calls.is_empty() {
        eoutln!("task {task} has changed no file (through Write or Edit) yet");
        return Ok(());
    }
    // Named as git names them: relative to the workspace when inside it.
    let mut files: Vec<PathBuf> = Vec::new();
    for (path, _) in &calls {
        let path = Path::new(path);
        let path = path.strip_prefix(workspace).unwrap_or(path).to_path_buf();
        if !files.contains(&path) {
            files.push(path);
        }
    }
    if in_git(workspace) {
        for file in &files {
            outln!("{}", git_diff(workspace, file).trim_end());
        }
        return Ok(());
    }
    for (path, input) in &calls {
        let text = |key: &str| input.get(key).and_then(Value::as_str);
        match (text("old_string"), text("new_string"), text("content")) {
            (Some(old), Some(new), _) => {
                for line in crate::diff::render(path, old, new, None) {
                    outln!("{line}");
                }
            }
            (_, _, Some(content)) => {
                outln!("{path}: written ({} lines)", content.lines().count());
            }
            _ => outln!("{path}: changed"),
        }
    }
    Ok(())
}

/// The paths and inputs of the task's writing calls that succeeded, in the order they ran.
async fn writes(host: &AgentHost, task: &TaskId) -> Result<Vec<(String, Value)>> {
    let events = host.log.read(task, 0).await?;
    let mut started: Vec<(String, String, Value)> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for event in &events {
        match CoreRecord::from_record(&event.record) {
            Some(Ok(CoreRecord::CallStarted {
                call_id,
                tool,
                input,
            })) if WRITING.contains(&&*tool) => {
                if let Some(path) = input.get("file_path").and_then(Value::as_str) {
                    started.push((call_id.to_string(), path.to_owned(), (*input).clone()));
                }
            }
            Some(Ok(CoreRecord::CallFinished {
                call_id,
                outcome: CallOutcome::Ok,
                ..
            })) => done.push(call_id.to_string()),
            _ => {}
        }
    }
    Ok(started
        .into_iter()
        .filter(|(id, _, _)| done.contains(id))
        .map(|(_, path, input)| (path, input))
        .collect())
}

fn in_git(workspace: &Path) -> bool {
    Command::new("git")
        .args(["rev-parse", "--is-inside-work-tree"])
        .current_dir(workspace)
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"true"))
}

/// `file`'s change against `HEAD`; a file git does not track, as all added.
fn git_diff(workspace: &Path, file: &Path) -> String {
    let tracked = Command::new("git")
        .args(["ls-files", "--error-unmatch", "--"])
        .arg(file)
        .current_dir(workspace)
        .output()
        .is_ok_and(|o| o.status.success());
    let mut command = Command::new("git");
    command
        .args(["--no-pager", "diff", "--no-ext-diff", "--color=always"])
        .current_dir(workspace);
    if tracked {
        command.args(["HEAD", "--"]).arg(file);
    } else {
        command.args(["--no-index", "--", "/dev/null"]).arg(file);
    }
    match command.output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.trim().is_empty() {
                format!("{}: no change against HEAD", file.display())
            } else {
                text
            }
        }
        Err(err) => format!("{}: git cannot be run: {err}", file.display()),
    }
}

/// `/model [NAME]`: shows the model, or switches the chat to `NAME` (an alias such as
/// `sonnet`, or a model of the provider) for the next reply on.
pub(crate) fn model(host: &mut AgentHost, args: &mut AgentArgs, paths: &HostPaths, rest: &str) {
    let provider = host.runtime.provider();
    let name = rest.trim();
    if name.is_empty() {
        eoutln!("model: {} · {}", provider.name(), provider.model());
        return;
    }
    let asked = AgentArgs {
        model: Some(name.to_owned()),
        ..args.clone()
    };
    match host.with_model(paths, &asked) {
        Ok(switched) => {
            *host = switched;
            *args = asked;
            let provider = host.runtime.provider();
            eoutln!(
                "model: {} · {} — the next reply uses it (`noeta resume` runs a task on the \
                 model it was made with)",
                provider.name(),
                provider.model()
            );
        }
        Err(err) => eoutln!("error: {err:#} (the chat keeps its model)"),
    }
}
