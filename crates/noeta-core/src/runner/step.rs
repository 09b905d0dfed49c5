//! One step of a turn: intake, the tool offer, reminders, compose and `before_model`, the model
//! call, and what the policy decides about the reply; the turn's end or failure.

use std::sync::Arc;

use crate::extension::StepSignal;
use crate::fold::TurnState;
use crate::hooks::FinishCheck;
use crate::model::Role;
use crate::model::{ModelReply, ModelRequest};
use crate::model::{StopReason, ToolCall};
use crate::policy::Decision;
use crate::provider::ProviderError;
use crate::records::CoreRecord;

use super::claim::Claim;
use super::{MAX_FAILED_TURNS, MAX_STEPS_PER_TURN, RunError, RunOutcome};

/// The tools a step offers, first offer of a name winning, and those withheld.
pub(super) type Offer = crate::hooks::ToolOffer;

/// What a phase of a step decided.
pub(super) enum Flow {
    Continue,
    Stop(RunOutcome),
}

impl Claim<'_> {
    pub(super) async fn drive(&mut self) -> Result<RunOutcome, RunError> {
        if let Some(reason) = &self.state.core.task_failed {
            return Ok(RunOutcome::TaskFailed {
                reason: reason.clone(),
            });
        }
        self.check_pins().await?;
        let started = {
            let view = self.view();
            let failure = self.hooks().on_start(&view).await;
            (view.take_staged(), failure)
        };
        self.commit(started.0).await?;
        if let Some(reason) = started.1 {
            if self.state.core.turn == TurnState::Running {
                return self.fail_turn(reason).await;
            }
            return Ok(RunOutcome::TurnFailed { reason });
        }
        let mut steps = 0;
        loop {
            match &self.state.core.turn {
                TurnState::Idle => return Ok(RunOutcome::Idle),
                TurnState::Ended { reason } => {
                    return Ok(RunOutcome::Ended {
                        reason: reason.clone(),
                    });
                }
                TurnState::Failed { reason } => {
                    return Ok(RunOutcome::TurnFailed {
                        reason: reason.clone(),
                    });
                }
                TurnState::Parked { call_id, question } => {
                    let (call_id, question) = (call_id.clone(), question.clone());
                    if self.wake_children(&call_id).await? {
                        continue;
                    }
                    return Ok(RunOutcome::Parked { call_id, question });
                }
                TurnState::Running => {}
            }
            if self.rt.stopping() {
                self.write_unwritten().await?;
                return Ok(RunOutcome::Stopped);
            }
            // What in-process work posted since the last step is committed before the next.
            let posted = self.rt.inbox.take(self.task.as_str());
            if let Err(err) = self.commit(posted.clone()).await {
                for record in posted {
                    self.rt.inbox.post(self.task.as_str(), record);
                }
                return Err(err);
            }
            steps += 1;
            if steps > MAX_STEPS_PER_TURN {
                return self
                    .fail_turn(format!(
                        "the turn took more than {MAX_STEPS_PER_TURN} steps"
                    ))
                    .await;
            }
            self.lease.renew_when_due().await?;
            let began = std::time::Instant::now();
            if steps == 1 {
                tracing::debug!(
                    target: "noeta::metrics",
                    task = %self.task,
                    claim_to_first_step_us = u64::try_from(self.claimed.elapsed().as_micros()).unwrap_or(u64::MAX),
                );
            }
            let flow = self.step().await?;
            tracing::debug!(
                target: "noeta::metrics",
                task = %self.task,
                step_us = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX),
            );
            if let Flow::Stop(outcome) = flow {
                return Ok(outcome);
            }
        }
    }

    pub(super) async fn fail_turn(&mut self, reason: String) -> Result<RunOutcome, RunError> {
        let mut batch = vec![
            CoreRecord::TurnFailed {
                reason: reason.clone(),
            }
            .to_record(),
        ];
        if self.state.core.failed_turns + 1 >= MAX_FAILED_TURNS {
            let task_reason =
                format!("{MAX_FAILED_TURNS} turns failed in a row; the last: {reason}");
            batch.push(
                CoreRecord::TaskFailed {
                    reason: task_reason.clone(),
                }
                .to_record(),
            );
            self.commit(batch).await?;
            return Ok(RunOutcome::TaskFailed {
                reason: task_reason,
            });
        }
        self.commit(batch).await?;
        Ok(RunOutcome::TurnFailed { reason })
    }

    pub(super) async fn end_turn(&mut self, reason: &str) -> Result<Flow, RunError> {
        self.commit(vec![
            CoreRecord::TurnEnded {
                reason: reason.to_owned(),
            }
            .to_record(),
        ])
        .await?;
        Ok(Flow::Stop(RunOutcome::Ended {
            reason: reason.to_owned(),
        }))
    }

    pub(super) async fn note(&mut self, reason: &str, message: &str) -> Result<(), RunError> {
        let note = CoreRecord::Note {
            reason: reason.to_owned(),
        };
        self.commit(vec![note.with_message(message)]).await
    }

    /// Turn intake: once per user message, recorded, so a resume never repeats it.
    pub(super) async fn intake(&mut self) -> Result<Option<String>, RunError> {
        let core = &self.state.core;
        let Some((seq, text)) = core
            .last_user
            .and_then(|i| core.messages.get(i))
            .map(|m| (m.seq, m.text.clone()))
        else {
            return Ok(None);
        };
        if seq <= self.state.core.intake_seq {
            return Ok(None);
        }
        let (mut staged, failure) = {
            let view = self.view();
            let failure = self.hooks().turn_intake(&view, &text).await;
            (view.take_staged(), failure)
        };
        if let Some(reason) = failure {
            return Ok(Some(reason));
        }
        staged.push(CoreRecord::IntakeDone { seq }.to_record());
        self.commit(staged).await?;
        Ok(None)
    }

    /// The calls of the last reply that have no result yet, in reply order.
    pub(super) fn pending_calls(&self) -> Vec<ToolCall> {
        let messages = &self.state.core.messages;
        let mut answered: Vec<&str> = Vec::new();
        for message in messages.iter().rev() {
            match message.role {
                Role::Tool => answered.extend(message.call_id.as_deref()),
                Role::Assistant => {
                    return message
                        .calls
                        .iter()
                        .filter(|c| !answered.contains(&c.id.as_str()))
                        .cloned()
                        .collect();
                }
                Role::Context => {}
                Role::User => return Vec::new(),
            }
        }
        Vec::new()
    }

    pub(super) fn offer(&self) -> Result<Offer, String> {
        let spec = &self.session.spec;
        self.hooks().offer(&self.view(), &|tool| {
            spec.allows(tool.name(), &tool.flags())
        })
    }

    pub(super) async fn step(&mut self) -> Result<Flow, RunError> {
        if let Some(reason) = self.intake().await? {
            return Ok(Flow::Stop(self.fail_turn(reason).await?));
        }
        let offer = match self.offer() {
            Ok(offer) => offer,
            Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
        };
        let pending = self.pending_calls();
        if !pending.is_empty() {
            return self.run_calls(&offer, pending).await;
        }
        // A reply recorded before a crash, whose decision was not: decide again, never re-ask the model.
        if let Some(last) = self.state.core.messages.last()
            && last.role == Role::Assistant
            && last.calls.is_empty()
        {
            let reply = ModelReply {
                text: last.text.as_str().to_owned(),
                calls: Vec::new(),
                stop: self.state.core.last_stop,
                usage: Default::default(),
                reasoning: last.reasoning.clone(),
            };
            return self.after_reply(&offer, reply).await;
        }
        self.model_step(&offer).await
    }

    /// Compose the request and call the model, then hand the reply to the policy.
    pub(super) async fn model_step(&mut self, offer: &Offer) -> Result<Flow, RunError> {
        let mut overflow_retries = 0;
        let mut stale_retries = 0;
        loop {
            // Reminders are recorded now and so sent with this request.
            let reminders = {
                let view = self.view();
                let signal = self.hooks().reminders(&view).await;
                (view.take_staged(), signal)
            };
            self.commit(reminders.0).await?;
            if let Some(signal) = reminders.1 {
                match self.signal(signal, &mut stale_retries).await? {
                    Some(flow) => return Ok(flow),
                    None => continue,
                }
            }
            let request = match self.compose(offer) {
                Ok(request) => request,
                Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
            };
            let (request, staged) = {
                let view = self.view();
                let request = self.hooks().before_model(&view, request).await;
                (request, view.take_staged())
            };
            self.commit(staged).await?;
            let request = match request {
                Ok(request) => request,
                Err(signal) => match self.signal(signal, &mut stale_retries).await? {
                    Some(flow) => return Ok(flow),
                    None => continue,
                },
            };
            let request = self.attach(request).await?;
            let hashes = self.segment_hashes(&request);
            let provider = self.rt.provider_for(&self.session.spec.name);
            let answer = match &self.rt.text {
                Some(sink) => {
                    let task = &self.task;
                    let piece = |text: &str| sink(task, text);
                    provider.complete_streaming(&request, &piece).await
                }
                None => provider.complete(&request).await,
            };
            let reply = match answer {
                Ok(reply) => reply,
                Err(ProviderError::ContextOverflow { message }) => {
                    overflow_retries += 1;
                    let made = overflow_retries <= 2 && self.make_room(&request).await?;
                    if !made {
                        return Ok(Flow::Stop(
                            self.fail_turn(format!("context_overflow: {message}"))
                                .await?,
                        ));
                    }
                    continue;
                }
                Err(err) => {
                    return Ok(Flow::Stop(
                        self.fail_turn(format!("provider: {err}")).await?,
                    ));
                }
            };
            // The request shares the conversation; drop it so recording the reply never copies it.
            drop(request);
            let composed = CoreRecord::RequestComposed {
                stable: hashes.stable,
                residents: hashes.residents,
                dynamic: hashes.dynamic,
            };
            let recorded = CoreRecord::AssistantReply {
                text: reply.text.as_str().into(),
                calls: reply.calls.as_slice().into(),
                stop: reply.stop.unwrap_or(StopReason::EndTurn),
                usage: reply.usage,
                reasoning: reply.reasoning.clone(),
            };
            // Written with the started-records of the calls it makes, or before anything else.
            self.defer(vec![composed.to_record(), recorded.to_record()])
                .await?;
            return self.after_reply(offer, reply).await;
        }
    }

    /// Loads the bodies of the images the request's messages carry (each once per claim).
    pub(super) async fn attach(
        &mut self,
        mut request: ModelRequest,
    ) -> Result<ModelRequest, RunError> {
        // The messages with attachments are known without a scan, unless a `before_model`
        // hook changed the conversation.
        let scanned: Vec<usize>;
        let attached = if Arc::ptr_eq(&request.messages, &self.state.core.messages) {
            &self.state.core.attached
        } else {
            scanned = crate::fold::attached_of(&request.messages);
            &scanned
        };
        for message in attached.iter().map(|&i| &request.messages[i]) {
            for reference in &message.attachments {
                if request.attachments.contains_key(&reference.sha256) {
                    continue;
                }
                let data = match self.images.get(&reference.sha256) {
                    Some(data) => Arc::clone(data),
                    None => {
                        let data = Arc::new(self.rt.content.get(reference).await?);
                        self.images
                            .insert(reference.sha256.clone(), Arc::clone(&data));
                        data
                    }
                };
                request.attachments.insert(
                    reference.sha256.clone(),
                    crate::model::Attachment {
                        media_type: reference.media_type.clone(),
                        data,
                    },
                );
            }
        }
        Ok(request)
    }

    /// Handles a step signal; `None` means compose again.
    pub(super) async fn signal(
        &mut self,
        signal: StepSignal,
        stale: &mut u32,
    ) -> Result<Option<Flow>, RunError> {
        match signal {
            StepSignal::TurnDone { reason } => Ok(Some(self.end_turn(&reason).await?)),
            StepSignal::RequestStale => {
                *stale += 1;
                if *stale > 3 {
                    return Ok(Some(Flow::Stop(
                        self.fail_turn(
                            "the request went stale more than 3 times in one step".to_owned(),
                        )
                        .await?,
                    )));
                }
                Ok(None)
            }
            StepSignal::TurnFailed { reason } => {
                Ok(Some(Flow::Stop(self.fail_turn(reason).await?)))
            }
            StepSignal::Error(err) => Ok(Some(Flow::Stop(
                self.fail_turn(format!("internal_error: {err}")).await?,
            ))),
        }
    }

    /// Asks each extension to make room after an overflow; true when one did.
    pub(super) async fn make_room(&mut self, request: &ModelRequest) -> Result<bool, RunError> {
        let (made, staged) = {
            let view = self.view();
            let made = self.hooks().on_context_overflow(&view, request).await;
            (made, view.take_staged())
        };
        self.commit(staged).await?;
        Ok(made)
    }

    pub(super) async fn after_reply(
        &mut self,
        offer: &Offer,
        reply: ModelReply,
    ) -> Result<Flow, RunError> {
        if reply.calls.is_empty() {
            self.write_unwritten().await?;
        }
        if reply.text.trim().is_empty() && reply.calls.is_empty() {
            let nudge = self.hooks().on_empty_reply(&self.view(), &reply).await;
            return match nudge {
                Some(message) => {
                    self.note("empty_reply", &message).await?;
                    Ok(Flow::Continue)
                }
                None => self.end_turn("empty_reply").await,
            };
        }
        let decision = crate::hooks::decide(self.session.policy.as_ref(), &self.view(), &reply);
        let decision = match decision {
            Ok(decision) => decision,
            Err(reason) => return Ok(Flow::Stop(self.fail_turn(reason).await?)),
        };
        if !matches!(decision, Decision::RunTools) {
            self.write_unwritten().await?;
        }
        match decision {
            Decision::RunTools => self.run_calls(offer, reply.calls).await,
            Decision::Continue { message } => {
                self.note("policy", &message).await?;
                Ok(Flow::Continue)
            }
            Decision::Finish { reason } => self.end_turn_unless_refused(&reason).await,
        }
    }

    /// Ends the turn unless an extension refuses, with a message the model sees.
    pub(super) async fn end_turn_unless_refused(&mut self, reason: &str) -> Result<Flow, RunError> {
        let (check, staged) = {
            let view = self.view();
            let check = self.hooks().before_finish(&view).await;
            (check, view.take_staged())
        };
        self.commit(staged).await?;
        match check {
            FinishCheck::Failed(reason) => Ok(Flow::Stop(self.fail_turn(reason).await?)),
            FinishCheck::Refused(message) => {
                self.note("finish_refused", &message).await?;
                Ok(Flow::Continue)
            }
            FinishCheck::Go => self.end_turn(reason).await,
        }
    }
}
