//! `noeta log` as a person reads it: the conversation as the terminal showed it while the task
//! ran — the person's messages, the model's replies, each call with its result's first lines,
//! asks and their answers, subagents' results, notices and failures. Bookkeeping records
//! (pins, composed requests, intake marks) are left out; `noeta log --json` has every event.

use noeta_core::records::{CallOutcome, CoreRecord};
use noeta_core::store::Record;
use serde_json::Value;

use crate::output::{clip, summary};
use crate::style::{CALL, DIM, ERROR, NOTICE, paint};

/// Lines of a result shown under its call.
const RESULT_LINES: usize = 6;

/// A transcript being written: each call is shown with its result under it (calls made
/// together finish in any order), and a call that never finished is shown as such.
#[derive(Default)]
pub(crate) struct Transcript {
    /// Calls of the last reply not shown yet: their ids and lines.
    pending: Vec<(String, String)>,
}

impl Transcript {
    /// The transcript lines of one record (none for bookkeeping).
    pub(crate) fn lines(&mut self, record: &Record) -> Vec<String> {
        // What an extension records for the person to see (a hook's `systemMessage`).
        if record.kind == "notice"
            && let Some(text) = record.data.get("text").and_then(Value::as_str)
        {
            return vec![paint(NOTICE, format!("⚑ {}: {text}", record.extension))];
        }
        if record.extension != "core" {
            return Vec::new();
        }
        let Some(Ok(parsed)) = CoreRecord::from_record(record) else {
            return Vec::new();
        };
        let pending = &mut self.pending;
        match parsed {
            CoreRecord::TaskStarted { agent, parent, .. } => {
                let under = parent.map_or_else(String::new, |p| format!(", a subagent of {p}"));
                vec![paint(DIM, format!("── agent {agent}{under}"))]
            }
            CoreRecord::UserMessage { text } => {
                let mut out = Vec::new();
                for (i, line) in text.trim_end().lines().enumerate() {
                    out.push(format!("{} {line}", if i == 0 { ">" } else { " " }));
                }
                out.push(String::new());
                out
            }
            // A reply's calls wait to be shown with their results.
            CoreRecord::AssistantReply { text, calls, .. } => {
                for call in calls.iter() {
                    pending.push((
                        call.id.clone(),
                        format!("● {}({})", paint(CALL, &call.name), summary(&call.input)),
                    ));
                }
                text.trim_end().lines().map(str::to_owned).collect()
            }
            CoreRecord::CallFinished {
                call_id,
                tool,
                text,
                outcome,
                ..
            } => {
                let mut out = take(pending, &call_id);
                out.extend(result(&tool, &text, outcome));
                out
            }
            CoreRecord::CallParked { call_id, question }
            | CoreRecord::ToolParked {
                call_id,
                question: Some(question),
                ..
            } => {
                let mut out = take(pending, &call_id);
                out.push(paint(NOTICE, format!("  ? {}", one_line(&question))));
                out
            }
            CoreRecord::AskAnswered { allow, .. } => vec![paint(
                DIM,
                if allow {
                    "  ✓ allowed"
                } else {
                    "  ✗ denied"
                },
            )],
            CoreRecord::CallAnswered { answer, .. } => {
                let shown = answer
                    .as_str()
                    .map_or_else(|| answer.to_string(), str::to_owned);
                vec![paint(DIM, format!("  ↳ answered: {}", clip(&shown, 160)))]
            }
            CoreRecord::ChildrenFinished { results, .. } => results
                .iter()
                .map(|child| {
                    let first = child.text.lines().next().unwrap_or_default();
                    let verdict = if child.ok { "" } else { " (failed)" };
                    format!(
                        "  {} {} {}{verdict}: {}",
                        paint(DIM, "⎿"),
                        child.agent,
                        paint(DIM, &child.task),
                        clip(first, 140)
                    )
                })
                .collect(),
            CoreRecord::TurnFailed { reason } => {
                let mut out = unfinished(pending);
                out.push(paint(ERROR, format!("✗ the turn failed: {reason}")));
                out
            }
            CoreRecord::TaskFailed { reason } => {
                let mut out = unfinished(pending);
                out.push(paint(ERROR, format!("✗ the task failed: {reason}")));
                out
            }
            CoreRecord::TurnEnded { .. } => {
                let mut out = unfinished(pending);
                out.push(String::new());
                out
            }
            _ => Vec::new(),
        }
    }

    /// Calls the log ends on (still running, or waiting): shown as they are.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(_, call)| call)
            .collect()
    }
}

/// The calls still pending when the turn ends: shown without a result.
fn unfinished(pending: &mut Vec<(String, String)>) -> Vec<String> {
    std::mem::take(pending)
        .into_iter()
        .flat_map(|(_, call)| {
            [
                call,
                format!(
                    "  {} {}",
                    paint(DIM, "⎿"),
                    paint(DIM, "(no result recorded)")
                ),
            ]
        })
        .collect()
}

/// The line of pending call `id`, taken out of `pending` (none when it was shown already).
fn take(pending: &mut Vec<(String, String)>, id: &str) -> Vec<String> {
    pending
        .iter()
        .position(|(call, _)| call == id)
        .map(|at| vec![pending.remove(at).1])
        .unwrap_or_default()
}

/// A call's result under it: its first lines, and how many more there are.
fn result(tool: &str, text: &str, outcome: CallOutcome) -> Vec<String> {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().take(RESULT_LINES.max(1)).enumerate() {
        let line = clip(line.trim_end(), 160);
        out.push(match (i, outcome == CallOutcome::Ok) {
            (0, true) => format!("  {} {line}", paint(DIM, "⎿")),
            (0, false) => format!(
                "  {} {}",
                paint(DIM, "⎿"),
                paint(ERROR, format!("{tool} {}: {line}", verdict(outcome)))
            ),
            _ => format!("    {line}"),
        });
    }
    if lines.is_empty() {
        out.push(format!(
            "  {} {}",
            paint(DIM, "⎿"),
            paint(DIM, "(no output)")
        ));
    }
    let hidden = lines.len().saturating_sub(RESULT_LINES);
    if hidden > 0 {
        out.push(format!(
            "    {}",
            paint(
                DIM,
                format!("… +{hidden} lines (`noeta log --json` has them)")
            )
        ));
    }
    out
}

/// How a call that did not succeed ended, in a word.
fn verdict(outcome: CallOutcome) -> &'static str {
    match outcome {
        CallOutcome::Denied => "was refused",
        CallOutcome::Unknown => "was cut off by a crash",
        _ => "failed",
    }
}

fn one_line(text: &str) -> String {
    clip(&text.split_whitespace().collect::<Vec<_>>().join(" "), 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_line_is_clipped_and_an_empty_result_says_so() {
        let shown = result("Bash", &"a".repeat(200), CallOutcome::Ok);
        assert_eq!(shown.len(), 1);
        assert!(
            shown[0].ends_with(&format!("{}…", "a".repeat(160))),
            "{shown:?}"
        );
        let empty = result("Bash", "", CallOutcome::Ok);
        assert!(empty[0].contains("(no output)"), "{empty:?}");
        let cut = result("Bash", "boom", CallOutcome::Unknown);
        assert!(
            cut[0].contains("Bash was cut off by a crash: boom"),
            "{cut:?}"
        );
    }
}
