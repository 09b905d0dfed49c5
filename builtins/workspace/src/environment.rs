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
    let branch = match run(exec, "git", &["rev-parse", "--abbrev-ref", "HEAD"]).await {
        Ok(branch) => branch,
        Err(why) if why.contains("not available") => {
            return vec!["- Git: unavailable (git is not installed)".to_owned()];
        }
        Err(why) if why.contains("unknown revision") || why.contains("ambiguous argument") => {
            // A repository without commits yet.
            "(no commits yet)".to_owned()
        }
        Err(_) => return vec!["- Git: not a git repository".to_owned()],
    };
    let mut lines = vec![format!("- Git branch: {branch}")];
    if let Ok(status) = run(exec, "git", &["status", "--porcelain=v1"]).await {
        let changed: Vec<&str> = status.lines().filter(|l| !l.trim().is_empty()).collect();
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
    }
    let count = RECENT_COMMITS.to_string();
    if let Ok(log) = run(
        exec,
        "git",
        &["log", "--oneline", "--no-decorate", "-n", &count],
    )
    .await
        && !log.is_empty()
    {
        lines.push("- Recent commits:".to_owned());
        lines.extend(log.lines().map(|l| format!("  {l}")));
    }
    lines
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
