//! Asking the person at the terminal: permission asks from the gate (yes / no / always for this
//! tool) and the questions a tool parks its call on (`AskUserQuestion` and the like).
//!
//! Answers are read from standard input: prompted on standard error when it is a terminal,
//! read line by line when it is a pipe. Standard input at its end (no terminal, nothing piped:
//! `</dev/null`, a service) denies an ask at once and leaves a question parked, never hangs.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{AskAnswer, Extension, HookResult, View};
use noeta_core::fold::TaskState;
use noeta_core::model::ToolCall;
use serde_json::{Map, Value, json};

use crate::approvals::{Approvals, rules_for};
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
    /// What "always" answers allowed in this workspace, remembered.
    approvals: Approvals,
}

impl Approver {
    /// An approver printing through `printer`, remembering "always" in `approvals`.
    pub(crate) fn new(printer: Arc<Printer>, approvals: Approvals) -> Self {
        if let Some(problem) = approvals.problem() {
            printer.note(&format!(
                "warning: earlier \"always\" answers are not used: {problem}"
            ));
        }
        Self { printer, approvals }
    }
}

/// Lines of an ask shown past which it goes through the pager (at a terminal).
const PAGE_PAST: usize = 30;

/// Shows `text` through the person's pager — `$PAGER` (run by the shell, as git does), else
/// `less -RFX` (colour kept, gone at once when it fits the screen, the text left on screen) —
/// and waits for it to close; `false` when no pager could be started (the text is then
/// shown plainly).
fn page(text: &str) -> bool {
    use std::io::Write as _;
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less -RFX".to_owned());
    let started = std::process::Command::new("sh")
        .args(["-c", &pager])
        .stdin(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = started else {
        return false;
    };
    if let Some(mut input) = child.stdin.take() {
        // Colour as the terminal shows it (`NO_COLOR` strips it).
        let shown = match anstream::AutoStream::choice(&std::io::stderr()) {
            anstream::ColorChoice::Never => anstream::adapter::strip_str(text).to_string(),
            _ => text.to_owned(),
        };
        let _ = input.write_all(shown.as_bytes());
    }
    child.wait().is_ok_and(|status| status.success())
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
/// A person's answer to a permission ask.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Permission {
    Yes,
    Always,
    /// No, with what they said the model should do instead, if anything.
    No(Option<String>),
}

/// Reads an answer: `y`, `a`, `n` (or nothing), or `n` followed by a reason (`n: use the
/// copy in docs/`, `no, ask first`).
fn permission(answer: &str) -> Option<Permission> {
    let trimmed = answer.trim();
    match trimmed.to_lowercase().as_str() {
        "y" | "yes" => return Some(Permission::Yes),
        "a" | "always" => return Some(Permission::Always),
        "n" | "no" | "" => return Some(Permission::No(None)),
        _ => {}
    }
    let lower = trimmed.to_lowercase();
    let rest = ["no", "n"]
        .iter()
        .find_map(|word| lower.strip_prefix(word).map(|_| &trimmed[word.len()..]))?;
    let reason = rest.strip_prefix([':', ',', ' ', '-'])?.trim();
    (!reason.is_empty()).then(|| Permission::No(Some(reason.to_owned())))
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
    ) -> HookResult<Option<AskAnswer>> {
        if self.approvals.allows(call) {
            return Ok(Some(AskAnswer::Allow));
        }
        let shown = format!(
            "{}\n  {}",
            what_it_would_do(call, view.workspace()),
            asks.join("\n  ")
        );
        self.printer.pause_ticker();
        // A change longer than a screenful is paged at a terminal, so its start is read too.
        if !(editor::editing() && shown.lines().count() > PAGE_PAST && page(&shown)) {
            self.printer.note(&shown);
        }
        let rules = rules_for(call);
        loop {
            let always = if rules.is_empty() {
                "[a] this once (it cannot be remembered exactly)".to_owned()
            } else {
                format!("[a]lways {} here", rules.join(", "))
            };
            let prompt =
                format!("  allow? [y]es / [n]o (or `n: why`, told to the model) / {always}: ");
            let Some(answer) = ask(&prompt).await else {
                self.printer
                    .note("  no answer (standard input is closed): denied");
                return Ok(Some(AskAnswer::Deny(None)));
            };
            match permission(&answer) {
                Some(Permission::Yes) => return Ok(Some(AskAnswer::Allow)),
                Some(Permission::Always) if rules.is_empty() => {
                    self.printer
                        .note("  allowed this once: the command cannot be remembered exactly");
                    return Ok(Some(AskAnswer::Allow));
                }
                Some(Permission::Always) => {
                    match self.approvals.remember(&rules) {
                        Ok(()) => {
                            if let Some(file) = self.approvals.file() {
                                self.printer.note(&format!(
                                    "  remembered for this workspace in {}",
                                    file.display()
                                ));
                            }
                        }
                        Err(why) => self
                            .printer
                            .note(&format!("  allowed for this chat only; {why}")),
                    }
                    return Ok(Some(AskAnswer::Allow));
                }
                Some(Permission::No(reason)) => return Ok(Some(AskAnswer::Deny(reason))),
                None => self.printer.note("  answer y, n (or `n: why`), or a"),
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
        assert_eq!(permission("Y"), Some(Permission::Yes));
        assert_eq!(permission("always"), Some(Permission::Always));
        assert_eq!(permission(""), Some(Permission::No(None)));
        assert_eq!(
            permission("n: use the copy in docs/"),
            Some(Permission::No(Some("use the copy in docs/".to_owned())))
        );
        assert_eq!(
            permission("No, ask me first"),
            Some(Permission::No(Some("ask me first".to_owned())))
        );
        assert_eq!(permission("nope"), None);
        assert_eq!(permission("maybe"), None);
    }
}
