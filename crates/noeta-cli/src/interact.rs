//! Asking the person at the terminal: permission asks from the gate (yes / no / always for this
//! tool) and the questions a tool parks its call on (`AskUserQuestion` and the like).
//!
//! Answers are read from standard input: prompted on standard error when it is a terminal,
//! read line by line when it is a pipe. Standard input at its end (no terminal, nothing piped:
//! `</dev/null`, a service) denies an ask at once and leaves a question parked, never hangs.

use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::fold::TaskState;
use noeta_core::model::ToolCall;
use serde_json::{Map, Value, json};

use crate::output::Printer;
use crate::stdio::eout;

/// The extension's name.
pub(crate) const APPROVER: &str = "cli_approver";

/// The lines of standard input, read by a thread of their own so that waiting for one never
/// blocks the async runtime and Ctrl-C can always interrupt the wait. The thread ends with the
/// input; a line read while nobody waited is kept for the next ask.
fn lines() -> &'static tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>> {
    static LINES: OnceLock<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>> =
        OnceLock::new();
    LINES.get_or_init(|| {
        let (send, receive) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            loop {
                let mut line = String::new();
                match stdin.lock().read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let line = line.trim_end_matches(['\n', '\r']).to_owned();
                        if send.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        tokio::sync::Mutex::new(receive)
    })
}

/// One line from standard input, without its line end; `None` at its end.
pub(crate) async fn read_line() -> Option<String> {
    lines().lock().await.recv().await
}

/// Shows `prompt` (on a terminal) and reads the answer.
pub(crate) async fn ask(prompt: &str) -> Option<String> {
    let terminal = std::io::stdin().is_terminal();
    if terminal {
        crate::status::stop();
        eout!("{prompt}");
        let _ = std::io::stderr().flush();
    }
    let answer = read_line().await;
    if terminal && answer.is_some() {
        // The Enter that ended the answer moved the cursor to a new line: the status line may
        // be drawn again (the call the person just allowed is shown running).
        crate::status::line_ended();
    }
    answer
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
        _view: &View<'_>,
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
        let input = serde_json::to_string(&call.input).unwrap_or_default();
        let input: String = input.chars().take(300).collect();
        self.printer.note(&format!(
            "? {} wants to run: {input}\n  {}",
            call.name,
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
    fn permission_answers() {
        assert_eq!(permission("Y"), Some((true, false)));
        assert_eq!(permission("always"), Some((true, true)));
        assert_eq!(permission(""), Some((false, false)));
        assert_eq!(permission("maybe"), None);
    }
}
