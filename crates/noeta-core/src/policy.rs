//! The policy: what a step does with the model's reply, and the kernel's minimal default.
//!
//! A task runs with zero plugins because the kernel has a policy of its own:
//! run the tool calls, and end the turn when the model stops calling tools.
//! A `policy` contribution replaces it.

use std::sync::Arc;

use crate::contrib::ComponentRef;
use crate::extension::View;
use crate::model::ModelReply;
use crate::model::StopReason;

/// What a step does next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Gate and run the reply's tool calls, then take another step.
    RunTools,
    /// End the turn.
    Finish {
        /// Why.
        reason: String,
    },
    /// Take another step after adding this message (a nudge the model sees).
    Continue {
        /// The message.
        message: String,
    },
}

/// The decision loop of an agent.
pub trait Policy: Send + Sync {
    /// The identity pinned in compiled agents.
    fn policy_ref(&self) -> ComponentRef;

    /// Decides what to do with a reply.
    fn decide(&self, view: &View<'_>, reply: &ModelReply) -> Decision;
}

/// The kernel's minimal policy: run tool calls; continue a reply cut off by the token limit; else finish.
#[derive(Debug, Clone, Copy, Default)]
pub struct MinimalPolicy;

/// The kernel policy's identity.
pub fn minimal_policy_ref() -> ComponentRef {
    ComponentRef::new("core", "1")
}

impl Policy for MinimalPolicy {
    fn policy_ref(&self) -> ComponentRef {
        minimal_policy_ref()
    }

    fn decide(&self, _view: &View<'_>, reply: &ModelReply) -> Decision {
        if !reply.calls.is_empty() {
            return Decision::RunTools;
        }
        if reply.stop == Some(StopReason::MaxTokens) {
            return Decision::Continue {
                message:
                    "Your reply was cut off by the output limit. Continue exactly where it stopped."
                        .to_owned(),
            };
        }
        Decision::Finish {
            reason: "end_turn".to_owned(),
        }
    }
}

/// The minimal policy as a shared value.
pub fn minimal_policy() -> Arc<dyn Policy> {
    Arc::new(MinimalPolicy)
}
