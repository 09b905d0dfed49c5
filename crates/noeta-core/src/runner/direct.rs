//! Direct calls: a tool of a task's agent called by a frontend instead of the model (an MCP
//! client of `noeta mcp serve`). The call goes through the same gate, run, `after_tool`,
//! overflow rule and records as a model's call; what would ask a person is refused instead,
//! since no one is there to answer.

use std::sync::Arc;

use serde_json::Value;

use crate::fold::{TaskState, TurnState};
use crate::model::Role;
use crate::model::ToolCall;
use crate::records::{CallOutcome, CoreRecord};
use crate::session::Session;
use crate::store::{ContentRef, StoreError, TaskId};
use crate::tool::{Tool, ToolOutput};

use super::calls::Gate;
use super::claim::Claim;
use super::{RunError, Runtime};

/// What a direct call came to, as the model would have seen it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectResult {
    /// The call's id in the task's log.
    pub call_id: String,
    /// The result's text (after every `after_tool`, bounded by the overflow rule).
    pub text: String,
    /// Whether it is an error (a failure, a denial, a refused ask).
    pub is_error: bool,
    /// How the call ended.
    pub outcome: CallOutcome,
    /// The images the result carries, in the content store.
    pub attachments: Vec<ContentRef>,
}

/// Why a call that would ask a person was refused, given what the gate would have asked.
pub type AskRefusal<'a> = &'a (dyn Fn(&[String]) -> String + Send + Sync);

impl Runtime {
    /// The tools a model of this task would be offered now, deferred ones included and
    /// withheld ones left out, in offer order. For a task not created yet, those a new task of
    /// the session would be offered (so a frontend can check its choices before making one).
    pub async fn direct_tools(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<Vec<Arc<dyn Tool>>, RunError> {
        let state = match self.load(session, task).await {
            Err(RunError::Store(StoreError::UnknownTask { .. })) => TaskState::default(),
            loaded => loaded?,
        };
        let view = crate::extension::View::new(
            task,
            &session.spec.name,
            &state,
            &session.spec.spawnable,
            &session.extensions,
        );
        let spec = &session.spec;
        let offer = crate::hooks::Hooks(&session.extensions)
            .offer(&view, &|tool| spec.allows(tool.name(), &tool.flags()))
            .map_err(|reason| RunError::Direct { reason })?;
        Ok(offer
            .tools
            .into_iter()
            .filter(|t| !offer.withheld.contains_key(t.tool.name()))
            .map(|t| t.tool)
            .collect())
    }

    /// Calls the tool `name` of the task's agent with `input`, as if the model had: gated (a
    /// call the gate would ask a person about is denied with `refusal`'s text), run under the
    /// task's lease, its result recorded. A tool that parks (on a question, on children) is
    /// answered with an error: nobody can wait on a direct call.
    pub async fn call_direct(
        &self,
        session: &Session,
        task: &TaskId,
        name: &str,
        input: Value,
        refusal: AskRefusal<'_>,
    ) -> Result<DirectResult, RunError> {
        let mut claim = self.claim(session, task).await?;
        let held = Arc::clone(&claim.lease);
        let result = held.keep_alive(claim.direct(name, input, refusal)).await;
        claim.write_unwritten().await?;
        claim.release().await?;
        result
    }

    /// Ends the task's turn after its direct calls (the frontend is done with it), so the
    /// task reads as finished rather than running. Nothing is recorded for a task whose turn
    /// is not running.
    pub async fn end_direct(
        &self,
        session: &Session,
        task: &TaskId,
        reason: &str,
    ) -> Result<(), RunError> {
        let mut claim = self.claim(session, task).await?;
        if claim.state.core.turn == TurnState::Running {
            claim
                .commit(vec![
                    CoreRecord::TurnEnded {
                        reason: reason.to_owned(),
                    }
                    .to_record(),
                ])
                .await?;
        }
        claim.release().await
    }
}

impl Claim<'_> {
    async fn direct(
        &mut self,
        name: &str,
        input: Value,
        refusal: AskRefusal<'_>,
    ) -> Result<DirectResult, RunError> {
        if let Some(reason) = &self.state.core.task_failed {
            return Err(RunError::Direct {
                reason: format!("the task failed: {reason}"),
            });
        }
        self.check_pins().await?;
        let (staged, failure) = {
            let view = self.view();
            let failure = self.hooks().on_start(&view).await;
            (view.take_staged(), failure)
        };
        self.commit(staged).await?;
        if let Some(reason) = failure {
            return Err(RunError::Direct { reason });
        }
        let offer = self.offer().map_err(|reason| RunError::Direct { reason })?;
        // The next record's sequence number: unique in the task, and the same on every machine.
        let call = ToolCall {
            id: format!("direct-{}", self.state.seq + 1),
            name: name.to_owned(),
            input,
        };
        let (gated, staged) = {
            let view = self.view().with_tools(&offer.tools);
            let gated = match self.gate(&view, &offer, call.clone()).await {
                Gate::Allow(allowed) => Ok(allowed),
                Gate::Deny(reason) => Err(reason),
                Gate::Ask(asked, asks) => {
                    match self.hooks().resolve_ask(&view, &asked, &asks).await {
                        Ok(Some(answer)) => answer.refusal().map_or(Ok(asked), Err),
                        Ok(None) => Err(refusal(&asks)),
                        Err(reason) => Err(reason),
                    }
                }
            };
            (gated, view.take_staged())
        };
        self.commit(staged).await?;
        let denied = match gated {
            Ok(allowed) => match offer.find(&allowed.name).cloned() {
                Some(tool) => {
                    self.run_batch(&mut vec![(allowed, tool)]).await?;
                    None
                }
                None => Some(super::calls::missing_tool(&offer, name)),
            },
            Err(reason) => Some(reason),
        };
        let outcome = match denied {
            Some(reason) => {
                let output = ToolOutput::error(reason);
                self.record_result(&call, output, CallOutcome::Denied, Vec::new(), None)
                    .await?;
                Some(CallOutcome::Denied)
            }
            None if self.state.core.parked.contains_key(&call.id) => {
                let output = ToolOutput::error(format!(
                    "{name}: the tool waits for a person or for child tasks, which a direct \
                     call cannot do"
                ));
                self.record_result(&call, output, CallOutcome::Error, Vec::new(), None)
                    .await?;
                Some(CallOutcome::Error)
            }
            None => None,
        };
        self.write_unwritten().await?;
        self.direct_result(&call.id, outcome)
    }

    /// The tool message the call's result folded into.
    fn direct_result(
        &self,
        call_id: &str,
        outcome: Option<CallOutcome>,
    ) -> Result<DirectResult, RunError> {
        let message = self
            .state
            .core
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Tool && m.call_id.as_deref() == Some(call_id))
            .ok_or_else(|| RunError::Direct {
                reason: format!("call `{call_id}` left no result in the log"),
            })?;
        let outcome = outcome.unwrap_or(if message.is_error {
            CallOutcome::Error
        } else {
            CallOutcome::Ok
        });
        Ok(DirectResult {
            call_id: call_id.to_owned(),
            text: message.text.as_str().to_owned(),
            is_error: message.is_error,
            outcome,
            attachments: message.attachments.clone(),
        })
    }
}
