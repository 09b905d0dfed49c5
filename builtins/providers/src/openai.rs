//! The OpenAI-compatible chat-completions provider (OpenAI, vLLM, Ollama, llama.cpp server):
//! the request body and the streamed reply.

use std::collections::BTreeMap;

use async_trait::async_trait;
use noeta_core::model::{Message, Role};
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::model::{StopReason, ToolCall, Usage};
use noeta_core::provider::{Provider, ProviderError, TextSink};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};
use sse_stream::Sse;

use crate::catalog::{Price, model_limits, model_price, tools_without_reasoning};
use crate::config::{EnvLookup, ProviderConfig, base_url, present, setting};
use crate::http::{Decoder, Flow, Http, TextOut, error_details, is_overflow, transient};
use crate::open::ProviderSetupError;

/// The model used when none is configured.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-6-sol";
/// The API base URL used when none is configured (with `/v1`, as the official SDKs take it).
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The variable holding the API key.
pub const OPENAI_API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The variable holding the base URL.
pub const OPENAI_BASE_URL_VAR: &str = "OPENAI_BASE_URL";

/// What stands before a context or tail text sent as a user message.
pub const CONTEXT_PREAMBLE: &str = "[Context from the runtime, not written by the user]\n\n";

/// An OpenAI-compatible chat-completions endpoint, every request streamed.
///
/// `complete` retries transient failures itself (see `ProviderConfig::max_retries`). Dropping
/// the future it returns aborts the call: the connection is closed and nothing is retried.
#[derive(Debug)]
pub struct OpenAiProvider {
    http: Http,
    url: String,
    headers: HeaderMap,
    model: String,
    /// The output limit and the field it goes in (`max_completion_tokens` for OpenAI itself,
    /// `max_tokens` for compatible servers), if one is sent.
    max_tokens: Option<(&'static str, u32)>,
    context_window: u64,
    reasoning_effort: Option<String>,
    /// The model's price, when known.
    price: Option<Price>,
}

impl OpenAiProvider {
    /// A provider from the configuration alone.
    pub fn new(config: ProviderConfig) -> Result<Self, ProviderSetupError> {
        Self::from_env(config, &|_| None)
    }

    /// A provider from the configuration, reading what it leaves unset from `env`:
    /// `OPENAI_API_KEY` and `OPENAI_BASE_URL` (with `/v1`; default `https://api.openai.com/v1`).
    /// Blank values count as unset. The key may be missing when the base URL is not OpenAI's
    /// (a local server).
    pub fn from_env(
        config: ProviderConfig,
        env: EnvLookup<'_>,
    ) -> Result<Self, ProviderSetupError> {
        let base = setting(config.base_url.as_deref(), env, OPENAI_BASE_URL_VAR)
            .unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.to_owned());
        let base = base_url(&base)?;
        let official = base == OPENAI_DEFAULT_BASE_URL;
        // Where the key comes from, for a refused key's error to name.
        let key_from_config = config
            .api_key
            .as_deref()
            .is_some_and(|k| !k.trim().is_empty());
        let key_source = if key_from_config {
            "the settings (`[plugins.providers] api_key`)".to_owned()
        } else {
            format!("`${OPENAI_API_KEY_VAR}`")
        };
        let key = setting(config.api_key.as_deref(), env, OPENAI_API_KEY_VAR);
        let key_source = key.as_ref().map(|_| key_source);
        if key.is_none() && official {
            return Err(ProviderSetupError::MissingKey {
                provider: "openai",
                variable: OPENAI_API_KEY_VAR,
            });
        }
        let model =
            present(config.model.as_deref()).unwrap_or_else(|| OPENAI_DEFAULT_MODEL.to_owned());
        let limits = model_limits(&model);
        let max_tokens = if official {
            Some((
                "max_completion_tokens",
                config.max_output_tokens.unwrap_or(limits.max_output_tokens),
            ))
        } else {
            config.max_output_tokens.map(|n| ("max_tokens", n))
        };
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ProviderSetupError::Config {
                    message: format!(
                        "the openai API key holds characters an HTTP header cannot carry (check \
                         {OPENAI_API_KEY_VAR})"
                    ),
                }
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Ok(Self {
            http: Http::new("openai", &config)?.with_key_source(key_source),
            url: format!("{base}/chat/completions"),
            headers,
            max_tokens,
            context_window: config.context_window.unwrap_or(limits.context_window),
            reasoning_effort: present(config.reasoning_effort.as_deref()),
            price: config.price.or_else(|| model_price(&model)),
            model,
        })
    }

    /// The output-token limit sent with every request, if any.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_tokens.map(|(_, n)| n)
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.url
    }

    /// The JSON body this provider sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
        if let Some((field, n)) = self.max_tokens {
            body.insert(field.into(), json!(n));
        }
        let mut tools: Vec<Value> = request.tools.iter().map(function_tool).collect();
        tools.extend(request.entries.iter().cloned());
        let effort = self.reasoning_effort.clone().or_else(|| {
            (!tools.is_empty() && tools_without_reasoning(&self.model)).then(|| "none".to_owned())
        });
        if let Some(effort) = effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert("messages".into(), Value::Array(messages(request)));
        Value::Object(body)
    }
}

impl OpenAiProvider {
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
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> u64 {
        self.context_window
    }

    fn max_output_tokens(&self) -> Option<u64> {
        self.max_tokens.map(|(_, n)| u64::from(n))
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.send(request, TextOut::default()).await
    }

    /// Lists the models (`GET …/models`): the endpoint answers and takes the key, for free.
    async fn probe(&self) -> Result<Option<String>, ProviderError> {
        let base = self
            .url
            .strip_suffix("/chat/completions")
            .unwrap_or(&self.url);
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

/// A tool schema (`{name, description, input_schema}`) as a chat-completions function.
fn function_tool(tool: &Value) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), tool.get("name").cloned().unwrap_or_default());
    if let Some(description) = tool
        .get("description")
        .filter(|d| d.as_str().is_some_and(|s| !s.is_empty()))
    {
        function.insert("description".into(), description.clone());
    }
    function.insert(
        "parameters".into(),
        tool.get("input_schema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object", "properties": {} })),
    );
    json!({ "type": "function", "function": function })
}

fn context_message(text: &str) -> Value {
    json!({ "role": "user", "content": format!("{CONTEXT_PREAMBLE}{text}") })
}

/// The wire messages: one system message, then the conversation. Tool messages follow the
/// assistant message that called them directly: user and context messages that came between
/// wait until after the results.
fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::new();
    let system: Vec<&str> = std::iter::once(request.system.as_str())
        .chain(request.residents.iter().map(String::as_str))
        .filter(|t| !t.is_empty())
        .collect();
    if !system.is_empty() {
        out.push(json!({ "role": "system", "content": system.join("\n\n") }));
    }
    let mut answering = false;
    let mut waiting = Vec::new();
    for message in request.messages.iter() {
        let user_side = match message.role {
            Role::User => json!({ "role": "user", "content": message.text }),
            Role::Context => context_message(&message.text),
            Role::Tool => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": message.call_id.as_deref().unwrap_or_default(),
                    "content": message.text,
                }));
                // Chat completions take images in user messages only: they follow the results.
                if !message.attachments.is_empty() {
                    waiting.push(images_message(message, request));
                }
                continue;
            }
            Role::Assistant => {
                out.append(&mut waiting);
                let calls: Vec<Value> = message
                    .calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.input.to_string() },
                        })
                    })
                    .collect();
                answering = !calls.is_empty();
                if calls.is_empty() {
                    if !message.text.is_empty() {
                        out.push(json!({ "role": "assistant", "content": message.text }));
                    }
                } else {
                    let content = if message.text.is_empty() {
                        Value::Null
                    } else {
                        json!(message.text)
                    };
                    out.push(
                        json!({ "role": "assistant", "content": content, "tool_calls": calls }),
                    );
                }
                continue;
            }
        };
        if answering {
            waiting.push(user_side);
        } else {
            out.push(user_side);
        }
    }
    out.append(&mut waiting);
    out.extend(
        request
            .tail
            .iter()
            .filter(|t| !t.is_empty())
            .map(|t| context_message(t)),
    );
    out
}

/// A user message with the images of a tool result, after a line saying whose they are.
fn images_message(message: &Message, request: &ModelRequest) -> Value {
    let call = message.call_id.as_deref().unwrap_or_default();
    let mut content = vec![json!({
        "type": "text",
        "text": format!("{CONTEXT_PREAMBLE}The images of the result of tool call {call}:"),
    })];
    for reference in &message.attachments {
        content.push(match request.attachments.get(&reference.sha256) {
            Some(image) => json!({
                "type": "image_url",
                "image_url": {
                    "url": format!("data:{};base64,{}", image.media_type, crate::http::base64(&image.data)),
                }
            }),
            None => json!({
                "type": "text",
                "text": format!("[image {} is not available]", reference.sha256),
            }),
        });
    }
    json!({ "role": "user", "content": content })
}

/// One tool call as its fragments arrive.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The streamed reply, chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct StreamDecoder<'s> {
    /// Where the text goes as it arrives.
    out: TextOut<'s>,
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<String>,
    usage: Usage,
}

/// The error a chunk carrying `error` stands for.
fn stream_error(data: &Value) -> ProviderError {
    let (detail, code) = error_details(&data.to_string());
    let message = match &code {
        Some(code) => format!("openai: stream error: {detail} ({code})"),
        None => format!("openai: stream error: {detail}"),
    };
    if is_overflow(&detail, code.as_deref()) {
        ProviderError::ContextOverflow { message }
    } else if code
        .as_deref()
        .is_some_and(|c| c.contains("invalid_request"))
    {
        ProviderError::Fatal { message }
    } else {
        transient(message)
    }
}

impl StreamDecoder<'_> {
    fn delta(&mut self, delta: &Value) {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.out.send(text);
            self.text.push_str(text);
        }
        let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) else {
            return;
        };
        for (position, fragment) in fragments.iter().enumerate() {
            let index = fragment
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let call = self.calls.entry(index).or_default();
            let field = |value: Option<&Value>| {
                value
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            if call.id.is_empty()
                && let Some(id) = field(fragment.get("id"))
            {
                call.id = id;
            }
            let function = fragment.get("function");
            if call.name.is_empty()
                && let Some(name) = field(function.and_then(|f| f.get("name")))
            {
                call.name = name;
            }
            if let Some(arguments) = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
            {
                call.arguments.push_str(arguments);
            }
        }
    }

    fn usage(&mut self, usage: &Value) {
        let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
        let prompt = number("/prompt_tokens").unwrap_or_default();
        let cached = number("/prompt_tokens_details/cached_tokens").unwrap_or_default();
        self.usage = Usage {
            input_tokens: prompt.saturating_sub(cached),
            output_tokens: number("/completion_tokens").unwrap_or_default(),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
            cost_micros: None,
        };
    }
}

impl Decoder for StreamDecoder<'_> {
    fn event(&mut self, event: Sse) -> Result<Flow, ProviderError> {
        let Some(data) = event
            .data
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
        else {
            return Ok(Flow::More);
        };
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| transient(format!("openai: a stream chunk is not valid JSON ({e})")))?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(stream_error(&chunk));
        }
        if let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
        {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_owned());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage(usage);
        }
        Ok(Flow::More)
    }

    fn end_of_body(self) -> Result<ModelReply, ProviderError> {
        if self.finish.is_some() {
            self.finish()
        } else {
            Err(transient(
                "openai: the stream ended before the reply was complete".to_owned(),
            ))
        }
    }

    fn finish(self) -> Result<ModelReply, ProviderError> {
        // Cut off by the output limit inside a call's arguments: the same request would cut it
        // again, so the partial call is dropped and the reply ends as `length`.
        let cut_off = self.finish.as_deref() == Some("length");
        let mut calls = Vec::new();
        for (index, call) in self.calls {
            let input = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str(&call.arguments) {
                    Ok(input) => input,
                    Err(_) if cut_off => continue,
                    Err(e) => {
                        return Err(transient(format!(
                            "openai: the model's arguments for tool `{}` are not valid JSON ({e})",
                            call.name
                        )));
                    }
                }
            };
            let id = if call.id.is_empty() {
                format!("call_{}", index + 1)
            } else {
                call.id
            };
            calls.push(ToolCall {
                id,
                name: call.name,
                input,
            });
        }
        let stop = match self.finish.as_deref() {
            Some("length") => StopReason::MaxTokens,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            _ if !calls.is_empty() => StopReason::ToolUse,
            _ => StopReason::EndTurn,
        };
        Ok(ModelReply {
            text: self.text,
            calls,
            stop: Some(stop),
            usage: self.usage,
            reasoning: Vec::new(),
        })
    }
}
