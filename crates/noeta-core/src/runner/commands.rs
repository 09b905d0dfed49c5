//! Slash commands: what the task's extensions offer a frontend, and running one. A task not
//! created yet (the first line of a chat may be a command) is answered from a new task's
//! state, without a claim; a command that would record something into it is refused until
//! the task exists.

use std::sync::Arc;

use crate::extension::{CommandReply, CommandSpec, View};
use crate::fold::TaskState;
use crate::hooks::Hooks;
use crate::session::Session;
use crate::store::{StoreError, TaskId};

use super::{RunError, Runtime};

impl Runtime {
    /// The task's state, or a new task's when it does not exist yet (`None` then).
    async fn state_or_new(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<Option<TaskState>, RunError> {
        match self.load(session, task).await {
            Ok(state) => Ok(Some(state)),
            Err(RunError::Store(StoreError::UnknownTask { .. })) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// A view of `state` without a claim (records staged on it are the caller's to refuse).
    fn unclaimed_view<'a>(
        &'a self,
        session: &'a Session,
        task: &'a TaskId,
        state: &'a TaskState,
    ) -> View<'a> {
        View::new(
            task,
            &session.spec.name,
            state,
            &session.spec.spawnable,
            &session.extensions,
        )
        .with_exec_env(self.exec.as_ref())
    }

    /// The slash commands the task's extensions offer, with the extension offering each.
    pub async fn commands(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<Vec<(String, CommandSpec)>, RunError> {
        let state = self.state_or_new(session, task).await?.unwrap_or_default();
        Ok(Hooks(&session.extensions).commands(&self.unclaimed_view(session, task, &state)))
    }

    /// Runs `/name args`: text to show, or a message for the frontend to send. The offering
    /// extension's error goes to the caller.
    pub async fn run_command(
        &self,
        session: &Session,
        task: &TaskId,
        name: &str,
        args: &str,
    ) -> Result<CommandReply, RunError> {
        // One fold finds the offering extension (and tells a task not made yet).
        let existing = self.state_or_new(session, task).await?;
        let unborn = existing.is_none();
        let state = existing.unwrap_or_default();
        let offered =
            Hooks(&session.extensions).commands(&self.unclaimed_view(session, task, &state));
        let Some((owner, _)) = offered.iter().find(|(_, c)| c.name == name) else {
            return Err(RunError::Command {
                name: name.to_owned(),
                message: format!(
                    "no such command (available: {})",
                    offered
                        .iter()
                        .map(|(_, c)| format!("/{}", c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let failed = |err: crate::extension::HookError| RunError::Command {
            name: name.to_owned(),
            message: err.to_string(),
        };
        if unborn {
            let view = self
                .unclaimed_view(session, task, &state)
                .with_model(&**self.provider_for(&session.spec.name));
            let reply = Hooks(&session.extensions)
                .run_command(owner, &view, name, args)
                .await
                .map_err(failed)?;
            if !view.take_staged().is_empty() {
                return Err(RunError::Command {
                    name: name.to_owned(),
                    message: "it records into the task, and there is no task yet: say \
                              something first"
                        .to_owned(),
                });
            }
            return Ok(reply);
        }
        let mut claim = self.claim(session, task).await?;
        let held = Arc::clone(&claim.lease);
        let (outcome, staged) = held
            .keep_alive(async {
                let view = claim.view();
                let outcome = Hooks(&session.extensions)
                    .run_command(owner, &view, name, args)
                    .await;
                Ok((outcome, view.take_staged()))
            })
            .await?;
        claim.commit(staged).await?;
        claim.release().await?;
        outcome.map_err(failed)
    }
}
