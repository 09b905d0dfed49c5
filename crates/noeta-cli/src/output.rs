//! What a run shows as it happens: the assistant's text, each tool call and its outcome, live
//! tool output, and a ticking indicator while a call takes long. With `--json`, every event as
//! one JSON line on stdout instead.
//!
//! The printer is an extension the command line appends to the agent's session: its
//! `on_event` sees each event right after it is committed, so what is printed is what the log
//! holds.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::stdio::{eout, eoutln, out, outln};
use async_trait::async_trait;
use noeta_core::ToolOutput;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::records::{CallOutcome, CoreRecord, ToolCall};
use noeta_core::store::Event;
use serde_json::{Value, json};

/// The extension's name.
pub(crate) const PRINTER: &str = "cli_printer";

/// A call running long enough to show a ticker for.
const TICK_AFTER: Duration = Duration::from_secs(2);

/// The call in flight, for the ticker.
#[derive(Default)]
struct InFlight {
    call: Option<(String, Instant)>,
    ticking: bool,
}

/// Prints a task's events as they are committed.
pub(crate) struct Printer {
    json: bool,
    tty: bool,
    in_flight: Arc<Mutex<InFlight>>,
    /// The text of the reply streaming in now, as printed so far.
    streamed: Mutex<String>,
    /// Calls whose result was shown when the call finished (`after_tool`), before its
    /// record is written (a retry-safe call's goes with the next reply).
    shown: Mutex<std::collections::BTreeSet<String>>,
}

impl Printer {
    /// A printer; `json` prints events as JSON lines.
    pub(crate) fn new(json: bool) -> Self {
        let printer = Self {
            json,
            tty: std::io::stderr().is_terminal(),
            in_flight: Arc::new(Mutex::new(InFlight::default())),
            streamed: Mutex::new(String::new()),
            shown: Mutex::new(std::collections::BTreeSet::new()),
        };
        if printer.tty && !json {
            let in_flight = Arc::clone(&printer.in_flight);
            std::thread::spawn(move || tick(&in_flight));
        }
        printer
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
        self.clear_tick();
        self.streamed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_str(piece);
        out!("{piece}");
        crate::stdio::flush_out();
    }

    /// A line of live tool output (not recorded).
    pub(crate) fn progress(&self, _call: &str, text: &str) {
        if self.json {
            line(&json!({ "progress": text }).to_string());
        } else {
            self.clear_tick();
            eoutln!("    {}", text.trim_end());
        }
    }

    /// A note of the command line's own, outside the log.
    pub(crate) fn note(&self, text: &str) {
        if self.json {
            line(&json!({ "note": text }).to_string());
        } else {
            self.clear_tick();
            eoutln!("{text}");
        }
    }

    /// Stops the ticker while a person is asked something (its call is parked or not started).
    pub(crate) fn pause_ticker(&self) {
        {
            let mut flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            flight.call = None;
        }
        self.clear_tick();
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

    /// A call's result in one line: its first line (clipped) and how many follow.
    fn result(&self, tool: &str, text: &str, ok: bool) {
        self.pause_ticker();
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("").trim_end();
        let more = lines.count();
        let more = if more > 0 {
            format!(" (+{more} lines)")
        } else {
            String::new()
        };
        let first = clip(first, 160);
        if ok {
            eoutln!("  ⎿ {first}{more}");
        } else {
            eoutln!("  ⎿ {tool} failed: {first}{more}");
        }
    }

    fn clear_tick(&self) {
        let mut flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if flight.ticking {
            eout!("\r\x1b[2K");
            flight.ticking = false;
        }
    }

    fn human(&self, event: &Event) {
        let record = &event.record;
        // What an extension records for the person to see (a hook's `systemMessage`).
        if record.kind == "notice"
            && let Some(text) = record.data.get("text").and_then(Value::as_str)
        {
            self.clear_tick();
            eoutln!("⚑ {}: {text}", record.extension);
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
                self.clear_tick();
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
                for call in calls {
                    eoutln!("● {}({})", call.name, summary(&call.input));
                }
            }
            CoreRecord::CallStarted { call_id, tool, .. } => {
                let mut flight = self
                    .in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                flight.call = Some((format!("{tool} {call_id}"), Instant::now()));
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
                    .remove(&call_id);
                if !shown {
                    self.result(&tool, &text, outcome == CallOutcome::Ok);
                }
            }
            CoreRecord::ToolParked { .. } | CoreRecord::CallParked { .. } => self.pause_ticker(),
            CoreRecord::TurnFailed { reason } => {
                self.reset();
                eoutln!("✗ the turn failed: {reason}");
            }
            CoreRecord::TaskFailed { reason } => {
                self.clear_tick();
                eoutln!("✗ the task failed: {reason}");
            }
            _ => {}
        }
    }
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
fn summary(input: &Value) -> String {
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

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(max).collect();
        format!("{kept}…")
    }
}

/// Shows the call in flight, with its time, once it has run for a while.
fn tick(in_flight: &Mutex<InFlight>) {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    let mut frame = 0;
    loop {
        std::thread::sleep(Duration::from_millis(120));
        let mut flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((label, started)) = flight.call.clone() else {
            continue;
        };
        let elapsed = started.elapsed();
        if elapsed < TICK_AFTER {
            continue;
        }
        frame = (frame + 1) % FRAMES.len();
        eout!(
            "\r\x1b[2K{} {label} ({}s)",
            FRAMES[frame],
            elapsed.as_secs()
        );
        let _ = std::io::stderr().flush();
        flight.ticking = true;
    }
}

#[async_trait]
impl Extension for Printer {
    fn name(&self) -> &str {
        PRINTER
    }

    /// Shows a result as the call finishes, whenever its record is written.
    async fn after_tool(
        &self,
        _view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        if !self.json {
            self.result(&call.name, &output.text, !output.is_error);
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
