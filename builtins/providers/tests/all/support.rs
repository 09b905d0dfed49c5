//! Test support: a scripted HTTP/1.1 server on the loopback interface, and request builders.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use noeta_builtin_providers::ProviderConfig;
use noeta_core::model::ToolCall;
use noeta_core::model::{Message, Role};
use noeta_core::model::{ModelRequest, Purpose};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How a scripted response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The whole body, then the connection closes.
    Complete,
    /// The body so far, then the connection drops without ending the chunked body.
    Drop,
    /// The body so far, then nothing more until the client hangs up.
    Stall,
    /// Not even the status line: nothing until the client hangs up.
    Silent,
}

/// One scripted response.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    chunks: Vec<String>,
    end: End,
    /// The pause after each chunk.
    pace: Duration,
}

impl Reply {
    /// A 200 event stream of Anthropic-style events (`event:` and `data:` lines).
    pub(crate) fn events(events: &[Value]) -> Self {
        let chunks = events
            .iter()
            .map(|event| {
                let kind = event["type"].as_str().unwrap_or("message");
                format!("event: {kind}\ndata: {event}\n\n")
            })
            .collect();
        Self::stream(chunks)
    }

    /// A 200 event stream of OpenAI-style chunks (`data:` lines), ended by `[DONE]`.
    pub(crate) fn chunks(chunks: &[Value]) -> Self {
        let mut lines: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        lines.push("data: [DONE]\n\n".to_owned());
        Self::stream(lines)
    }

    /// A 200 event stream of raw text pieces.
    pub(crate) fn stream(chunks: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            end: End::Complete,
            pace: Duration::from_millis(2),
        }
    }

    /// A non-streamed answer with a JSON body.
    pub(crate) fn status(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.to_string()],
            end: End::Complete,
            pace: Duration::from_millis(2),
        }
    }

    /// Nothing at all until the client hangs up.
    pub(crate) fn silent() -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            chunks: Vec::new(),
            end: End::Silent,
            pace: Duration::from_millis(2),
        }
    }

    /// With one more header.
    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Pausing `pace` after each chunk (a slow model).
    pub(crate) fn paced(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// Ending as `end` says.
    pub(crate) fn ending(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: String,
}

impl From<noeta_testkit::http::Request> for Recorded {
    fn from(request: noeta_testkit::http::Request) -> Self {
        Self {
            method: request.method,
            path: request.path,
            headers: request.headers,
            body: request.body,
        }
    }
}

impl Recorded {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Reply>>,
    last: Mutex<Option<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    hangups: AtomicUsize,
    changed: Notify,
}

/// A server answering each connection's one request with the next scripted reply (the last
/// one again once the script runs out).
pub(crate) struct MockServer {
    pub(crate) base: String,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        state.replies.lock().unwrap().extend(replies);
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, shared.clone()));
            }
        });
        Self { base, state, task }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub(crate) fn request(&self, index: usize) -> Recorded {
        self.requests()[index].clone()
    }

    pub(crate) fn hangups(&self) -> usize {
        self.state.hangups.load(Ordering::SeqCst)
    }

    /// Waits (10 s at most) until `check` holds.
    pub(crate) async fn wait_until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let wait = async {
            loop {
                let changed = self.state.changed.notified();
                if check(self) {
                    return;
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), changed).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }
}

/// Reads until the peer closes the connection.
async fn await_hangup(socket: &mut TcpStream, state: &State) {
    let mut sink = [0u8; 1024];
    while let Ok(n) = socket.read(&mut sink).await {
        if n == 0 {
            break;
        }
    }
    state.hangups.fetch_add(1, Ordering::SeqCst);
    state.changed.notify_waiters();
}

async fn serve(mut socket: TcpStream, state: Arc<State>) {
    let Some(request) = noeta_testkit::http::read_request(&mut socket)
        .await
        .map(Recorded::from)
    else {
        return;
    };
    let reply = {
        let next = state.replies.lock().unwrap().pop_front();
        let mut last = state.last.lock().unwrap();
        if let Some(next) = next {
            *last = Some(next);
        }
        last.clone().expect("the mock server has no reply scripted")
    };
    state.requests.lock().unwrap().push(request);
    state.changed.notify_waiters();
    if reply.end == End::Silent {
        await_hangup(&mut socket, &state).await;
        return;
    }
    let mut head = format!(
        "HTTP/1.1 {} Scripted\r\nconnection: close\r\n",
        reply.status
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let streamed = reply.status == 200;
    if streamed {
        head.push_str("transfer-encoding: chunked\r\n\r\n");
    } else {
        let length: usize = reply.chunks.iter().map(String::len).sum();
        head.push_str(&format!("content-length: {length}\r\n\r\n"));
    }
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for chunk in &reply.chunks {
        let bytes = if streamed {
            format!("{:x}\r\n{chunk}\r\n", chunk.len())
        } else {
            chunk.clone()
        };
        if socket.write_all(bytes.as_bytes()).await.is_err() {
            return;
        }
        let _ = socket.flush().await;
        tokio::time::sleep(reply.pace).await;
    }
    match reply.end {
        End::Complete => {
            if streamed {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
        End::Drop => {
            let _ = socket.shutdown().await;
        }
        End::Stall | End::Silent => await_hangup(&mut socket, &state).await,
    }
}

/// A config pointed at `base` with a key, tiny retry delays and a short idle timeout.
pub(crate) fn config(base: &str) -> ProviderConfig {
    ProviderConfig {
        api_key: Some("test-key".to_owned()),
        base_url: Some(base.to_owned()),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(1),
        retry_max_delay: Duration::from_millis(5),
        idle_timeout: Duration::from_secs(5),
        ..ProviderConfig::default()
    }
}

pub(crate) fn message(role: Role, text: &str) -> Message {
    Message::synthetic(0, role, text)
}

pub(crate) fn assistant(text: &str, calls: &[(&str, &str, Value)]) -> Message {
    let mut message = message(Role::Assistant, text);
    message.calls = calls
        .iter()
        .map(|(id, name, input)| ToolCall {
            id: (*id).to_owned(),
            name: (*name).to_owned(),
            input: input.clone(),
        })
        .collect();
    message
}

pub(crate) fn tool_result(call_id: &str, text: &str, is_error: bool) -> Message {
    let mut message = message(Role::Tool, text);
    message.call_id = Some(call_id.into());
    message.is_error = is_error;
    message
}

/// A step request over `messages`, no tools.
pub(crate) fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        purpose: Purpose::Step,
        agent: "main".to_owned(),
        step: 0,
        system: "You are a test.".to_owned(),
        tools: Arc::new(Vec::new()),
        entries: Vec::new(),
        residents: Vec::new(),
        messages: Arc::new(messages),
        tail: Vec::new(),
        attachments: Default::default(),
    }
}

/// A request whose one tool result carries a 4-byte "image" (`abcd`, base64 `YWJjZA==`).
pub(crate) fn request_with_image() -> ModelRequest {
    let mut result = tool_result("c1", "Image file shot.png", false);
    let reference = noeta_core::store::content_ref("image/png", b"abcd");
    result.attachments = vec![reference.clone()];
    let mut request = request(vec![
        message(Role::User, "look"),
        assistant(
            "",
            &[("c1", "Read", serde_json::json!({ "file_path": "shot.png" }))],
        ),
        result,
    ]);
    request.attachments.insert(
        reference.sha256.clone(),
        noeta_core::model::Attachment {
            media_type: "image/png".to_owned(),
            data: Arc::new(b"abcd".to_vec()),
        },
    );
    request
}

/// A lookup over a fixed table, standing in for the process environment.
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let table: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name: &str| table.get(name).cloned()
}
