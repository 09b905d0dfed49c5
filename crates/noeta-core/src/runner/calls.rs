//! Tool calls: the gate (rewrites, asks, `resolve_ask`), running calls (adjacent read-only ones
//! together), parks and wakes, crash recovery, and recording a result (`after_tool`, the
//! overflow rule) — plus input validation against the tool's schema.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::canonical;
use crate::extension::View;
use crate::fold::TurnState;
use crate::hooks::CallVerdict;
use crate::model::Role;
use crate::model::ToolCall;
use crate::records::{CallOutcome, CoreRecord};
use crate::records::{SpawnOrder, Wake};
use crate::store::Record;
use crate::tool::{Park, Tool, ToolContext, ToolError, ToolOutput};

use super::claim::{Claim, ClaimKeeper};
use super::step::{Flow, Offer};
use super::tree::create_child;
use super::{DEFAULT_MAX_RESULT_CHARS, MAX_PARALLEL_READS, MAX_REWRITES, RunError, RunOutcome};

/// What one run of a tool produced.
pub(super) struct Ran {
    output: ToolOutput,
    outcome: CallOutcome,
    staged: Vec<Record>,
    spawns: Vec<SpawnOrder>,
}

/// A gate's verdict on one call.
pub(super) enum Gate {
    Allow(ToolCall),
    Deny(String),
    Ask(ToolCall, Vec<String>),
}

pub(super) fn missing_tool(offer: &Offer, name: &str) -> String {
    if let Some(error) = offer.withheld.get(name) {
        return error.clone();
    }
    let names: Vec<&str> = offer.tools.iter().map(|t| t.tool.name()).collect();
    format!(
        "no tool named `{name}` is available (available: {})",
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    )
}

/// Compiled input schemas, by their canonical bytes (compiling one costs far more than a step).
pub(super) static VALIDATORS: std::sync::LazyLock<
    Mutex<HashMap<Vec<u8>, Arc<jsonschema::Validator>>>,
> = std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

/// Schemas kept compiled at most; past it the cache starts over.
pub(super) const MAX_VALIDATORS: usize = 1024;

/// The validator of each tool object seen, by the object's address. The entry holds the tool,
/// so no other tool takes that address while it lives; a tool's schema is fixed for the life of
/// the object. A call then finds its validator without rendering the schema.
type ByTool = HashMap<usize, (Arc<dyn Tool>, Arc<jsonschema::Validator>)>;
static BY_TOOL: std::sync::LazyLock<Mutex<ByTool>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

fn validator_of(tool: &Arc<dyn Tool>) -> Result<Arc<jsonschema::Validator>, String> {
    let key = Arc::as_ptr(tool).cast::<()>() as usize;
    if let Some((_, validator)) = BY_TOOL
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(Arc::clone(validator));
    }
    let validator = validator(tool.as_ref())?;
    let mut cache = BY_TOOL.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= MAX_VALIDATORS {
        cache.clear();
    }
    cache.insert(key, (Arc::clone(tool), Arc::clone(&validator)));
    Ok(validator)
}

pub(super) fn validator(tool: &dyn Tool) -> Result<Arc<jsonschema::Validator>, String> {
    let schema = tool.input_schema();
    let key = canonical::to_bytes(&schema);
    let mut cache = VALIDATORS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(validator) = cache.get(&key) {
        return Ok(Arc::clone(validator));
    }
    // Checked against the meta-schema, the schema is the instance: the path is in it.
    let validator = Arc::new(jsonschema::validator_for(&schema).map_err(|err| {
        format!(
            "{}: the tool's input schema is invalid — {}",
            tool.name(),
            located(&err)
        )
    })?);
    if cache.len() >= MAX_VALIDATORS {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&validator));
    Ok(validator)
}

/// A validation error led by where in the checked value it is (`/n: …`), when not at its root.
fn located(err: &jsonschema::ValidationError<'_>) -> String {
    let at = err.instance_path().to_string();
    if at.is_empty() {
        err.to_string()
    } else {
        format!("{at}: {err}")
    }
}

/// Checks a call's input against the tool's JSON Schema, with an error the model can act on.
pub(super) fn check_input(tool: &Arc<dyn Tool>, input: &Value) -> Result<(), String> {
    if tool.flags().unchecked_input {
        return Ok(());
    }
    let validator = validator_of(tool)?;
    let errors: Vec<String> = validator.iter_errors(input).map(|e| located(&e)).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: invalid input — {}. Fix the arguments and call it again.",
            tool.name(),
            errors.join("; ")
        ))
    }
}

impl Claim<'_> {
    /// What woke the parked call `id`, if it was parked and has been woken.
    fn wake_of(&self, id: &str) -> Option<Wake> {
        self.state.core.parked.get(id).and_then(|p| p.wake.clone())
    }

    /// Every extension is asked; any deny wins, else the first rewrite (re-gated), else ask.
    pub(super) async fn gate(&self, view: &View<'_>, offer: &Offer, call: ToolCall) -> Gate {
        let mut call = call;
        let mut rewrites = 0;
        loop {
            let Some(tool) = offer.find(&call.name) else {
                return Gate::Deny(missing_tool(offer, &call.name));
            };
            if let Err(reason) = check_input(tool, &call.input) {
                return Gate::Deny(reason);
            }
            match self.hooks().before_tool(view, &call).await {
                CallVerdict::Deny(reason) => return Gate::Deny(reason),
                CallVerdict::Rewrite(input) => {
                    rewrites += 1;
                    if rewrites > MAX_REWRITES {
                        return Gate::Deny(format!(
                            "`{}` was rewritten more than {MAX_REWRITES} times; denied",
                            call.name
                        ));
                    }
                    call.input = input;
                }
                CallVerdict::Ask(asks) => return Gate::Ask(call, asks),
                CallVerdict::Allow => return Gate::Allow(call),
            }
        }
    }

    /// Gates calls in order and runs them; adjacent read-only calls run together.
    pub(super) async fn run_calls(
        &mut self,
        offer: &Offer,
        calls: Vec<ToolCall>,
    ) -> Result<Flow, RunError> {
        let flag = |call: &ToolCall, pick: fn(&crate::tool::ToolFlags) -> bool| {
            offer.find(&call.name).is_some_and(|t| pick(&t.flags()))
        };
        // Calls to run-last tools go after the others, each group in reply order.
        let mut calls = calls;
        calls.sort_by_key(|c| flag(c, |f| f.run_last));
        let silent: Vec<String> = calls
            .iter()
            .filter(|c| flag(c, |f| f.silent_reply_after))
            .map(|c| c.id.clone())
            .collect();
        let mut batch: Vec<(ToolCall, Arc<dyn Tool>)> = Vec::new();
        for call in calls {
            // The calls after one that parked are gated only once it is answered.
            if matches!(self.state.core.turn, TurnState::Parked { .. }) {
                return Ok(Flow::Stop(self.parked_outcome()));
            }
            if self.state.core.open_calls.contains_key(call.id.as_str()) {
                self.run_batch(&mut batch).await?;
                match self.state.core.parked.get(&call.id).cloned() {
                    Some(parked) if !parked.resuming => match parked.wake {
                        Some(wake) => self.resume(offer, &call, wake).await?,
                        // Another call of this reply parked too: wake it if its children are
                        // done, else wait on it.
                        None => {
                            if !self.wake_children(&call.id).await? {
                                return Ok(Flow::Stop(RunOutcome::Parked {
                                    call_id: call.id.clone(),
                                    question: parked.question.clone().unwrap_or_else(|| {
                                        format!(
                                            "waiting for {} child task(s)",
                                            parked.children.len()
                                        )
                                    }),
                                }));
                            }
                            if let Some(wake) = self.wake_of(&call.id) {
                                self.resume(offer, &call, wake).await?;
                            }
                        }
                    },
                    _ => self.recover(offer, &call).await?,
                }
                if matches!(self.state.core.turn, TurnState::Parked { .. }) {
                    return Ok(Flow::Stop(self.parked_outcome()));
                }
                continue;
            }
            // Records hooks stage while gating commit with the gate's phase.
            let (gated, staged) = {
                let view = self.view().with_tools(&offer.tools);
                let gated = self.gate(&view, offer, call.clone()).await;
                (gated, view.take_staged())
            };
            let (gated, staged) = match gated {
                Gate::Ask(asked, asks) => match self.state.core.answers.get(&call.id).copied() {
                    Some(true) => (Gate::Allow(asked), staged),
                    Some(false) => (Gate::Deny("the user declined this call".to_owned()), staged),
                    None => {
                        // Asking may take a person's time: everything so far is written first.
                        self.commit(staged).await?;
                        self.write_unwritten().await?;
                        let view = self.view().with_tools(&offer.tools);
                        let gated = match self.hooks().resolve_ask(&view, &asked, &asks).await {
                            Ok(Some(answer)) => match answer.refusal() {
                                None => Gate::Allow(asked),
                                Some(refusal) => Gate::Deny(refusal),
                            },
                            Ok(None) => Gate::Ask(asked, asks),
                            Err(reason) => Gate::Deny(reason),
                        };
                        (gated, view.take_staged())
                    }
                },
                other => (other, staged),
            };
            self.commit(staged).await?;
            match gated {
                Gate::Deny(reason) => {
                    self.run_batch(&mut batch).await?;
                    self.record_result(
                        &call,
                        ToolOutput::error(reason),
                        CallOutcome::Denied,
                        Vec::new(),
                        None,
                    )
                    .await?;
                }
                Gate::Ask(_, asks) => {
                    let question = asks.join("; ");
                    self.run_batch(&mut batch).await?;
                    let parked = CoreRecord::CallParked {
                        call_id: call.id.clone(),
                        question: question.clone(),
                    };
                    self.commit(vec![parked.to_record()]).await?;
                    return Ok(Flow::Stop(RunOutcome::Parked {
                        call_id: call.id,
                        question,
                    }));
                }
                Gate::Allow(allowed) => {
                    let Some(tool) = offer.find(&allowed.name).cloned() else {
                        continue;
                    };
                    if tool.flags().read_only {
                        batch.push((allowed, tool));
                        if batch.len() == MAX_PARALLEL_READS {
                            self.run_batch(&mut batch).await?;
                        }
                    } else {
                        self.run_batch(&mut batch).await?;
                        let mut single = vec![(allowed, tool)];
                        self.run_batch(&mut single).await?;
                    }
                }
            }
        }
        self.run_batch(&mut batch).await?;
        if matches!(self.state.core.turn, TurnState::Parked { .. }) {
            return Ok(Flow::Stop(self.parked_outcome()));
        }
        // A successful call of a silent-reply tool ends the turn: its result is the last word.
        let succeeded = |id: &String| {
            self.state
                .core
                .messages
                .iter()
                .rev()
                .take_while(|m| m.role != Role::Assistant)
                .any(|m| m.call_id.as_deref() == Some(id.as_str()) && !m.is_error)
        };
        if silent.iter().any(succeeded) {
            return self.end_turn_unless_refused("silent_reply_after").await;
        }
        Ok(Flow::Continue)
    }

    /// The outcome for a parked turn.
    pub(super) fn parked_outcome(&self) -> RunOutcome {
        match &self.state.core.turn {
            TurnState::Parked { call_id, question } => RunOutcome::Parked {
                call_id: call_id.clone(),
                question: question.clone(),
            },
            _ => RunOutcome::Idle,
        }
    }

    /// The call with the input it started with (after any rewrite), as its `call_started`
    /// record holds it.
    pub(super) fn as_started(&self, call: &ToolCall) -> ToolCall {
        let input = self
            .state
            .core
            .open_calls
            .get(call.id.as_str())
            .map_or_else(|| call.input.clone(), |open| Value::clone(&open.input));
        ToolCall {
            input,
            ..call.clone()
        }
    }

    /// Resumes a woken call, exactly once: the resume is recorded before it runs.
    pub(super) async fn resume(
        &mut self,
        offer: &Offer,
        call: &ToolCall,
        wake: Wake,
    ) -> Result<(), RunError> {
        let call = self.as_started(call);
        let Some(tool) = offer.find(&call.name).cloned() else {
            let output = ToolOutput::error(format!(
                "{}: the tool is no longer offered, so the parked call cannot resume",
                call.name
            ));
            return self
                .record_result(&call, output, CallOutcome::Error, Vec::new(), None)
                .await;
        };
        let started = CoreRecord::ResumeStarted {
            call_id: call.id.clone(),
        };
        self.commit(vec![started.to_record()]).await?;
        let ran = self.invoke(&call, &tool, Some(wake)).await;
        self.record_run(&call, &tool, ran).await
    }

    /// Commits the started-records of a batch, runs it, and records results in call order.
    pub(super) async fn run_batch(
        &mut self,
        batch: &mut Vec<(ToolCall, Arc<dyn Tool>)>,
    ) -> Result<(), RunError> {
        if batch.is_empty() {
            return Ok(());
        }
        let calls = std::mem::take(batch);
        let started = calls
            .iter()
            .map(|(call, _)| {
                CoreRecord::CallStarted {
                    call_id: call.id.as_str().into(),
                    tool: call.name.as_str().into(),
                    input: Arc::new(call.input.clone()),
                }
                .to_record()
            })
            .collect();
        self.commit(started).await?;
        let runs = calls
            .iter()
            .map(|(call, tool)| self.invoke(call, tool, None));
        let results = futures::future::join_all(runs).await;
        for ((call, tool), ran) in calls.iter().zip(results) {
            self.record_run(call, tool, ran).await?;
        }
        Ok(())
    }

    /// Runs one tool call (or resumes a parked one); a failure or panic becomes an error
    /// result and drops the call's staged records and children.
    pub(super) async fn invoke(
        &self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        wake: Option<Wake>,
    ) -> Ran {
        let ctx = self.tool_context(call);
        let running = async {
            match wake {
                Some(wake) => tool.resume(call.input.clone(), wake, &ctx).await,
                None => tool.run(call.input.clone(), &ctx).await,
            }
        };
        self.collect_run(call, &ctx, running).await
    }

    /// The context a tool runs with: state, spawner, model, inbox, lease keeper, exec env.
    pub(super) fn tool_context(&self, call: &ToolCall) -> ToolContext {
        let ctx = ToolContext::with_state(
            self.task.as_str(),
            call.id.as_str(),
            Arc::clone(&self.state),
            self.rt.progress.clone(),
        )
        .with_spawner(self.spawner(&call.id))
        .with_model(Arc::clone(self.rt.provider_for(&self.session.spec.name)))
        .with_content(Arc::clone(&self.rt.content))
        .with_inbox(self.rt.inbox.clone())
        .with_keeper(Arc::new(ClaimKeeper(Arc::clone(&self.lease))));
        match &self.exec {
            Some(exec) => ctx.with_exec(Arc::clone(exec)),
            None => ctx,
        }
    }

    /// What a tool's run came to: its output with what it staged and spawned, or an error
    /// result (a failure or panic drops its staged records and children).
    pub(super) async fn collect_run(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        running: impl std::future::Future<Output = Result<ToolOutput, ToolError>>,
    ) -> Ran {
        let failed = |output: ToolOutput| Ran {
            output,
            outcome: CallOutcome::Error,
            staged: Vec::new(),
            spawns: Vec::new(),
        };
        match crate::hooks::run_tool(&call.name, running).await {
            Ok(output) => {
                let outcome = if output.is_error {
                    CallOutcome::Error
                } else {
                    CallOutcome::Ok
                };
                Ran {
                    output,
                    outcome,
                    staged: ctx.take_staged(),
                    spawns: ctx.take_spawns(),
                }
            }
            Err(text) => failed(ToolOutput::error(text)),
        }
    }

    /// Records what a finished run produced: a result, or a park (with its children created).
    pub(super) async fn record_run(
        &mut self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        ran: Ran,
    ) -> Result<(), RunError> {
        let limit = tool.flags().max_result_chars;
        let Some(park) = ran.output.park.clone() else {
            if !ran.spawns.is_empty() && ran.spawns.iter().all(|s| s.background) {
                // Children it does not wait for: recorded with the result, created after it.
                let started = CoreRecord::BackgroundStarted {
                    call_id: call.id.clone(),
                    children: ran.spawns.clone(),
                };
                let mut staged = ran.staged;
                staged.push(started.to_record());
                self.record_result(call, ran.output, ran.outcome, staged, limit)
                    .await?;
                let depth = self.state.core.depth;
                for order in &ran.spawns {
                    create_child(self.rt, &self.task, depth, order).await?;
                }
                return Ok(());
            }
            if !ran.spawns.is_empty() {
                let output = ToolOutput::error(format!(
                    "{}: spawned {} child task(s) without waiting for them — a tool that spawns must return ToolOutput::wait_for_children()",
                    call.name,
                    ran.spawns.len()
                ));
                return self
                    .record_result(call, output, CallOutcome::Error, Vec::new(), limit)
                    .await;
            }
            let batch = self
                .result_records(call, ran.output, ran.outcome, ran.staged, limit)
                .await?;
            if tool.flags().retry_safe {
                // Lost in a crash, it runs again: its result goes with the next write (the
                // next reply's, a person asked, the turn's end), one durable write per step.
                return self.defer(batch).await;
            }
            return self.commit(batch).await;
        };
        let question = match park {
            Park::Ask { question } => Some(question),
            Park::Children if ran.spawns.is_empty() => {
                let output = ToolOutput::error(format!(
                    "{}: waits for children but spawned none",
                    call.name
                ));
                return self
                    .record_result(call, output, CallOutcome::Error, Vec::new(), limit)
                    .await;
            }
            Park::Children => None,
        };
        let parked = CoreRecord::ToolParked {
            call_id: call.id.clone(),
            question,
            children: ran.spawns.clone(),
        };
        let mut batch = ran.staged;
        batch.push(parked.to_record());
        self.commit(batch).await?;
        let depth = self.state.core.depth;
        for order in &ran.spawns {
            create_child(self.rt, &self.task, depth, order).await?;
        }
        Ok(())
    }

    /// A call a crash left open: rerun it if retry-safe, else ask `recover`, else answer "outcome unknown".
    pub(super) async fn recover(&mut self, offer: &Offer, call: &ToolCall) -> Result<(), RunError> {
        let call = self.as_started(call);
        let unknown = || {
            ToolOutput::error(format!(
                "{}: outcome unknown — the worker stopped while this call was running; check its effects before trying again",
                call.name
            ))
        };
        let Some(tool) = offer.find(&call.name).cloned() else {
            return self
                .record_result(&call, unknown(), CallOutcome::Unknown, Vec::new(), None)
                .await;
        };
        if tool.flags().retry_safe {
            // A retry-safe call runs again — a resumed one resumes again with the same wake.
            let ran = self.invoke(&call, &tool, self.wake_of(&call.id)).await;
            return self.record_run(&call, &tool, ran).await;
        }
        let ctx = self.tool_context(&call);
        match crate::hooks::recover_tool(&tool, &call.name, &ctx).await {
            Some(output) => {
                let outcome = if output.is_error {
                    CallOutcome::Error
                } else {
                    CallOutcome::Ok
                };
                // Settled like a run: what it staged or spawned, and a park, count.
                let ran = Ran {
                    output,
                    outcome,
                    staged: ctx.take_staged(),
                    spawns: ctx.take_spawns(),
                };
                self.record_run(&call, &tool, ran).await
            }
            None => {
                self.record_result(&call, unknown(), CallOutcome::Unknown, Vec::new(), None)
                    .await
            }
        }
    }

    /// after_tool, the overflow rule, then the result and the tool's records in one batch.
    pub(super) async fn record_result(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        outcome: CallOutcome,
        staged: Vec<Record>,
        limit: Option<usize>,
    ) -> Result<(), RunError> {
        let batch = self
            .result_records(call, output, outcome, staged, limit)
            .await?;
        self.commit(batch).await
    }

    /// A call's result (after every `after_tool`, bounded by the overflow rule) with the
    /// records staged while it ran, ready to append.
    pub(super) async fn result_records(
        &mut self,
        call: &ToolCall,
        output: ToolOutput,
        outcome: CallOutcome,
        staged: Vec<Record>,
        limit: Option<usize>,
    ) -> Result<Vec<Record>, RunError> {
        let mut output = output;
        let mut hook_records = Vec::new();
        if matches!(outcome, CallOutcome::Ok | CallOutcome::Error) {
            let view = self.view();
            output = self.hooks().after_tool(&view, call, output).await;
            hook_records = view.take_staged();
        }
        let outcome = match (outcome, output.is_error) {
            (CallOutcome::Ok, true) => CallOutcome::Error,
            (other, _) => other,
        };
        let limit = limit.unwrap_or(DEFAULT_MAX_RESULT_CHARS);
        let (text, full) = self.overflow(call, &output.text, limit).await?;
        let mut attachments = Vec::with_capacity(output.attachments.len());
        for attachment in &output.attachments {
            attachments.push(
                self.rt
                    .content
                    .put(&attachment.media_type, &attachment.data)
                    .await?,
            );
        }
        let finished = CoreRecord::CallFinished {
            call_id: call.id.as_str().into(),
            tool: call.name.clone(),
            text,
            outcome,
            full,
            attachments,
        };
        let mut batch = staged;
        batch.extend(hook_records);
        batch.push(finished.to_record());
        Ok(batch)
    }

    /// The one overflow rule: over the limit, the full body goes to the content store and a bounded preview stays inline.
    pub(super) async fn overflow(
        &self,
        call: &ToolCall,
        text: &str,
        limit: usize,
    ) -> Result<(crate::model::SharedText, Option<crate::store::ContentRef>), RunError> {
        let total = text.chars().count();
        if total <= limit {
            return Ok((text.into(), None));
        }
        let reference = self.rt.content.put("text/plain", text.as_bytes()).await?;
        let head: String = text.chars().take(limit).collect();
        let preview = format!(
            "{head}\n… [{} output truncated: {total} characters in all, {limit} shown; the full output is kept as sha256 {}]",
            call.name, reference.sha256
        );
        Ok((preview.into(), Some(reference)))
    }
}
