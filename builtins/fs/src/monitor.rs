//! `Monitor`: a background shell whose standard output reaches the model line by line.
//!
//! The tool starts the command exactly as `Bash` with `run_in_background` does (same
//! shell mode and refusals, directory, environment, ids and 8-at-once cap, see
//! `bash.rs`), always with a deadline (default 300 s, at most 1,800 s), records it
//! (`monitor`), and answers at once. Before every model request the `fs` extension's
//! `reminders` hook calls [`notifications`]: for each job of the task still watched, the
//! complete lines it printed since the last step become one text, `[Monitor <id>:
//! <description>] <line>` a line, which the runner records in the conversation; when the
//! job ended, a last line says how, and `monitor_ended` is recorded so it is not said
//! again. A step's notifications stay within 10,000 characters; the lines past that are
//! dropped, with their count. Standard error is not streamed: `BashOutput` reads it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::extension::View;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

use crate::bash::Shell;
use crate::jobs::{Jobs, Watch};
use crate::paths::fail;
use crate::registry::EXTENSION;

const NAME: &str = "Monitor";

/// The deadline when `timeout_ms` is not given, in milliseconds.
const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// The shortest and longest `timeout_ms` a call may ask for.
const MIN_TIMEOUT_MS: u64 = 1_000;
const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// The longest deadline a monitored command gets, whatever it asked for.
const LONGEST_DEADLINE_MS: u64 = 1_800_000;
/// Characters of one tool result.
const MAX_RESULT_CHARS: usize = 10_000;
/// Characters of one step's notifications, all jobs together.
pub(crate) const MAX_STEP_CHARS: usize = 10_000;
/// Characters of one streamed line; the rest is clipped.
const MAX_LINE_CHARS: usize = 2_000;
/// Characters of the description in each line's label.
const MAX_LABEL_CHARS: usize = 100;

/// The `Monitor` tool.
pub(crate) struct Monitor {
    shell: Arc<Shell>,
    jobs: Arc<Jobs>,
}

impl Monitor {
    pub(crate) fn new(shell: Arc<Shell>, jobs: Arc<Jobs>) -> Self {
        Self { shell, jobs }
    }
}

#[async_trait]
impl Tool for Monitor {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Starts a command in the background and streams what it prints: each line it writes to standard output reaches you as a notification, in the conversation before your next request, as it is printed. Use it to watch a log, a test run, a build or a server instead of polling with BashOutput.\n\n\
         - The command runs as Bash runs it (same working directory, same rules); the call returns at once with the shell's id (`bash_N`).\n\
         - Every notification line starts with `[Monitor <id>: <description>]`; when the command ends, one last line says how (exited with code N, killed, deadline reached).\n\
         - Standard error is not streamed: read it with BashOutput.\n\
         - Lines over 2000 characters are clipped; one step's notifications stay within 10000 characters, and the lines past that are dropped (their count is given).\n\
         - `timeout_ms` (default 300000, from 1000 to 3600000; at most 1800000 is used) kills the whole process tree when it passes; KillShell stops it sooner."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": { "type": "string", "description": "The command to run and watch." },
                "description": {
                    "type": "string",
                    "description": "A short label of what is watched, such as `test run` or `server log`; it starts every notification."
                },
                "timeout_ms": {
                    "type": "number",
                    "minimum": MIN_TIMEOUT_MS,
                    "maximum": MAX_TIMEOUT_MS,
                    "description": "Deadline in milliseconds (default 300000; at most 1800000 is used)."
                }
            },
            "required": ["command", "description"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .with_risk(Risk::High)
            .clearable()
            .with_max_result_chars(MAX_RESULT_CHARS)
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
        let description = input
            .get("description")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(NAME, "`description` must be a string"))?
            .trim();
        if description.is_empty() {
            return Err(fail(
                NAME,
                "`description` is empty: give a short label of what is watched",
            ));
        }
        let asked_ms = match input.get("timeout_ms") {
            None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
            Some(value) => match value.as_f64() {
                Some(ms) if ms >= MIN_TIMEOUT_MS as f64 && ms <= MAX_TIMEOUT_MS as f64 => ms as u64,
                _ => {
                    return Err(fail(
                        NAME,
                        format!(
                            "`timeout_ms` {value} is not a number of milliseconds from {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}"
                        ),
                    ));
                }
            },
        };
        let timeout_ms = asked_ms.min(LONGEST_DEADLINE_MS);
        let timeout = Duration::from_millis(timeout_ms);
        let started = self.shell.start_background(
            NAME,
            &self.jobs,
            ctx,
            line,
            Some(timeout),
            Some(Watch::new(timeout)),
        )?;
        let id = started.id;
        ctx.record(
            EXTENSION,
            "monitor",
            json!({
                "id": id,
                "description": description,
                "command": line,
                "cwd": started.cwd,
                "timeout_ms": timeout_ms,
            }),
        );
        let mut text = format!(
            "Monitoring `{id}` ({description}). Each line it prints to standard output will arrive as a notification as it is printed, and one last line when it ends; its standard error is not streamed (read it with BashOutput, bash_id `{id}`). It is killed after {timeout_ms} ms; stop it sooner with KillShell (shell_id `{id}`)."
        );
        if asked_ms > timeout_ms {
            text.push_str(&format!(
                "\n`timeout_ms` {asked_ms} is over the longest deadline of a monitored command, {LONGEST_DEADLINE_MS} ms, so it gets {LONGEST_DEADLINE_MS} ms."
            ));
        }
        for note in started.notes {
            text.push_str(&format!("\n{note}"));
        }
        Ok(ToolOutput::text(text))
    }
}

/// What one watched job has to say in a step.
struct Batch {
    /// `[Monitor <id>: <description>]`.
    label: String,
    /// Its new lines, labelled.
    lines: Vec<String>,
    /// What follows them: a dropped-bytes note and how it ended, labelled.
    tail: Vec<String>,
}

/// The task's notifications for this step, one text per watched job with something to say;
/// records `monitor_ended` for each job whose end they tell.
pub(crate) fn notifications(jobs: &Jobs, view: &View<'_>) -> Vec<String> {
    let Some(watched) = view
        .ext_state(EXTENSION)
        .and_then(|s| s.get("monitors"))
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut watched: Vec<(&String, &str)> = watched
        .iter()
        .map(|(id, description)| (id, description.as_str().unwrap_or("")))
        .collect();
    watched.sort_by_key(|(id, _)| job_number(id));
    let task = view.task_id().as_str();
    let mut batches = Vec::new();
    for (id, description) in watched {
        let label = format!("[Monitor {id}: {}]", label_of(description));
        let mut batch = Batch {
            lines: Vec::new(),
            tail: Vec::new(),
            label,
        };
        match jobs.look(task, id) {
            None => {
                batch.tail.push(format!(
                    "{} ran in a worker that has since stopped; its process and output are gone",
                    batch.label
                ));
                view.record(
                    EXTENSION,
                    "monitor_ended",
                    json!({ "id": id, "status": "gone" }),
                );
            }
            Some(look) => {
                batch.lines = look
                    .lines
                    .iter()
                    .map(|line| format!("{} {}", batch.label, clip(line)))
                    .collect();
                if look.dropped > 0 {
                    batch.tail.push(format!(
                        "{} [{} bytes of output were dropped before they were read]",
                        batch.label, look.dropped
                    ));
                }
                if let Some(status) = look.ended {
                    batch.tail.push(format!("{} ended: {status}", batch.label));
                    view.record(
                        EXTENSION,
                        "monitor_ended",
                        json!({ "id": id, "status": status }),
                    );
                }
            }
        }
        if !batch.lines.is_empty() || !batch.tail.is_empty() {
            batches.push(batch);
        }
    }
    render(batches)
}

/// One text per batch, the streamed lines cut so that all of them stay within
/// `MAX_STEP_CHARS` (the tails are always kept).
fn render(batches: Vec<Batch>) -> Vec<String> {
    let size = |lines: &[String]| -> usize { lines.iter().map(|l| l.chars().count() + 1).sum() };
    let total: usize = batches.iter().map(|b| size(&b.lines) + size(&b.tail)).sum();
    if total <= MAX_STEP_CHARS {
        return batches
            .into_iter()
            .map(|b| [b.lines, b.tail].concat().join("\n"))
            .collect();
    }
    // Room for the lines once every tail, and a note for each job that has lines, are in.
    let reserved: usize = batches
        .iter()
        .map(|b| {
            let note = if b.lines.is_empty() {
                0
            } else {
                dropped_note(&b.label, b.lines.len()).chars().count() + 1
            };
            size(&b.tail) + note
        })
        .sum();
    let mut room = MAX_STEP_CHARS.saturating_sub(reserved);
    let mut texts = Vec::new();
    for batch in batches {
        let mut kept = Vec::new();
        let mut dropped = 0;
        for line in batch.lines {
            let cost = line.chars().count() + 1;
            if dropped == 0 && cost <= room {
                room -= cost;
                kept.push(line);
            } else {
                dropped += 1;
            }
        }
        if dropped > 0 {
            kept.push(dropped_note(&batch.label, dropped));
        }
        kept.extend(batch.tail);
        texts.push(kept.join("\n"));
    }
    texts
}

/// The note standing for `dropped` lines past a step's limit.
fn dropped_note(label: &str, dropped: usize) -> String {
    format!(
        "{label} [{dropped} more lines dropped: one step's notifications stay within {MAX_STEP_CHARS} characters]"
    )
}

/// `line` clipped to `MAX_LINE_CHARS` characters.
fn clip(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_owned();
    }
    let head: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{head} … [line truncated]")
}

/// The description as each line's label shows it: one line, at most `MAX_LABEL_CHARS`.
fn label_of(description: &str) -> String {
    let flat: String = description
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= MAX_LABEL_CHARS {
        return flat.to_owned();
    }
    let head: String = flat.chars().take(MAX_LABEL_CHARS).collect();
    format!("{head}…")
}

/// The `N` of `bash_N`, for ordering (anything else last).
pub(crate) fn job_number(id: &str) -> u64 {
    id.strip_prefix("bash_")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(label: &str, lines: usize, width: usize, tail: &[&str]) -> Batch {
        Batch {
            label: label.to_owned(),
            lines: (0..lines)
                .map(|i| format!("{label} {i:04} {}", "x".repeat(width)))
                .collect(),
            tail: tail.iter().map(|t| format!("{label} {t}")).collect(),
        }
    }

    #[test]
    fn a_step_within_the_limit_is_rendered_whole() {
        let texts = render(vec![
            batch("[Monitor bash_1: a]", 2, 3, &[]),
            batch("[Monitor bash_2: b]", 0, 0, &["ended: killed"]),
        ]);
        assert_eq!(
            texts,
            [
                "[Monitor bash_1: a] 0000 xxx\n[Monitor bash_1: a] 0001 xxx",
                "[Monitor bash_2: b] ended: killed"
            ]
        );
    }

    #[test]
    fn lines_past_the_limit_are_dropped_across_jobs_and_tails_kept() {
        let texts = render(vec![
            batch("[Monitor bash_1: a]", 100, 100, &[]),
            batch(
                "[Monitor bash_2: b]",
                60,
                100,
                &["ended: exited with code 0"],
            ),
        ]);
        let total: usize = texts.iter().map(|t| t.chars().count()).sum();
        assert!(total <= MAX_STEP_CHARS, "{total}");
        assert!(texts[1].ends_with("[Monitor bash_2: b] ended: exited with code 0"));
        assert!(texts[1].contains("[Monitor bash_2: b] [60 more lines dropped"));
        let kept = texts[0].lines().filter(|l| l.contains(" xxx")).count();
        assert!(texts[0].ends_with(&format!(
            "[Monitor bash_1: a] [{} more lines dropped: one step's notifications stay within 10000 characters]",
            100 - kept
        )));
    }

    #[test]
    fn long_lines_and_labels_are_clipped() {
        let line = "y".repeat(MAX_LINE_CHARS + 5);
        assert_eq!(
            clip(&line),
            format!("{} … [line truncated]", "y".repeat(MAX_LINE_CHARS))
        );
        assert_eq!(label_of(" tests\nrun "), "tests run");
        assert_eq!(label_of(&"z".repeat(120)), format!("{}…", "z".repeat(100)));
        assert!(job_number("bash_2") < job_number("bash_10"));
    }
}
