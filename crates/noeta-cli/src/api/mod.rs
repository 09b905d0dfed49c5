//! `noeta serve`: an HTTP API over a store's tasks, for programs that submit tasks, watch them
//! and answer them from anywhere (`docs/http-api.md` documents every route and body).
//!
//! Tasks are created the way `noeta run --detach` creates them and put on the store's queue;
//! the server runs them with workers in its own process (`--workers N`) or leaves them to
//! `noeta worker` processes on any host. Events are read back from the store, as JSON or as
//! Server-Sent Events (each event's id is its sequence number, so a client reconnecting with
//! `Last-Event-ID` misses nothing and sees nothing twice).
//!
//! Closed by default (`docs/security.md`): bound to loopback; every request's `Host` must be
//! the server's own (`guard.rs`), a browser's state-changing request must come from the server's
//! own page, every API request needs the token (`token.rs`: the settings' or one made and kept
//! in `~/.noeta/serve-token`), and what a client may choose for a task is bounded by what the
//! server itself runs with (`routes.rs`). Connections are limited before anything is read: a
//! cap on open connections, a deadline for each request's header (which also ends idle
//! keep-alive connections), and a cap on request bodies.

mod events;
mod guard;
mod routes;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use noeta::HostPaths;
use noeta_toolkit::{HostCheck, SettingsTable};
use serde_json::Value;

use crate::agent::{self, AgentArgs};
use crate::live::LiveText;
use crate::stdio::{eoutln, outln};
use crate::worker::{self, WorkerArgs};

/// The address `noeta serve` listens on unless told otherwise.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:7878";

/// The fewest characters a configured token may have.
const MIN_TOKEN_CHARS: usize = 16;

/// The settings key of the API token.
const TOKEN_SETTING: &str = "[plugins.serve] token";

/// How long tasks in flight get to finish their step once the server is told to stop; past it
/// the server ends anyway and they resume later, as after a crash.
const STOP_GRACE: Duration = Duration::from_secs(3);

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
    /// `--provider`, `--model` and `--permission-mode`: what tasks run with unless a request
    /// says otherwise, and the loosest permission mode a request may ask for.
    pub(crate) provider: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) permission_mode: Option<String>,
    /// Opened by `noeta open`: the page's address comes first, the port falls back to a free
    /// one when `addr`'s is taken, and the worker says what it runs in one line.
    pub(crate) opened: bool,
}

/// `[plugins.serve]`.
#[derive(Debug, Clone)]
struct ServeSettings {
    token: Option<String>,
    allowed_hosts: Vec<String>,
    max_connections: usize,
    max_body_bytes: usize,
    header_timeout: Duration,
}

/// The keys `[plugins.serve]` takes.
const SERVE_KEYS: &[&str] = &[
    "token",
    "allowed_hosts",
    "max_connections",
    "max_body_bytes",
    "header_timeout_ms",
];

impl ServeSettings {
    fn read(paths: &HostPaths, args: &AgentArgs) -> Result<Self> {
        let settings = agent::settings(paths, args)?;
        let params = settings
            .params("serve")
            .map(|p| Value::Object(p.clone()))
            .unwrap_or(Value::Null);
        let table = SettingsTable::new("serve", &params, SERVE_KEYS)?;
        let token = match params.get("token") {
            None => None,
            Some(value) => {
                let resolved = noeta::secrets::resolve_secrets(value, &agent::secrets())
                    .with_context(|| format!("{TOKEN_SETTING} cannot be resolved"))?;
                match resolved.as_str().map(str::trim) {
                    Some(token) if token.chars().count() >= MIN_TOKEN_CHARS => {
                        Some(token.to_owned())
                    }
                    _ => bail!(
                        "{TOKEN_SETTING} must be a string of at least {MIN_TOKEN_CHARS} characters (a secret reference such as \"{{env:NOETA_SERVE_TOKEN}}\")"
                    ),
                }
            }
        };
        Ok(Self {
            token,
            allowed_hosts: table.strings("allowed_hosts")?.unwrap_or_default(),
            max_connections: table.positive::<usize>("max_connections")?.unwrap_or(256),
            max_body_bytes: table
                .positive::<usize>("max_body_bytes")?
                .unwrap_or(1024 * 1024),
            header_timeout: table
                .positive_duration("header_timeout_ms", noeta_toolkit::TimeUnit::Milliseconds)?
                .unwrap_or(Duration::from_secs(10)),
        })
    }
}

/// The token a local server of this user asks for (`noeta serve`, `noeta mcp serve --http`):
/// the settings' `[plugins.serve] token`, else the one kept in `~/.noeta/serve-token`; and a
/// line saying which, for the server's first words.
pub(crate) fn server_token(paths: &HostPaths, args: &AgentArgs) -> Result<(String, String)> {
    let settings = ServeSettings::read(paths, args)?;
    token_of(paths, settings.token)
}

/// [`server_token`] from the settings' token, if any.
fn token_of(paths: &HostPaths, configured: Option<String>) -> Result<(String, String)> {
    let token = token::token(configured, paths.user_dir().as_deref())?;
    let note = match &token.source {
        token::Source::Settings => format!("the token of {TOKEN_SETTING}"),
        token::Source::File(file) => format!("the token in {}", file.display()),
        token::Source::Process => format!("a token made for this process: {}", token.value),
    };
    Ok((token.value, note))
}

/// What every handler shares.
pub(crate) struct Api {
    /// The host operations (and the store) requests are served with.
    tasks: Arc<noeta::Tasks>,
    token: String,
    hosts: HostCheck,
    stop: Arc<AtomicBool>,
    ui: Option<Arc<dyn noeta::frontends::Frontend>>,
    /// Reply text streaming from this process's worker slots.
    live: Option<LiveText>,
    /// What tasks run with, and what a request may ask for.
    bounds: routes::Bounds,
}

type Shared = Arc<Api>;

/// The built-in web frontend `noeta serve` serves at `/`.
pub(crate) fn web_page() -> Arc<dyn noeta::frontends::Frontend> {
    Arc::new(noeta::frontends::Web)
}

/// `noeta open FRONTEND`: a web frontend served on loopback (its URL printed, with the token),
/// or the terminal's chat.
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
        addr: DEFAULT_ADDR.to_owned(),
        store,
        workers,
        plugin_dirs,
        ui: Some(chosen),
        provider: None,
        model: None,
        permission_mode: None,
        opened: true,
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
        provider: args.provider.clone(),
        model: args.model.clone(),
        permission_mode: args.permission_mode.clone(),
        ..AgentArgs::default()
    };
    let settings = ServeSettings::read(paths, &base)?;
    if !addr.ip().is_loopback() && settings.token.is_none() {
        bail!(
            "refusing to serve on {addr}, which is not a loopback address, without a token: set \
             {TOKEN_SETTING} to a secret reference such as \"{{env:NOETA_SERVE_TOKEN}}\" \
             (every request then needs `Authorization: Bearer <token>`)"
        );
    }
    let bounds = routes::Bounds::of(paths, &base)?;
    let (token, token_note) = token_of(paths, settings.token.clone())?;
    let stores = noeta::open_store(paths, args.store.as_deref())?;
    let stop = Arc::new(AtomicBool::new(false));
    let live = (args.workers > 0).then(LiveText::new);
    // One set of host operations for the requests and the worker slots: a host is opened
    // once per workspace and settings choice, and a model only to run a task.
    let work = WorkerArgs {
        store: args.store.clone(),
        slots: args.workers.max(1),
        lease_secs: 60,
        plugin_dirs: args.plugin_dirs.clone(),
        plugins_shown: !args.opened,
    };
    let name = noeta::process_worker("worker");
    let tasks = Arc::new(worker::tasks(
        paths,
        &work,
        stores,
        &name,
        &stop,
        live.as_ref(),
    ));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        // A page opened again while another holds the usual port gets a free one.
        Err(err) if args.opened && err.kind() == std::io::ErrorKind::AddrInUse => {
            let free = SocketAddr::new(addr.ip(), 0);
            tokio::net::TcpListener::bind(free)
                .await
                .with_context(|| format!("cannot listen on {free}"))?
        }
        Err(err) => return Err(err).with_context(|| format!("cannot listen on {addr}")),
    };
    let bound = listener.local_addr()?;
    let hosts = HostCheck::loopback(bound.port())
        .with_allowed(&settings.allowed_hosts)
        .map_err(|why| anyhow::anyhow!("[plugins.serve] allowed_hosts: {why}"))?;
    if args.ui.is_some() && args.opened {
        // The page first: it is what `noeta open web` is for.
        outln!("http://{bound}/#token={token}");
        outln!("http://{bound}/v1/");
    } else {
        outln!("http://{bound}/v1/");
        if args.ui.is_some() {
            // The page takes the token from the address's fragment, which no request carries.
            outln!("http://{bound}/#token={token}");
        }
    }
    crate::stdio::flush_out();
    if args.opened && bound.port() != addr.port() {
        eoutln!(
            "port {} is in use (another noeta, maybe): serving on {} instead",
            addr.port(),
            bound.port()
        );
    }
    eoutln!(
        "noeta API on http://{bound}/v1/ — store {}, {} worker slot(s) in this process; every \
         request needs `Authorization: Bearer <token>` ({token_note})",
        tasks.stores().url,
        args.workers,
    );
    let working = if args.workers > 0 {
        let worker = worker::open(paths, work, Arc::clone(&tasks), name, Arc::clone(&stop))?;
        Some(tokio::spawn(worker.run()))
    } else {
        None
    };
    crate::stdio::flush_out();
    let api = Arc::new(Api {
        tasks,
        token,
        hosts,
        stop: Arc::clone(&stop),
        ui: args.ui,
        live,
        bounds,
    });
    let router = Router::new()
        .route("/", get(routes::page))
        .route("/assets/{name}", get(routes::page))
        .route("/v1/agents", get(routes::agents))
        .route("/v1/tasks", get(routes::list).post(routes::create))
        .route("/v1/tasks/{id}", get(routes::show))
        .route("/v1/tasks/{id}/events", get(events::events))
        .route("/v1/tasks/{id}/messages", post(routes::message))
        .route("/v1/tasks/{id}/answer", post(routes::answer))
        .route("/v1/tasks/{id}/cancel", post(routes::cancel))
        .fallback(|| async { routes::Fail(StatusCode::NOT_FOUND, "no such route".to_owned()) })
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&api),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn(guard::secure))
        .with_state(api);
    let signal = Arc::clone(&stop);
    let stopping = async move { worker::stop_on_signal(signal).await };
    accept(listener, router, &settings, stopping).await;
    if let Some(working) = working {
        match tokio::time::timeout(STOP_GRACE, working).await {
            Ok(ended) => ended.context("the worker ended abnormally")??,
            Err(_) => eoutln!(
                "stopped: the tasks still running resume with the next worker, as after a crash"
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Serves `router` on `listener` until `stopping` completes: at most `max_connections` open at
/// once (more wait in the listen queue), each request's header read within `header_timeout`
/// (the same deadline ends a keep-alive connection that sends nothing more). Once stopping,
/// open connections get [`STOP_GRACE`] to finish.
async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    settings: &ServeSettings,
    stopping: impl Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(settings.max_connections));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(settings.header_timeout);
    let builder = Arc::new(builder);
    let service = hyper_util::service::TowerToHyperService::new(router);
    tokio::pin!(stopping);
    loop {
        let slot = tokio::select! {
            () = &mut stopping => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let stream = tokio::select! {
            () = &mut stopping => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    // Out of descriptors or the like: wait a moment instead of spinning.
                    tracing::warn!("noeta serve cannot accept a connection: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = service.clone();
        let builder = Arc::clone(&builder);
        tokio::spawn(async move {
            let _slot = slot;
            let connection = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(err) = connection.await {
                tracing::debug!("an HTTP connection to noeta serve ended: {err}");
            }
        });
    }
    drop(listener);
    // Event streams end at the stop flag; the other requests get the grace to finish.
    let max = u32::try_from(settings.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(STOP_GRACE, slots.acquire_many(max)).await;
}

impl Api {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}
