//! Model providers: the small backend interface the runner calls, and the scripted provider for offline runs.
//!
//! A scripted file replays model turns in order. The turn to play is the
//! request's step (the replies the task has recorded), so a resumed task (a
//! new process, a new provider value) picks up exactly where the crashed one
//! stopped, and a compacted conversation plays on as if it were whole.
//!
//! The file is JSON:
//!
//! ```json
//! {
//!   "model": "scripted",
//!   "context_window": 200000,
//!   "turns": [
//!     { "text": "Reading it.", "calls": [{ "name": "Read", "input": { "file_path": "a.txt" } }],
//!       "usage": { "input_tokens": 12, "output_tokens": 7 } },
//!     { "error": "context_overflow" },
//!     { "text": "Done." }
//!   ]
//! }
//! ```
//!
//! A turn may carry `reasoning`, provider blocks kept with the reply (see
//! `ModelReply::reasoning`). A turn's `stop` defaults to `tool_use` when it has calls and `end_turn`
//! otherwise; call ids default to `call_<turn>_<index>` (turn counted from 1
//! over the whole list). An `error` turn (`context_overflow`, `transient`,
//! `fatal`) fails the next step's model call once (in this process) and is
//! then passed over, so a step the runner retries gets the answer after it.
//! A turn's `delay_ms` holds its answer (or error) back that long, as a slow
//! model would.
//!
//! Auxiliary requests (a compaction summary, a tool's side question) never
//! take a turn: they get the script's `auxiliary` answers in order (a list of
//! strings; running out is an error), or, when it has none, a fixed sentence
//! counting the messages they were sent.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::model::{ModelReply, ModelRequest, Purpose, StopReason, ToolCall, Usage};

/// Why a model call failed, deciding what the runner does next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// Try again later (rate limits, overload, connection trouble).
    #[error("transient provider error: {message}")]
    Transient {
        /// What happened.
        message: String,
        /// How long the provider asked to wait.
        retry_after_ms: Option<u64>,
    },
    /// The request is too long for the model's context window.
    #[error("the request exceeds the model's context window: {message}")]
    ContextOverflow {
        /// What the provider said.
        message: String,
    },
    /// Retrying will not help.
    #[error("provider error: {message}")]
    Fatal {
        /// What happened.
        message: String,
    },
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Aborted,
}

/// A model backend.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name (`anthropic`, `openai`, `scripted`).
    fn name(&self) -> &str;

    /// The model it calls.
    fn model(&self) -> &str;

    /// The model's context window, in tokens.
    fn context_window(&self) -> u64;

    /// The output tokens each request reserves (`max_tokens`), when the provider sets a limit:
    /// a request's input must leave that much of the window free.
    fn max_output_tokens(&self) -> Option<u64> {
        None
    }

    /// One model call.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError>;

    /// A cheap request that shows the provider's endpoint answers and accepts its credentials,
    /// without a model call (`noeta doctor --online`): what was asked and answered, or `None`
    /// for a provider with nothing to reach. One attempt, no retries.
    async fn probe(&self) -> Result<Option<String>, ProviderError> {
        Ok(None)
    }

    /// One model call whose reply text is also handed to `on_text` piece by piece as it
    /// arrives (for display only: the reply returned is what counts). A provider that does not
    /// stream hands the whole text over once.
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_text: &TextSink<'_>,
    ) -> Result<ModelReply, ProviderError> {
        let reply = self.complete(request).await?;
        if !reply.text.is_empty() {
            on_text(&reply.text);
        }
        Ok(reply)
    }
}

/// Receives a reply's text as it streams in.
pub type TextSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptTurn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    calls: Vec<ScriptCall>,
    #[serde(default)]
    stop: Option<StopReason>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<ScriptError>,
    #[serde(default)]
    reasoning: Vec<Value>,
    /// How long the answer (or error) takes to arrive.
    #[serde(default)]
    delay_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ScriptError {
    ContextOverflow,
    Transient,
    Fatal,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default = "default_model")]
    model: String,
    #[serde(default = "default_window")]
    context_window: u64,
    turns: Vec<ScriptTurn>,
    #[serde(default)]
    auxiliary: Vec<String>,
    /// Scripts of other agents' tasks (subagents), by agent name: a request from a task of a
    /// listed agent is answered from its script, by that task's step.
    #[serde(default)]
    agents: BTreeMap<String, AgentScript>,
}

/// One agent's script inside a script.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentScript {
    turns: Vec<ScriptTurn>,
    #[serde(default)]
    auxiliary: Vec<String>,
}

fn default_model() -> String {
    "scripted".to_owned()
}

fn default_window() -> u64 {
    200_000
}

/// The most bytes a model script file may hold.
pub const MAX_SCRIPT_BYTES: u64 = 16 * 1024 * 1024;

/// A script that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptFileError {
    /// The file could not be read.
    #[error("cannot read model script `{path}`: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid script.
    #[error("model script `{path}` is not valid: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parse error, naming the line and column.
        #[source]
        source: serde_json::Error,
    },
}

/// One step of a script: the errors to fail it with first, then the turn that answers it.
#[derive(Debug, Clone)]
struct ScriptStep {
    /// Positions in `turns` of the error turns before the answer.
    errors: Vec<usize>,
    /// Position in `turns` of the answer, if the script has one.
    answer: Option<usize>,
}

/// Replays a script of model turns.
#[derive(Debug)]
pub struct ScriptedProvider {
    script: Script,
    /// The providers of the agents the script lists, by agent name.
    agents: BTreeMap<String, ScriptedProvider>,
    steps: Vec<ScriptStep>,
    /// The step last asked for and how many of its errors this process has served.
    served: Mutex<(u64, usize)>,
    /// Auxiliary answers served so far.
    auxiliary: Mutex<usize>,
}

impl ScriptedProvider {
    /// Parses a script; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, ScriptFileError> {
        let mut script: Script =
            serde_json::from_str(text).map_err(|source| ScriptFileError::Parse {
                path: origin.to_owned(),
                source,
            })?;
        let agents = std::mem::take(&mut script.agents)
            .into_iter()
            .map(|(name, agent)| {
                let script = Script {
                    model: script.model.clone(),
                    context_window: script.context_window,
                    turns: agent.turns,
                    auxiliary: agent.auxiliary,
                    agents: BTreeMap::new(),
                };
                (name, Self::from_script(script))
            })
            .collect();
        Ok(Self {
            agents,
            ..Self::from_script(script)
        })
    }

    fn from_script(script: Script) -> Self {
        let mut steps = Vec::new();
        let mut errors = Vec::new();
        for (i, turn) in script.turns.iter().enumerate() {
            if turn.error.is_some() {
                errors.push(i);
            } else {
                steps.push(ScriptStep {
                    errors: std::mem::take(&mut errors),
                    answer: Some(i),
                });
            }
        }
        if !errors.is_empty() {
            steps.push(ScriptStep {
                errors,
                answer: None,
            });
        }
        Self {
            script,
            agents: BTreeMap::new(),
            steps,
            served: Mutex::new((u64::MAX, 0)),
            auxiliary: Mutex::new(0),
        }
    }

    /// Reads a script file: a regular file of at most [`MAX_SCRIPT_BYTES`] (a named pipe or a
    /// device is refused without being waited on).
    pub fn from_file(path: &Path) -> Result<Self, ScriptFileError> {
        let shown = path.display().to_string();
        let text = crate::files::read_text(path, MAX_SCRIPT_BYTES).map_err(|err| {
            ScriptFileError::Read {
                path: shown.clone(),
                source: err.into_io(),
            }
        })?;
        Self::from_json(&text, &shown)
    }

    /// The number of turns in the script.
    pub fn len(&self) -> usize {
        self.script.turns.len()
    }

    /// Whether the script has no turns.
    pub fn is_empty(&self) -> bool {
        self.script.turns.is_empty()
    }

    /// Waits as long as turn `index` says its answer takes; with `on_text`, its text streams
    /// word by word over that time, as a model's would.
    async fn take_time(&self, index: usize, on_text: Option<&TextSink<'_>>) {
        let turn = &self.script.turns[index];
        let pieces: Vec<&str> = match on_text {
            Some(_) => turn.text.split_inclusive(' ').collect(),
            None => Vec::new(),
        };
        let delay = std::time::Duration::from_millis(turn.delay_ms);
        let each = delay / u32::try_from(pieces.len().max(1)).unwrap_or(u32::MAX);
        if pieces.is_empty() && !delay.is_zero() {
            futures_timer::Delay::new(delay).await;
        }
        for piece in pieces {
            if !each.is_zero() {
                futures_timer::Delay::new(each).await;
            }
            if let Some(sink) = on_text {
                sink(piece);
            }
        }
    }

    /// The answer to `request`, its text handed to `on_text` as it "arrives".
    async fn answer(
        &self,
        request: &ModelRequest,
        on_text: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ProviderError> {
        if let Some(agent) = self.agents.get(&request.agent) {
            let reply = agent.complete(request).await?;
            if let Some(sink) = on_text.filter(|_| !reply.text.is_empty()) {
                sink(&reply.text);
            }
            return Ok(reply);
        }
        if let Purpose::Auxiliary { name } = &request.purpose {
            return self.auxiliary_reply(name, request);
        }
        let missing = || ProviderError::Fatal {
            message: format!(
                "the model script has {} step(s) and step {} was asked for",
                self.steps.len(),
                request.step + 1
            ),
        };
        let step = usize::try_from(request.step)
            .ok()
            .and_then(|i| self.steps.get(i))
            .ok_or_else(missing)?;
        let error = {
            let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
            if served.0 != request.step {
                *served = (request.step, 0);
            }
            let error = step.errors.get(served.1).copied();
            if error.is_some() {
                served.1 += 1;
            }
            error
        };
        if let Some(index) = error {
            self.take_time(index, None).await;
            return Err(match self.script.turns[index].error {
                Some(ScriptError::ContextOverflow) => ProviderError::ContextOverflow {
                    message: format!("scripted overflow at turn {}", index + 1),
                },
                Some(ScriptError::Transient) => ProviderError::Transient {
                    message: format!("scripted transient error at turn {}", index + 1),
                    retry_after_ms: None,
                },
                _ => ProviderError::Fatal {
                    message: format!("scripted fatal error at turn {}", index + 1),
                },
            });
        }
        let index = step.answer.ok_or_else(missing)?;
        self.take_time(index, on_text).await;
        let turn = &self.script.turns[index];
        let calls: Vec<ToolCall> = turn
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}_{}", index + 1, i + 1)),
                name: c.name.clone(),
                input: if c.input.is_null() {
                    Value::Object(serde_json::Map::new())
                } else {
                    c.input.clone()
                },
            })
            .collect();
        let stop = turn.stop.unwrap_or(if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
        Ok(ModelReply {
            text: turn.text.clone(),
            calls,
            stop: Some(stop),
            usage: turn.usage.unwrap_or_default(),
            reasoning: turn.reasoning.clone(),
        })
    }

    fn auxiliary_reply(
        &self,
        name: &str,
        request: &ModelRequest,
    ) -> Result<ModelReply, ProviderError> {
        let text = if self.script.auxiliary.is_empty() {
            let bytes: usize = request.messages.iter().map(|m| m.text.len()).sum();
            format!(
                "Scripted {name} answer over {} message(s) of {bytes} byte(s).",
                request.messages.len()
            )
        } else {
            let mut next = self
                .auxiliary
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(text) = self.script.auxiliary.get(*next) else {
                return Err(ProviderError::Fatal {
                    message: format!(
                        "the model script has {} auxiliary answer(s) and answer {} was asked for (by {name})",
                        self.script.auxiliary.len(),
                        *next + 1
                    ),
                });
            };
            *next += 1;
            text.clone()
        };
        Ok(ModelReply {
            text,
            calls: Vec::new(),
            stop: Some(StopReason::EndTurn),
            usage: Usage::default(),
            reasoning: Vec::new(),
        })
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.script.model
    }

    fn context_window(&self) -> u64 {
        self.script.context_window
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.answer(request, None).await
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_text: &TextSink<'_>,
    ) -> Result<ModelReply, ProviderError> {
        self.answer(request, Some(on_text)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn step(agent: &str, step: u64) -> ModelRequest {
        let mut request = ModelRequest::auxiliary("x", "system", Vec::new());
        request.purpose = Purpose::Step;
        request.agent = agent.to_owned();
        request.step = step;
        request
    }

    #[test]
    fn a_listed_agents_tasks_are_answered_from_its_own_script() {
        let provider = ScriptedProvider::from_json(
            r#"{
                "turns": [{ "text": "main one" }, { "text": "main two" }],
                "agents": { "explore": { "turns": [{ "text": "explore one" }], "auxiliary": ["explore aside"] } }
            }"#,
            "test",
        )
        .unwrap();
        let text = |request: ModelRequest| block_on(provider.complete(&request)).map(|r| r.text);
        assert_eq!(text(step("main", 1)).unwrap(), "main two");
        assert_eq!(text(step("explore", 0)).unwrap(), "explore one");
        // Unlisted agents use the top-level script.
        assert_eq!(text(step("plan", 0)).unwrap(), "main one");
        let mut aside = ModelRequest::auxiliary("compaction", "s", Vec::new());
        aside.agent = "explore".into();
        assert_eq!(text(aside).unwrap(), "explore aside");
        let err = text(step("explore", 1)).unwrap_err();
        assert!(
            err.to_string()
                .contains("the model script has 1 step(s) and step 2 was asked for"),
            "{err}"
        );
    }

    #[test]
    fn a_scripted_turn_streams_its_text_word_by_word_over_its_delay() {
        let provider = ScriptedProvider::from_json(
            r#"{ "turns": [{ "text": "one two three", "delay_ms": 30 }, { "text": "whole" }] }"#,
            "test",
        )
        .unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let sink = |piece: &str| seen.lock().unwrap().push(piece.to_owned());
        let reply = block_on(provider.complete_streaming(&step("main", 0), &sink)).unwrap();
        assert_eq!(reply.text, "one two three");
        let reply = block_on(provider.complete_streaming(&step("main", 1), &sink)).unwrap();
        assert_eq!(reply.text, "whole");
        assert_eq!(*seen.lock().unwrap(), ["one ", "two ", "three", "whole"]);
    }

    #[test]
    fn an_agent_script_with_an_unknown_key_is_refused() {
        let err = ScriptedProvider::from_json(
            r#"{ "turns": [], "agents": { "explore": { "turns": [], "model": "x" } } }"#,
            "script.json",
        )
        .unwrap_err();
        assert!(err.to_string().contains("script.json"), "{err}");
        assert!(err.to_string().contains("unknown field `model`"), "{err}");
    }
}
