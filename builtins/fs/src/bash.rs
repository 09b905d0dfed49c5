//! `Bash`: one shell command in the foreground, in the workspace, with a deadline.
//!
//! Two shell modes run it (`off` mounts no `Bash`): `allowlist` splits the
//! command into words and runs the first word, which must be on
//! `shell_allowlist`, as a program without a shell (so shell operators are
//! refused rather than passed along as words; `cd DIR` alone moves the working
//! directory); `arbitrary` runs it with `bash -c`. The working directory is
//! tracked across calls, recorded under `fs` (`shell`), and kept inside the
//! workspace: a command that leaves it finds the next call back at the root,
//! told so. The whole process group dies at the deadline (default 120 s, at
//! most 600 s). By default the command sees only a few of the host's variables
//! (`PATH`, `HOME`, `LANG`, `LC_ALL`, `USER`, `TMPDIR`) plus `shell_env`, so
//! the host's secrets stay out of it; `shell_env_inherit = true` passes all.
//! [`Shell::start_background`] starts background shells, for `Bash` with
//! `run_in_background` and for `Monitor` alike.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::ExecCommand;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

use crate::jobs::{Jobs, Watch};
use crate::paths::{Workspace, fail};
use crate::registry::EXTENSION;

const NAME: &str = "Bash";

/// The default deadline, in milliseconds.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest deadline a call may ask for, in milliseconds.
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Bytes kept of each output stream.
const CAPTURE_CAP: usize = 256 * 1024;
/// Bytes of each stream a background shell keeps until `BashOutput` reads them.
const BACKGROUND_BUFFER: usize = 1024 * 1024;
/// Characters of output the model sees; the middle of longer output is elided.
const MAX_RESULT_CHARS: usize = 30_000;
/// A leading `sleep` at least this long (seconds) is refused in the foreground.
const LONGEST_SLEEP_SECS: f64 = 25.0;
/// Where the command's last working directory is printed, after its own output.
const CWD_MARK: &str = "\u{1f}noeta-cwd:";
/// The host variables a command sees when the host's environment is not inherited.
const BASE_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR"];
/// The programs `allowlist` mode runs when `shell_allowlist` is not set.
pub(crate) const DEFAULT_ALLOWLIST: [&str; 20] = [
    "cargo", "cat", "diff", "echo", "file", "find", "git", "go", "grep", "head", "ls", "make",
    "node", "npm", "pwd", "pytest", "python3", "sort", "tail", "wc",
];
/// Words that only mean something to a shell.
const OPERATORS: [&str; 12] = [
    "|", "||", "&&", ";", "&", ">", ">>", "<", "<<", "2>", "2>&1", "&>",
];

/// How `Bash` runs commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellMode {
    /// No shell tool.
    Off,
    /// Programs on the allowlist, without a shell.
    Allowlist,
    /// Anything, through `bash -c`.
    Arbitrary,
}

impl ShellMode {
    /// The words `shell_mode` takes, and the mode each names.
    pub(crate) const WORDS: [(&'static str, Self); 3] = [
        ("off", Self::Off),
        ("allowlist", Self::Allowlist),
        ("arbitrary", Self::Arbitrary),
    ];
}

/// The shell settings of `[plugins.fs]`.
#[derive(Debug, Clone)]
pub(crate) struct Shell {
    pub(crate) mode: ShellMode,
    pub(crate) allowlist: Vec<String>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) inherit_env: bool,
    /// Background shells are killed when the task's turn ends (`background_ends_with_turn`).
    pub(crate) ends_with_turn: bool,
}

impl Default for Shell {
    fn default() -> Self {
        Self {
            mode: ShellMode::Allowlist,
            allowlist: DEFAULT_ALLOWLIST.iter().map(|s| (*s).to_owned()).collect(),
            env: BTreeMap::new(),
            inherit_env: false,
            ends_with_turn: false,
        }
    }
}

impl Shell {
    /// The command's environment: the base (or all of the host's) plus `shell_env`.
    fn environment(&self, command: ExecCommand) -> ExecCommand {
        let mut command = if self.inherit_env {
            command
        } else {
            let mut bare = command.without_host_env();
            for key in BASE_ENV {
                if let Ok(value) = std::env::var(key) {
                    bare = bare.with_env(key, value);
                }
            }
            bare
        };
        for (key, value) in &self.env {
            command = command.with_env(key.clone(), value.clone());
        }
        command
    }

    /// The program to run for `line` in allowlist mode, or the `cd` it asks for; refusals
    /// are `tool`'s.
    fn allowlisted(&self, tool: &str, line: &str) -> Result<Planned, ToolError> {
        let words = shlex::split(line).ok_or_else(|| {
            fail(
                tool,
                "the command has an unclosed quote or a trailing escape",
            )
        })?;
        let Some((program, args)) = words.split_first() else {
            return Err(fail(tool, "the command is empty"));
        };
        if let Some(op) = words.iter().find(|w| OPERATORS.contains(&w.as_str())) {
            return Err(fail(
                tool,
                format!(
                    "`{op}` is a shell operator, and shell_mode is `allowlist`: a command runs as one program without a shell. Run the programs in separate calls."
                ),
            ));
        }
        if program == "cd" {
            return match args {
                [dir] => Ok(Planned::Cd(dir.clone())),
                [] => Ok(Planned::Cd(".".to_owned())),
                _ => Err(fail(tool, "`cd` takes one directory")),
            };
        }
        if !self.allowlist.iter().any(|p| p == program) {
            return Err(fail(
                tool,
                format!(
                    "`{program}` is not on the shell allowlist (allowed: {})",
                    self.allowlist.join(", ")
                ),
            ));
        }
        Ok(Planned::Run(ExecCommand::new(
            program.clone(),
            args.to_vec(),
        )))
    }

    /// What `line` runs as in this shell mode; a background command is not followed by the
    /// directory mark.
    fn plan(&self, tool: &str, line: &str, background: bool) -> Result<Planned, ToolError> {
        match self.mode {
            ShellMode::Allowlist => self.allowlisted(tool, line),
            ShellMode::Arbitrary if background => {
                Ok(Planned::Run(ExecCommand::new("bash", ["-c", line])))
            }
            ShellMode::Arbitrary => {
                let script = format!(
                    "{line}\n__noeta_status=$?\nprintf '\\n{CWD_MARK}%s\\n' \"$(pwd -P)\"\nexit $__noeta_status"
                );
                Ok(Planned::Run(ExecCommand::new(
                    "bash",
                    ["-c", script.as_str()],
                )))
            }
            ShellMode::Off => Err(fail(tool, "the shell is off (shell_mode = \"off\")")),
        }
    }

    /// Starts `line` as the task's next background job for `tool` (`Bash` with
    /// `run_in_background`, `Monitor`): the same refusals, directory, environment and
    /// 8-at-once cap for both; killed with its process group when `timeout` passes.
    pub(crate) fn start_background(
        &self,
        tool: &str,
        jobs: &Jobs,
        ctx: &ToolContext,
        line: &str,
        timeout: Option<Duration>,
        watch: Option<Watch>,
    ) -> Result<Started, ToolError> {
        let workspace = Workspace::of(ctx, tool)?;
        let Some(env) = ctx.exec_env() else {
            return Err(ToolError::Fatal(format!(
                "{tool}: no execution environment"
            )));
        };
        let (cwd, mut notes) = start_dir(ctx, &workspace);
        if self.ends_with_turn {
            notes.push(
                "It will be killed when this turn ends (background_ends_with_turn is on)."
                    .to_owned(),
            );
        }
        let command = match self.plan(tool, line, true)? {
            Planned::Cd(_) => return Err(fail(tool, "`cd` cannot run in the background")),
            Planned::Run(command) => command,
        };
        let mut command = self
            .environment(command)
            .in_dir(&cwd)
            .with_output_cap(BACKGROUND_BUFFER);
        if let Some(timeout) = timeout {
            command = command.with_timeout(timeout);
        }
        let id = jobs.next_id(ctx, tool)?;
        let job = env
            .spawn(&command)
            .map_err(|err| fail(tool, err.to_string()))?;
        jobs.keep(ctx, &id, job, watch);
        Ok(Started { id, cwd, notes })
    }
}

/// A background job just started.
pub(crate) struct Started {
    /// Its id, `bash_N`.
    pub(crate) id: String,
    /// The workspace-relative directory it runs in.
    pub(crate) cwd: String,
    /// What the model should be told about where it runs.
    pub(crate) notes: Vec<String>,
}

/// Where a command starts: the tracked directory, or the root (with a note) if it is gone.
fn start_dir(ctx: &ToolContext, workspace: &Workspace) -> (String, Vec<String>) {
    let cwd = tracked_cwd(ctx);
    let usable = std::fs::canonicalize(workspace.root().join(&cwd))
        .is_ok_and(|real| real.starts_with(workspace.root()) && real.is_dir());
    if cwd != "." && !usable {
        let note = format!(
            "The working directory `{cwd}` no longer exists; the command ran in the workspace root."
        );
        return (".".to_owned(), vec![note]);
    }
    (cwd, Vec::new())
}

/// The `Bash` tool.
pub(crate) struct Bash {
    shell: Arc<Shell>,
    jobs: Arc<Jobs>,
}

impl Bash {
    pub(crate) fn new(shell: Arc<Shell>, jobs: Arc<Jobs>) -> Self {
        Self { shell, jobs }
    }
}

/// What a call will do.
enum Planned {
    /// Change the tracked working directory only.
    Cd(String),
    /// Run a program.
    Run(ExecCommand),
}

/// A leading `sleep N` of `N` seconds or more, which would hold the turn in the foreground.
fn long_leading_sleep(command: &str) -> Option<f64> {
    let mut words = command.split_whitespace();
    if words.next()? != "sleep" {
        return None;
    }
    let arg = words.next()?;
    let (number, unit) = match arg.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => arg.split_at(i),
        None => (arg, ""),
    };
    let scale = match unit.trim_end_matches([';', '&']) {
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let seconds = number.parse::<f64>().ok()? * scale;
    (seconds >= LONGEST_SLEEP_SECS).then_some(seconds)
}

/// `text` cut to `max` characters by eliding its middle.
pub(crate) fn elide_middle(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let keep = max / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(count - keep).collect();
    format!(
        "{head}\n… [{} characters elided] …\n{tail}",
        count - 2 * keep
    )
}

/// The working directory the task's shell is in, workspace-relative (`.` for the root).
fn tracked_cwd(ctx: &ToolContext) -> String {
    ctx.state(EXTENSION)
        .and_then(|s| s.get("cwd"))
        .and_then(Value::as_str)
        .unwrap_or(".")
        .to_owned()
}

#[async_trait]
impl Tool for Bash {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Runs a shell command in the workspace and returns its output.\n\n\
         - The working directory persists between calls (a `cd` carries over) and stays inside the workspace.\n\
         - `timeout` is in milliseconds (default 120000, at most 600000); the whole process tree is killed when it passes.\n\
         - Output over 30000 characters is shortened in the middle.\n\
         - `run_in_background` starts a long command (a server, a watcher, a long build) and returns its id at once; BashOutput reads what it printed, KillShell stops it.\n\
         - Prefer Read, Glob and Grep over cat, find and grep for files.\n\
         - Do not start with a long `sleep`: check the condition you are waiting for instead."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": { "type": "string", "description": "The command to run." },
                "timeout": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_MS,
                    "description": "Deadline in milliseconds (default 120000, at most 600000)."
                },
                "description": {
                    "type": "string",
                    "description": "What the command does, in five to ten words."
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Start it and return at once; read its output with BashOutput, stop it with KillShell."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .with_risk(Risk::High)
            .clearable()
            // The tool shortens output itself; the room above it is for its notes and exit code.
            .with_max_result_chars(MAX_RESULT_CHARS + 2_000)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let line = input
            .get("command")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(NAME, "`command` must be a string"))?
            .trim();
        if line.is_empty() {
            return Err(fail(NAME, "the command is empty"));
        }
        let timeout_ms = match input.get("timeout") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
            Some(value) => match value.as_f64() {
                Some(ms) if ms >= 1.0 && ms <= MAX_TIMEOUT_MS as f64 => ms as u64,
                _ => {
                    return Err(fail(
                        NAME,
                        format!(
                            "`timeout` {value} is not a number of milliseconds from 1 to {MAX_TIMEOUT_MS}"
                        ),
                    ));
                }
            },
        };
        let background = input.get("run_in_background").and_then(Value::as_bool) == Some(true);
        if !background && let Some(seconds) = long_leading_sleep(line) {
            return Err(fail(
                NAME,
                format!(
                    "Blocked: a leading `sleep` of {seconds} s would hold the turn in the foreground. Check for the condition you are waiting on instead, or sleep less than {LONGEST_SLEEP_SECS} s at a time."
                ),
            ));
        }
        if background {
            let timeout = input
                .get("timeout")
                .is_some_and(|t| !t.is_null())
                .then(|| Duration::from_millis(timeout_ms));
            let started = self
                .shell
                .start_background(NAME, &self.jobs, ctx, line, timeout, None)?;
            let id = started.id;
            ctx.record(
                EXTENSION,
                "shell_background",
                json!({ "id": id, "command": line, "cwd": started.cwd }),
            );
            let mut text = format!(
                "Started `{id}` in the background. Read its output with BashOutput (bash_id `{id}`); stop it with KillShell."
            );
            for note in started.notes {
                text.push_str(&format!("\n{note}"));
            }
            return Ok(ToolOutput::text(text));
        }
        let workspace = Workspace::of(ctx, NAME)?;
        let Some(env) = ctx.exec_env() else {
            return Err(ToolError::Fatal(format!(
                "{NAME}: no execution environment"
            )));
        };
        let (cwd, mut notes) = start_dir(ctx, &workspace);
        let command = match self.shell.plan(NAME, line, false)? {
            Planned::Cd(dir) => {
                let base = if cwd == "." || Path::new(&dir).is_absolute() {
                    String::new()
                } else {
                    format!("{cwd}/")
                };
                let target = workspace.resolve(NAME, &format!("{base}{dir}"))?;
                if !target.abs.is_dir() {
                    return Err(fail(NAME, format!("`{dir}` is not a directory")));
                }
                ctx.record(
                    EXTENSION,
                    "shell",
                    json!({ "command": line, "cwd": target.rel, "status": 0 }),
                );
                return Ok(ToolOutput::text(format!(
                    "(working directory: {})",
                    target.rel
                )));
            }
            Planned::Run(command) => command,
        };
        let mut command = self
            .shell
            .environment(command)
            .in_dir(&cwd)
            .with_timeout(Duration::from_millis(timeout_ms))
            .with_output_cap(CAPTURE_CAP);
        // Each line as it is printed is live progress (not the result; the shell's own
        // directory mark is left out).
        if let Some(progress) = ctx.progress_sink() {
            command = command.with_line_sink(std::sync::Arc::new(move |line: &str| {
                if !line.trim().is_empty() && !line.starts_with(CWD_MARK) {
                    progress(line);
                }
            }));
        }
        let out = env
            .run(&command)
            .await
            .map_err(|err| fail(NAME, err.to_string()))?;

        let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        // The directory the command ended in, printed after its output (arbitrary mode).
        let mut next_cwd = cwd.clone();
        if self.shell.mode == ShellMode::Arbitrary {
            // The mark the shell prints starts a line; a look-alike the command printed itself
            // is only trusted as far as it names a real directory inside the workspace.
            let mark = format!("\n{CWD_MARK}");
            match stdout.rfind(&mark) {
                Some(at) => {
                    let ended = stdout[at + mark.len()..].trim_end().to_owned();
                    stdout.truncate(at);
                    let inside = std::fs::canonicalize(&ended)
                        .ok()
                        .filter(|real| real.starts_with(workspace.root()) && real.is_dir());
                    match inside {
                        Some(real) => next_cwd = workspace.relative(&real),
                        None => {
                            notes.push(format!(
                                "The command left the workspace (for `{ended}`); the next command starts in the workspace root."
                            ));
                            next_cwd = ".".to_owned();
                        }
                    }
                }
                None if out.dropped > 0 => notes.push(
                    "The output passed the capture limit, so a `cd` in this command was not tracked."
                        .to_owned(),
                ),
                None => {}
            }
        }
        ctx.record(
            EXTENSION,
            "shell",
            json!({ "command": line, "cwd": next_cwd, "status": out.status, "timed_out": out.timed_out }),
        );

        let mut text = stdout.trim_end().to_owned();
        let stderr = stderr.trim_end();
        if !stderr.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(stderr);
        }
        let mut text = elide_middle(&text, MAX_RESULT_CHARS);
        if out.dropped > 0 {
            text.push_str(&format!(
                "\n[{} more bytes of output were not captured]",
                out.dropped
            ));
        }
        if text.is_empty() {
            text = "(no output)".to_owned();
        }
        for note in notes {
            text.push_str(&format!("\n{note}"));
        }
        if out.timed_out {
            return Ok(ToolOutput::error(format!(
                "{NAME}: the command timed out after {timeout_ms} ms and was killed\n{text}"
            )));
        }
        match out.status {
            Some(0) => Ok(ToolOutput::text(text)),
            Some(code) => Ok(ToolOutput::error(format!("{text}\nExit code {code}"))),
            None => Ok(ToolOutput::error(format!("{text}\nKilled by a signal"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_sleeps_of_25_seconds_or_more_are_caught() {
        assert_eq!(long_leading_sleep("sleep 30"), Some(30.0));
        assert_eq!(long_leading_sleep("sleep 1m && ls"), Some(60.0));
        assert_eq!(long_leading_sleep("sleep 25; make"), Some(25.0));
        assert_eq!(long_leading_sleep("sleep 2"), None);
        assert_eq!(long_leading_sleep("make && sleep 60"), None);
        assert_eq!(long_leading_sleep("sleepy 60"), None);
    }

    #[test]
    fn long_output_loses_its_middle() {
        let text = "a".repeat(10) + &"b".repeat(10);
        assert_eq!(elide_middle(&text, 100), text);
        assert_eq!(elide_middle(&text, 4), "aa\n… [16 characters elided] …\nbb");
    }
}
