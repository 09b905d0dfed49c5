//! Command hooks, written exactly as Claude Code users write them (the `hooks` extension).
//!
//! Settings (`[plugins.governance] hooks`) take the same shape as Claude
//! Code's `hooks` JSON: event name → a list of `{matcher, hooks: [{type:
//! "command", command, timeout}]}` groups, plus a per-hook `fail_closed` and `env` (variables
//! for the command: a Claude Code plugin's options). The
//! command runs through `sh -c` in the workspace with the event as JSON on
//! standard input. Exit 0 succeeds (its JSON output, if any, is read); exit 2
//! blocks, feeding standard error back; any other exit, a crash or a timeout is
//! a non-blocking error — a deny instead when the hook is `fail_closed`.
//!
//! Where each event runs: `PreToolUse` in the gate (`before_tool`),
//! `PostToolUse` after a call (`after_tool`), `Stop` at `before_finish`,
//! `UserPromptSubmit` at turn intake, `SessionStart` once per task at
//! `on_start`, `Notification` in the background when a turn parks on a person
//! (`on_event`; the matcher matches the notification type).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::{ExecCommand, ExecEnv, LocalExecEnv};
use noeta_core::extension::{Extension, HookError, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::records::{CoreRecord, ERASED_KIND};
use noeta_core::store::Event as LogEvent;
use noeta_core::{ToolOutput, Verdict};
use regex::Regex;

use crate::transcript::Transcripts;
use crate::{Mode, current_mode};
use noeta_toolkit::PermissionRule as Rule;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The extension's name; its records (warnings, the session-start mark) live under it.
pub(crate) const HOOKS: &str = "hooks";

/// The default timeout of a hook, in seconds.
const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// Notification hooks running at once, at most; past it a notification is dropped (and logged).
const MAX_NOTIFICATIONS_IN_FLIGHT: usize = 16;

/// The events hooks run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    PreToolUse,
    PostToolUse,
    Stop,
    UserPromptSubmit,
    SessionStart,
    Notification,
}

impl Event {
    const KNOWN: &'static str =
        "PreToolUse, PostToolUse, Stop, UserPromptSubmit, SessionStart, Notification";

    fn parse(name: &str) -> Option<Self> {
        match name {
            "PreToolUse" => Some(Event::PreToolUse),
            "PostToolUse" => Some(Event::PostToolUse),
            "Stop" => Some(Event::Stop),
            "UserPromptSubmit" => Some(Event::UserPromptSubmit),
            "SessionStart" => Some(Event::SessionStart),
            "Notification" => Some(Event::Notification),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::Stop => "Stop",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::SessionStart => "SessionStart",
            Event::Notification => "Notification",
        }
    }
}

/// The events Claude Code documents that noeta does not run (yet): configured, they are
/// accepted with one warning and ignored.
const NOT_RUN: [&str; 23] = [
    "PostToolUseFailure",
    "PostToolBatch",
    "PermissionRequest",
    "PermissionDenied",
    "UserPromptExpansion",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Elicitation",
    "ElicitationResult",
    "TeammateIdle",
    "TaskCreated",
    "TaskCompleted",
    "Setup",
    "InstructionsLoaded",
    "CwdChanged",
    "FileChanged",
    "ConfigChange",
    "WorktreeCreate",
    "WorktreeRemove",
    "SessionEnd",
];

/// The keys of a command hook noeta reads.
const SPEC_KEYS: [&str; 7] = [
    "type",
    "command",
    "timeout",
    "fail_closed",
    "env",
    "if",
    "async",
];

#[derive(Debug, Deserialize)]
struct CommandSpec {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    timeout: Option<u64>,
    #[serde(default)]
    fail_closed: bool,
    /// Variables set for the command (a Claude Code plugin's options, secrets resolved).
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Claude Code's `if`: a permission rule the tool call must match (`Bash(git *)`).
    #[serde(default, rename = "if")]
    condition: Option<String>,
    /// Claude Code's `async`: the hook runs in the background and never blocks.
    #[serde(default, rename = "async")]
    background: bool,
    /// Claude Code's other keys (`if`, `async`, `asyncRewake`, `statusMessage`, `once`,
    /// `shell`, …): each is one warning, and the hook runs without it.
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

#[derive(Debug, Deserialize)]
struct Group {
    #[serde(default)]
    matcher: Option<String>,
    /// Where the host read the group (`<file>: hooks.<Event>[i]`), set when it merges a hooks
    /// file or a plugin's hooks into the settings: errors and warnings name it.
    #[serde(default, rename = "noeta_source")]
    source: Option<String>,
    hooks: Vec<CommandSpec>,
    /// Keys a group does not have; each is one warning.
    #[serde(flatten)]
    other: BTreeMap<String, Value>,
}

/// One configured hook.
#[derive(Debug)]
struct Hook {
    matcher: Option<Regex>,
    command: String,
    timeout: Duration,
    fail_closed: bool,
    env: BTreeMap<String, String>,
    /// `if`: the rule a tool call must match for the hook to run.
    condition: Option<Rule>,
    /// `async`: started in the background; nothing waits for it, and it cannot block.
    background: bool,
}

impl Hook {
    fn matches(&self, tool: &str) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_match(tool))
    }

    /// Whether the hook runs for `call` (its `if`, when it has one; `cwd`: the workspace).
    fn applies(&self, call: &ToolCall, cwd: &str) -> bool {
        self.condition
            .as_ref()
            .is_none_or(|rule| rule.matches(&call.name, &call.input, cwd))
    }
}

/// How one hook run ended.
enum Ran {
    /// Exit 0, with its standard output and the JSON object it printed, if any.
    Ok {
        stdout: String,
        json: Option<Map<String, Value>>,
    },
    /// Exit 2: block, with standard error fed back.
    Block { stderr: String },
    /// Anything else: another exit, a crash, a timeout.
    Failed { why: String },
}

/// The `hooks` extension.
pub(crate) struct Hooks {
    events: BTreeMap<Event, Vec<Hook>>,
    /// What of the configuration is accepted and not used: events noeta does not run, keys it
    /// does not read, hook types other than `command`. Each is said once, when the session is
    /// built.
    pub(crate) ignored: Vec<String>,
    env: Arc<dyn ExecEnv>,
    /// Where the commands run, as the hooks' input names it.
    cwd: String,
    /// Notification hooks still running in the background.
    notifying: Arc<AtomicUsize>,
    /// The tasks' transcripts, named in every input as `transcript_path`.
    transcripts: Transcripts,
    /// The configured permission mode (the task's own switch wins), for `permission_mode`.
    start_mode: Mode,
}

/// The key a host sets on each hook group it merges from a file, naming where it was read
/// (`<file>: hooks.<Event>[i]`).
pub const SOURCE_KEY: &str = "noeta_source";

/// The hooks configured, by event.
type Events = BTreeMap<Event, Vec<Hook>>;

/// The hooks of `table` (the events, as Claude Code's `hooks` JSON writes them) and what of
/// it is accepted and not used, each line naming where it was written: the group's
/// [`SOURCE_KEY`], else `settings [plugins.governance] hooks.<Event>[i]`.
fn read_events(table: &Value) -> Result<(Events, Vec<String>), String> {
    let groups: BTreeMap<String, Vec<Group>> = serde_json::from_value(table.clone())
        .map_err(|err| format!("settings [plugins.governance] hooks: {err}"))?;
    let mut events: BTreeMap<Event, Vec<Hook>> = BTreeMap::new();
    let mut ignored = Vec::new();
    for (name, list) in groups {
        let label = |i: usize, group: &Group| {
            group
                .source
                .clone()
                .unwrap_or_else(|| format!("settings [plugins.governance] hooks.{name}[{i}]"))
        };
        let Some(event) = Event::parse(&name) else {
            for (i, group) in list.iter().enumerate() {
                let count = group.hooks.len();
                let at = label(i, group);
                ignored.push(if NOT_RUN.contains(&name.as_str()) {
                    format!("{at}: noeta does not run `{name}` hooks yet; {count} hook(s) ignored")
                } else {
                    format!(
                        "{at}: `{name}` is no hook event (known: {}); {count} hook(s) ignored",
                        Event::KNOWN
                    )
                });
            }
            continue;
        };
        for (i, group) in list.into_iter().enumerate() {
            let at_group = label(i, &group);
            let matcher = match group.matcher.as_deref() {
                None | Some("") | Some("*") => None,
                Some(pattern) => Some(Regex::new(&format!("^(?:{pattern})$")).map_err(|err| {
                    format!("{at_group}: matcher `{pattern}` is not a valid pattern: {err}")
                })?),
            };
            for key in group.other.keys() {
                ignored.push(format!("{at_group}: key `{key}` is not used"));
            }
            for (j, spec) in group.hooks.into_iter().enumerate() {
                let at = format!("{at_group}.hooks[{j}]");
                if spec.kind != "command" {
                    ignored.push(format!(
                        "{at}: hook type `{}` is not supported (only `command`); this hook is ignored",
                        spec.kind
                    ));
                    continue;
                }
                let Some(command) = spec.command.filter(|c| !c.trim().is_empty()) else {
                    return Err(format!("{at}: a command hook needs a `command`"));
                };
                for key in spec
                    .other
                    .keys()
                    .filter(|k| !SPEC_KEYS.contains(&k.as_str()))
                {
                    ignored.push(format!(
                        "{at}: `{key}` is not supported yet; the hook runs without it"
                    ));
                }
                let condition = match spec.condition.as_deref() {
                    None => None,
                    Some(_) if !matches!(event, Event::PreToolUse | Event::PostToolUse) => {
                        ignored.push(format!(
                            "{at}: `if` applies to tool events only; the hook runs without it"
                        ));
                        None
                    }
                    Some(text) => Some(Rule::parse(text).map_err(|why| format!("{at}.if: {why}"))?),
                };
                events.entry(event).or_default().push(Hook {
                    matcher: matcher.clone(),
                    command,
                    timeout: Duration::from_secs(spec.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS)),
                    fail_closed: spec.fail_closed,
                    env: spec.env,
                    condition,
                    background: spec.background,
                });
            }
        }
    }
    Ok((events, ignored))
}

/// The lines said so far, so each is said once per process however many sessions read the
/// same configuration (or a host said it first, through [`notes`]).
static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Marks `line` said; whether it was new.
fn first_time(line: &str) -> bool {
    SAID.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(line.to_owned())
}

/// What of the hooks `table` (events, with [`SOURCE_KEY`] on each group) is accepted and not
/// used, each line naming where it was written — or why it cannot be used at all. A host
/// calls it when it reads a hooks file, to list these lines with the file's other warnings;
/// they are then not said again when a session is built.
///
/// # Errors
/// A hook that cannot be read (no `command`, a bad matcher or `if`), naming it.
pub fn notes(table: &Value) -> Result<Vec<String>, String> {
    let (_, ignored) = read_events(table)?;
    for line in &ignored {
        first_time(line);
    }
    Ok(ignored)
}

/// Reads `[plugins.governance] hooks`; every error names the event, the group or the field.
/// Hook commands run in `cwd`, or in the current directory when it is not set.
pub(crate) fn parse(
    table: Option<&Value>,
    cwd: Option<PathBuf>,
    start_mode: Mode,
    commands: Option<Arc<dyn ExecEnv>>,
) -> Result<Option<Hooks>, String> {
    let Some(table) = table.filter(|t| !t.is_null()) else {
        return Ok(None);
    };
    let workspace = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|err| {
            format!("settings [plugins.governance] hooks: cannot tell the current directory: {err}")
        })?,
    };
    let (events, ignored) = read_events(table)?;
    for line in &ignored {
        if first_time(line) {
            tracing::warn!("{line}");
        }
    }
    Ok(Some(Hooks {
        events,
        ignored,
        cwd: workspace.display().to_string(),
        transcripts: Transcripts::new(&workspace),
        // The host's environment when it runs in this directory; else a local one here.
        env: match commands {
            Some(env) if same_dir(env.workspace(), &workspace) => env,
            _ => Arc::new(LocalExecEnv::new(workspace)),
        },
        notifying: Arc::new(AtomicUsize::new(0)),
        start_mode,
    }))
}

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    let real = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    real(a) == real(b)
}

/// The output keys acted on; any other (Claude Code's `continue`, `stopReason` and
/// `suppressOutput` among them) is reported as ignored.
const KNOWN_OUTPUT: [&str; 4] = ["decision", "reason", "hookSpecificOutput", "systemMessage"];
const KNOWN_SPECIFIC: [&str; 5] = [
    "hookEventName",
    "permissionDecision",
    "permissionDecisionReason",
    "updatedInput",
    "additionalContext",
];

impl Hooks {
    fn for_event(&self, event: Event, tool: Option<&str>) -> impl Iterator<Item = &Hook> {
        self.events
            .get(&event)
            .into_iter()
            .flatten()
            .filter(move |h| tool.is_none_or(|t| h.matches(t)))
    }

    async fn run(&self, hook: &Hook, input: &Value) -> Ran {
        let mut command = ExecCommand::new("sh", ["-c", hook.command.as_str()])
            .with_env("CLAUDE_PROJECT_DIR", self.cwd.as_str())
            .with_stdin(input.to_string())
            .with_timeout(hook.timeout);
        for (name, value) in &hook.env {
            command = command.with_env(name.as_str(), value.as_str());
        }
        let finished = crate::hook_process::run(
            Arc::clone(&self.env),
            command,
            hook.timeout,
            hook.command.clone(),
            Arc::clone(&self.notifying),
        )
        .await;
        let done = match finished {
            // It asked for the background: it goes on there, and can no longer block.
            crate::hook_process::Finished::WentAsync => {
                return Ran::Ok {
                    stdout: String::new(),
                    json: None,
                };
            }
            crate::hook_process::Finished::Done(done) => done,
        };
        match done {
            Err(err) => Ran::Failed {
                why: err.to_string(),
            },
            Ok(out) if out.timed_out => Ran::Failed {
                why: format!("timed out after {} s", hook.timeout.as_secs()),
            },
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                match out.status {
                    // An async answer the environment could not show early: the hook ran
                    // to its end, and what it printed after that answer is not for the model.
                    Some(0)
                        if crate::hook_process::async_request(
                            stdout.lines().next().unwrap_or_default(),
                        )
                        .is_some() =>
                    {
                        Ran::Ok {
                            stdout: String::new(),
                            json: None,
                        }
                    }
                    Some(0) => {
                        let json = stdout
                            .starts_with('{')
                            .then(|| serde_json::from_str::<Map<String, Value>>(&stdout).ok())
                            .flatten();
                        Ran::Ok { stdout, json }
                    }
                    Some(2) if stderr.is_empty() => Ran::Block {
                        stderr: format!("blocked by the hook `{}` (exit 2)", hook.command),
                    },
                    Some(2) => Ran::Block { stderr },
                    Some(code) => Ran::Failed {
                        why: format!("exited with status {code}: {stderr}"),
                    },
                    None => Ran::Failed {
                        why: "ended by a signal".to_owned(),
                    },
                }
            }
        }
    }

    /// Records a warning (unknown output keys, a failed non-blocking hook) where people see it.
    fn warn(&self, view: &View<'_>, event: Event, hook: &Hook, message: &str) {
        tracing::warn!(event = event.name(), command = %hook.command, "{message}");
        view.record(
            HOOKS,
            "warning",
            json!({ "event": event.name(), "command": hook.command, "message": message }),
        );
    }

    /// The hooks of `event` that run now, once the `async` ones among `hooks` are started in
    /// the background.
    fn now<'h>(
        &'h self,
        event: Event,
        hooks: impl Iterator<Item = &'h Hook>,
        input: &Value,
    ) -> Vec<&'h Hook> {
        hooks
            .filter(|hook| {
                if hook.background {
                    self.in_background(event, hook, input.to_string());
                }
                !hook.background
            })
            .collect()
    }

    /// Runs a hook in the background (a Notification hook, an `async` one): nothing waits for
    /// it and it cannot block; a failure is logged.
    fn in_background(&self, event: Event, hook: &Hook, input: String) {
        let event = event.name();
        if self.notifying.fetch_add(1, Ordering::SeqCst) >= MAX_NOTIFICATIONS_IN_FLIGHT {
            self.notifying.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(command = %hook.command, "{event} hook dropped: {MAX_NOTIFICATIONS_IN_FLIGHT} still running in the background");
            return;
        }
        let mut command = ExecCommand::new("sh", ["-c", hook.command.as_str()])
            .with_env("CLAUDE_PROJECT_DIR", self.cwd.as_str())
            .with_stdin(input)
            .with_timeout(hook.timeout);
        for (name, value) in &hook.env {
            command = command.with_env(name.as_str(), value.as_str());
        }
        let env = self.env.clone();
        let notifying = Arc::clone(&self.notifying);
        let shown = hook.command.clone();
        std::thread::spawn(move || {
            let result = futures::executor::block_on(env.run(&command));
            notifying.fetch_sub(1, Ordering::SeqCst);
            match result {
                Ok(out) if out.status == Some(0) => {}
                Ok(out) if out.timed_out => {
                    tracing::warn!(command = %shown, "{event} hook timed out");
                }
                Ok(out) => tracing::warn!(
                    command = %shown,
                    status = ?out.status,
                    stderr = %String::from_utf8_lossy(&out.stderr).trim(),
                    "{event} hook failed"
                ),
                Err(err) => tracing::warn!(command = %shown, "{event} hook failed: {err}"),
            }
        });
    }

    /// Records a hook failure that did not block anything.
    fn not_blocking(&self, view: &View<'_>, event: Event, hook: &Hook, why: &str) {
        self.warn(view, event, hook, &format!("failed (not blocking): {why}"));
    }

    /// Records what a hook adds to the conversation: its `additionalContext`, or its plain output.
    fn add_context(
        &self,
        view: &View<'_>,
        event: Event,
        hook: &Hook,
        stdout: String,
        json: Option<&Map<String, Value>>,
    ) {
        let context = match json {
            Some(json) => {
                self.check_keys(view, event, hook, json);
                self.system_message(view, event, json);
                specific(json, "additionalContext")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
            None => Some(stdout).filter(|s| !s.is_empty()),
        };
        if let Some(text) = context {
            view.record_with_message(HOOKS, "context", json!({ "event": event.name() }), &text);
        }
    }

    fn check_keys(&self, view: &View<'_>, event: Event, hook: &Hook, json: &Map<String, Value>) {
        let mut unknown: Vec<String> = json
            .keys()
            .filter(|k| !KNOWN_OUTPUT.contains(&k.as_str()))
            .cloned()
            .collect();
        if let Some(specific) = json.get("hookSpecificOutput").and_then(Value::as_object) {
            unknown.extend(
                specific
                    .keys()
                    .filter(|k| !KNOWN_SPECIFIC.contains(&k.as_str()))
                    .map(|k| format!("hookSpecificOutput.{k}")),
            );
        }
        if !unknown.is_empty() {
            self.warn(
                view,
                event,
                hook,
                &format!(
                    "the hook's output has unknown keys, which were ignored: {}",
                    unknown.join(", ")
                ),
            );
        }
    }

    /// The fields every event's input has, as Claude Code sends them: the session (the task),
    /// its transcript (brought up to date first), the directory, the event and the permission
    /// mode in force.
    fn base(&self, view: &View<'_>, event: Event) -> Map<String, Value> {
        let task = view.task_id().as_str();
        let transcript = match self.transcripts.update(task, &view.core().messages) {
            Ok(path) => path,
            Err(why) => {
                tracing::warn!("hooks: {why}");
                self.transcripts.path(task)
            }
        };
        let mut input = Map::new();
        input.insert("session_id".to_owned(), json!(task));
        input.insert(
            "transcript_path".to_owned(),
            json!(transcript.display().to_string()),
        );
        input.insert("cwd".to_owned(), json!(self.cwd));
        input.insert(
            "permission_mode".to_owned(),
            json!(current_mode(view, self.start_mode).as_str()),
        );
        input.insert("hook_event_name".to_owned(), json!(event.name()));
        input
    }

    /// A hook's `systemMessage`: shown to the person (recorded as a notice), and returned to
    /// stand as the reason of a block that gives none.
    fn system_message(
        &self,
        view: &View<'_>,
        event: Event,
        json: &Map<String, Value>,
    ) -> Option<String> {
        let text = json
            .get("systemMessage")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())?;
        view.record(
            HOOKS,
            "notice",
            json!({ "event": event.name(), "text": text }),
        );
        Some(text.to_owned())
    }
}

/// A field of the output's `hookSpecificOutput` object.
fn specific<'a>(json: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    json.get("hookSpecificOutput")
        .and_then(Value::as_object)
        .and_then(|s| s.get(key))
}

/// The reason of a `decision: block` output (`default` when it gives none).
fn block_reason(json: &Map<String, Value>, default: &str) -> Option<String> {
    (json.get("decision").and_then(Value::as_str) == Some("block")).then(|| {
        json.get("reason")
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    })
}

#[async_trait]
impl Extension for Hooks {
    fn name(&self) -> &str {
        HOOKS
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        let mut input = self.base(view, Event::PreToolUse);
        input.insert("tool_name".to_owned(), json!(call.name));
        input.insert("tool_input".to_owned(), call.input.clone());
        input.insert("tool_use_id".to_owned(), json!(call.id));
        let input = Value::Object(input);
        let mut verdicts: Vec<Verdict> = Vec::new();
        let hooks = self
            .for_event(Event::PreToolUse, Some(&call.name))
            .filter(|h| h.applies(call, &self.cwd));
        for hook in self.now(Event::PreToolUse, hooks, &input) {
            match self.run(hook, &input).await {
                Ran::Block { stderr } => verdicts.push(Verdict::Deny { reason: stderr }),
                Ran::Failed { why } if hook.fail_closed => verdicts.push(Verdict::Deny {
                    reason: format!("PreToolUse hook `{}` failed: {why}", hook.command),
                }),
                Ran::Failed { why } => self.not_blocking(view, Event::PreToolUse, hook, &why),
                Ran::Ok { json: None, .. } => {}
                Ran::Ok {
                    json: Some(json), ..
                } => {
                    self.check_keys(view, Event::PreToolUse, hook, &json);
                    let shown = self.system_message(view, Event::PreToolUse, &json);
                    let reason = specific(&json, "permissionDecisionReason")
                        .or_else(|| json.get("reason"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or(shown)
                        .unwrap_or_else(|| "blocked by a PreToolUse hook".to_owned());
                    // A hook that hands back the input it was given (as a rewriting hook does
                    // when the gate checks the rewritten call again) has no change to make.
                    if let Some(updated) =
                        specific(&json, "updatedInput").filter(|u| **u != call.input)
                    {
                        verdicts.push(Verdict::Rewrite {
                            input: updated.clone(),
                            reason: reason.clone(),
                        });
                    }
                    let decision = specific(&json, "permissionDecision")
                        .and_then(Value::as_str)
                        .or_else(|| json.get("decision").and_then(Value::as_str));
                    match decision {
                        Some("deny" | "block") => verdicts.push(Verdict::Deny { reason }),
                        Some("ask") => verdicts.push(Verdict::Ask {
                            reason,
                            firm: false,
                        }),
                        Some("allow" | "approve") => {
                            verdicts.push(Verdict::Allow { approve: true })
                        }
                        _ => {}
                    }
                }
            }
        }
        // The strongest answer: a deny, then a rewrite, then an ask, then an allow.
        let rank = |v: &Verdict| match v {
            Verdict::Deny { .. } => 0,
            Verdict::Rewrite { .. } => 1,
            Verdict::Ask { .. } => 2,
            _ => 3,
        };
        Ok(verdicts.into_iter().min_by_key(rank))
    }

    async fn after_tool(
        &self,
        view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        let mut input = self.base(view, Event::PostToolUse);
        input.insert("tool_name".to_owned(), json!(call.name));
        input.insert("tool_input".to_owned(), call.input.clone());
        input.insert("tool_use_id".to_owned(), json!(call.id));
        input.insert(
            "tool_response".to_owned(),
            json!({ "text": output.text, "is_error": output.is_error }),
        );
        let input = Value::Object(input);
        let mut output = output;
        let hooks = self
            .for_event(Event::PostToolUse, Some(&call.name))
            .filter(|h| h.applies(call, &self.cwd));
        for hook in self.now(Event::PostToolUse, hooks, &input) {
            let feedback = match self.run(hook, &input).await {
                Ran::Block { stderr } => Some(stderr),
                Ran::Failed { why } => {
                    self.not_blocking(view, Event::PostToolUse, hook, &why);
                    None
                }
                Ran::Ok { json: None, .. } => None,
                Ran::Ok {
                    json: Some(json), ..
                } => {
                    self.check_keys(view, Event::PostToolUse, hook, &json);
                    let shown = self.system_message(view, Event::PostToolUse, &json);
                    let blocked = block_reason(&json, "").map(|r| {
                        if r.is_empty() {
                            shown.unwrap_or_default()
                        } else {
                            r
                        }
                    });
                    let context = specific(&json, "additionalContext")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    blocked
                        .into_iter()
                        .chain(context)
                        .reduce(|a, b| format!("{a}\n{b}"))
                }
            };
            if let Some(text) = feedback.filter(|t| !t.is_empty()) {
                output.text = format!("{}\n\nPostToolUse hook: {text}", output.text);
            }
        }
        Ok(output)
    }

    async fn before_finish(&self, view: &View<'_>) -> HookResult<Option<String>> {
        let mut input = self.base(view, Event::Stop);
        // True when a Stop hook already refused this turn once (so a hook can avoid looping).
        let refused = view
            .ext_state(HOOKS)
            .and_then(|s| s.get("stop_refused_at"))
            .and_then(Value::as_u64);
        let turn = view.core().last_user.map(|i| i as u64);
        input.insert(
            "stop_hook_active".to_owned(),
            json!(refused.is_some() && refused == turn),
        );
        let input = Value::Object(input);
        for hook in self.now(Event::Stop, self.for_event(Event::Stop, None), &input) {
            let refusal = match self.run(hook, &input).await {
                Ran::Block { stderr } => Some(stderr),
                Ran::Failed { why } if hook.fail_closed => {
                    Some(format!("Stop hook `{}` failed: {why}", hook.command))
                }
                Ran::Failed { why } => {
                    self.not_blocking(view, Event::Stop, hook, &why);
                    None
                }
                Ran::Ok { json: None, .. } => None,
                Ran::Ok {
                    json: Some(json), ..
                } => {
                    self.check_keys(view, Event::Stop, hook, &json);
                    let shown = self.system_message(view, Event::Stop, &json);
                    block_reason(&json, "").map(|r| {
                        if r.is_empty() {
                            shown.unwrap_or_else(|| "a Stop hook asks you to go on".to_owned())
                        } else {
                            r
                        }
                    })
                }
            };
            if let Some(reason) = refusal {
                view.record(HOOKS, "stop_refused", json!({ "at": turn }));
                return Ok(Some(reason));
            }
        }
        Ok(None)
    }

    async fn turn_intake(&self, view: &View<'_>, message: &str) -> HookResult<()> {
        let mut input = self.base(view, Event::UserPromptSubmit);
        input.insert("prompt".to_owned(), json!(message));
        let input = Value::Object(input);
        let hooks = self.for_event(Event::UserPromptSubmit, None);
        for hook in self.now(Event::UserPromptSubmit, hooks, &input) {
            match self.run(hook, &input).await {
                Ran::Block { stderr } => {
                    return Err(HookError::new(format!(
                        "UserPromptSubmit hook blocked the prompt: {stderr}"
                    )));
                }
                Ran::Failed { why } if hook.fail_closed => {
                    return Err(HookError::new(format!(
                        "UserPromptSubmit hook `{}` failed: {why}",
                        hook.command
                    )));
                }
                Ran::Failed { why } => self.not_blocking(view, Event::UserPromptSubmit, hook, &why),
                Ran::Ok {
                    json: Some(json), ..
                } if block_reason(&json, "").is_some() => {
                    self.check_keys(view, Event::UserPromptSubmit, hook, &json);
                    let shown = self.system_message(view, Event::UserPromptSubmit, &json);
                    let reason = block_reason(&json, "")
                        .filter(|r| !r.is_empty())
                        .or(shown)
                        .unwrap_or_default();
                    return Err(HookError::new(format!(
                        "UserPromptSubmit hook blocked the prompt: {}",
                        if reason.is_empty() {
                            hook.command.as_str()
                        } else {
                            reason.as_str()
                        }
                    )));
                }
                Ran::Ok { stdout, json } => {
                    self.add_context(view, Event::UserPromptSubmit, hook, stdout, json.as_ref());
                }
            }
        }
        Ok(())
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        // Once per task: the mark is recorded, so later claims and resumes skip it.
        if view
            .ext_state(HOOKS)
            .and_then(|s| s.get("session_started"))
            .is_some()
        {
            return Ok(());
        }
        // What the configuration holds and noeta does not use, once per task in its log.
        for line in &self.ignored {
            view.record(HOOKS, "warning", json!({ "message": line }));
        }
        let hooks: Vec<&Hook> = self.for_event(Event::SessionStart, None).collect();
        if hooks.is_empty() {
            if !self.ignored.is_empty() {
                view.record(HOOKS, "session_started", json!({}));
            }
            return Ok(());
        }
        let mut input = self.base(view, Event::SessionStart);
        // Once per task, when it starts (Claude Code's other sources — resume, clear,
        // compact — do not start a noeta task's session again).
        input.insert("source".to_owned(), json!("startup"));
        let input = Value::Object(input);
        for hook in self.now(Event::SessionStart, hooks.into_iter(), &input) {
            match self.run(hook, &input).await {
                Ran::Ok { stdout, json } => {
                    self.add_context(view, Event::SessionStart, hook, stdout, json.as_ref());
                }
                Ran::Block { stderr } | Ran::Failed { why: stderr } => {
                    self.not_blocking(view, Event::SessionStart, hook, &stderr);
                }
            }
        }
        view.record(HOOKS, "session_started", json!({}));
        Ok(())
    }

    /// A turn parked on a person: Notification hooks hear of it, live only (never on replay).
    fn on_event(&self, view: &View<'_>, event: &LogEvent) -> HookResult<()> {
        let record = &event.record;
        let parked = record.kind == "call_parked" || record.kind == "tool_parked";
        if !parked || !self.events.contains_key(&Event::Notification) {
            return Ok(());
        }
        let (kind, message) = match CoreRecord::from_record(record) {
            Some(Ok(CoreRecord::CallParked { question, .. })) => ("permission_prompt", question),
            Some(Ok(CoreRecord::ToolParked {
                question: Some(question),
                ..
            })) => ("question", question),
            _ => return Ok(()),
        };
        let mut input = self.base(view, Event::Notification);
        input.insert("message".to_owned(), json!(message));
        input.insert("notification_type".to_owned(), json!(kind));
        let input = Value::Object(input).to_string();
        for hook in self.for_event(Event::Notification, Some(kind)) {
            self.in_background(Event::Notification, hook, input.clone());
        }
        Ok(())
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if !state.is_object() {
            *state = json!({});
        }
        let Some(map) = state.as_object_mut() else {
            return Ok(());
        };
        match kind {
            "session_started" => {
                map.insert("session_started".to_owned(), Value::Bool(true));
            }
            "stop_refused" => {
                map.insert(
                    "stop_refused_at".to_owned(),
                    data.get("at").cloned().unwrap_or(Value::Null),
                );
            }
            "warning" | "context" | "notice" | ERASED_KIND => {}
            other => return Err(format!("unknown record kind `{other}`")),
        }
        Ok(())
    }
}
