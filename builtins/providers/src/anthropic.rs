//! The Anthropic Messages provider: the request body (with its two cache breakpoints) and the
//! streamed reply.

use std::collections::BTreeMap;

use async_trait::async_trait;
use noeta_core::model::{Message, Role};
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::model::{StopReason, ToolCall, Usage};
use noeta_core::provider::{Provider, ProviderError, TextSink};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};
use sse_stream::Sse;

use crate::catalog::{Price, model_limits, model_price};
use crate::config::{EnvLookup, ProviderConfig, base_url, present, setting};
use crate::http::{Decoder, Flow, Http, TextOut, is_overflow, transient};
use crate::open::ProviderSetupError;

/// The model used when none is configured.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-5-5";
/// The API base URL used when none is configured (without `/v1`, as the official SDKs take it).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The variable holding the API key.
pub const ANTHROPIC_API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The variable holding the base URL.
pub const ANTHROPIC_BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
/// The API version header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1_024;

/// Anthropic's Messages API, every request streamed.
///
/// `complete` retries transient failures itself (see `ProviderConfig::max_retries`). Dropping
/// the future it returns aborts the call: the connection is closed and nothing is retried.
#[derive(Debug)]
pub struct AnthropicProvider {
    http: Http,
    url: String,
    headers: HeaderMap,
    model: String,
    max_tokens: u32,
    context_window: u64,
    thinking_budget: Option<u32>,
    /// The model's price, when known.
    price: Option<Price>,
}

impl AnthropicProvider {
    /// A provider from the configuration alone: the key must be in it.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderSetupError> {
        Self::from_env(config, &|_| None)
    }

    /// A provider from the configuration, reading what it leaves unset from `env`:
    /// `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` (without `/v1`; default
    /// `https://api.anthropic.com`). Blank values count as unset.
    pub fn from_env(
        config: ProviderConfig,
        env: EnvLookup<'_>,
    ) -> Result<Self, ProviderSetupError> {
        // Where the key comes from, for a refused key's error to name.
        let key_from_config = config
            .api_key
            .as_deref()
            .is_some_and(|k| !k.trim().is_empty());
        let key_source = if key_from_config {
            "the settings (`[plugins.providers] api_key`)".to_owned()
        } else {
            format!("`${ANTHROPIC_API_KEY_VAR}`")
        };
        let key = setting(config.api_key.as_deref(), env, ANTHROPIC_API_KEY_VAR).ok_or(
            ProviderSetupError::MissingKey {
                provider: "anthropic",
                variable: ANTHROPIC_API_KEY_VAR,
            },
        )?;
        let base = setting(config.base_url.as_deref(), env, ANTHROPIC_BASE_URL_VAR)
            .unwrap_or_else(|| ANTHROPIC_DEFAULT_BASE_URL.to_owned());
        let base = base_url(&base)?;
        let model =
            present(config.model.as_deref()).unwrap_or_else(|| ANTHROPIC_DEFAULT_MODEL.to_owned());
        let limits = model_limits(&model);
        let max_tokens = config.max_output_tokens.unwrap_or(limits.max_output_tokens);
        if max_tokens == 0 {
            return Err(ProviderSetupError::Config {
                message: "max_output_tokens must be at least 1".to_owned(),
            });
        }
        if let Some(budget) = config.thinking_budget
            && (budget < MIN_THINKING_BUDGET || budget >= max_tokens)
        {
            return Err(ProviderSetupError::Config {
                message: format!(
                    "thinking_budget {budget} must be at least {MIN_THINKING_BUDGET} and below \
                     max_tokens {max_tokens} for model `{model}`"
                ),
            });
        }
        let mut headers = HeaderMap::new();
        let mut key = HeaderValue::from_str(&key).map_err(|_| ProviderSetupError::Config {
            message: format!(
                "the anthropic API key holds characters an HTTP header cannot carry (check \
                 {ANTHROPIC_API_KEY_VAR})"
            ),
        })?;
        key.set_sensitive(true);
        headers.insert("x-api-key", key);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Ok(Self {
            http: Http::new("anthropic", &config)?.with_key_source(Some(key_source)),
            url: format!("{base}/v1/messages"),
            headers,
            price: config.price.or_else(|| model_price(&model)),
            model,
            max_tokens,
            context_window: config.context_window.unwrap_or(limits.context_window),
            thinking_budget: config.thinking_budget,
        })
    }

    /// The `max_tokens` sent with every request.
    pub fn max_output_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.url
    }

    /// The JSON body this provider sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("max_tokens".into(), json!(self.max_tokens));
        body.insert("stream".into(), json!(true));
        let mut system = Vec::new();
        if !request.system.is_empty() {
            system.push(json!({
                "type": "text",
                "text": request.system,
                "cache_control": { "type": "ephemeral" },
            }));
        }
        for resident in request.residents.iter().filter(|r| !r.is_empty()) {
            system.push(json!({ "type": "text", "text": resident }));
        }
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        let tools: Vec<Value> = request
            .tools
            .iter()
            .chain(&request.entries)
            .cloned()
            .collect();
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(budget) = self.thinking_budget {
            body.insert(
                "thinking".into(),
                json!({ "type": "enabled", "budget_tokens": budget }),
            );
        }
        body.insert("messages".into(), Value::Array(messages(request)));
        Value::Object(body)
    }
}

impl AnthropicProvider {
    /// One streamed call, its text handed to `out` as it arrives.
    async fn send(
        &self,
        request: &ModelRequest,
        out: TextOut<'_>,
    ) -> Result<ModelReply, ProviderError> {
        self.http
            .call(
                self.name(),
                &self.url,
                &self.headers,
                &self.request_body(request),
                self.price,
                out,
                |out| StreamDecoder {
                    out,
                    ..StreamDecoder::default()
                },
            )
            .await
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn max_output_tokens(&self) -> Option<u64> {
        Some(u64::from(self.max_tokens))
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.send(request, TextOut::default()).await
    }

    /// Lists the models (`GET …/models`): the endpoint answers and takes the key, for free.
    async fn probe(&self) -> Result<Option<String>, ProviderError> {
        let base = self.url.strip_suffix("/messages").unwrap_or(&self.url);
        self.http
            .probe(&format!("{base}/models"), &self.headers)
            .await
            .map(Some)
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_text: &TextSink<'_>,
    ) -> Result<ModelReply, ProviderError> {
        let sent = std::sync::atomic::AtomicBool::new(false);
        self.send(request, TextOut(Some(on_text), Some(&sent)))
            .await
    }
}

/// A text block.
fn text_block(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// Text the runtime brought in, marked as such on the wire.
fn reminder_block(text: &str) -> Value {
    text_block(&format!("<system-reminder>\n{text}\n</system-reminder>"))
}

/// An assistant message's content: its reasoning blocks verbatim, its text, its calls.
fn assistant_content(message: &Message) -> Vec<Value> {
    let mut content: Vec<Value> = message.reasoning.clone();
    if !message.text.is_empty() {
        content.push(text_block(&message.text));
    }
    for call in message.calls.iter() {
        let input = if call.input.is_object() {
            call.input.clone()
        } else {
            json!({})
        };
        content.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": input,
        }));
    }
    content
}

fn tool_result_block(message: &Message, request: &ModelRequest) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert(
        "tool_use_id".into(),
        json!(message.call_id.as_deref().unwrap_or_default()),
    );
    if message.attachments.is_empty() {
        if !message.text.is_empty() {
            block.insert("content".into(), json!(message.text));
        }
    } else {
        // With images the content is a list of blocks: the text, then each image.
        let mut content = Vec::new();
        if !message.text.is_empty() {
            content.push(text_block(&message.text));
        }
        for reference in &message.attachments {
            content.push(match request.attachments.get(&reference.sha256) {
                Some(image) => json!({
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": image.media_type,
                        "data": crate::http::base64(&image.data),
                    }
                }),
                None => text_block(&format!("[image {} is not available]", reference.sha256)),
            });
        }
        block.insert("content".into(), Value::Array(content));
    }
    if message.is_error {
        block.insert("is_error".into(), json!(true));
    }
    Value::Object(block)
}

/// Whether a block may carry `cache_control` (thinking blocks may not).
fn cacheable(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("text" | "tool_use" | "tool_result" | "image" | "document")
    )
}

/// The wire messages: user-side blocks between two assistant messages merge into one user
/// message (tool results first), the latest content block carries the second cache breakpoint,
/// and the tail follows as reminders in the last user message.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut results = Vec::new();
    let mut others = Vec::new();
    let flush =
        |turns: &mut Vec<(&str, Vec<Value>)>, results: &mut Vec<Value>, others: &mut Vec<Value>| {
            if !results.is_empty() || !others.is_empty() {
                let content = results.drain(..).chain(others.drain(..)).collect();
                turns.push(("user", content));
            }
        };
    for message in request.messages.iter() {
        match message.role {
            Role::User if !message.text.is_empty() => others.push(text_block(&message.text)),
            Role::Context if !message.text.is_empty() => {
                others.push(reminder_block(&message.text));
            }
            Role::Tool => results.push(tool_result_block(message, request)),
            Role::Assistant => {
                let content = assistant_content(message);
                if !content.is_empty() {
                    flush(&mut turns, &mut results, &mut others);
                    turns.push(("assistant", content));
                }
            }
            Role::User | Role::Context => {}
        }
    }
    flush(&mut turns, &mut results, &mut others);
    if let Some(block) = turns
        .last_mut()
        .and_then(|(_, content)| content.iter_mut().rev().find(|b| cacheable(b)))
        && let Some(block) = block.as_object_mut()
    {
        block.insert("cache_control".into(), json!({ "type": "ephemeral" }));
    }
    let tail: Vec<Value> = request
        .tail
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| reminder_block(t))
        .collect();
    if !tail.is_empty() {
        match turns.last_mut() {
            Some(("user", content)) => content.extend(tail),
            _ => turns.push(("user", tail)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

/// One content block as it streams in.
#[derive(Debug)]
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        input: Option<Value>,
    },
    Thinking {
        block: Value,
        thinking: String,
        signature: String,
    },
    /// Any other block (`redacted_thinking`, server tool blocks): kept verbatim.
    Other {
        block: Value,
        json: String,
    },
}

/// The streamed reply, event by event.
#[derive(Debug, Default)]
pub(crate) struct StreamDecoder<'s> {
    /// Where the text goes as it arrives.
    out: TextOut<'s>,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop: Option<String>,
}

fn number(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl StreamDecoder<'_> {
    fn usage(&mut self, usage: &Value) {
        if let Some(n) = number(usage, "input_tokens") {
            self.usage.input_tokens = n;
        }
        if let Some(n) = number(usage, "output_tokens") {
            self.usage.output_tokens = n;
        }
        if let Some(n) = number(usage, "cache_read_input_tokens") {
            self.usage.cache_read_tokens = n;
        }
        if let Some(n) = number(usage, "cache_creation_input_tokens") {
            self.usage.cache_write_tokens = n;
        }
    }

    fn block_start(&mut self, index: u64, block: &Value) {
        let started = match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(text(block, "text")),
            Some("tool_use") => Block::Tool {
                id: text(block, "id"),
                name: text(block, "name"),
                json: String::new(),
                input: None,
            },
            Some("thinking") => Block::Thinking {
                block: block.clone(),
                thinking: text(block, "thinking"),
                signature: text(block, "signature"),
            },
            _ => Block::Other {
                block: block.clone(),
                json: String::new(),
            },
        };
        self.blocks.insert(index, started);
    }

    fn block_delta(&mut self, index: u64, delta: &Value) {
        let Some(block) = self.blocks.get_mut(&index) else {
            return;
        };
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match (block, delta.get("type").and_then(Value::as_str)) {
            (Block::Text(text), Some("text_delta")) => {
                self.out.send(piece("text"));
                text.push_str(piece("text"));
            }
            (Block::Tool { json, .. } | Block::Other { json, .. }, Some("input_json_delta")) => {
                json.push_str(piece("partial_json"));
            }
            (Block::Thinking { thinking, .. }, Some("thinking_delta")) => {
                thinking.push_str(piece("thinking"));
            }
            (Block::Thinking { signature, .. }, Some("signature_delta")) => {
                signature.push_str(piece("signature"));
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, index: u64) -> Result<(), ProviderError> {
        if let Some(Block::Tool {
            name, json, input, ..
        }) = self.blocks.get_mut(&index)
        {
            *input = Some(tool_input(name, json)?);
        }
        Ok(())
    }
}

/// A tool call's streamed arguments as JSON (nothing streamed means no arguments).
fn tool_input(name: &str, json: &str) -> Result<Value, ProviderError> {
    if json.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(json).map_err(|e| {
        transient(format!(
            "anthropic: the model's arguments for tool `{name}` are not valid JSON ({e})"
        ))
    })
}

/// The error an `error` event stands for.
fn stream_error(data: &Value) -> ProviderError {
    let error = data.get("error").unwrap_or(data);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    let detail = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no error message)");
    let message = format!("anthropic: stream error: {detail} ({kind})");
    match kind {
        "overloaded_error" | "api_error" | "rate_limit_error" => transient(message),
        "invalid_request_error" if is_overflow(detail, None) => {
            ProviderError::ContextOverflow { message }
        }
        _ => ProviderError::Fatal { message },
    }
}

impl Decoder for StreamDecoder<'_> {
    fn event(&mut self, event: Sse) -> Result<Flow, ProviderError> {
        let Some(data) = event.data.as_deref().filter(|d| !d.trim().is_empty()) else {
            return Ok(Flow::More);
        };
        let data: Value = serde_json::from_str(data)
            .map_err(|e| transient(format!("anthropic: a stream event is not valid JSON ({e})")))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        let index = number(&data, "index").unwrap_or_default();
        match kind {
            "message_start" => {
                if let Some(usage) = data.pointer("/message/usage") {
                    self.usage(usage);
                }
            }
            "content_block_start" => {
                self.block_start(index, data.get("content_block").unwrap_or(&Value::Null));
            }
            "content_block_delta" => {
                self.block_delta(index, data.get("delta").unwrap_or(&Value::Null));
            }
            "content_block_stop" => self.block_stop(index)?,
            "message_delta" => {
                if let Some(stop) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop.to_owned());
                }
                if let Some(usage) = data.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => return Err(stream_error(&data)),
            _ => {}
        }
        Ok(Flow::More)
    }

    fn end_of_body(self) -> Result<ModelReply, ProviderError> {
        Err(transient(
            "anthropic: the stream ended before the message was complete".to_owned(),
        ))
    }

    fn finish(self) -> Result<ModelReply, ProviderError> {
        // A reply the output limit cut off may end inside a call's arguments: the same request
        // would cut it again, so the partial call is dropped and the reply ends as `max_tokens`.
        let cut_off = matches!(
            self.stop.as_deref(),
            Some("max_tokens" | "model_context_window_exceeded")
        );
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        let mut reasoning = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => texts.push(text),
                Block::Tool {
                    id,
                    name,
                    json,
                    input,
                } => {
                    let input = match input {
                        Some(input) => input,
                        None => match tool_input(&name, &json) {
                            Ok(input) => input,
                            Err(_) if cut_off => continue,
                            Err(err) => return Err(err),
                        },
                    };
                    calls.push(ToolCall { id, name, input });
                }
                Block::Thinking {
                    mut block,
                    thinking,
                    signature,
                } => {
                    if let Some(fields) = block.as_object_mut() {
                        fields.insert("thinking".into(), json!(thinking));
                        if !signature.is_empty() {
                            fields.insert("signature".into(), json!(signature));
                        }
                    }
                    reasoning.push(block);
                }
                Block::Other { mut block, json } => {
                    if !json.trim().is_empty()
                        && let Ok(input) = serde_json::from_str::<Value>(&json)
                        && let Some(fields) = block.as_object_mut()
                    {
                        fields.insert("input".into(), input);
                    }
                    reasoning.push(block);
                }
            }
        }
        let stop = match self.stop.as_deref() {
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
            Some(_) => StopReason::EndTurn,
            None if calls.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolUse,
        };
        let text = texts
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        Ok(ModelReply {
            text,
            calls,
            stop: Some(stop),
            usage: self.usage,
            reasoning,
        })
    }
}
