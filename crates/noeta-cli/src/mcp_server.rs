//! The MCP server frontend: a set of tools served to MCP clients over stdio or streamable
//! HTTP (`noeta mcp serve`; `serve.rs` drives it). It is the command line's, not the `mcp`
//! built-in's: that plugin is the client.
//!
//! [`Desk`] is the MCP face: it answers `tools/list` and `tools/call` by sending a [`Job`] to
//! whoever owns the tools (the command line's agent, which runs each call through the task's
//! gate and log) and waiting for the answer. Jobs go one at a time through a channel, so calls
//! from several clients never run the task's tools at once. A call the client cancels
//! (`notifications/cancelled`, or a client gone) is given up where it runs; a call with a
//! `progressToken` is told `notifications/progress` every second while it runs; a client may
//! set a logging level and hears each call start and end at `info` and failures at `error`.
//! `resources/list`, `resources/templates/list` and `prompts/list` answer empty lists: the
//! server serves tools only.

use std::future::Future;
use std::sync::Arc;

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt as _};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServedTool {
    /// Its model-visible name (`Read`, `Glob`, `mcp__git__status`, …).
    pub(crate) name: String,
    /// What the model reads about it.
    pub(crate) description: String,
    /// Its input's JSON schema (an object schema).
    pub(crate) input_schema: Value,
    /// It changes nothing.
    pub(crate) read_only: bool,
    /// Calling it again with the same input does no more than the first call.
    pub(crate) idempotent: bool,
}

impl ServedTool {
    /// A tool named `name`, neither read-only nor idempotent.
    pub(crate) fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            read_only: false,
            idempotent: false,
        }
    }

    /// Marks it read-only and idempotent, or not.
    #[must_use]
    pub(crate) fn with_hints(mut self, read_only: bool, idempotent: bool) -> Self {
        self.read_only = read_only;
        self.idempotent = idempotent;
        self
    }
}

/// An image a result carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServedImage {
    /// Its media type (`image/png`, …).
    pub(crate) media_type: String,
    /// Its bytes.
    pub(crate) data: Vec<u8>,
}

impl ServedImage {
    /// An image of `media_type`.
    pub(crate) fn new(media_type: impl Into<String>, data: Vec<u8>) -> Self {
        Self {
            media_type: media_type.into(),
            data,
        }
    }
}

/// A call's result as the client receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Served {
    /// The result's text.
    pub(crate) text: String,
    /// Whether the call failed, was denied or refused (`isError`).
    pub(crate) is_error: bool,
    /// The images it carries.
    pub(crate) images: Vec<ServedImage>,
}

impl Served {
    /// A result of `text`.
    pub(crate) fn new(text: impl Into<String>, is_error: bool) -> Self {
        Self {
            text: text.into(),
            is_error,
            images: Vec::new(),
        }
    }

    /// With the images it carries.
    #[must_use]
    pub(crate) fn with_images(mut self, images: Vec<ServedImage>) -> Self {
        self.images = images;
        self
    }
}

/// What a desk asks of the tools' owner. An `Err` is a failure of the server itself (the
/// store, a plugin hook), answered to the client as a protocol error; a tool's own failure
/// is an `Ok` result with `is_error`.
#[derive(Debug)]
pub(crate) enum Job {
    /// List the served tools.
    Tools(oneshot::Sender<Result<Vec<ServedTool>, String>>),
    /// Call one.
    Call {
        /// The tool's name as listed.
        name: String,
        /// Its arguments (an object).
        input: Value,
        /// Where the result goes.
        reply: oneshot::Sender<Result<Served, String>>,
        /// Resolves when nobody wants the result any more (the client cancelled the call, or
        /// is gone): the call is then given up.
        cancelled: oneshot::Receiver<()>,
    },
}

/// How often a call with a `progressToken` is told it still runs.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The MCP server over a job channel.
#[derive(Debug, Clone)]
pub(crate) struct Desk {
    jobs: mpsc::Sender<Job>,
    instructions: Arc<str>,
    /// The least severe log level the client wants (`logging/setLevel`; `warning` until it
    /// says), as its rank (see [`rank`]).
    log_level: Arc<std::sync::atomic::AtomicU8>,
}

/// A level's rank: debug 0 … emergency 7.
#[expect(
    deprecated,
    reason = "MCP logging is still part of the protocol version served"
)]
fn rank(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

impl Desk {
    /// A desk sending its jobs to `jobs`, telling clients `instructions` when they connect.
    pub(crate) fn new(jobs: mpsc::Sender<Job>, instructions: impl Into<String>) -> Self {
        Self {
            jobs,
            instructions: Arc::from(instructions.into()),
            log_level: Arc::new(std::sync::atomic::AtomicU8::new(3)),
        }
    }

    /// Tells the client `text` at `level`, when it asked for that level.
    #[expect(
        deprecated,
        reason = "MCP logging is still part of the protocol version served"
    )]
    async fn log(
        &self,
        peer: &rmcp::Peer<RoleServer>,
        level: rmcp::model::LoggingLevel,
        text: String,
    ) {
        if rank(level) < self.log_level.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let mut message =
            rmcp::model::LoggingMessageNotificationParam::new(level, Value::String(text));
        message.logger = Some("noeta".to_owned());
        let _ = peer.notify_logging_message(message).await;
    }

    async fn ask<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Job,
    ) -> Result<T, ErrorData> {
        let (reply, answer) = oneshot::channel();
        let gone =
            || ErrorData::internal_error("the noeta agent serving these tools has stopped", None);
        self.jobs.send(job(reply)).await.map_err(|_| gone())?;
        answer
            .await
            .map_err(|_| gone())?
            .map_err(|reason| ErrorData::internal_error(reason, None))
    }
}

fn listed(tool: ServedTool) -> rmcp::model::Tool {
    let schema: JsonObject = match tool.input_schema {
        Value::Object(map) => map,
        _ => serde_json::Map::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let hints = ToolAnnotations::new()
        .read_only(tool.read_only)
        .destructive(!tool.read_only)
        .idempotent(tool.idempotent)
        .open_world(false);
    rmcp::model::Tool::new(tool.name, tool.description, Arc::new(schema)).with_annotations(hints)
}

fn result(served: Served) -> CallToolResult {
    let mut content = Vec::with_capacity(1 + served.images.len());
    if !served.text.is_empty() || served.images.is_empty() {
        content.push(ContentBlock::text(served.text));
    }
    for image in served.images {
        let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
        content.push(ContentBlock::image(data, image.media_type));
    }
    if served.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for Desk {
    #[expect(
        deprecated,
        reason = "MCP logging is still part of the protocol version served"
    )]
    fn get_info(&self) -> ServerConfig {
        // Resources and prompts are listed (empty) rather than refused: clients ask for them.
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("noeta", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.as_ref())
    }

    #[expect(
        deprecated,
        reason = "MCP logging is still part of the protocol version served"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level
            .store(rank(request.level), std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.ask(Job::Tools).await?;
        Ok(ListToolsResult::with_all_items(
            tools.into_iter().map(listed).collect(),
        ))
    }

    #[expect(
        deprecated,
        reason = "MCP logging is still part of the protocol version served"
    )]
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        use rmcp::model::LoggingLevel;
        let token = request
            .meta
            .as_ref()
            .and_then(rmcp::model::RequestMetaObject::get_progress_token)
            .or_else(|| context.meta.get_progress_token());
        let name = request.name.into_owned();
        let input = Value::Object(request.arguments.unwrap_or_default());
        let shown = name.clone();
        self.log(
            &context.peer,
            LoggingLevel::Info,
            format!("calling `{shown}`"),
        )
        .await;
        // Dropped with this call (a cancel, or a client gone), it tells the owner to give up.
        let (_wanted, cancelled) = oneshot::channel::<()>();
        let asked = self.ask(|reply| Job::Call {
            name,
            input,
            reply,
            cancelled,
        });
        tokio::pin!(asked);
        let started = std::time::Instant::now();
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let answer = loop {
            tokio::select! {
                answer = &mut asked => break answer,
                () = context.ct.cancelled() => {
                    self.log(&context.peer, LoggingLevel::Info, format!("`{shown}` cancelled by the client")).await;
                    return Err(ErrorData::internal_error(format!("`{shown}` was cancelled"), None));
                }
                _ = ticks.tick(), if token.is_some() => {
                    if let Some(token) = &token {
                        let seconds = started.elapsed().as_secs();
                        let mut progress = rmcp::model::ProgressNotificationParam::new(
                            token.clone(),
                            seconds as f64,
                        );
                        progress.message = Some(format!("`{shown}` is running ({seconds} s)"));
                        let _ = context.peer.notify_progress(progress).await;
                    }
                }
            }
        };
        match &answer {
            Ok(served) => {
                self.log(
                    &context.peer,
                    LoggingLevel::Info,
                    format!(
                        "`{shown}` finished{}",
                        if served.is_error {
                            " with an error"
                        } else {
                            ""
                        }
                    ),
                )
                .await;
            }
            Err(err) => {
                self.log(
                    &context.peer,
                    LoggingLevel::Error,
                    format!("`{shown}` failed: {}", err.message),
                )
                .await;
            }
        }
        Ok(result(answer?).into())
    }
}

/// Serves `desk` on this process's stdin and stdout until the client closes them.
///
/// # Errors
/// The handshake failed, or the connection broke.
pub(crate) async fn serve_stdio(desk: Desk) -> Result<(), String> {
    let running = desk
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP client's handshake failed: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("the MCP connection ended badly: {e}"))
}

/// What `noeta mcp serve --http` on `port` answers: a `Host` of a loopback name with that port,
/// and a request carrying an `Origin` only from that same address (the MCP transport
/// specification asks a server to validate `Origin`, so a web page cannot reach a local server
/// through DNS rebinding); a request without `Origin` is not a browser's.
pub(crate) fn http_config(port: u16) -> StreamableHttpServerConfig {
    let names = ["127.0.0.1", "localhost", "[::1]"];
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(names.iter().map(|name| format!("{name}:{port}")))
        .with_allowed_origins(names.iter().map(|name| format!("http://{name}:{port}")))
        .enforce_origin_validation()
}

/// Serves `desk` over streamable HTTP on `listener` (every path) until `stop` completes, with
/// the `Host` and `Origin` checks of [`http_config`], and, with `token`, every request needing
/// `Authorization: Bearer <token>` (another user of the machine can reach a loopback port).
///
/// # Errors
/// The listener failed.
pub(crate) async fn serve_http(
    desk: Desk,
    listener: TcpListener,
    stop: impl Future<Output = ()>,
    token: Option<String>,
) -> Result<(), String> {
    use http_body_util::BodyExt as _;
    use hyper::service::Service as _;
    let port = listener
        .local_addr()
        .map_err(|e| format!("the MCP listener has no address: {e}"))?
        .port();
    let service = StreamableHttpService::new(
        move || Ok(desk.clone()),
        Arc::new(LocalSessionManager::default()),
        http_config(port),
    );
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut stop => return Ok(()),
            accepted = listener.accept() => accepted.map_err(|e| format!("cannot accept an MCP client: {e}"))?,
        };
        let inner = hyper_util::service::TowerToHyperService::new(service.clone());
        let token = token.clone();
        let guarded = hyper::service::service_fn(move |request| {
            let inner = inner.clone();
            let allowed = token.as_deref().is_none_or(|token| {
                let given = request
                    .headers()
                    .get(hyper::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok());
                noeta_toolkit::bearer_matches(given, token)
            });
            async move {
                if allowed {
                    return inner.call(request).await;
                }
                let body = http_body_util::Full::new(hyper::body::Bytes::from_static(
                    b"noeta mcp serve needs `Authorization: Bearer <token>`: the token of [plugins.serve] token, else the one in ~/.noeta/serve-token\n",
                ))
                .boxed();
                let mut refused = hyper::Response::new(body);
                *refused.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                Ok(refused)
            }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), guarded);
            if let Err(e) = connection.await {
                tracing::debug!("an MCP client's HTTP connection ended: {e}");
            }
        });
    }
}

#[cfg(test)]
#[path = "mcp_server_tests.rs"]
mod tests;
