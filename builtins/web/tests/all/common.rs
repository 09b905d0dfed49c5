//! What the web tests share: a small HTTP/1.1 server on the loopback interface that answers
//! from a table of routes and counts what it is asked, test model providers, and tool calls.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions; each test file uses a part"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::model::{StopReason, Usage};
use noeta_core::provider::{Provider, ProviderError};
use noeta_core::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One canned answer.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    /// A 200 answer of `content_type`.
    pub(crate) fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// An HTML page.
    pub(crate) fn html(body: &str) -> Self {
        Self::ok("text/html; charset=utf-8", body)
    }

    /// A redirect to `location`.
    pub(crate) fn redirect(status: u16, location: &str) -> Self {
        Self {
            status,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }

    /// An answer of `status` with a JSON body.
    pub(crate) fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

/// A request the server received.
pub(crate) type Seen = noeta_testkit::http::Request;

#[derive(Default)]
struct Shared {
    routes: Mutex<BTreeMap<String, Reply>>,
    seen: Mutex<Vec<Seen>>,
}

/// A server answering each request by its path (404 for an unknown one), one request per
/// connection.
pub(crate) struct Server {
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
    /// The port it listens on.
    pub(crate) port: u16,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let serving = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, Arc::clone(&serving)));
            }
        });
        Self {
            base: format!("http://127.0.0.1:{port}"),
            port,
            shared,
            task,
        }
    }

    /// Answers `path` with `reply` from now on.
    pub(crate) fn route(&self, path: &str, reply: Reply) -> &Self {
        self.shared
            .routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), reply);
        self
    }

    /// The full URL of `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Every request so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// How many requests asked for `path`.
    pub(crate) fn hits(&self, path: &str) -> usize {
        self.seen().iter().filter(|s| s.path == path).count()
    }
}

async fn serve(mut socket: TcpStream, shared: Arc<Shared>) {
    let Some(request) = noeta_testkit::http::read_request(&mut socket).await else {
        return;
    };
    let reply = shared
        .routes
        .lock()
        .unwrap()
        .get(&request.path)
        .cloned()
        .unwrap_or_else(|| Reply::ok("text/plain", "no such page").with_status(404));
    shared.seen.lock().unwrap().push(request);
    let mut head = format!("HTTP/1.1 {} X\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.body.len()
    ));
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(&reply.body).await;
    let _ = socket.shutdown().await;
}

impl Reply {
    /// The same answer with another status.
    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}

/// A model that answers every request with `answer` (or fails when it is `None`) and keeps
/// the requests it got.
#[derive(Default)]
pub(crate) struct TestModel {
    answer: Option<String>,
    pub(crate) requests: Mutex<Vec<ModelRequest>>,
}

impl TestModel {
    pub(crate) fn answering(answer: &str) -> Arc<Self> {
        Arc::new(Self {
            answer: Some(answer.to_owned()),
            requests: Mutex::default(),
        })
    }

    pub(crate) fn failing() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The text of the one user message of request `n`.
    pub(crate) fn prompt(&self, n: usize) -> String {
        self.requests.lock().unwrap()[n].messages[0]
            .text
            .to_string()
    }

    pub(crate) fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

#[async_trait]
impl Provider for TestModel {
    fn name(&self) -> &str {
        "test"
    }

    fn model(&self) -> &str {
        "test-model"
    }

    fn context_window(&self) -> u64 {
        100_000
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        match &self.answer {
            Some(text) => Ok(ModelReply {
                text: text.clone(),
                calls: Vec::new(),
                stop: Some(StopReason::EndTurn),
                usage: Usage::default(),
                reasoning: Vec::new(),
            }),
            None => Err(ProviderError::Fatal {
                message: "the test model is down".to_owned(),
            }),
        }
    }
}

/// A tool context with `model` for auxiliary calls (none: no model).
pub(crate) fn context(model: Option<Arc<TestModel>>) -> ToolContext {
    let ctx = ToolContext::new("task", "call");
    match model {
        Some(model) => ctx.with_model(model),
        None => ctx,
    }
}

/// Runs `tool` once.
pub(crate) async fn call(
    tool: &dyn Tool,
    input: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    tool.run(input, ctx).await
}

/// The message of a model-visible tool error.
pub(crate) fn message(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::RespondToModel(text)) => text,
        other => panic!("expected a model-visible error, got {other:?}"),
    }
}
