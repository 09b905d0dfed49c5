//! `noeta serve`: an HTTP API over a store's tasks, for programs that submit tasks, watch them
//! and answer them from anywhere (`docs/http-api.md` documents every route and body).
//!
//! Tasks are created the way `noeta run --detach` creates them and put on the store's queue;
//! the server runs them with workers in its own process (`--workers N`) or leaves them to
//! `noeta worker` processes on any host. Events are read back from the store, as JSON or as
//! Server-Sent Events (each event's id is its sequence number, so a client reconnecting with
//! `Last-Event-ID` misses nothing and sees nothing twice).
//!
//! Bound to loopback by default. A token set in the settings (`[plugins.serve] token`, a
//! secret reference) is required of every request as `Authorization: Bearer …`; a server on
//! any other address refuses to start without one.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use noeta::HostPaths;
use noeta::backends::Stores;
use noeta_core::records::hydrate;
use noeta_core::runner::RunError;
use noeta_core::store::{StoreError, TaskId};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::{self, AgentArgs, AgentHost};
use crate::live::{Follower, LiveText};
use crate::overview;
use crate::stdio::{eoutln, outln};
use crate::worker::{self, WorkerArgs};

/// The address `noeta serve` listens on unless told otherwise.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:7878";

/// The settings key of the API token.
const TOKEN_SETTING: &str = "[plugins.serve] token";

/// `noeta serve`'s choices.
#[derive(Debug, Clone)]
pub(crate) struct ServeArgs {
    /// `--addr`.
    pub(crate) addr: String,
    /// `--store`.
    pub(crate) store: Option<String>,
    /// `--workers`: worker slots run in this process (0: leave the queue to `noeta worker`).
    pub(crate) workers: usize,
    /// `--plugin-dir`.
    pub(crate) plugin_dirs: Vec<PathBuf>,
    /// The web frontend served at `/` (`None`: `--no-ui`).
    pub(crate) ui: Option<Arc<dyn noeta::frontends::Frontend>>,
}

/// What every handler shares.
struct Api {
    paths: HostPaths,
    stores: Stores,
    store: Option<String>,
    plugin_dirs: Vec<PathBuf>,
    token: Option<String>,
    stop: Arc<AtomicBool>,
    ui: Option<Arc<dyn noeta::frontends::Frontend>>,
    /// Reply text streaming from this process's worker slots.
    live: Option<LiveText>,
}

type Shared = Arc<Api>;

/// An answer other than success: a status and `{"error": "…"}`.
#[derive(Debug)]
struct Fail(StatusCode, String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn bad(message: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::BAD_REQUEST, message.to_string())
}

/// A run error as an answer: a task held by a worker, or in no state to take this, is a
/// conflict; anything else the server's failure.
fn from_run(err: RunError) -> Fail {
    match err {
        RunError::Busy { .. }
        | RunError::NotParked { .. }
        | RunError::BadAnswer { .. }
        | RunError::Store(StoreError::Leased { .. }) => Fail(StatusCode::CONFLICT, err.to_string()),
        other => Fail(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

fn internal(err: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
}

/// The body as `T`, or a 400 naming what is wrong with it.
fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, Fail> {
    body.map(|Json(value)| value).map_err(|err| {
        bad(format!(
            "the request body is not accepted: {}",
            err.body_text()
        ))
    })
}

/// The API token from the settings, resolved (`None` when none is set).
fn token(paths: &HostPaths, args: &AgentArgs) -> Result<Option<String>> {
    let settings = agent::settings(paths, args)?;
    let Some(value) = settings.params("serve").and_then(|t| t.get("token")) else {
        return Ok(None);
    };
    let resolved = noeta::secrets::resolve_secrets(value, &agent::secrets())
        .with_context(|| format!("{TOKEN_SETTING} cannot be resolved"))?;
    match resolved.as_str() {
        Some(token) if !token.trim().is_empty() => Ok(Some(token.to_owned())),
        _ => bail!(
            "{TOKEN_SETTING} must be a non-empty string (a secret reference such as \"{{env:NOETA_SERVE_TOKEN}}\")"
        ),
    }
}

/// The built-in web frontend `noeta serve` serves at `/`.
pub(crate) fn web_page() -> Arc<dyn noeta::frontends::Frontend> {
    Arc::new(noeta::frontends::Web)
}

/// `noeta open FRONTEND`: a web frontend served on loopback (its URL printed), or the
/// terminal's chat.
pub(crate) async fn open(
    paths: &HostPaths,
    plugin_dirs: Vec<PathBuf>,
    frontend: &str,
    store: Option<String>,
    workers: usize,
) -> Result<ExitCode> {
    let chosen = noeta::frontends::Frontends::standard()
        .find(frontend)
        .map_err(anyhow::Error::msg)?;
    if chosen.assets().is_empty() {
        let args = AgentArgs {
            store,
            plugin_dirs,
            chat: true,
            ..AgentArgs::default()
        };
        return crate::tasks::chat(paths, &args, None).await;
    }
    let args = ServeArgs {
        addr: "127.0.0.1:0".to_owned(),
        store,
        workers,
        plugin_dirs,
        ui: Some(chosen),
    };
    serve(paths, args).await
}

/// `noeta serve [--addr ADDR] [--store URL] [--workers N]`.
pub(crate) async fn serve(paths: &HostPaths, args: ServeArgs) -> Result<ExitCode> {
    let addr: SocketAddr = args.addr.parse().map_err(|_| {
        anyhow::anyhow!(
            "--addr `{}` is not an address and port such as {DEFAULT_ADDR}",
            args.addr
        )
    })?;
    let base = AgentArgs {
        store: args.store.clone(),
        plugin_dirs: args.plugin_dirs.clone(),
        ..AgentArgs::default()
    };
    let token = token(paths, &base)?;
    if !addr.ip().is_loopback() && token.is_none() {
        bail!(
            "refusing to serve on {addr}, which is not a loopback address, without a token: set \
             {TOKEN_SETTING} to a secret reference such as \"{{env:NOETA_SERVE_TOKEN}}\" \
             (every request then needs `Authorization: Bearer <token>`)"
        );
    }
    let stores = noeta::open_store(paths, args.store.as_deref())?;
    let stop = Arc::new(AtomicBool::new(false));
    let live = (args.workers > 0).then(LiveText::new);
    let working = if args.workers > 0 {
        let worker = worker::open(
            paths,
            WorkerArgs {
                store: args.store.clone(),
                slots: args.workers,
                lease_secs: 60,
                plugin_dirs: args.plugin_dirs.clone(),
            },
            Some(stores.clone()),
            Arc::clone(&stop),
            live.clone(),
        )?;
        Some(tokio::spawn(worker.run()))
    } else {
        None
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    eoutln!(
        "noeta API on http://{bound}/v1/ — store {}, {} worker slot(s) in this process{}",
        stores.url,
        args.workers,
        if token.is_some() {
            ", token required"
        } else {
            ""
        }
    );
    outln!("http://{bound}/v1/");
    if args.ui.is_some() {
        outln!("http://{bound}/");
    }
    crate::stdio::flush_out();
    let api = Arc::new(Api {
        paths: paths.clone(),
        stores,
        store: args.store,
        plugin_dirs: args.plugin_dirs,
        token,
        stop: Arc::clone(&stop),
        ui: args.ui,
        live,
    });
    let router = Router::new()
        .route("/", get(page))
        .route("/assets/{name}", get(page))
        .route("/v1/tasks", get(list).post(create))
        .route("/v1/tasks/{id}", get(show))
        .route("/v1/tasks/{id}/events", get(events))
        .route("/v1/tasks/{id}/messages", post(message))
        .route("/v1/tasks/{id}/answer", post(answer))
        .route("/v1/tasks/{id}/cancel", post(cancel))
        .fallback(|| async { Fail(StatusCode::NOT_FOUND, "no such route".to_owned()) })
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&api),
            guard,
        ))
        .layer(axum::middleware::from_fn(secure))
        .with_state(api);
    let signal = Arc::clone(&stop);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            worker::stop_on_signal(signal).await;
        })
        .await
        .context("the HTTP server failed")?;
    if let Some(working) = working {
        working.await.context("the worker ended abnormally")??;
    }
    Ok(ExitCode::SUCCESS)
}

/// The Content-Security-Policy of every answer: nothing but this server's own scripts, styles
/// and API; no inline code, no frames, no forms posted elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Adds the security headers to every answer, the page's included.
async fn secure(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    response
}

/// Why a POST is refused as a possible cross-site request forgery, if it is: a body that is not
/// JSON (a browser sends JSON across sites only after a preflight this server never grants), or
/// an `Origin`/`Sec-Fetch-Site` that is not this server's.
fn forged(request: &Request) -> Option<String> {
    let headers = request.headers();
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Some("a POST must carry `Content-Type: application/json`".to_owned());
    }
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site != "same-origin" && site != "none")
    {
        return Some("a request from another site is refused".to_owned());
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let own = host.is_some_and(|host| {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host)
        });
        if !own {
            return Some(format!("a request from origin `{origin}` is refused"));
        }
    }
    None
}

/// Refuses every API request without the token, when one is set, and every POST that may be
/// forged; the page and its files need no token (they hold no data, and the page asks for it).
async fn guard(State(api): State<Shared>, request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    if request.method() == axum::http::Method::POST
        && let Some(why) = forged(&request)
    {
        return Fail(StatusCode::FORBIDDEN, why).into_response();
    }
    if let Some(token) = &api.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
            return Fail(
                StatusCode::UNAUTHORIZED,
                format!(
                    "this server needs `Authorization: Bearer <token>` with the token of {TOKEN_SETTING}"
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The web frontend's page and files.
async fn page(State(api): State<Shared>, uri: axum::http::Uri) -> Response {
    let Some(ui) = &api.ui else {
        return Fail(
            StatusCode::NOT_FOUND,
            "this server serves no page (--no-ui); the API is under /v1/".to_owned(),
        )
        .into_response();
    };
    match ui.assets().iter().find(|a| a.path == uri.path()) {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.media_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            asset.body,
        )
            .into_response(),
        None => Fail(StatusCode::NOT_FOUND, "no such file".to_owned()).into_response(),
    }
}

impl Api {
    fn args(&self) -> AgentArgs {
        AgentArgs {
            store: self.store.clone(),
            plugin_dirs: self.plugin_dirs.clone(),
            ..AgentArgs::default()
        }
    }

    /// The task `id` names, which must exist (404 otherwise).
    async fn task(&self, id: &str) -> Result<TaskId, Fail> {
        let task = TaskId::new(id).map_err(bad)?;
        match self.stores.log.info(&task).await {
            Ok(_) => Ok(task),
            Err(StoreError::UnknownTask { .. }) => Err(Fail(
                StatusCode::NOT_FOUND,
                format!("no task `{id}` in this store"),
            )),
            Err(err) => Err(internal(err)),
        }
    }

    /// The agent host `task` runs with: its recorded agent and model.
    async fn host_for(&self, task: &TaskId) -> Result<AgentHost, Fail> {
        let args = crate::tasks::for_task(self.stores.log.as_ref(), task, &self.args())
            .await
            .map_err(|err| bad(format!("{err:#}")))?;
        AgentHost::open_with(&self.paths, &args, self.stores.clone())
            .map_err(|err| bad(format!("{err:#}")))
    }

    async fn enqueue(&self, task: &TaskId) -> Result<(), Fail> {
        self.stores.queue.enqueue(task, 0).await.map_err(internal)
    }
}

async fn list(State(api): State<Shared>) -> Result<Json<Value>, Fail> {
    let rows = overview::rows(&api.stores).await.map_err(internal)?;
    Ok(Json(Value::Array(
        rows.iter().map(overview::Row::json).collect(),
    )))
}

async fn show(State(api): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, Fail> {
    let task = api.task(&id).await?;
    let row = overview::one(&api.stores, &task).await.map_err(internal)?;
    Ok(Json(row.json()))
}

/// `POST /v1/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTask {
    goal: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    permission_mode: Option<String>,
}

async fn create(
    State(api): State<Shared>,
    new: Result<Json<NewTask>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    if new.goal.trim().is_empty() {
        return Err(bad("`goal` is empty: say what the agent is to do"));
    }
    let permission_mode = new
        .permission_mode
        .as_deref()
        .map(agent::permission_mode)
        .transpose()
        .map_err(|err| bad(format!("`permission_mode`: {err}")))?;
    let args = AgentArgs {
        agent: new.agent,
        provider: new.provider,
        model: new.model,
        permission_mode,
        detach: true,
        ..api.args()
    };
    let host = AgentHost::open_with(&api.paths, &args, api.stores.clone())
        .map_err(|err| bad(format!("{err:#}")))?;
    // Ids carry the time and a salt; a clash with a task made in the same instant tries again.
    let mut tries = 0;
    let task = loop {
        let task = agent::new_task_id().map_err(internal)?;
        match host.runtime.create(&host.session, &task, &new.goal).await {
            Ok(()) => break task,
            Err(RunError::Store(StoreError::TaskExists { .. })) if tries < 8 => tries += 1,
            Err(err) => return Err(from_run(err)),
        }
    };
    api.enqueue(&task).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": task.as_str(), "status": "queued" })),
    ))
}

/// `POST /v1/tasks/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMessage {
    text: String,
}

async fn message(
    State(api): State<Shared>,
    Path(id): Path<String>,
    new: Result<Json<NewMessage>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    let task = api.task(&id).await?;
    if new.text.trim().is_empty() {
        return Err(bad("`text` is empty"));
    }
    let host = api.host_for(&task).await?;
    host.runtime
        .send(&host.session, &task, &new.text)
        .await
        .map_err(from_run)?;
    api.enqueue(&task).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": task.as_str(), "status": "queued" })),
    ))
}

/// `POST /v1/tasks/{id}/answer`: `allow` for a permission ask, `answer` for a question.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewAnswer {
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    allow: Option<bool>,
    #[serde(default)]
    answer: Option<Value>,
}

async fn answer(
    State(api): State<Shared>,
    Path(id): Path<String>,
    new: Result<Json<NewAnswer>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    let task = api.task(&id).await?;
    let host = api.host_for(&task).await?;
    let state = host
        .runtime
        .load(&host.session, &task)
        .await
        .map_err(from_run)?;
    let noeta_core::fold::TurnState::Parked { call_id, question } = &state.core.turn else {
        return Err(Fail(
            StatusCode::CONFLICT,
            format!(
                "task {task} waits for no answer ({})",
                overview::status(&state)
            ),
        ));
    };
    if let Some(given) = &new.call_id
        && given != call_id
    {
        return Err(Fail(
            StatusCode::CONFLICT,
            format!("task {task} waits on call `{call_id}`, not `{given}`"),
        ));
    }
    let asks_a_question = state
        .core
        .parked
        .get(call_id)
        .is_some_and(|p| p.question.is_some());
    if asks_a_question {
        let answer = match (new.answer, new.allow) {
            (Some(Value::String(text)), _) => {
                crate::interact::typed_answer(&state, call_id, &text).map_err(bad)?
            }
            (Some(answer), _) => answer,
            (None, _) => {
                return Err(bad(format!(
                    "call {call_id} asks a question ({question}): give `answer`, not `allow`"
                )));
            }
        };
        host.runtime
            .reply(&host.session, &task, call_id, answer)
            .await
            .map_err(from_run)?;
    } else {
        let Some(allow) = new.allow else {
            return Err(bad(format!(
                "call {call_id} asks permission ({question}): give `allow`: true or false"
            )));
        };
        host.runtime
            .answer(&host.session, &task, call_id, allow)
            .await
            .map_err(from_run)?;
    }
    api.enqueue(&task).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": task.as_str(), "call_id": call_id, "status": "queued" })),
    ))
}

async fn cancel(State(api): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, Fail> {
    let task = api.task(&id).await?;
    let host = api.host_for(&task).await?;
    let cancelled = host
        .runtime
        .cancel(&task, "by a request to the HTTP API")
        .await
        .map_err(from_run)?;
    // Its queue entry ends at the next take; a parent waiting on it wakes with why.
    api.enqueue(&task).await?;
    if let Some(parent) = api.stores.log.info(&task).await.map_err(internal)?.parent {
        api.enqueue(&parent).await?;
    }
    Ok(Json(json!({ "id": task.as_str(), "cancelled": cancelled })))
}

/// `?after=N` on the events route.
#[derive(Debug, Deserialize)]
struct After {
    #[serde(default)]
    after: Option<u64>,
}

/// One event as the API gives it.
async fn event_json(api: &Api, event: noeta_core::store::Event) -> Result<Value, StoreError> {
    let event = hydrate(event, api.stores.content.as_ref()).await?;
    let record = &event.record;
    Ok(json!({
        "seq": event.seq,
        "extension": record.extension,
        "kind": record.kind,
        "data": record.data,
        "message": record.message,
    }))
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

async fn events(
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
        for event in api.stores.log.read(&task, after).await.map_err(internal)? {
            out.push(event_json(&api, event).await.map_err(internal)?);
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
            if state.api.stop.load(Ordering::SeqCst) {
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
            let batch = match state.api.stores.log.read(&state.task, state.after).await {
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
                let data = match event_json(&state.api, event).await {
                    Ok(data) => data,
                    Err(err) => json!({ "seq": last, "error": err.to_string() }),
                };
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
