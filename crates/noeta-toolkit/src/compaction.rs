//! The compaction records the `react` plugin writes: their schema, how they fold, and a typed
//! reader of the folded state.
//!
//! A `compacted` record says that every message before `keep_from_seq` is
//! stood in for by `summary` when a request is composed; the messages stay in
//! the log. Other plugins (the reminders, `RecallHistory`, a frontend) read
//! the state through [`read`] instead of importing `react`, and the fold is
//! [`CompactionState::apply`], so writer and readers agree on it.

use noeta_core::StateView;
use serde::{Deserialize, Serialize};

/// The extension the compaction records live under.
pub const EXTENSION: &str = "compaction";

/// The record kind of a compaction.
pub const KIND: &str = "compacted";

/// Compactions this close together (in model replies) belong to one run.
pub const THRASH_WINDOW: u64 = 3;

/// A run this long means compaction is thrashing: each summary buys only a few replies.
pub const THRASH_RUN: u64 = 3;

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The request neared the model's context window.
    Threshold,
    /// The provider refused the request as too long.
    Overflow,
    /// A person asked for it (`/compact`).
    Requested,
}

/// The payload of a `compacted` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compacted {
    /// Messages with a lower sequence number are covered by the summary.
    pub keep_from_seq: u64,
    /// How many messages the summary covers, from the start of the conversation.
    pub covered: u64,
    /// The summary.
    pub summary: String,
    /// Text other extensions asked to lead the summary with (`lead_resident`), by extension.
    #[serde(default)]
    pub lead: Vec<(String, String)>,
    /// Text other extensions asked to follow the summary (`resident`), by extension.
    #[serde(default)]
    pub residents: Vec<(String, String)>,
    /// Why it ran.
    pub trigger: Trigger,
    /// The estimated size of the request that set it off, in tokens.
    pub estimated_tokens: u64,
    /// Model replies in the conversation when it ran.
    pub at_reply: u64,
}

/// The folded compaction state of a task.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionState {
    /// The compaction in force, if any.
    pub current: Option<Compacted>,
    /// Compactions so far.
    pub count: u64,
    /// Compactions in the current run (each within [`THRASH_WINDOW`] replies of the last).
    pub run: u64,
    /// Whether the current run has reached [`THRASH_RUN`].
    pub thrashing: bool,
}

impl CompactionState {
    /// Messages with a lower sequence number are summarised (0: none are).
    pub fn keep_from_seq(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.keep_from_seq)
    }

    /// How many messages are collapsed into the summary.
    pub fn covered(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.covered)
    }

    /// Folds one compaction in.
    pub fn apply(&mut self, record: Compacted) {
        let close = self
            .current
            .as_ref()
            .is_some_and(|last| record.at_reply.saturating_sub(last.at_reply) <= THRASH_WINDOW);
        self.run = if close { self.run + 1 } else { 1 };
        self.thrashing = self.run >= THRASH_RUN;
        self.count += 1;
        self.current = Some(record);
    }
}

/// The compaction state of a task, from its folded state (the default when none ran).
pub fn read(state: &dyn StateView) -> CompactionState {
    state
        .ext_state(EXTENSION)
        // Read in place: this runs at every compose, and the state is not copied for it.
        .and_then(|value| Deserialize::deserialize(value).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(reply: u64) -> Compacted {
        Compacted {
            keep_from_seq: reply * 10,
            covered: reply,
            summary: format!("summary at {reply}"),
            lead: Vec::new(),
            residents: Vec::new(),
            trigger: Trigger::Threshold,
            estimated_tokens: 1000,
            at_reply: reply,
        }
    }

    #[test]
    fn three_compactions_each_within_three_replies_latch_thrashing_until_a_run_breaks() {
        let mut state = CompactionState::default();
        let mut seen = Vec::new();
        for reply in [10, 12, 15, 17, 30, 31] {
            state.apply(at(reply));
            seen.push((state.run, state.thrashing));
        }
        assert_eq!(
            seen,
            [
                (1, false),
                (2, false),
                (3, true),
                (4, true),
                (1, false),
                (2, false)
            ]
        );
        assert_eq!(
            (state.count, state.keep_from_seq(), state.covered()),
            (6, 310, 31)
        );
    }

    #[test]
    fn no_state_reads_as_nothing_collapsed() {
        let state = CompactionState::default();
        assert_eq!((state.keep_from_seq(), state.covered()), (0, 0));
        assert!(!state.thrashing);
    }
}
