//! Model providers: the small backend interface the runner calls, and the scripted provider for offline runs.
//!
//! A scripted file replays model turns in order. The turn to play is the
//! number of assistant messages already in the conversation, so a resumed
//! task (a new process, a new provider value) picks up exactly where the
//! crashed one stopped.
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
//! A turn's `stop` defaults to `tool_use` when it has calls and `end_turn`
//! otherwise; call ids default to `call_<turn>_<index>`. An `error` turn
//! (`context_overflow`, `transient`, `fatal`) fails that model call instead.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::extension::{ModelReply, ModelRequest};
use crate::fold::Role;
use crate::records::{StopReason, ToolCall, Usage};

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

    /// One model call.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError>;
}

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
}

fn default_model() -> String {
    "scripted".to_owned()
}

fn default_window() -> u64 {
    200_000
}

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

/// Replays a script of model turns.
#[derive(Debug)]
pub struct ScriptedProvider {
    script: Script,
    /// The conversation last seen — its length, the hash of its last message, and the number
    /// of assistant messages in it — so a call on the same conversation counts only new messages.
    seen: Mutex<(usize, crate::canonical::Digest, usize)>,
}

impl ScriptedProvider {
    /// Parses a script; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, ScriptFileError> {
        let script: Script =
            serde_json::from_str(text).map_err(|source| ScriptFileError::Parse {
                path: origin.to_owned(),
                source,
            })?;
        Ok(Self {
            script,
            seen: Mutex::new((0, crate::canonical::Digest::default(), 0)),
        })
    }

    /// Reads a script file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptFileError::Read {
            path: shown.clone(),
            source,
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
        let index = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            let messages = &request.messages;
            let (len, last, count) = &*seen;
            // Another task's conversation, or an erased message, is counted afresh.
            let same = *len > 0 && messages.get(len - 1).is_some_and(|m| m.hash == *last);
            let (from, base) = if same { (*len, *count) } else { (0, 0) };
            let total = base
                + messages[from..]
                    .iter()
                    .filter(|m| m.role == Role::Assistant)
                    .count();
            let tail = messages.last().map(|m| m.hash).unwrap_or_default();
            *seen = (messages.len(), tail, total);
            total
        };
        let Some(turn) = self.script.turns.get(index) else {
            return Err(ProviderError::Fatal {
                message: format!(
                    "the model script has {} turn(s) and turn {} was asked for",
                    self.script.turns.len(),
                    index + 1
                ),
            });
        };
        match turn.error {
            Some(ScriptError::ContextOverflow) => {
                return Err(ProviderError::ContextOverflow {
                    message: format!("scripted overflow at turn {}", index + 1),
                });
            }
            Some(ScriptError::Transient) => {
                return Err(ProviderError::Transient {
                    message: format!("scripted transient error at turn {}", index + 1),
                    retry_after_ms: None,
                });
            }
            Some(ScriptError::Fatal) => {
                return Err(ProviderError::Fatal {
                    message: format!("scripted fatal error at turn {}", index + 1),
                });
            }
            None => {}
        }
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
        })
    }
}
