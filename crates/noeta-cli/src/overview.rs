//! How tasks stand, as `noeta tasks` lists them and the HTTP API serves them: each task's
//! status from the kernel's fold of its log, its goal and agent, and the worker holding it; and
//! a chat's `/status`.

use std::collections::BTreeMap;

use anyhow::Result;
use noeta::backends::Stores;
use noeta_core::fold::{TaskState, TurnState};
use noeta_core::model::Role;
use noeta_core::records::hydrate_all;
use noeta_core::store::{ContentStore, EventLog, TaskId, TaskInfo};
use serde_json::{Value, json};

use crate::agent::AgentHost;
use crate::stdio::eoutln;

/// What a task whose log is empty is: one whose run stopped before its goal was recorded.
pub(crate) const NEVER_STARTED: &str = "never started (stopped before its goal was recorded)";

/// How a task stands, from its folded state.
pub(crate) fn status(state: &TaskState) -> String {
    if state.seq == 0 {
        return NEVER_STARTED.to_owned();
    }
    if let Some(reason) = &state.core.task_failed {
        return format!("failed: {reason}");
    }
    match &state.core.turn {
        TurnState::Ended { .. } => "turn ended".to_owned(),
        TurnState::Parked { question, .. } => format!("waiting: {question}"),
        TurnState::Failed { reason } => format!("turn failed: {reason}"),
        TurnState::Running => "running (or interrupted)".to_owned(),
        _ => "idle".to_owned(),
    }
}

/// Folds a task with the kernel's fold alone: the conversation and the turn, which is what
/// listings show (extension records are not folded, their reducers are not loaded).
pub(crate) async fn core_state(
    log: &dyn EventLog,
    content: &dyn ContentStore,
    task: &TaskId,
) -> Result<TaskState> {
    let mut events = log.read(task, 0).await?;
    hydrate_all(&mut events, content).await?;
    Ok(noeta_core::fold::Folder::new(&[], "listing").fold(&events)?)
}

/// One task as listings show it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// What the store knows without its log.
    pub(crate) info: TaskInfo,
    /// `turn ended`, `waiting: …`, `failed: …`, or `unreadable: …` for a log that cannot be read.
    pub(crate) status: String,
    /// The first line of its first user message.
    pub(crate) goal: String,
    /// Its agent.
    pub(crate) agent: String,
    /// The worker whose live lease holds it.
    pub(crate) worker: Option<String>,
    /// The call it waits on, what is asked, and on what: `permission` (a person allows or
    /// denies the call), `question` (a person answers the tool's question) or `children`
    /// (child tasks).
    pub(crate) waiting: Option<(String, String, &'static str)>,
}

impl Row {
    /// The row as `tasks --json` and the HTTP API give it: a failed task's `status` is
    /// `failed`, with its `reason` beside it.
    pub(crate) fn json(&self) -> Value {
        let (status, reason) = match self.status.strip_prefix("failed: ") {
            Some(reason) => ("failed", Some(reason)),
            None => (self.status.as_str(), None),
        };
        json!({
            "id": self.info.id.as_str(),
            "parent": self.info.parent.as_ref().map(TaskId::as_str),
            "agent": self.agent,
            "events": self.info.head,
            "created_ms": self.info.created_ms,
            "status": status,
            "reason": reason,
            "worker": self.worker,
            "waiting": self.waiting.as_ref().map(|(call_id, question, on)| json!({
                "call_id": call_id,
                "question": question,
                "on": on,
            })),
            "goal": self.goal,
        })
    }
}

/// The row of one task of `infos`' store, `holders` saying who holds what.
async fn row(stores: &Stores, info: TaskInfo, holders: &BTreeMap<TaskId, String>) -> Row {
    let worker = holders.get(&info.id).cloned();
    // One task whose log cannot be read or folded does not hide the others.
    let state = match core_state(stores.log.as_ref(), stores.content.as_ref(), &info.id).await {
        Ok(state) => state,
        Err(err) => {
            return Row {
                info,
                status: format!("unreadable: {err:#}"),
                goal: String::new(),
                agent: String::new(),
                worker,
                waiting: None,
            };
        }
    };
    let goal = state
        .core
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.text.lines().next().unwrap_or("").to_owned())
        .unwrap_or_default();
    let waiting = match &state.core.turn {
        TurnState::Parked { call_id, question } if state.core.task_failed.is_none() => {
            let on = match state.core.parked.get(call_id) {
                None => "permission",
                Some(parked) if parked.question.is_some() => "question",
                Some(_) => "children",
            };
            Some((call_id.clone(), question.clone(), on))
        }
        _ => None,
    };
    Row {
        status: status(&state),
        goal,
        agent: state.core.agent.clone().unwrap_or_default(),
        info,
        worker,
        waiting,
    }
}

/// Who holds which task now (a store that cannot say lists none).
async fn holders(stores: &Stores) -> BTreeMap<TaskId, String> {
    stores
        .queue
        .holders()
        .await
        .map(|held| held.into_iter().collect())
        .unwrap_or_default()
}

/// Every task of the store, oldest first.
pub(crate) async fn rows(stores: &Stores) -> Result<Vec<Row>> {
    let mut list = stores.log.tasks().await?;
    list.sort_by_key(|t| (t.created_ms, t.id.as_str().to_owned()));
    let holders = holders(stores).await;
    let mut rows = Vec::with_capacity(list.len());
    for info in list {
        rows.push(row(stores, info, &holders).await);
    }
    Ok(rows)
}

/// One task of the store.
pub(crate) async fn one(stores: &Stores, task: &TaskId) -> Result<Row> {
    let info = stores.log.info(task).await?;
    Ok(row(stores, info, &holders(stores).await).await)
}

/// `/status` (and `/cost`) in a chat: the agent, the model, the permission mode in force (the
/// task's own switch, else the chat's `flagged` mode, else the settings'), the store, and the
/// task's calls, tokens and cost so far.
pub(crate) async fn chat_status(
    host: &AgentHost,
    task: Option<&TaskId>,
    flagged: Option<&str>,
) -> Result<()> {
    let provider = host.runtime.provider();
    eoutln!("agent {}", host.session.spec.name);
    eoutln!("model {} ({})", provider.model(), provider.name());
    eoutln!("store {}", host.stores.url);
    let Some(task) = task else {
        eoutln!("no task yet: your next message starts one");
        return Ok(());
    };
    let state = host.runtime.load(&host.session, task).await?;
    // The mode the task switched to (`/mode`, recorded by the `permissions` extension).
    let mode = state
        .ext_state("permissions")
        .and_then(|g| g.get("mode"))
        .and_then(serde_json::Value::as_str)
        .or(flagged)
        .map_or_else(|| "as the settings say".to_owned(), str::to_owned);
    let usage = &state.core.usage;
    let cost = usage.cost_micros.map_or_else(
        || "no price known for this model".to_owned(),
        |micros| format!("${:.4}", micros as f64 / 1_000_000.0),
    );
    eoutln!("permission mode {mode}");
    eoutln!(
        "task {task}: {} model call(s), {} tool call(s); tokens {} in, {} out ({} read from the \
         prompt cache, {} written to it); cost {cost}",
        state.core.model_calls,
        state.core.tool_calls,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens
    );
    Ok(())
}
