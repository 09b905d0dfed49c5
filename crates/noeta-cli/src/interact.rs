//! Asking the person at the terminal: permission asks from the gate (yes / no / always for this
//! tool) and the questions a tool parks its call on (`AskUserQuestion` and the like).
//!
//! Answers are read from standard input: prompted on standard error when it is a terminal,
//! read line by line when it is a pipe. Standard input at its end (no terminal, nothing piped:
//! `</dev/null`, a service) denies an ask at once and leaves a question parked, never hangs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::TaskState;
use noeta_core::model::ToolCall;
use serde_json::{Map, Value, json};

use crate::editor::{self, Kind, Typed};
use crate::output::Printer;

/// The extension's name.
pub(crate) const APPROVER: &str = "cli_approver";

/// Shows `prompt` (at the line editor) and reads the answer: `None` at the input's end. Ctrl-C
/// on an empty answer interrupts the turn, as the signal does.
pub(crate) async fn ask(prompt: &str) -> Option<String> {
    read(prompt, Kind::Answer).await
}

/// Reads a line of `kind` after `prompt`: `None` at the input's end; Ctrl-C on an empty line
/// interrupts (the chat leaves, a running turn stops).
pub(crate) async fn read(prompt: &str, kind: Kind) -> Option<String> {
    let editing = editor::editing();
    if editing {
        crate::status::stop();
    }
    match editor::read(prompt, kind).await {
        Typed::Line(line) => {
            if editing {
                // The Enter that ended the answer moved the cursor to a new line: the status
                // line may be drawn again (the call the person just allowed is shown running).
                crate::status::line_ended();
            }
            Some(line)
        }
        Typed::Interrupted => {
            crate::worker::interrupt();
            None
        }
        Typed::Ended => None,
    }
}

/// Answers the gate's asks at the terminal.
pub(crate) struct Approver {
    printer: Arc<Printer>,
    /// Tools allowed for the rest of this process ("always").
    always: Mutex<BTreeSet<String>>,
}

impl Approver {
    /// An approver printing through `printer`.
    pub(crate) fn new(printer: Arc<Printer>) -> Self {
        Self {
            printer,
            always: Mutex::new(BTreeSet::new()),
        }
    }
}

/// The diff lines an ask shows at most.
const ASK_DIFF_LINES: usize = 200;

/// What a call the person is asked about would do, shown before they answer: a shell command
/// as its text, a `Write` or an `Edit` as the diff it would make to the file, anything else as
/// its input.
fn what_it_would_do(call: &ToolCall, workspace: Option<&std::path::Path>) -> String {
    let text = |key: &str| call.input.get(key).and_then(Value::as_str);
    let current = |path: &str| -> Option<String> {
        let path = std::path::Path::new(path);
        let path = match workspace {
            Some(ws) if path.is_relative() => ws.join(path),
            _ => path.to_path_buf(),
        };
        std::fs::read_to_string(path).ok()
    };
    let diff = |path: &str, old: &str, new: &str| {
        crate::diff::render(path, old, new, Some(ASK_DIFF_LINES))
            .iter()
            .map(|line| format!("    {line}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match (call.name.as_str(), text("command"), text("file_path")) {
        ("Bash", Some(command), _) => {
            let command: Vec<String> = command.lines().map(|l| format!("    {l}")).collect();
            let about = text("description")
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            format!("? Bash wants to run{about}:\n{}", command.join("\n"))
        }
        ("Write", _, Some(path)) => {
            let new = text("content").unwrap_or_default();
            let old = current(path).unwrap_or_default();
            format!(
                "? Write wants to write {path} ({} line{}):\n{}",
                new.lines().count(),
                if new.lines().count() == 1 { "" } else { "s" },
                diff(path, &old, new)
            )
        }
        ("Edit", _, Some(path)) => {
            let (from, to) = (
                text("old_string").unwrap_or_default(),
                text("new_string").unwrap_or_default(),
            );
            let all = call.input.get("replace_all").and_then(Value::as_bool) == Some(true);
            let shown = match current(path) {
                Some(old) if !from.is_empty() && old.contains(from) => {
                    let new = if all {
                        old.replace(from, to)
                    } else {
                        old.replacen(from, to, 1)
                    };
                    diff(path, &old, &new)
                }
                // The file as it is cannot show it: the strings themselves.
                _ => diff(path, from, to),
            };
            format!("? Edit wants to change {path}:\n{shown}")
        }
        _ => {
            let input = serde_json::to_string(&call.input).unwrap_or_default();
            let input: String = input.chars().take(300).collect();
            format!("? {} wants to run: {input}", call.name)
        }
    }
}

/// What an answer to a permission ask means: allow, and whether for the rest of the run.
fn permission(answer: &str) -> Option<(bool, bool)> {
    match answer.trim().to_lowercase().as_str() {
        "y" | "yes" => Some((true, false)),
        "a" | "always" => Some((true, true)),
        "n" | "no" | "" => Some((false, false)),
        _ => None,
    }
}

#[async_trait]
impl Extension for Approver {
    fn name(&self) -> &str {
        APPROVER
    }

    async fn resolve_ask(
        &self,
        view: &View<'_>,
        call: &ToolCall,
        asks: &[String],
    ) -> HookResult<Option<bool>> {
        if self
            .always
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&call.name)
        {
            return Ok(Some(true));
        }
        self.printer.note(&format!(
            "{}\n  {}",
            what_it_would_do(call, view.workspace()),
            asks.join("\n  ")
        ));
        self.printer.pause_ticker();
        loop {
            let prompt = format!("  allow? [y]es / [n]o / [a]lways for {}: ", call.name);
            let Some(answer) = ask(&prompt).await else {
                self.printer
                    .note("  no answer (standard input is closed): denied");
                return Ok(Some(false));
            };
            match permission(&answer) {
                Some((allow, always)) => {
                    if always {
                        self.always
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(call.name.clone());
                    }
                    return Ok(Some(allow));
                }
                None => self.printer.note("  answer y, n or a"),
            }
        }
    }
}

/// Asks the `AskUserQuestion` questions of `input` and builds the answer; `None` when standard
/// input ended before every question was answered.
async fn ask_user_questions(printer: &Printer, input: &Value) -> Option<Value> {
    let mut answers = Map::new();
    for question in input["questions"].as_array().into_iter().flatten() {
        let text = question["question"].as_str().unwrap_or("");
        let multi = question["multiSelect"].as_bool().unwrap_or(false);
        let options: Vec<&str> = question["options"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["label"].as_str())
            .collect();
        let mut shown = format!("? {text}");
        for (i, option) in question["options"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            shown.push_str(&format!(
                "\n  {}. {} — {}",
                i + 1,
                option["label"].as_str().unwrap_or(""),
                option["description"].as_str().unwrap_or("")
            ));
        }
        printer.note(&shown);
        let hint = if multi {
            "  numbers separated by commas, or your own words: "
        } else {
            "  a number, or your own words: "
        };
        let answer = ask(hint).await?;
        let picked: Option<Vec<&str>> = answer
            .split(',')
            .map(|part| {
                part.trim()
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| options.get(i).copied())
            })
            .collect();
        let value = match picked {
            Some(labels) if multi && !labels.is_empty() => json!(labels),
            Some(labels) if labels.len() == 1 => json!(labels[0]),
            _ => json!(answer.trim()),
        };
        answers.insert(text.to_owned(), value);
    }
    Some(json!({ "answers": answers }))
}

/// The answer to the question call `call_id` is parked on, asked at the terminal; `None` when
/// nobody answered (standard input ended).
pub(crate) async fn answer_question(
    printer: &Printer,
    state: &TaskState,
    call_id: &str,
    question: &str,
) -> Option<Value> {
    printer.pause_ticker();
    match noeta::tasks::parked_call(state, call_id) {
        Some(call) if call.name == "AskUserQuestion" => {
            ask_user_questions(printer, &call.input).await
        }
        _ => {
            printer.note(&format!("? {question}"));
            ask("  your answer: ").await.map(Value::String)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_shows_a_command_as_text_and_a_change_as_its_diff() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
        let call = |name: &str, input: Value| ToolCall {
            id: "c".to_owned(),
            name: name.to_owned(),
            input,
        };
        let bash = what_it_would_do(
            &call(
                "Bash",
                json!({"command": "cargo test\ncargo build", "description": "test it"}),
            ),
            Some(ws.path()),
        );
        assert_eq!(
            bash,
            "? Bash wants to run (test it):\n    cargo test\n    cargo build"
        );
        let edit = what_it_would_do(
            &call(
                "Edit",
                json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "BETA"}),
            ),
            Some(ws.path()),
        );
        assert!(
            edit.starts_with("? Edit wants to change notes.txt:"),
            "{edit}"
        );
        assert!(edit.contains("-beta") && edit.contains("+BETA"), "{edit}");
        let write = what_it_would_do(
            &call(
                "Write",
                json!({"file_path": "new.txt", "content": "one\ntwo\n"}),
            ),
            Some(ws.path()),
        );
        assert!(
            write.starts_with("? Write wants to write new.txt (2 lines):"),
            "{write}"
        );
        assert!(write.contains("+one") && write.contains("+two"), "{write}");
        let other = what_it_would_do(&call("WebFetch", json!({"url": "https://x"})), None);
        assert_eq!(other, "? WebFetch wants to run: {\"url\":\"https://x\"}");
    }

    #[test]
    fn permission_answers() {
        assert_eq!(permission("Y"), Some((true, false)));
        assert_eq!(permission("always"), Some((true, true)));
        assert_eq!(permission(""), Some((false, false)));
        assert_eq!(permission("maybe"), None);
    }
}
