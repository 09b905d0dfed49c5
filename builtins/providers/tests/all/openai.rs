//! The OpenAI-compatible provider against the mock server: streaming, the request body, errors,
//! retries, deadlines and cancellation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use noeta_builtin_providers::{
    CONTEXT_PREAMBLE, OPENAI_DEFAULT_MODEL, OpenAiProvider, ProviderConfig, ProviderSetupError,
    model_limits,
};
use noeta_core::model::Role;
use noeta_core::model::{StopReason, Usage};
use noeta_core::provider::{Provider, ProviderError};
use serde_json::{Value, json};

use crate::support::{
    End, MockServer, Reply, assistant, config, env_of, message, request, tool_result,
};

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "test", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}})
}

fn text_chunks(text: &str) -> Vec<Value> {
    vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": text}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(10, 2, 0),
    ]
}

/// A provider for the mock server, which stands in for a local OpenAI-compatible server.
fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(config(&format!("{}/v1", server.base))).unwrap()
}

fn hello() -> noeta_core::model::ModelRequest {
    request(vec![message(Role::User, "Hello?")])
}

#[tokio::test]
async fn a_text_reply_reports_its_usage() {
    let server = MockServer::start(vec![Reply::chunks(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo."}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(100, 20, 60),
    ])])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Hello.");
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 40,
            output_tokens: 20,
            cache_read_tokens: 60,
            cache_write_tokens: 0,
            cost_micros: None,
        }
    );
    let sent = server.request(0);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer test-key"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["model"], json!(OPENAI_DEFAULT_MODEL));
    assert!(body.get("max_tokens").is_none());
    assert!(body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn tool_calls_stream_their_arguments_in_fragments() {
    let server = MockServer::start(vec![Reply::chunks(&[
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "Read", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"file_"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                "function": {"name": "Glob", "arguments": "{\"pattern\":"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "path\": \"a.txt\"}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": " \"*.rs\"}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 2, "id": "call_c", "type": "function",
                "function": {"name": "Clock", "arguments": ""}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(30, 12, 0),
    ])])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "");
    assert_eq!(reply.stop, Some(StopReason::ToolUse));
    let calls: Vec<(&str, &str, &Value)> = reply
        .calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), &c.input))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a", "Read", &json!({"file_path": "a.txt"})),
            ("call_b", "Glob", &json!({"pattern": "*.rs"})),
            ("call_c", "Clock", &json!({})),
        ]
    );
}

#[tokio::test]
async fn finish_reasons_map_to_the_kernel_s() {
    for (wire, expected) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("content_filter", StopReason::EndTurn),
    ] {
        let mut chunks = text_chunks("x");
        chunks[2] = chunk(json!({}), Some(wire));
        let server = MockServer::start(vec![Reply::chunks(&chunks)]).await;
        let reply = provider(&server).complete(&hello()).await.unwrap();
        assert_eq!(reply.stop, Some(expected), "{wire}");
    }
}

#[tokio::test]
async fn the_request_body_maps_every_part_of_the_request() {
    let server = MockServer::start(vec![Reply::chunks(&text_chunks("ok"))]).await;
    let provider = OpenAiProvider::new(ProviderConfig {
        model: Some("qwen3:8b".to_owned()),
        max_output_tokens: Some(2_048),
        ..config(&format!("{}/v1", server.base))
    })
    .unwrap();
    let read_schema = json!({"type": "object", "properties": {"file_path": {"type": "string"}}});
    let mut request = request(vec![
        message(Role::Context, "Project instructions."),
        message(Role::User, "Read a.txt and b.txt."),
        assistant(
            "Reading both.",
            &[
                ("call_a", "Read", json!({"file_path": "a.txt"})),
                ("call_b", "Read", json!({"file_path": "b.txt"})),
            ],
        ),
        tool_result("call_a", "alpha", false),
        message(Role::Context, "A file changed."),
        tool_result("call_b", "no such file", true),
        assistant("", &[("call_c", "Clock", json!({}))]),
        tool_result("call_c", "noon", false),
        assistant("Only a.txt exists.", &[]),
        message(Role::User, "Thanks."),
    ]);
    request.system = "You are noeta.".to_owned();
    request.residents = vec!["Memory index.".to_owned(), "Skills list.".to_owned()];
    request.tools = Arc::new(vec![
        json!({"name": "Read", "description": "Reads a file.", "input_schema": read_schema}),
        json!({"name": "Clock", "description": "", "input_schema": {"type": "object"}}),
    ]);
    request.entries = vec![json!({"type": "function", "function": {"name": "extra"}})];
    request.tail = vec!["Todo list is empty.".to_owned()];
    provider.complete(&request).await.unwrap();
    let context =
        |text: &str| json!({"role": "user", "content": format!("{CONTEXT_PREAMBLE}{text}")});
    assert_eq!(
        server.request(0).json(),
        json!({
            "model": "qwen3:8b",
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 2048,
            "tools": [
                {"type": "function", "function": {"name": "Read", "description": "Reads a file.",
                    "parameters": read_schema}},
                {"type": "function", "function": {"name": "Clock", "parameters": {"type": "object"}}},
                {"type": "function", "function": {"name": "extra"}},
            ],
            "messages": [
                {"role": "system", "content": "You are noeta.\n\nMemory index.\n\nSkills list."},
                context("Project instructions."),
                {"role": "user", "content": "Read a.txt and b.txt."},
                {"role": "assistant", "content": "Reading both.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "Read", "arguments": "{\"file_path\":\"a.txt\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "Read", "arguments": "{\"file_path\":\"b.txt\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "alpha"},
                {"role": "tool", "tool_call_id": "call_b", "content": "no such file"},
                context("A file changed."),
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_c", "type": "function",
                     "function": {"name": "Clock", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_c", "content": "noon"},
                {"role": "assistant", "content": "Only a.txt exists."},
                {"role": "user", "content": "Thanks."},
                context("Todo list is empty."),
            ],
        })
    );
}

#[test]
fn openai_itself_gets_max_completion_tokens_and_reasoning_off_with_tools() {
    let provider = OpenAiProvider::new(ProviderConfig {
        api_key: Some("k".to_owned()),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!(
        provider.endpoint(),
        "https://api.openai.com/v1/chat/completions"
    );
    let mut with_tools = hello();
    with_tools.tools = Arc::new(vec![
        json!({"name": "Read", "input_schema": {"type": "object"}}),
    ]);
    let body = provider.request_body(&with_tools);
    assert_eq!(
        body["max_completion_tokens"],
        json!(model_limits(OPENAI_DEFAULT_MODEL).max_output_tokens)
    );
    assert!(body.get("max_tokens").is_none());
    assert_eq!(body["reasoning_effort"], json!("none"));
    let body = provider.request_body(&hello());
    assert!(body.get("reasoning_effort").is_none());

    let provider = OpenAiProvider::new(ProviderConfig {
        api_key: Some("k".to_owned()),
        reasoning_effort: Some("high".to_owned()),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!(
        provider.request_body(&with_tools)["reasoning_effort"],
        json!("high")
    );

    let provider = OpenAiProvider::new(ProviderConfig {
        api_key: Some("k".to_owned()),
        model: Some("gpt-4o".to_owned()),
        ..ProviderConfig::default()
    })
    .unwrap();
    let body = provider.request_body(&with_tools);
    assert!(body.get("reasoning_effort").is_none());
    assert_eq!(body["max_completion_tokens"], json!(16_384));
    assert_eq!(provider.context_window(), 128_000);
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_it_asks_for() {
    let server = MockServer::start(vec![
        Reply::status(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
        .header("retry-after-ms", "300"),
        Reply::chunks(&text_chunks("Made it.")),
    ])
    .await;
    let began = Instant::now();
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Made it.");
    assert_eq!(server.requests().len(), 2);
    assert!(
        began.elapsed() >= Duration::from_millis(280),
        "retried after {:?}, before the 300 ms asked for",
        began.elapsed()
    );
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit_then_transient() {
    let server = MockServer::start(vec![Reply::status(
        500,
        json!({"error": {"message": "The server had an error", "type": "server_error"}}),
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("500"), "{message}");
    assert!(message.contains("The server had an error"), "{message}");
    assert!(message.contains("gave up after 3 attempts"), "{message}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn context_length_errors_are_overflows_and_not_retried() {
    for body in [
        json!({"error": {"message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        json!({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
            "type": "BadRequestError", "code": 400}),
    ] {
        let server = MockServer::start(vec![Reply::status(400, body)]).await;
        let error = provider(&server).complete(&hello()).await.unwrap_err();
        let ProviderError::ContextOverflow { message } = error else {
            panic!("expected an overflow, got {error:?}");
        };
        assert!(message.contains("maximum context length"), "{message}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_401_is_fatal_with_the_provider_s_message() {
    let server = MockServer::start(vec![Reply::status(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-xx.", "type": "invalid_request_error",
            "code": "invalid_api_key"}}),
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = error else {
        panic!("expected a fatal error, got {error:?}");
    };
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(message.contains("401"), "{message}");
    // Where the refused key came from, and what tries it.
    assert!(
        message.ends_with(
            "— the API key from the settings (`[plugins.providers] api_key`) was refused: check it (`noeta doctor --online` tries it)"
        ),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_key_from_the_environment_names_its_variable() {
    let server = MockServer::start(vec![Reply::status(
        403,
        json!({"error": {"message": "Forbidden.", "type": "permission_error"}}),
    )])
    .await;
    let env = env_of(&[
        ("OPENAI_API_KEY", "sk-env"),
        ("OPENAI_BASE_URL", &format!("{}/v1", server.base)),
    ]);
    let provider = OpenAiProvider::from_env(ProviderConfig::default(), &env).unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = error else {
        panic!("expected a fatal error, got {error:?}");
    };
    assert!(
        message.contains("the API key from `$OPENAI_API_KEY` was refused"),
        "{message}"
    );
}

#[tokio::test]
async fn a_mid_stream_error_is_retried_as_transient() {
    let broken = Reply::chunks(&[
        chunk(json!({"role": "assistant", "content": "Half"}), None),
        json!({"error": {"message": "The server is overloaded", "type": "server_error"}}),
    ]);
    let server = MockServer::start(vec![broken, Reply::chunks(&text_chunks("Whole."))]).await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Whole.");
    assert_eq!(server.requests().len(), 2);

    let overflow = Reply::chunks(&[json!({"error": {"message": "context length exceeded",
        "type": "invalid_request_error", "code": "context_length_exceeded"}})]);
    let server = MockServer::start(vec![overflow]).await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::ContextOverflow { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn malformed_tool_arguments_are_transient_and_name_the_tool() {
    let server = MockServer::start(vec![Reply::chunks(&[
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "Edit", "arguments": "{\"file_path\": "}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ])])
    .await;
    let provider = OpenAiProvider::new(ProviderConfig {
        max_retries: 0,
        ..config(&format!("{}/v1", server.base))
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("`Edit`"), "{message}");
    assert!(message.contains("not valid JSON"), "{message}");
}

#[tokio::test]
async fn a_stalled_stream_times_out_as_transient() {
    let server = MockServer::start(vec![
        Reply::stream(vec![format!(
            "data: {}\n\n",
            chunk(json!({"content": "Hm"}), None)
        )])
        .ending(End::Stall),
    ])
    .await;
    let provider = OpenAiProvider::new(ProviderConfig {
        max_retries: 0,
        idle_timeout: Duration::from_millis(200),
        ..config(&format!("{}/v1", server.base))
    })
    .unwrap();
    let began = Instant::now();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("stalled"), "{message}");
    assert!(began.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_stream_without_an_end_is_transient_unless_it_finished() {
    let unfinished = Reply::stream(vec![format!(
        "data: {}\n\n",
        chunk(json!({"content": "Hm"}), None)
    )]);
    let server = MockServer::start(vec![unfinished]).await;
    let provider = OpenAiProvider::new(ProviderConfig {
        max_retries: 0,
        ..config(&format!("{}/v1", server.base))
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Transient { .. }),
        "{error:?}"
    );

    let finished_without_done = Reply::stream(
        text_chunks("Fine.")
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect(),
    );
    let server = MockServer::start(vec![finished_without_done]).await;
    let reply = OpenAiProvider::new(config(&format!("{}/v1", server.base)))
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();
    assert_eq!(reply.text, "Fine.");
}

#[tokio::test]
async fn dropping_the_future_aborts_the_request() {
    let server = MockServer::start(vec![
        Reply::stream(vec![format!(
            "data: {}\n\n",
            chunk(json!({"content": "Hm"}), None)
        )])
        .ending(End::Stall),
    ])
    .await;
    let provider = Arc::new(
        OpenAiProvider::new(ProviderConfig {
            idle_timeout: Duration::from_secs(600),
            ..config(&format!("{}/v1", server.base))
        })
        .unwrap(),
    );
    let running = {
        let provider = provider.clone();
        tokio::spawn(async move { provider.complete(&hello()).await })
    };
    server
        .wait_until("the request to arrive", |s| s.requests().len() == 1)
        .await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    server
        .wait_until("the client to hang up", |s| s.hangups() == 1)
        .await;
}

#[tokio::test]
async fn a_local_server_needs_no_key() {
    let server = MockServer::start(vec![Reply::chunks(&text_chunks("Local."))]).await;
    let env = env_of(&[("OPENAI_BASE_URL", &format!("{}/v1/", server.base))]);
    let provider = OpenAiProvider::from_env(
        ProviderConfig {
            model: Some("llama3.2".to_owned()),
            ..ProviderConfig::default()
        },
        &env,
    )
    .unwrap();
    assert_eq!(
        provider.endpoint(),
        format!("{}/v1/chat/completions", server.base)
    );
    assert_eq!(provider.context_window(), 128_000);
    let reply = provider.complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Local.");
    assert_eq!(server.request(0).header("authorization"), None);
}

#[test]
fn keys_come_from_the_config_then_the_environment() {
    let env = env_of(&[("OPENAI_API_KEY", "env-key")]);
    let provider = OpenAiProvider::from_env(ProviderConfig::default(), &env).unwrap();
    assert_eq!(
        provider.endpoint(),
        "https://api.openai.com/v1/chat/completions"
    );
    assert_eq!(provider.model(), OPENAI_DEFAULT_MODEL);
    let provider = OpenAiProvider::from_env(
        ProviderConfig {
            base_url: Some("http://localhost:8000/v1".to_owned()),
            ..ProviderConfig::default()
        },
        &env,
    )
    .unwrap();
    assert_eq!(
        provider.endpoint(),
        "http://localhost:8000/v1/chat/completions"
    );
}

#[tokio::test]
async fn the_configured_key_wins_over_the_environment() {
    let server = MockServer::start(vec![Reply::chunks(&text_chunks("ok"))]).await;
    let env = env_of(&[("OPENAI_API_KEY", "env-key")]);
    let provider = OpenAiProvider::from_env(config(&format!("{}/v1", server.base)), &env).unwrap();
    provider.complete(&hello()).await.unwrap();
    assert_eq!(
        server.request(0).header("authorization"),
        Some("Bearer test-key")
    );
}

#[test]
fn openai_itself_needs_a_key_and_names_the_variable() {
    for env in [
        env_of(&[]),
        env_of(&[("OPENAI_BASE_URL", "https://api.openai.com/v1/")]),
    ] {
        let error = OpenAiProvider::from_env(ProviderConfig::default(), &env).unwrap_err();
        assert!(
            matches!(error, ProviderSetupError::MissingKey { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
    }
}

#[tokio::test]
async fn streamed_text_reaches_the_sink_piece_by_piece_and_the_reply_is_whole() {
    let server = MockServer::start(vec![Reply::chunks(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo."}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(10, 2, 0),
    ])])
    .await;
    let pieces = std::sync::Mutex::new(Vec::new());
    let sink = |text: &str| pieces.lock().unwrap().push(text.to_owned());
    let reply = provider(&server)
        .complete_streaming(&hello(), &sink)
        .await
        .unwrap();
    assert_eq!(reply.text, "Hello.");
    assert_eq!(*pieces.lock().unwrap(), ["Hel", "lo."]);
}

#[tokio::test]
async fn an_image_in_a_tool_result_follows_it_as_a_user_message() {
    let server = MockServer::start(vec![Reply::chunks(&text_chunks("a picture"))]).await;
    provider(&server)
        .complete(&crate::support::request_with_image())
        .await
        .unwrap();
    let body = server.request(0).json();
    let messages = body["messages"].as_array().unwrap();
    let tool = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(messages[tool]["content"], "Image file shot.png");
    let images = &messages[tool + 1];
    assert_eq!(images["role"], "user");
    assert_eq!(
        images["content"][1],
        json!({ "type": "image_url", "image_url": { "url": "data:image/png;base64,YWJjZA==" } })
    );
}

#[tokio::test]
async fn a_closed_port_fails_at_once_saying_what_to_check() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = OpenAiProvider::new(config(&format!("http://127.0.0.1:{port}/v1"))).unwrap();
    let started = Instant::now();
    let err = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.contains("nothing answers at http://127.0.0.1:")
            && message.contains("(connection refused) — is the server running"),
        "{message}"
    );
    // Not retried: retries are for overloads and resets.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
