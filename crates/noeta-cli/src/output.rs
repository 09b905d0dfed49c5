//! What a run shows as it happens: the assistant's text, each tool call and a preview of its
//! result (in full with `--verbose`, or later with `/show N` in chat), what an `Edit` or a
//! `Write` changed as a coloured diff, live tool output, and the status line while the model
//! works or a tool runs (`status.rs`). With `--json`, every event as one JSON line on stdout
//! instead.
//!
//! The printer is an extension the command line appends to the agent's session: its
//! `on_event` sees each event right after it is committed, so what is printed is what the log
//! holds.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::stdio::{eout, eoutln, out, outln};
use crate::style::{CALL, DIM, ERROR, NOTICE, paint};
use async_trait::async_trait;
use noeta_core::ToolOutput;
use noeta_core::contrib::Verdict;
use noeta_core::extension::{Extension, HookResult, StepSignal, View};
use noeta_core::model::ModelRequest;
use noeta_core::model::ToolCall;
use noeta_core::records::{CallOutcome, CoreRecord};
use noeta_core::store::Event;
use serde_json::{Value, json};

/// The extension's name.
pub(crate) const PRINTER: &str = "cli_printer";

/// Lines of a result shown without `--verbose`.
const PREVIEW_LINES: usize = 4;
/// Diff lines shown without `--verbose`.
const DIFF_LINES: usize = 40;
/// The largest file whose old text is kept to show a `Write`'s diff.
const DIFF_MAX_BYTES: u64 = 1024 * 1024;

/// Prints a task's events as they are committed.
pub(crate) struct Printer {
    json: bool,
    /// Results in full, not previewed.
    verbose: bool,
    /// In chat: a hidden result is named by `/show N`.
    chat: bool,
    /// The text of the reply streaming in now, as printed so far.
    streamed: Mutex<String>,
    /// Calls whose result was shown when the call finished (`after_tool`), before its
    /// record is written (a retry-safe call's goes with the next reply).
    shown: Mutex<std::collections::BTreeSet<String>>,
    /// In chat, every result shown, in order, for `/show N`: the tool and its text.
    results: Mutex<Vec<(String, String)>>,
    /// The text a file had before an `Edit` or a `Write` call changed it, by call id.
    before_write: Mutex<BTreeMap<String, String>>,
}

impl Printer {
    /// A printer; `json` prints events as JSON lines, `verbose` shows results in full, `chat`
    /// names hidden lines by `/show N`.
    pub(crate) fn new(json: bool, verbose: bool, chat: bool) -> Self {
        if !json {
            crate::status::enable();
        }
        Self {
            json,
            verbose,
            chat,
            streamed: Mutex::new(String::new()),
            shown: Mutex::new(std::collections::BTreeSet::new()),
            results: Mutex::new(Vec::new()),
            before_write: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether events go out as JSON lines.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// A piece of the reply streaming in (not recorded: the reply is, once whole).
    pub(crate) fn text(&self, piece: &str) {
        if self.json {
            line(&json!({ "text_delta": piece }).to_string());
            return;
        }
        crate::status::stop();
        self.streamed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_str(piece);
        out!("{piece}");
        crate::stdio::flush_out();
    }

    /// A line of live tool output (not recorded): the status line's detail on a terminal (the
    /// result follows when the call ends), a JSON line with `--json`.
    pub(crate) fn progress(&self, _call: &str, text: &str) {
        if self.json {
            line(&json!({ "progress": text }).to_string());
        } else {
            crate::status::detail(text);
        }
    }

    /// A note of the command line's own, outside the log.
    pub(crate) fn note(&self, text: &str) {
        if self.json {
            line(&json!({ "note": text }).to_string());
        } else {
            eoutln!("{text}");
        }
    }

    /// Clears the status line while a person is asked something (its call is parked or not
    /// started).
    pub(crate) fn pause_ticker(&self) {
        crate::status::stop();
    }

    /// Forgets a reply's partial text (an interrupted or failed step) and the call in flight;
    /// text that was shown but never recorded is marked as such.
    pub(crate) fn reset(&self) {
        let partial =
            std::mem::take(&mut *self.streamed.lock().unwrap_or_else(PoisonError::into_inner));
        self.pause_ticker();
        if partial.is_empty() || self.json {
            return;
        }
        if !partial.ends_with('\n') {
            outln!();
        }
        eoutln!("  (the reply above stopped before it was whole and was not recorded)");
    }

    /// `/show N` in chat (`None`: the last): that result in full.
    pub(crate) fn show(&self, n: Option<usize>) {
        let results = self.results.lock().unwrap_or_else(PoisonError::into_inner);
        if results.is_empty() {
            eoutln!("no tool result yet in this chat");
            return;
        }
        let n = n.unwrap_or(results.len());
        match n.checked_sub(1).and_then(|i| results.get(i)) {
            Some((tool, text)) => {
                eoutln!("{}", paint(DIM, format!("result {n} ({tool}):")));
                outln!("{}", text.trim_end());
            }
            None => eoutln!(
                "no result {n}: this chat has shown results 1 to {}",
                results.len()
            ),
        }
    }

    /// A call's result: a preview of its first lines (all with `--verbose`) and how to see the
    /// rest, with `below` (an edit's diff lines) under it, written at once.
    fn result(&self, tool: &str, text: &str, ok: bool, preview: usize, below: &[String]) {
        use std::fmt::Write as _;
        crate::status::stop();
        // Only a chat names results for `/show N`; a run keeps none.
        let n = if self.chat {
            let mut results = self.results.lock().unwrap_or_else(PoisonError::into_inner);
            results.push((tool.to_owned(), text.to_owned()));
            results.len()
        } else {
            0
        };
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let keep = if self.verbose {
            lines.len()
        } else {
            preview.min(lines.len())
        };
        let mut block = String::with_capacity(text.len().min(4096) + 64);
        for (i, line) in lines.iter().take(keep.max(1)).enumerate() {
            let line = if self.verbose {
                (*line).trim_end().to_owned()
            } else {
                clip(line.trim_end(), 160)
            };
            let _ = match (i, ok) {
                (0, true) => writeln!(block, "  {} {}", paint(DIM, "⎿"), line),
                (0, false) => writeln!(
                    block,
                    "  {} {}",
                    paint(DIM, "⎿"),
                    paint(ERROR, format!("{tool} failed: {line}"))
                ),
                _ => writeln!(block, "    {line}"),
            };
        }
        let hidden = lines.len().saturating_sub(keep.max(1));
        if hidden > 0 {
            let how = if self.chat {
                format!("/show {n} shows them")
            } else {
                "--verbose shows them".to_owned()
            };
            let _ = writeln!(
                block,
                "    {}",
                paint(DIM, format!("… +{hidden} lines ({how})"))
            );
        }
        for line in below {
            let _ = writeln!(block, "    {line}");
        }
        eout!("{block}");
    }

    /// What an `Edit` or a `Write` changed, as diff lines to show below its result.
    fn diff(&self, call: &ToolCall) -> Vec<String> {
        let path = call
            .input
            .get("file_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(old) = self
            .before_write
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&call.id)
        else {
            return Vec::new();
        };
        // The file as the call left it.
        let Some(new) = read_small(std::path::Path::new(path)) else {
            return Vec::new();
        };
        // Named as the tools name it: relative to the workspace when inside it.
        let cwd = std::env::current_dir().unwrap_or_default();
        let shown = std::path::Path::new(path)
            .strip_prefix(&cwd)
            .map_or_else(|_| path.to_owned(), |p| p.display().to_string());
        let limit = (!self.verbose).then_some(DIFF_LINES);
        crate::diff::render(&shown, &old, &new, limit)
    }

    fn human(&self, event: &Event) {
        let record = &event.record;
        // What an extension records for the person to see (a hook's `systemMessage`).
        if record.kind == "notice"
            && let Some(text) = record.data.get("text").and_then(Value::as_str)
        {
            eoutln!(
                "{}",
                paint(NOTICE, format!("⚑ {}: {text}", record.extension))
            );
            return;
        }
        if record.extension != "core" {
            return;
        }
        let Some(Ok(parsed)) = CoreRecord::from_record(record) else {
            return;
        };
        match parsed {
            CoreRecord::AssistantReply { text, calls, .. } => {
                crate::status::stop();
                let streamed = std::mem::take(
                    &mut *self.streamed.lock().unwrap_or_else(PoisonError::into_inner),
                );
                if streamed.is_empty() {
                    if !text.trim().is_empty() {
                        outln!("{}", text.trim_end());
                    }
                } else if !streamed.ends_with('\n') {
                    outln!();
                }
                for call in calls.iter() {
                    eoutln!("● {}({})", paint(CALL, &call.name), summary(&call.input));
                }
            }
            CoreRecord::CallStarted { tool, input, .. } => {
                crate::status::start(format!("{tool}({})", summary(&input)));
            }
            CoreRecord::CallFinished {
                call_id,
                text,
                outcome,
                tool,
                ..
            } => {
                let shown = self
                    .shown
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(call_id.as_str());
                if !shown {
                    self.result(&tool, &text, outcome == CallOutcome::Ok, PREVIEW_LINES, &[]);
                }
            }
            CoreRecord::ToolParked { .. } | CoreRecord::CallParked { .. } => self.pause_ticker(),
            CoreRecord::TurnFailed { reason } => {
                self.reset();
                eoutln!("{}", paint(ERROR, format!("✗ the turn failed: {reason}")));
            }
            CoreRecord::TaskFailed { reason } => {
                crate::status::stop();
                eoutln!("{}", paint(ERROR, format!("✗ the task failed: {reason}")));
            }
            CoreRecord::TurnEnded { .. } => {
                crate::status::stop();
                self.before_write
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
            }
            _ => {}
        }
    }
}

/// A file's text when it is a regular file of at most `DIFF_MAX_BYTES` in UTF-8.
fn read_small(path: &std::path::Path) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.len() <= DIFF_MAX_BYTES)?;
    std::fs::read_to_string(path).ok()
}

fn line(text: &str) {
    outln!("{text}");
    crate::stdio::flush_out();
}

/// The inputs that say best what a call is about, in order of preference.
const TELLING: [&str; 8] = [
    "file_path",
    "pattern",
    "command",
    "path",
    "url",
    "query",
    "description",
    "prompt",
];

/// A call's input in a few words: its most telling text value, else its JSON, clipped.
pub(crate) fn summary(input: &Value) -> String {
    let first = input
        .as_object()
        .and_then(|o| {
            TELLING
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str))
                .or_else(|| o.values().find_map(Value::as_str))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| input.to_string());
    clip(first.lines().next().unwrap_or(""), 80)
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(max).collect();
        format!("{kept}…")
    }
}

#[async_trait]
impl Extension for Printer {
    fn name(&self) -> &str {
        PRINTER
    }

    /// The model is about to be called: the status line says so until its reply streams in.
    async fn before_model(
        &self,
        _view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        if !self.json {
            crate::status::start("thinking");
        }
        Ok(request)
    }

    /// Keeps the text a file has before a `Write` replaces it, for the diff. Never a verdict.
    async fn before_tool(&self, _view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        if !self.json
            && matches!(call.name.as_str(), "Edit" | "Write")
            && let Some(path) = call.input.get("file_path").and_then(Value::as_str)
        {
            let path = std::path::Path::new(path);
            // A file that is not there yet is empty; one too big for a diff gets none.
            let old = if path.exists() {
                let Some(old) = read_small(path) else {
                    return Ok(None);
                };
                old
            } else {
                String::new()
            };
            self.before_write
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(call.id.clone(), old);
        }
        Ok(None)
    }

    /// Shows a result (and an edit's diff) as the call finishes, whenever its record is
    /// written.
    async fn after_tool(
        &self,
        _view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        if !self.json {
            let diff = if output.is_error {
                Vec::new()
            } else {
                self.diff(call)
            };
            // With a diff below it, the result's first line says enough.
            let preview = if diff.is_empty() { PREVIEW_LINES } else { 1 };
            self.result(&call.name, &output.text, !output.is_error, preview, &diff);
            self.shown
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(call.id.clone());
        }
        Ok(output)
    }

    fn on_event(&self, _view: &View<'_>, event: &Event) -> HookResult<()> {
        if self.json {
            let value = json!({
                "seq": event.seq,
                "extension": event.record.extension,
                "kind": event.record.kind,
                "data": event.record.data,
                "message": event.record.message,
            });
            line(&value.to_string());
        } else {
            self.human(event);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_summed_up_by_its_first_text_value() {
        assert_eq!(
            summary(&json!({ "file_path": "src/main.rs", "limit": 3 })),
            "src/main.rs"
        );
        assert_eq!(summary(&json!({ "n": 3 })), "{\"n\":3}");
        assert_eq!(
            summary(&json!({ "glob": "*.rs", "pattern": "fn main" })),
            "fn main"
        );
        assert_eq!(
            summary(&json!({ "command": "cargo test\n--all" })),
            "cargo test"
        );
        assert_eq!(clip(&"x".repeat(100), 80).chars().count(), 81);
    }
}
