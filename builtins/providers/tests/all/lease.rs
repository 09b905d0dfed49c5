//! End to end through the runtime: a reply streaming for longer than the claim's lease, and
//! retries spanning longer than it, are recorded (the heartbeat keeps the lease), on both wire
//! formats, against a real HTTP server on the loopback interface.

use std::sync::Arc;
use std::time::Duration;

use noeta_builtin_providers::{AnthropicProvider, OpenAiProvider, ProviderConfig};
use noeta_core::provider::Provider;
use noeta_core::records::CoreRecord;
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::bare_session;
use noeta_core::store::{EventLog, MemoryContentStore, MemoryEventLog, SystemClock, TaskId};
use serde_json::{Value, json};

use crate::support::{MockServer, Reply, config};

/// The lease of these runs; each reply takes several of them.
const TTL_MS: u64 = 300;

/// The words of the slow reply, one chunk each.
const WORDS: [&str; 8] = [
    "Slow ", "and ", "steady ", "wins ", "the ", "race, ", "every ", "time.",
];

fn anthropic_events(words: &[&str]) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
            "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
    ];
    events.extend(words.iter().map(|w| {
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": w}})
    }));
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 8}}),
        json!({"type": "message_stop"}),
    ]);
    events
}

fn openai_chunks(words: &[&str]) -> Vec<Value> {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    chunks.extend(words.iter().map(|w| chunk(json!({ "content": w }), None)));
    chunks.push(chunk(json!({}), Some("stop")));
    chunks
}

/// Runs one task against `provider` with a short lease; the outcome and the recorded replies.
async fn run_with(provider: Arc<dyn Provider>) -> (RunOutcome, Vec<String>) {
    let log = Arc::new(MemoryEventLog::new(Arc::new(SystemClock)));
    let rt = Runtime::new(log.clone(), Arc::new(MemoryContentStore::new()), provider)
        .with_lease_ttl(TTL_MS);
    let session = bare_session("main", "You are patient.");
    let task = TaskId::new("slow").unwrap();
    rt.create(&session, &task, "Take your time.").await.unwrap();
    let outcome = rt.run(&session, &task).await.unwrap();
    let replies = log
        .read(&task, 0)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match CoreRecord::from_record(&e.record) {
            Some(Ok(CoreRecord::AssistantReply { text, .. })) => Some(text.to_string()),
            _ => None,
        })
        .collect();
    (outcome, replies)
}

fn pace() -> Duration {
    // Eight words and the frames around them: about five lease lengths in all.
    Duration::from_millis(TTL_MS / 2)
}

#[tokio::test]
async fn an_anthropic_reply_streaming_longer_than_the_lease_is_recorded() {
    let server =
        MockServer::start(vec![Reply::events(&anthropic_events(&WORDS)).paced(pace())]).await;
    let provider = AnthropicProvider::new(config(&server.base)).unwrap();
    let (outcome, replies) = run_with(Arc::new(provider)).await;
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(replies, [WORDS.concat()]);
}

#[tokio::test]
async fn an_openai_reply_streaming_longer_than_the_lease_is_recorded() {
    let server = MockServer::start(vec![Reply::chunks(&openai_chunks(&WORDS)).paced(pace())]).await;
    let provider = OpenAiProvider::new(config(&format!("{}/v1", server.base))).unwrap();
    let (outcome, replies) = run_with(Arc::new(provider)).await;
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(replies, [WORDS.concat()]);
}

#[tokio::test]
async fn retries_spanning_longer_than_the_lease_end_in_a_recorded_reply() {
    let overloaded = || {
        Reply::status(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
        .header("retry-after-ms", &(TTL_MS * 2 / 3).to_string())
    };
    let server = MockServer::start(vec![
        overloaded(),
        overloaded(),
        overloaded(),
        overloaded(),
        Reply::events(&anthropic_events(&["After ", "the ", "storm."])),
    ])
    .await;
    let provider = AnthropicProvider::new(ProviderConfig {
        max_retries: 5,
        ..config(&server.base)
    })
    .unwrap();
    let started = std::time::Instant::now();
    let (outcome, replies) = run_with(Arc::new(provider)).await;
    assert!(
        started.elapsed() > Duration::from_millis(2 * TTL_MS),
        "the retries took {:?}, more than the lease",
        started.elapsed()
    );
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    assert_eq!(replies, ["After the storm."]);
    assert_eq!(server.requests().len(), 5);
}
