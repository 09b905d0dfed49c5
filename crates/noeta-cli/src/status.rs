//! The status line: what the agent is doing now — waiting for the model, or running a tool —
//! with its elapsed time and the last line of live output, redrawn in place on standard error.
//!
//! It is drawn only on a terminal (indicatif hides itself otherwise), only after a short
//! delay (quick steps never flicker), and only when the cursor is at the start of a line.
//! Everything the command line prints goes through `stdio`, which clears the line first; the
//! ticker draws it again on its next tick.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long something runs before the line shows it.
const DELAY: Duration = Duration::from_millis(400);
/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Line {
    /// What is going on, when something is.
    label: Option<(String, Instant)>,
    /// The last line of live output.
    detail: String,
    /// The drawn line.
    bar: Option<ProgressBar>,
}

fn line() -> &'static Mutex<Line> {
    static LINE: OnceLock<Mutex<Line>> = OnceLock::new();
    LINE.get_or_init(Mutex::default)
}

/// Whether the last thing written to the terminal ended a line.
static AT_LINE_START: AtomicBool = AtomicBool::new(true);

/// Starts the ticker, once, when standard error is a terminal; without it nothing is drawn.
pub(crate) fn enable() {
    static STARTED: OnceLock<()> = OnceLock::new();
    if !std::io::stderr().is_terminal() {
        return;
    }
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("noeta-status".to_owned())
            .spawn(ticker)
            .map(drop)
            .unwrap_or(());
    });
}

/// Shows `label` (with its elapsed time) until [`stop`].
pub(crate) fn start(label: impl Into<String>) {
    let mut line = line().lock().unwrap_or_else(PoisonError::into_inner);
    line.label = Some((label.into(), Instant::now()));
    line.detail.clear();
}

/// The last line of live output of what runs now.
pub(crate) fn detail(text: &str) {
    let mut line = line().lock().unwrap_or_else(PoisonError::into_inner);
    if line.label.is_some() {
        line.detail = text.trim().chars().take(60).collect();
    }
}

/// Nothing is going on: the line is cleared.
pub(crate) fn stop() {
    let mut line = line().lock().unwrap_or_else(PoisonError::into_inner);
    line.label = None;
    line.detail.clear();
    if let Some(bar) = line.bar.take() {
        bar.finish_and_clear();
    }
}

/// The person ended a line at the terminal (an answer typed after a prompt, its Enter echoed by
/// the terminal itself): the cursor is at the start of a line again, so the line may be drawn.
pub(crate) fn line_ended() {
    AT_LINE_START.store(true, Ordering::Relaxed);
}

/// Runs `write` (something printed) with the line cleared; `ends_line` says whether what it
/// prints leaves the cursor at the start of a line.
pub(crate) fn clear_for<R>(ends_line: Option<bool>, write: impl FnOnce() -> R) -> R {
    let mut line = line().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(bar) = line.bar.take() {
        bar.finish_and_clear();
    }
    let result = write();
    if let Some(ends) = ends_line {
        AT_LINE_START.store(ends, Ordering::Relaxed);
    }
    drop(line);
    result
}

fn ticker() {
    let style = ProgressStyle::with_template("{spinner} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    loop {
        std::thread::sleep(TICK);
        let mut line = line().lock().unwrap_or_else(PoisonError::into_inner);
        let Some((label, since)) = line.label.clone() else {
            continue;
        };
        let elapsed = since.elapsed();
        if elapsed < DELAY || !AT_LINE_START.load(Ordering::Relaxed) {
            continue;
        }
        let detail = if line.detail.is_empty() {
            String::new()
        } else {
            format!(" · {}", line.detail)
        };
        let message = format!("{label} · {}s{detail}", elapsed.as_secs());
        let bar = line.bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(style.clone());
            bar
        });
        bar.set_message(message);
        bar.tick();
    }
}
