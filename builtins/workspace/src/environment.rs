//! The `environment` extension: where the task runs, recorded once.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::{ExecCommand, ExecEnv, ExecError};
use noeta_core::extension::{ContextPart, Extension, HookResult, View};
use noeta_core::records::ERASED_KIND;
use serde_json::{Value, json};

/// The extension's name; its one record is `environment/captured`.
pub const EXTENSION: &str = "environment";

/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Uncommitted paths listed by name; the rest are counted.
const LISTED_CHANGES: usize = 10;

/// Recent commits listed.
const RECENT_COMMITS: usize = 5;

type Clock = dyn Fn() -> u64 + Send + Sync;

/// Platform, date, working directory and git state: gathered on the task's first claim,
/// recorded, and rendered from the record ever after.
pub struct Environment {
    git: bool,
    clock: Arc<Clock>,
}

impl Environment {
    /// Reports the git state when `git` is on; reads the system clock.
    pub fn new(git: bool) -> Self {
        Self::with_clock(git, || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        })
    }

    /// The same, with a clock giving Unix seconds (for tests).
    pub fn with_clock(git: bool, clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Self {
            git,
            clock: Arc::new(clock),
        }
    }

    async fn gather(&self, exec: &Arc<dyn ExecEnv>) -> String {
        let mut lines = vec![
            "Environment (as recorded when this task started):".to_owned(),
            format!("- Working directory: {}", exec.workspace().display()),
            format!("- Platform: {}", platform(exec).await),
            format!("- Date: {}", noeta_toolkit::dates::iso_date((self.clock)())),
        ];
        if let Some(isolation) = exec.isolation() {
            lines.push(format!("- Sandbox: {} ({isolation})", exec.name()));
        }
        if self.git {
            lines.extend(git_state(exec).await);
        }
        lines.join("\n")
    }
}

/// The platform commands run on: this process's for a local environment, `uname` otherwise.
async fn platform(exec: &Arc<dyn ExecEnv>) -> String {
    if exec.name() == "local" {
        return format!("{} ({})", std::env::consts::OS, std::env::consts::ARCH);
    }
    match run(exec, "uname", &["-s", "-m"]).await {
        Ok(text) if !text.is_empty() => text,
        _ => format!("unknown ({} environment)", exec.name()),
    }
}

/// What a repository's own configuration may not make git run while noeta reads its state
/// (an untrusted repository's `core.fsmonitor` is a command; so is the signature check a
/// `log.showSignature` would start).
const SAFE_GIT: &[&str] = &[
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "log.showSignature=false",
];

/// Runs a command; its trimmed standard output, or why it failed.
async fn run(exec: &Arc<dyn ExecEnv>, program: &str, args: &[&str]) -> Result<String, String> {
    let command = ExecCommand::new(program, args.iter().copied()).with_timeout(GIT_TIMEOUT);
    match exec.run(&command).await {
        Ok(out) if out.status == Some(0) => {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        }
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(ExecError::Spawn { .. }) => Err(format!("{program} is not available")),
        Err(err) => Err(err.to_string()),
    }
}

/// The git lines: branch, uncommitted changes and recent commits.
async fn git_state(exec: &Arc<dyn ExecEnv>) -> Vec<String> {
    let not_a_repository = || vec!["- Git: not a git repository".to_owned()];
    // Without a `.git` here or above (and no `GIT_DIR`), git finds no repository either: no
    // need to start it to hear so.
    if exec.name() == "local" && !maybe_repository(exec.workspace()) {
        return not_a_repository();
    }
    // One command gives the branch (its first line) and the uncommitted paths.
    let status = match run(
        exec,
        "git",
        &[SAFE_GIT, &["status", "--porcelain=v1", "--branch"]].concat(),
    )
    .await
    {
        Ok(status) => status,
        Err(why) if why.contains("not available") => {
            return vec!["- Git: unavailable (git is not installed)".to_owned()];
        }
        Err(_) => return not_a_repository(),
    };
    let mut status = status.lines();
    let branch = status
        .next()
        .and_then(|line| line.strip_prefix("## "))
        .map_or_else(|| "(unknown)".to_owned(), branch_of);
    let mut lines = vec![format!("- Git branch: {branch}")];
    let changed: Vec<&str> = status.filter(|l| !l.trim().is_empty()).collect();
    if changed.is_empty() {
        lines.push("- Uncommitted changes: none".to_owned());
    } else {
        lines.push(format!("- Uncommitted changes: {} paths", changed.len()));
        lines.extend(
            changed
                .iter()
                .take(LISTED_CHANGES)
                .map(|l| format!("  {l}")),
        );
        if changed.len() > LISTED_CHANGES {
            lines.push(format!("  … and {} more", changed.len() - LISTED_CHANGES));
        }
    }
    let count = RECENT_COMMITS.to_string();
    if let Ok(log) = run(
        exec,
        "git",
        &[
            SAFE_GIT,
            &["log", "--oneline", "--no-decorate", "-n", &count],
        ]
        .concat(),
    )
    .await
        && !log.is_empty()
    {
        lines.push("- Recent commits:".to_owned());
        lines.extend(log.lines().map(|l| format!("  {l}")));
    }
    lines
}

/// The branch named by the head line of `git status --branch` (after `## `): `main` of
/// `main...origin/main [ahead 1]`, `HEAD` when detached, `(no commits yet)` before the first.
fn branch_of(head: &str) -> String {
    if head.starts_with("No commits yet on ") || head.starts_with("Initial commit on ") {
        return "(no commits yet)".to_owned();
    }
    if head.starts_with("HEAD (no branch)") {
        return "HEAD".to_owned();
    }
    head.split("...").next().unwrap_or(head).to_owned()
}

/// Whether git could find a repository for `dir`: a `.git` in it or above it, or `GIT_DIR`.
fn maybe_repository(dir: &std::path::Path) -> bool {
    std::env::var_os("GIT_DIR").is_some()
        || dir
            .ancestors()
            .any(|d| d.join(".git").symlink_metadata().is_ok())
}

#[async_trait]
impl Extension for Environment {
    fn name(&self) -> &str {
        EXTENSION
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        if view.ext_state(EXTENSION).is_some_and(|s| !s.is_null()) {
            return Ok(());
        }
        let Some(exec) = view.exec_env() else {
            return Ok(());
        };
        let text = self.gather(exec).await;
        view.record(EXTENSION, "captured", json!({ "text": text }));
        Ok(())
    }

    fn context(&self, view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        Ok(view
            .ext_state(EXTENSION)
            .and_then(|s| s.get("text"))
            .and_then(Value::as_str)
            .map(|text| vec![ContextPart::resident_of(crate::ENVIRONMENT_KIND.0, text)])
            .unwrap_or_default())
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            "captured" => {
                let text = data
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or("bad `captured` record: no `text`")?;
                *state = json!({ "text": text });
                Ok(())
            }
            ERASED_KIND => Ok(()),
            other => Err(format!("unknown record kind `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::branch_of;

    #[test]
    fn the_branch_is_read_from_the_status_head_line() {
        assert_eq!(branch_of("main"), "main");
        assert_eq!(branch_of("main...origin/main [ahead 1, behind 2]"), "main");
        assert_eq!(branch_of("feature/x...origin/feature/x"), "feature/x");
        assert_eq!(branch_of("HEAD (no branch)"), "HEAD");
        assert_eq!(branch_of("No commits yet on trunk"), "(no commits yet)");
        assert_eq!(branch_of("Initial commit on trunk"), "(no commits yet)");
    }
}
