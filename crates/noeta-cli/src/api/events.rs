//! `GET /v1/tasks/{id}/events`: a task's events as JSON, or followed as Server-Sent Events
//! (each event's id its sequence number; reply text streaming from this process's workers in
//! between as `event: text`).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use noeta_core::store::TaskId;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::routes::{Fail, bad, internal};
use crate::live::{Follower, LiveText};

/// `?after=N` on the events route.
#[derive(Debug, Deserialize)]
pub(super) struct After {
    #[serde(default)]
    after: Option<u64>,
}

/// One event as the API gives it.
fn event_json(event: &noeta_core::store::Event) -> Value {
    let record = &event.record;
    json!({
        "seq": event.seq,
        "extension": record.extension,
        "kind": record.kind,
        "data": record.data,
        "message": record.message,
    })
}

/// How often a followed task's log is read again.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// A client following one task's events.
struct Following {
    api: Shared,
    task: TaskId,
    /// The last sequence number sent.
    after: u64,
    /// The reply text streaming in from this process's worker slots.
    follower: Option<Follower>,
    /// When the log is read again.
    next_read: tokio::time::Instant,
}

pub(super) async fn events(
    State(api): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<After>,
    headers: HeaderMap,
) -> Result<Response, Fail> {
    let task = api.task(&id).await?;
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| bad(format!("Last-Event-ID `{v}` is not a sequence number")))
        })
        .transpose()?;
    let after = resumed.or(query.after).unwrap_or(0);
    let wants_stream = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !wants_stream {
        let mut out = Vec::new();
        for event in api.tasks.follow(&task, after).await.map_err(internal)? {
            out.push(event_json(&event));
        }
        return Ok(Json(Value::Array(out)).into_response());
    }
    let follower = api.live.as_ref().map(LiveText::follow);
    let state = Following {
        api,
        task,
        after,
        follower,
        next_read: tokio::time::Instant::now(),
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if state.api.stopping() {
                return None;
            }
            let now = tokio::time::Instant::now();
            if now < state.next_read {
                // Until the log is read again, the reply text streaming in meanwhile.
                let text = match state.follower.as_mut() {
                    Some(follower) => tokio::select! {
                        () = tokio::time::sleep_until(state.next_read) => None,
                        text = follower.next(&state.task) => Some(text),
                    },
                    None => {
                        tokio::time::sleep_until(state.next_read).await;
                        None
                    }
                };
                match text {
                    Some(Some(text)) if !text.is_empty() => {
                        let piece = SseEvent::default()
                            .event("text")
                            .data(json!({ "text": text }).to_string());
                        return Some((vec![piece], state));
                    }
                    Some(None) => state.follower = None,
                    _ => {}
                }
                continue;
            }
            state.next_read = now + FOLLOW_EVERY;
            let batch = match state.api.tasks.follow(&state.task, state.after).await {
                Ok(batch) => batch,
                Err(err) => {
                    let failed = SseEvent::default()
                        .event("error")
                        .data(json!({ "error": err.to_string() }).to_string());
                    state.after = u64::MAX;
                    return Some((vec![failed], state));
                }
            };
            if batch.is_empty() {
                continue;
            }
            let mut last = state.after;
            let mut sent = Vec::with_capacity(batch.len());
            for event in batch {
                last = event.seq;
                let data = event_json(&event);
                sent.push(
                    SseEvent::default()
                        .id(last.to_string())
                        .data(data.to_string()),
                );
            }
            state.after = last;
            // What streamed before these events belongs to replies now recorded.
            if let Some(follower) = state.follower.as_mut() {
                follower.skip_waiting();
            }
            return Some((sent, state));
        }
    })
    .flat_map(|batch| futures::stream::iter(batch.into_iter().map(Ok::<_, Infallible>)));
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
