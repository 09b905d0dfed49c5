//! The repetition guard (the `repetition_guard` extension): the same call, again and again.
//!
//! A call is the same as another when its tool and its input's canonical bytes
//! are. When a call would be the `threshold`-th same one among the last
//! `window` calls of the conversation, the guard asks a person first (or, with
//! `action = "deny"`, refuses). It reads the calls from the conversation, so it
//! needs no records of its own. Off unless `[plugins.governance] repetition`
//! sets a `threshold` of 2 or more.

use async_trait::async_trait;
use noeta_core::Verdict;
use noeta_core::canonical;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::model::Role;
use noeta_core::model::ToolCall;
use serde::Deserialize;

/// The extension's name.
pub(crate) const REPETITION_GUARD: &str = "repetition_guard";

/// What the guard does with a repeated call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Action {
    /// Ask a person first.
    #[default]
    Ask,
    /// Refuse it.
    Deny,
}

/// The guard's settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepetitionGuard {
    threshold: usize,
    #[serde(default = "default_window")]
    window: usize,
    #[serde(default)]
    action: Action,
}

fn default_window() -> usize {
    8
}

impl RepetitionGuard {
    /// Checks the numbers; an error names the field.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.threshold < 2 {
            return Err(format!(
                "settings [plugins.governance] repetition.threshold: {} is less than 2 (a call repeats from its second time)",
                self.threshold
            ));
        }
        if self.window < self.threshold {
            return Err(format!(
                "settings [plugins.governance] repetition.window: {} is less than the threshold {}",
                self.window, self.threshold
            ));
        }
        Ok(())
    }
}

/// What makes two calls the same.
fn key(call: &ToolCall) -> (String, Vec<u8>) {
    (call.name.clone(), canonical::to_bytes(&call.input))
}

#[async_trait]
impl Extension for RepetitionGuard {
    fn name(&self) -> &str {
        REPETITION_GUARD
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        // The calls before this one, newest first: this reply's earlier calls, then older replies'.
        let mut earlier: Vec<&ToolCall> = Vec::new();
        let replies = view
            .messages()
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant);
        for (i, message) in replies.enumerate() {
            let calls = &message.calls;
            // Only the newest reply holds this call (ids may repeat across replies).
            let upto = if i == 0 {
                calls
                    .iter()
                    .position(|c| c.id == call.id)
                    .unwrap_or(calls.len())
            } else {
                calls.len()
            };
            earlier.extend(calls[..upto].iter().rev());
            if earlier.len() >= self.window - 1 {
                break;
            }
        }
        let wanted = key(call);
        let same = earlier
            .iter()
            .take(self.window - 1)
            .filter(|c| key(c) == wanted)
            .count();
        if same + 1 < self.threshold {
            return Ok(None);
        }
        let times = match same {
            1 => "once".to_owned(),
            n => format!("{n} times"),
        };
        let reason = format!(
            "`{}` was already called {times} with this same input among the last {} calls — the approach may be stuck",
            call.name, self.window
        );
        Ok(Some(match self.action {
            Action::Ask => Verdict::Ask { reason, firm: true },
            Action::Deny => Verdict::Deny {
                reason: format!("{reason}; try something different"),
            },
        }))
    }
}
