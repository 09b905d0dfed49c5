//! Budgets (the `budget` extension): caps on what one task may spend.
//!
//! `[plugins.governance] budget` sets any of `max_iterations` (model calls),
//! `max_tokens` (input plus output tokens over all model calls), `max_cost_usd`
//! (what the model calls cost, from the prices their provider reports),
//! `max_tool_calls` (calls that started), `max_subtasks` (child tasks
//! spawned) and `max_depth` (how deep below the root a child may be). Every
//! count comes from the task's log — model calls and tokens from the kernel's
//! state, started calls and spawned children folded by this extension from the
//! kernel's `call_started` and `tool_parked` records — so a budget holds across
//! crashes, resumes and workers. A fork starts with a fresh budget.

use async_trait::async_trait;
use noeta_core::Verdict;
use noeta_core::extension::{Extension, HookResult, SpawnRequest, StepSignal, View};
use noeta_core::model::ModelRequest;
use noeta_core::model::Role;
use noeta_core::model::ToolCall;
use noeta_core::records::CORE;
use serde::Deserialize;
use serde_json::{Value, json};

/// The extension's name.
pub(crate) const BUDGET: &str = "budget";

/// The caps; an absent one is not enforced.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Budget {
    #[serde(default)]
    max_iterations: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_cost_usd: Option<f64>,
    #[serde(default)]
    max_tool_calls: Option<u64>,
    #[serde(default)]
    max_subtasks: Option<u64>,
    #[serde(default)]
    max_depth: Option<u32>,
}

impl Budget {
    /// Whether any cap is set (else the extension is not added).
    pub(crate) fn is_set(&self) -> bool {
        self.max_iterations.is_some()
            || self.max_tokens.is_some()
            || self.max_cost_usd.is_some()
            || self.max_tool_calls.is_some()
            || self.max_subtasks.is_some()
            || self.max_depth.is_some()
    }

    /// Refuses a cost cap that is not a positive number of dollars.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match self.max_cost_usd {
            Some(max) if !(max.is_finite() && max > 0.0) => Err(format!(
                "settings [plugins.governance] budget.max_cost_usd: expected a positive number of US dollars, got `{max}`"
            )),
            _ => Ok(()),
        }
    }

    fn counted(view: &View<'_>, key: &str) -> u64 {
        view.ext_state(BUDGET)
            .and_then(|s| s.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Calls of the current reply before `call` that were allowed and wait to start together.
    fn waiting_before(view: &View<'_>, call: &ToolCall) -> u64 {
        let messages = view.messages();
        let Some(reply) = messages.iter().rposition(|m| m.role == Role::Assistant) else {
            return 0;
        };
        let answered = |id: &str| {
            messages[reply..]
                .iter()
                .any(|m| m.role == Role::Tool && m.call_id.as_deref() == Some(id))
        };
        let open = &view.core().open_calls;
        messages[reply]
            .calls
            .iter()
            .take_while(|c| c.id != call.id)
            .filter(|c| !answered(&c.id) && !open.contains_key(c.id.as_str()))
            .count() as u64
    }
}

#[async_trait]
impl Extension for Budget {
    fn name(&self) -> &str {
        BUDGET
    }

    fn folds(&self) -> Vec<String> {
        vec![CORE.to_owned()]
    }

    async fn before_model(
        &self,
        view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        let core = view.core();
        if let Some(max) = self.max_iterations
            && core.model_calls >= max
        {
            return Err(StepSignal::TurnFailed {
                reason: format!(
                    "budget: the task has made {} model calls (max_iterations = {max})",
                    core.model_calls
                ),
            });
        }
        let tokens = core.usage.input_tokens + core.usage.output_tokens;
        if let Some(max) = self.max_tokens
            && tokens >= max
        {
            return Err(StepSignal::TurnFailed {
                reason: format!("budget: the task has used {tokens} tokens (max_tokens = {max})"),
            });
        }
        if let Some(max) = self.max_cost_usd {
            // A call without a price cannot be counted: the cap cannot be kept, so it is not
            // pretended to be.
            if core.unpriced_calls > 0 {
                return Err(StepSignal::TurnFailed {
                    reason: format!(
                        "budget: max_cost_usd = {max} is set, but {} model call(s) of this task came without a price (the model is not in the provider's price catalogue; set its price in the provider settings)",
                        core.unpriced_calls
                    ),
                });
            }
            let spent = core.usage.cost_micros.unwrap_or(0) as f64 / 1e6;
            if spent >= max {
                return Err(StepSignal::TurnFailed {
                    reason: format!("budget: the task has cost ${spent:.4} (max_cost_usd = {max})"),
                });
            }
        }
        Ok(request)
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        let Some(max) = self.max_tool_calls else {
            return Ok(None);
        };
        let used = Self::counted(view, "started") + Self::waiting_before(view, call);
        Ok((used >= max).then(|| Verdict::Deny {
            reason: format!(
                "budget: {used} tool calls already made in this task (max_tool_calls = {max}); finish with what you have"
            ),
        }))
    }

    fn before_spawn(&self, view: &View<'_>, spawn: &SpawnRequest) -> HookResult<Option<Verdict>> {
        if let Some(max) = self.max_depth
            && spawn.depth > max
        {
            return Ok(Some(Verdict::Deny {
                reason: format!(
                    "budget: a child of `{}` would run at depth {} (max_depth = {max})",
                    spawn.agent, spawn.depth
                ),
            }));
        }
        if let Some(max) = self.max_subtasks {
            let spawned = Self::counted(view, "children") + spawn.earlier_in_call as u64;
            if spawned >= max {
                return Ok(Some(Verdict::Deny {
                    reason: format!(
                        "budget: this task has spawned {spawned} child tasks (max_subtasks = {max})"
                    ),
                }));
            }
        }
        Ok(None)
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        // Only the kernel's records reach this extension (it records none of its own).
        let (key, add) = match kind {
            "call_started" => ("started", 1),
            "tool_parked" => (
                "children",
                data.get("children")
                    .and_then(Value::as_array)
                    .map_or(0, |c| c.len() as u64),
            ),
            _ => return Ok(()),
        };
        if add == 0 {
            return Ok(());
        }
        if !state.is_object() {
            *state = json!({});
        }
        if let Some(map) = state.as_object_mut() {
            let now = map.get(key).and_then(Value::as_u64).unwrap_or(0);
            map.insert(key.to_owned(), json!(now + add));
        }
        Ok(())
    }

    fn continue_state(&self, _state: &Value) -> Value {
        Value::Null
    }
}
