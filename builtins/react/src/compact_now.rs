//! `/compact`: the compaction extension's slash command — the conversation summarised now,
//! at the person's word, rather than when the next request nears the context window. All but
//! the latest exchange goes into the summary, recorded as any compaction is (`compacted`,
//! trigger `requested`), so the next replies start from it.

use noeta_core::StateView;
use noeta_core::extension::{CommandReply, CommandSpec, HookError, StepSignal, View};
use noeta_toolkit::compaction::{self, Trigger};

use crate::compaction::Compaction;

/// The command's name.
const COMMAND: &str = "compact";

/// The command, as the extension offers it.
pub(crate) fn spec() -> CommandSpec {
    CommandSpec {
        name: COMMAND.to_owned(),
        description: "summarise the conversation now: the next replies start from the summary"
            .to_owned(),
    }
}

/// Runs `/compact` (any other name is not this extension's).
pub(crate) async fn run(
    extension: &Compaction,
    view: &View<'_>,
    name: &str,
) -> Result<CommandReply, HookError> {
    if name != COMMAND {
        return Err(HookError::new(format!("unknown command `/{name}`")));
    }
    if view.model().is_none() {
        return Err(HookError::new("there is no model to write the summary"));
    }
    let state = compaction::read(view as &dyn StateView);
    // No tail kept by size: everything up to the latest point a cut may fall goes into the
    // summary.
    match extension
        .compact(view, &state, Trigger::Requested, 0, 0)
        .await
    {
        Ok(Some(next)) => Ok(CommandReply::Show(format!(
            "compacted: the conversation's first {} messages are now a summary of {} characters",
            next.current.as_ref().map_or(0, |c| c.covered),
            next.current
                .as_ref()
                .map_or(0, |c| c.summary.chars().count())
        ))),
        Ok(None) => Ok(CommandReply::Show(
            "nothing to compact yet: the conversation is all recent".to_owned(),
        )),
        Err(StepSignal::TurnFailed { reason } | StepSignal::TurnDone { reason }) => {
            Err(HookError::new(format!("compaction failed: {reason}")))
        }
        Err(StepSignal::Error(err)) => Err(err),
        Err(_) => Err(HookError::new(
            "compaction failed: the conversation changed meanwhile; try again",
        )),
    }
}
