//! Property tests of the stream decoders: a response body of any bytes — arbitrary, or events
//! shaped like Anthropic's and OpenAI's with fields from their vocabulary, cut into chunks
//! anywhere — goes through the SSE parser and each decoder to a reply or an error; nothing
//! panics. Inputs that once broke a decoder are kept in `proptest-regressions/`.

use std::io::Cursor;

use futures::StreamExt;
use noeta_testkit::fuzz;
use proptest::prelude::*;
use serde_json::{Map, Value};
use sse_stream::SseStream;

use crate::http::{Decoder, Flow};

const EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "message",
    "",
];
const KEYS: &[&str] = &[
    "type",
    "index",
    "delta",
    "text",
    "thinking",
    "signature",
    "partial_json",
    "content_block",
    "usage",
    "input_tokens",
    "output_tokens",
    "stop_reason",
    "message",
    "id",
    "name",
    "input",
    "choices",
    "finish_reason",
    "tool_calls",
    "function",
    "arguments",
    "content",
    "error",
    "cache_read_input_tokens",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_content",
];
const WORDS: &[&str] = &[
    "text",
    "text_delta",
    "tool_use",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop",
    "length",
    "tool_calls",
    "{\"a\":",
    "\"}",
    "overloaded_error",
    "redacted_thinking",
    "server_tool_use",
    "",
];

/// A JSON value whose object keys and strings come from the vocabularies.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| Value::String(w.to_owned())),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        "[ -~]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..5).prop_map(|pairs| {
                let map: Map<String, Value> =
                    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                Value::Object(map)
            }),
        ]
    })
}

/// One SSE event: an `event:` line of the vocabulary (or none), then its data — JSON, the
/// `[DONE]` mark, or noise — or a comment.
fn event() -> impl Strategy<Value = String> {
    let data = prop_oneof![
        4 => json().prop_map(|v| v.to_string()),
        1 => Just("[DONE]".to_owned()),
        1 => "[ -~]{0,40}",
    ];
    prop_oneof![
        6 => (prop::sample::select(EVENTS), data).prop_map(|(kind, data)| if kind.is_empty() {
            format!("data: {data}\n\n")
        } else {
            format!("event: {kind}\ndata: {data}\n\n")
        }),
        1 => Just(": keep-alive\n\n".to_owned()),
        1 => "[ -~\n:]{0,40}",
    ]
}

/// A body cut into chunks at the given points.
fn chunked(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::new();
    let mut from = 0;
    for at in points.into_iter().chain([body.len()]) {
        chunks.push(body[from..at].to_vec());
        from = at;
    }
    chunks
}

/// Runs `chunks` through the SSE parser into `decoder`, as a response would.
fn decode<D: Decoder>(mut decoder: D, chunks: Vec<Vec<u8>>) {
    let stream = futures::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, std::io::Error>(Cursor::new(c))),
    );
    let mut events = SseStream::from_bytes_stream(stream);
    futures::executor::block_on(async {
        while let Some(next) = events.next().await {
            let Ok(event) = next else { return };
            match decoder.event(event) {
                Ok(Flow::More) => {}
                Ok(Flow::Done) => {
                    let _ = decoder.finish();
                    return;
                }
                Err(_) => return,
            }
        }
        let _ = decoder.end_of_body();
    });
}

fn both(body: &[u8], cuts: &[usize]) {
    decode(
        crate::anthropic::StreamDecoder::default(),
        chunked(body, cuts),
    );
    decode(crate::openai::StreamDecoder::default(), chunked(body, cuts));
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn a_body_of_any_bytes_is_decoded_or_refused(
        body in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        both(&body, &cuts);
    }

    #[test]
    fn a_body_of_provider_shaped_events_is_decoded_or_refused(
        events in prop::collection::vec(event(), 0..12),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        both(events.concat().as_bytes(), &cuts);
    }
}
