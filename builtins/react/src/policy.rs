//! The default decision loop (`react` `1`): act on tool calls, recover a reply the output
//! limit cut off, nudge once after an empty reply, and otherwise end the turn.
//!
//! It is no `policy` contribution: the host hands it to the session build as
//! the default, so an activated policy plugin (or `Options.policy`) replaces
//! it and nothing of it runs then. Its limits are counted from the
//! conversation itself (the notes it left since the newest user message), so
//! a resumed task counts on where the crashed one stopped.

use async_trait::async_trait;
use noeta_core::ComponentRef;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::model::ModelReply;
use noeta_core::model::Role;
use noeta_core::model::StopReason;
use noeta_core::policy::{Decision, Policy};

/// The loop's extension name (it has no records).
pub const LOOP: &str = "react_loop";
/// Continuations a turn gets after replies cut off by the output limit.
pub const MAX_CONTINUATIONS: usize = 3;
/// What the model is told after a reply cut off by the output limit.
pub const CONTINUE: &str =
    "Your reply was cut off by the output limit. Continue exactly where it stopped.";
/// What the model is told after an empty reply (once a turn).
pub const EMPTY_NUDGE: &str =
    "Your last reply was empty. Continue with the task: call a tool, or give your final answer.";

/// The identity the loop pins in compiled agents.
pub fn policy_ref() -> ComponentRef {
    ComponentRef::new("react", "1")
}

/// How many context notes reading `text` the conversation holds since its newest user message.
fn notes_this_turn(
    view_messages: &[noeta_core::model::Message],
    last_user: Option<usize>,
    text: &str,
) -> usize {
    let from = last_user.map_or(0, |i| i + 1);
    view_messages
        .get(from..)
        .unwrap_or_default()
        .iter()
        .filter(|m| m.role == Role::Context && m.text == text)
        .count()
}

/// The default decision loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReactPolicy;

impl Policy for ReactPolicy {
    fn policy_ref(&self) -> ComponentRef {
        policy_ref()
    }

    fn decide(&self, view: &View<'_>, reply: &ModelReply) -> Decision {
        if !reply.calls.is_empty() {
            return Decision::RunTools;
        }
        if reply.stop == Some(StopReason::MaxTokens) {
            let used = notes_this_turn(view.messages(), view.core().last_user, CONTINUE);
            if used < MAX_CONTINUATIONS {
                return Decision::Continue {
                    message: CONTINUE.to_owned(),
                };
            }
            return Decision::Finish {
                reason: "max_tokens".to_owned(),
            };
        }
        Decision::Finish {
            reason: "end_turn".to_owned(),
        }
    }
}

/// The loop's hooks: the empty-reply nudge. Mounted only for agents the loop runs.
pub(crate) struct Loop;

#[async_trait]
impl Extension for Loop {
    fn name(&self) -> &str {
        LOOP
    }

    async fn on_empty_reply(
        &self,
        view: &View<'_>,
        _reply: &ModelReply,
    ) -> HookResult<Option<String>> {
        let used = notes_this_turn(view.messages(), view.core().last_user, EMPTY_NUDGE);
        Ok((used == 0).then(|| EMPTY_NUDGE.to_owned()))
    }
}
