//! The Anthropic provider against the mock server: streaming, the request body, errors, retries,
//! deadlines and cancellation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use noeta_builtin_providers::{
    ANTHROPIC_DEFAULT_MODEL, AnthropicProvider, ProviderConfig, ProviderSetupError, model_limits,
};
use noeta_core::model::Role;
use noeta_core::model::{StopReason, Usage};
use noeta_core::provider::{Provider, ProviderError};
use serde_json::{Value, json};

use crate::support::{
    End, MockServer, Reply, assistant, config, env_of, message, request, tool_result,
};

fn start(usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "content": [], "model": "claude-test", "stop_reason": null, "usage": usage}})
}

fn block_start(index: u64, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u64, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u64) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop: &str, output_tokens: u64) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens}})
}

fn stop() -> Value {
    json!({"type": "message_stop"})
}

fn text_events(text: &str) -> Vec<Value> {
    vec![
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": text})),
        block_stop(0),
        message_delta("end_turn", 3),
        stop(),
    ]
}

fn provider(server: &MockServer) -> AnthropicProvider {
    AnthropicProvider::new(config(&server.base)).unwrap()
}

fn hello() -> noeta_core::model::ModelRequest {
    request(vec![message(Role::User, "Hello?")])
}

#[tokio::test]
async fn a_text_reply_reports_its_usage() {
    let server = MockServer::start(vec![Reply::events(&[
        start(json!({"input_tokens": 12, "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 50, "output_tokens": 1})),
        json!({"type": "ping"}),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hel"})),
        json!({"type": "ping"}),
        delta(0, json!({"type": "text_delta", "text": "lo."})),
        block_stop(0),
        message_delta("end_turn", 7),
        stop(),
    ])])
    .await;
    let provider = provider(&server);
    let reply = provider.complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Hello.");
    assert!(reply.calls.is_empty());
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 7,
            cache_read_tokens: 100,
            cache_write_tokens: 50,
            // The default model has no published price in the catalog.
            cost_micros: None,
        }
    );
    let sent = server.request(0);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("test-key"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["model"], json!(ANTHROPIC_DEFAULT_MODEL));
    assert_eq!(
        body["max_tokens"],
        json!(model_limits(ANTHROPIC_DEFAULT_MODEL).max_output_tokens)
    );
    assert!(body.get("thinking").is_none());
}

#[tokio::test]
async fn a_tool_call_streams_its_arguments_in_fragments() {
    let server = MockServer::start(vec![Reply::events(&[
        start(json!({"input_tokens": 20, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Reading it."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"file_"}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "path\": \"a."}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "txt\", \"limit\": 5}"}),
        ),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_2", "name": "Clock", "input": {}}),
        ),
        block_stop(2),
        message_delta("tool_use", 30),
        stop(),
    ])])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Reading it.");
    assert_eq!(reply.stop, Some(StopReason::ToolUse));
    assert_eq!(reply.calls.len(), 2);
    assert_eq!(reply.calls[0].id, "toolu_1");
    assert_eq!(reply.calls[0].name, "Read");
    assert_eq!(
        reply.calls[0].input,
        json!({"file_path": "a.txt", "limit": 5})
    );
    assert_eq!(reply.calls[1].name, "Clock");
    assert_eq!(reply.calls[1].input, json!({}));
    assert_eq!(reply.usage.output_tokens, 30);
}

#[tokio::test]
async fn stop_reasons_map_to_the_kernel_s() {
    for (wire, expected) in [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("refusal", StopReason::EndTurn),
    ] {
        let mut events = text_events("x");
        events[4] = message_delta(wire, 1);
        let server = MockServer::start(vec![Reply::events(&events)]).await;
        let reply = provider(&server).complete(&hello()).await.unwrap();
        assert_eq!(reply.stop, Some(expected), "{wire}");
    }
}

#[tokio::test]
async fn thinking_blocks_are_kept_and_sent_back_first() {
    let server = MockServer::start(vec![
        Reply::events(&[
            start(json!({"input_tokens": 9, "output_tokens": 1})),
            block_start(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": "Let me think"}),
            ),
            delta(
                0,
                json!({"type": "thinking_delta", "thinking": " it over."}),
            ),
            delta(
                0,
                json!({"type": "signature_delta", "signature": "c2lnbmF0dXJl"}),
            ),
            block_stop(0),
            block_start(
                1,
                json!({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}),
            ),
            block_stop(1),
            block_start(2, json!({"type": "text", "text": ""})),
            delta(2, json!({"type": "text_delta", "text": "Checking."})),
            block_stop(2),
            block_start(
                3,
                json!({"type": "tool_use", "id": "toolu_9", "name": "Glob", "input": {}}),
            ),
            delta(
                3,
                json!({"type": "input_json_delta", "partial_json": "{\"pattern\":\"*\"}"}),
            ),
            block_stop(3),
            message_delta("tool_use", 40),
            stop(),
        ]),
        Reply::events(&text_events("Done.")),
    ])
    .await;
    let provider = AnthropicProvider::new(ProviderConfig {
        thinking_budget: Some(2_048),
        max_output_tokens: Some(8_192),
        ..config(&server.base)
    })
    .unwrap();
    let first = provider.complete(&hello()).await.unwrap();
    let expected_reasoning = vec![
        json!({"type": "thinking", "thinking": "Let me think it over.", "signature": "c2lnbmF0dXJl"}),
        json!({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}),
    ];
    assert_eq!(first.reasoning, expected_reasoning);
    assert_eq!(first.text, "Checking.");
    assert_eq!(first.calls[0].input, json!({"pattern": "*"}));
    let body = server.request(0).json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], json!(8192));

    let mut turn = assistant(&first.text, &[("toolu_9", "Glob", json!({"pattern": "*"}))]);
    turn.reasoning = first.reasoning.clone();
    let second = request(vec![
        message(Role::User, "Hello?"),
        turn,
        tool_result("toolu_9", "a.txt", false),
    ]);
    provider.complete(&second).await.unwrap();
    let body = server.request(1).json();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            expected_reasoning[0],
            expected_reasoning[1],
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_9", "name": "Glob", "input": {"pattern": "*"}},
        ]})
    );
}

#[tokio::test]
async fn the_request_body_maps_every_part_of_the_request() {
    let server = MockServer::start(vec![Reply::events(&text_events("ok"))]).await;
    let provider = AnthropicProvider::new(ProviderConfig {
        model: Some("claude-sonnet-4-5".to_owned()),
        ..config(&server.base)
    })
    .unwrap();
    let read_schema = json!({"type": "object", "properties": {"file_path": {"type": "string"}}});
    let mut request = request(vec![
        message(Role::Context, "Project instructions."),
        message(Role::User, "Read a.txt and b.txt."),
        assistant(
            "Reading both.",
            &[
                ("toolu_a", "Read", json!({"file_path": "a.txt"})),
                ("toolu_b", "Read", json!({"file_path": "b.txt"})),
            ],
        ),
        tool_result("toolu_a", "alpha", false),
        message(Role::Context, "A file changed."),
        tool_result("toolu_b", "no such file", true),
        assistant("Only a.txt exists.", &[]),
        message(Role::User, "Thanks."),
    ]);
    request.system = "You are noeta.".to_owned();
    request.residents = vec!["Memory index.".to_owned(), "Skills list.".to_owned()];
    request.tools = Arc::new(vec![json!({
        "name": "Read", "description": "Reads a file.", "input_schema": read_schema,
    })]);
    request.entries = vec![json!({"type": "web_search_20250305", "name": "web_search"})];
    request.tail = vec!["Todo list is empty.".to_owned()];
    provider.complete(&request).await.unwrap();
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        server.request(0).json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "stream": true,
            "system": [
                {"type": "text", "text": "You are noeta.", "cache_control": ephemeral},
                {"type": "text", "text": "Memory index."},
                {"type": "text", "text": "Skills list."},
            ],
            "tools": [
                {"name": "Read", "description": "Reads a file.", "input_schema": read_schema},
                {"type": "web_search_20250305", "name": "web_search"},
            ],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>\nProject instructions.\n</system-reminder>"},
                    {"type": "text", "text": "Read a.txt and b.txt."},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {"file_path": "a.txt"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "Read", "input": {"file_path": "b.txt"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "alpha"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file", "is_error": true},
                    {"type": "text", "text": "<system-reminder>\nA file changed.\n</system-reminder>"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Only a.txt exists."},
                ]},
                {"role": "user", "content": [
                    {"type": "text", "text": "Thanks.", "cache_control": ephemeral},
                    {"type": "text", "text": "<system-reminder>\nTodo list is empty.\n</system-reminder>"},
                ]},
            ],
        })
    );
}

#[tokio::test]
async fn a_tail_after_an_assistant_message_gets_its_own_user_message() {
    let server = MockServer::start(vec![Reply::events(&text_events("ok"))]).await;
    let mut request = request(vec![
        message(Role::User, "Go on."),
        assistant("", &[("toolu_1", "Bash", json!({"command": "ls"}))]),
    ]);
    request.tail = vec!["Reminder.".to_owned()];
    provider(&server).complete(&request).await.unwrap();
    let body = server.request(0).json();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"},
             "cache_control": {"type": "ephemeral"}},
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nReminder.\n</system-reminder>"},
        ]})
    );
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_it_asks_for() {
    let server = MockServer::start(vec![
        Reply::status(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}),
        )
        .header("retry-after", "1"),
        Reply::events(&text_events("Made it.")),
    ])
    .await;
    let began = Instant::now();
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Made it.");
    assert_eq!(server.requests().len(), 2);
    assert!(
        began.elapsed() >= Duration::from_millis(900),
        "retried after {:?}, before the one second asked for",
        began.elapsed()
    );
}

#[tokio::test]
async fn overload_is_retried_up_to_the_limit_then_transient() {
    let server = MockServer::start(vec![Reply::status(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("529"), "{message}");
    assert!(message.contains("Overloaded"), "{message}");
    assert!(message.contains("gave up after 3 attempts"), "{message}");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_too_long_prompt_is_an_overflow_and_not_retried() {
    let server = MockServer::start(vec![Reply::status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"}}),
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::ContextOverflow { message } = error else {
        panic!("expected an overflow, got {error:?}");
    };
    assert!(message.contains("208310 tokens"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_401_is_fatal_with_the_provider_s_message() {
    let server = MockServer::start(vec![Reply::status(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = error else {
        panic!("expected a fatal error, got {error:?}");
    };
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert!(message.contains("401"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

fn error_event(kind: &str, text: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": text}})
}

#[tokio::test]
async fn mid_stream_error_events_are_classified() {
    let partial = |kind: &str, text: &str| {
        Reply::events(&[
            start(json!({"input_tokens": 5, "output_tokens": 1})),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "Half"})),
            error_event(kind, text),
        ])
    };
    let server = MockServer::start(vec![
        partial("overloaded_error", "Overloaded"),
        Reply::events(&text_events("Whole.")),
    ])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Whole.");
    assert_eq!(server.requests().len(), 2);

    let server = MockServer::start(vec![partial(
        "invalid_request_error",
        "prompt is too long: 1000 tokens > 999 maximum",
    )])
    .await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::ContextOverflow { .. }),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1);

    let server = MockServer::start(vec![partial("permission_error", "not allowed")]).await;
    let error = provider(&server).complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = error else {
        panic!("expected a fatal error, got {error:?}");
    };
    assert!(message.contains("not allowed"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn malformed_tool_arguments_are_transient_and_name_the_tool() {
    let server = MockServer::start(vec![Reply::events(&[
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}),
        ),
        delta(
            0,
            json!({"type": "input_json_delta", "partial_json": "{\"file_path\": \"a"}),
        ),
        block_stop(0),
        message_delta("tool_use", 3),
        stop(),
    ])])
    .await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 1,
        ..config(&server.base)
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("`Write`"), "{message}");
    assert!(message.contains("not valid JSON"), "{message}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_dropped_connection_or_a_cut_stream_is_retried() {
    let cut = Reply::events(&[
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
    ]);
    let server = MockServer::start(vec![
        cut.clone().ending(End::Drop),
        cut,
        Reply::events(&text_events("Third time.")),
    ])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Third time.");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_stalled_stream_times_out_as_transient() {
    let server = MockServer::start(vec![
        Reply::events(&[start(json!({"input_tokens": 5, "output_tokens": 1}))]).ending(End::Stall),
    ])
    .await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 0,
        idle_timeout: Duration::from_millis(200),
        ..config(&server.base)
    })
    .unwrap();
    let began = Instant::now();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(
        message.contains("the stream stalled (no byte for 0.2 s)"),
        "{message}"
    );
    assert!(began.elapsed() < Duration::from_secs(10));
    server
        .wait_until("the stalled connection to close", |s| s.hangups() == 1)
        .await;
}

#[tokio::test]
async fn a_stream_that_keeps_sending_bytes_is_alive_though_no_event_comes_for_a_while() {
    // Between the first event and the next, only keep-alive comments come, one every 100 ms,
    // for 0.8 s in all: longer than the idle limit without an event, never without a byte.
    let events: Vec<String> = text_events("Still here.")
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    let mut chunks = vec![events[0].clone()];
    chunks.extend(std::iter::repeat_n(": keep-alive\n\n".to_owned(), 8));
    chunks.extend(events[1..].iter().cloned());
    let server = MockServer::start(vec![
        Reply::stream(chunks).paced(Duration::from_millis(100)),
    ])
    .await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 0,
        idle_timeout: Duration::from_millis(350),
        ..config(&server.base)
    })
    .unwrap();
    let reply = provider.complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Still here.");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_as_transient() {
    let server = MockServer::start(vec![Reply::silent()]).await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 0,
        idle_timeout: Duration::from_millis(200),
        ..config(&server.base)
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("no response within"), "{message}");
}

#[tokio::test]
async fn dropping_the_future_aborts_the_request() {
    let server = MockServer::start(vec![
        Reply::events(&[start(json!({"input_tokens": 5, "output_tokens": 1}))]).ending(End::Stall),
    ])
    .await;
    let provider = Arc::new(
        AnthropicProvider::new(ProviderConfig {
            idle_timeout: Duration::from_secs(600),
            ..config(&server.base)
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
    assert_eq!(server.hangups(), 0);
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    server
        .wait_until("the client to hang up", |s| s.hangups() == 1)
        .await;
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_ends_early_is_transient() {
    let server = MockServer::start(vec![Reply::events(&text_events("x")[..5])]).await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 0,
        ..config(&server.base)
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(message.contains("ended before"), "{message}");
}

#[tokio::test]
async fn a_refused_connection_fails_at_once_and_is_not_retried() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 5,
        ..config(&format!("http://127.0.0.1:{port}"))
    })
    .unwrap();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Fatal { message } = error else {
        panic!("expected a fatal error, got {error:?}");
    };
    assert!(
        message
            .contains("(connection refused) — is the server running, and is the base URL right?")
            && !message.contains("gave up after"),
        "{message}"
    );
}

#[test]
fn keys_and_base_urls_come_from_the_config_then_the_environment() {
    let env = env_of(&[
        ("ANTHROPIC_API_KEY", "env-key"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
    ]);
    let provider = AnthropicProvider::from_env(ProviderConfig::default(), &env).unwrap();
    assert_eq!(provider.endpoint(), "http://127.0.0.1:9/v1/messages");
    assert_eq!(provider.model(), ANTHROPIC_DEFAULT_MODEL);
    let shown = format!("{provider:?}");
    assert!(!shown.contains("env-key"), "the key shows in {shown}");

    let provider = AnthropicProvider::from_env(
        ProviderConfig {
            base_url: Some("https://proxy.example/anthropic".to_owned()),
            ..ProviderConfig::default()
        },
        &env,
    )
    .unwrap();
    assert_eq!(
        provider.endpoint(),
        "https://proxy.example/anthropic/v1/messages"
    );

    let env = env_of(&[
        ("ANTHROPIC_API_KEY", "env-key"),
        ("ANTHROPIC_BASE_URL", " "),
    ]);
    let provider = AnthropicProvider::from_env(ProviderConfig::default(), &env).unwrap();
    assert_eq!(provider.endpoint(), "https://api.anthropic.com/v1/messages");
}

#[test]
fn a_missing_key_names_the_variable_to_set() {
    for env in [env_of(&[]), env_of(&[("ANTHROPIC_API_KEY", "  ")])] {
        let error = AnthropicProvider::from_env(ProviderConfig::default(), &env).unwrap_err();
        assert!(
            matches!(error, ProviderSetupError::MissingKey { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    }
    let error = AnthropicProvider::new(ProviderConfig::default()).unwrap_err();
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
}

#[test]
fn limits_come_from_the_catalog_unless_configured() {
    let key = || ProviderConfig {
        api_key: Some("k".to_owned()),
        ..ProviderConfig::default()
    };
    let provider = AnthropicProvider::new(key()).unwrap();
    assert_eq!(
        provider.context_window(),
        model_limits(ANTHROPIC_DEFAULT_MODEL).context_window
    );
    let provider = AnthropicProvider::new(ProviderConfig {
        model: Some("claude-opus-4-1-20250805".to_owned()),
        ..key()
    })
    .unwrap();
    assert_eq!(provider.context_window(), 200_000);
    assert_eq!(provider.max_output_tokens(), 32_000);
    let provider = AnthropicProvider::new(ProviderConfig {
        model: Some("claude-unknown".to_owned()),
        ..key()
    })
    .unwrap();
    assert_eq!(provider.context_window(), 128_000);
    assert_eq!(provider.max_output_tokens(), 16_384);
    let provider = AnthropicProvider::new(ProviderConfig {
        context_window: Some(50_000),
        max_output_tokens: Some(4_000),
        ..key()
    })
    .unwrap();
    assert_eq!(provider.context_window(), 50_000);
    assert_eq!(provider.max_output_tokens(), 4_000);
}

#[test]
fn a_thinking_budget_must_fit_under_max_tokens() {
    let error = AnthropicProvider::new(ProviderConfig {
        api_key: Some("k".to_owned()),
        max_output_tokens: Some(4_000),
        thinking_budget: Some(4_000),
        ..ProviderConfig::default()
    })
    .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("thinking_budget 4000"), "{text}");
    assert!(text.contains("max_tokens 4000"), "{text}");
}

#[test]
fn a_base_url_that_is_not_http_is_refused() {
    let error = AnthropicProvider::new(ProviderConfig {
        api_key: Some("k".to_owned()),
        base_url: Some("file:///tmp/socket".to_owned()),
        ..ProviderConfig::default()
    })
    .unwrap_err();
    assert!(error.to_string().contains("file:///tmp/socket"), "{error}");
}

#[tokio::test]
async fn streamed_text_reaches_the_sink_piece_by_piece_and_the_reply_is_whole() {
    let server = MockServer::start(vec![Reply::events(&[
        start(json!({"input_tokens": 3, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hel"})),
        delta(0, json!({"type": "text_delta", "text": "lo."})),
        block_stop(0),
        message_delta("end_turn", 2),
        stop(),
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
async fn a_priced_model_reports_what_each_call_cost() {
    let events = [
        start(
            json!({"input_tokens": 1000, "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 400, "output_tokens": 1}),
        ),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "ok"})),
        block_stop(0),
        message_delta("end_turn", 100),
        stop(),
    ];
    let server = MockServer::start(vec![Reply::events(&events), Reply::events(&events)]).await;
    let mut listed = config(&server.base);
    listed.model = Some("claude-sonnet-4-5".into());
    let reply = AnthropicProvider::new(listed)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();
    // 1,000 × 3 + 100 × 15 + 2,000 × 0.3 + 400 × 3.75 micro-dollars.
    assert_eq!(reply.usage.cost_micros, Some(6_600));
    let mut own = config(&server.base);
    own.model = Some("claude-private".into());
    own.price = Some(noeta_builtin_providers::Price {
        input: 1.0,
        output: 2.0,
        cache_read: 0.0,
        cache_write: 0.0,
    });
    let reply = AnthropicProvider::new(own)
        .unwrap()
        .complete(&hello())
        .await
        .unwrap();
    assert_eq!(reply.usage.cost_micros, Some(1_200));
}

#[tokio::test]
async fn an_image_in_a_tool_result_goes_as_a_base64_image_block() {
    let server = MockServer::start(vec![Reply::events(&text_events("a picture"))]).await;
    provider(&server)
        .complete(&crate::support::request_with_image())
        .await
        .unwrap();
    let body = server.request(0).json();
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["content"],
        json!([
            { "type": "text", "text": "Image file shot.png" },
            { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": "YWJjZA==" } }
        ])
    );
}

#[tokio::test]
async fn a_retried_stream_tells_the_sink_the_reply_starts_over() {
    let cut = Reply::events(&[
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hal"})),
    ]);
    let server = MockServer::start(vec![
        cut.ending(End::Drop),
        Reply::events(&text_events("Whole.")),
    ])
    .await;
    let pieces = std::sync::Mutex::new(Vec::new());
    let sink = |text: &str| pieces.lock().unwrap().push(text.to_owned());
    let reply = provider(&server)
        .complete_streaming(&hello(), &sink)
        .await
        .unwrap();
    assert_eq!(reply.text, "Whole.");
    assert_eq!(
        *pieces.lock().unwrap(),
        [
            "Hal",
            "\n[the reply was cut off; it starts over]\n",
            "Whole."
        ]
    );
}

#[tokio::test]
async fn a_call_cut_off_by_the_output_limit_is_dropped_not_retried() {
    let server = MockServer::start(vec![Reply::events(&[
        start(json!({"input_tokens": 5, "output_tokens": 1})),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Writing it."})),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "t1", "name": "Write", "input": {}}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"content\": \"abc"}),
        ),
        message_delta("max_tokens", 64),
        stop(),
    ])])
    .await;
    let reply = provider(&server).complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Writing it.");
    assert!(reply.calls.is_empty());
    assert_eq!(reply.stop, Some(StopReason::MaxTokens));
    assert_eq!(server.requests().len(), 1, "not retried");
}

fn overloaded(retry_after_ms: u64) -> Reply {
    Reply::status(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
    .header("retry-after-ms", &retry_after_ms.to_string())
}

#[tokio::test]
async fn each_retry_is_told_with_its_wait_its_cause_and_its_number() {
    let server = MockServer::start(vec![
        overloaded(20),
        overloaded(30),
        Reply::events(&text_events("Made it.")),
    ])
    .await;
    let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 4,
        notify: Some(noeta_builtin_providers::Notify::new(move |line| {
            sink.lock().unwrap().push(line.to_owned())
        })),
        ..config(&server.base)
    })
    .unwrap();
    let reply = provider.complete(&hello()).await.unwrap();
    assert_eq!(reply.text, "Made it.");
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("retrying in 0.0 s: anthropic: HTTP 529"),
        "{lines:?}"
    );
    assert!(lines[0].ends_with("(attempt 2 of 5)"), "{lines:?}");
    assert!(lines[0].contains("Overloaded"), "{lines:?}");
    assert!(lines[1].ends_with("(attempt 3 of 5)"), "{lines:?}");
}

#[tokio::test]
async fn retries_stop_at_their_time_limit_and_the_error_names_the_endpoint_and_attempts() {
    let server = MockServer::start(vec![overloaded(400)]).await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 20,
        max_retry_time: Duration::from_millis(1_000),
        ..config(&server.base)
    })
    .unwrap();
    let began = Instant::now();
    let error = provider.complete(&hello()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = error else {
        panic!("expected a transient error, got {error:?}");
    };
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "stopped by the time limit, not the count ({:?})",
        began.elapsed()
    );
    assert_eq!(server.requests().len(), 3, "{message}");
    assert!(message.contains("HTTP 529"), "{message}");
    assert!(
        message.contains(&format!(
            "— {}/v1/messages: gave up after 3 attempts in",
            server.base
        )),
        "{message}"
    );
    assert!(
        message.ends_with("another would end past the retries' limit of 1.0 s"),
        "{message}"
    );
}
