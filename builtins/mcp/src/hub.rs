//! The connections to one session's MCP servers, kept on a runtime of their own.
//!
//! rmcp needs tokio; the kernel is executor-agnostic. So every connection lives on one tokio
//! runtime (one worker thread, `noeta-mcp`) that the hub owns, and the tool calls the runner
//! makes are handed to it and awaited through a channel, from whatever executor polls them.
//! Dropping a call's future aborts it there, which drops rmcp's request and sends the server
//! the protocol's cancellation.
//!
//! Servers start in the background — at a turn's intake, or the first time a resumed task's
//! tools are wanted — each within its startup deadline. The first offer of the session's tools
//! waits for them at most `startup_wait_ms`, counted from when they began; a server not up by
//! then is late, and its tools join when it is, deferred (found with ToolSearch), so no turn
//! waits for a slow server and the request's stable prefix does not change under it. One that fails to start, dies or stops answering is marked failed with the
//! cause (for a command, the last lines it wrote to stderr too) and started again on the next
//! call to it, no sooner than its back-off allows (1 s, doubling to 30 s). A failure concerns
//! that server alone.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;

use crate::elicit::{Client, Elicitor};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Map, Value};

use crate::connect::{backoff, connect_into, fail, with_stderr};
use crate::http;
use crate::remote::{Remote, RemoteResolver};
use crate::settings::{Server, Transport};
use crate::sign_in::Challenge;
use crate::tokens::TokenVault;

/// A tool as a server lists it.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    /// The server's alias.
    pub(crate) alias: String,
    /// The name the server knows it by.
    pub(crate) remote: String,
    /// Its description.
    pub(crate) description: String,
    /// Its input schema, as the server gives it.
    pub(crate) schema: Value,
    /// Its annotations say it changes nothing.
    pub(crate) read_only: bool,
    /// Its annotations say calling it twice is calling it once.
    pub(crate) idempotent: bool,
    /// Offered through ToolSearch rather than up front.
    pub(crate) deferred: bool,
}

/// A server's state as reported: its tools, or why it is down.
pub(crate) type State = Result<Vec<Listed>, String>;

/// A resource as a server lists it.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    /// The server's alias.
    pub(crate) alias: String,
    /// Its URI.
    pub(crate) uri: String,
    /// Its name.
    pub(crate) name: String,
    /// What it is, when the server says.
    pub(crate) description: Option<String>,
    /// Its media type, when the server says.
    pub(crate) mime: Option<String>,
}

/// A prompt as a server lists it.
#[derive(Debug, Clone)]
pub(crate) struct Prompt {
    /// The server's alias.
    pub(crate) alias: String,
    /// Its name on the server.
    pub(crate) name: String,
    /// What it is, when the server says.
    pub(crate) description: Option<String>,
    /// Its arguments in order: name, whether required, description.
    pub(crate) arguments: Vec<(String, bool, Option<String>)>,
}

/// A live connection.
pub(crate) struct Live {
    pub(crate) service: RunningService<RoleClient, Client>,
    pub(crate) tools: Vec<Listed>,
    pub(crate) resources: Vec<Resource>,
    pub(crate) prompts: Vec<Prompt>,
}

pub(crate) enum Conn {
    /// Not tried yet.
    Idle,
    Ready(Live),
    Failed {
        error: String,
        failures: u32,
        at: Instant,
    },
}

/// What the host's resolver last said of a `type = "host"` server.
pub(crate) type Endpoint = Result<Option<Remote>, String>;

pub(crate) struct Slot {
    pub(crate) server: Server,
    pub(crate) conn: tokio::sync::Mutex<Conn>,
    /// The last lines the server's process wrote to stderr.
    pub(crate) stderr: Arc<Mutex<VecDeque<String>>>,
    /// A `type = "host"` server's endpoint as last resolved (`None`: never asked).
    pub(crate) endpoint: Mutex<Option<Endpoint>>,
    /// Who answers the server's requests for input (none: they are declined).
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
    /// Where sign-ins to remote servers are kept (none: no tokens are sent).
    pub(crate) tokens: Option<Arc<dyn TokenVault>>,
    /// The sign-in the server last asked for, when it refused the client.
    pub(crate) challenge: Mutex<Option<Challenge>>,
}

/// The starts in flight, and when the latest began.
#[derive(Default)]
struct Starts {
    running: usize,
    latest: Option<Instant>,
    /// A start began since the last offer (which then waits for it, briefly).
    fresh: bool,
}

/// One session's servers.
pub(crate) struct Hub {
    slots: Arc<Vec<Slot>>,
    defer_above: usize,
    /// Starts in flight, told when one ends.
    starts: Arc<(Mutex<Starts>, Condvar)>,
    /// Whether the servers never tried have been started (a resumed task's first offer).
    kicked: AtomicBool,
    /// Whether the session's tools have been offered once (after the first wait).
    offered: AtomicBool,
    /// The servers that were not up at the first offer: their tools are deferred.
    late: Mutex<BTreeSet<usize>>,
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The host's resolver of `type = "host"` servers.
    resolver: Option<Arc<dyn RemoteResolver>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("servers", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl Hub {
    pub(crate) fn new(
        servers: Vec<Server>,
        defer_above: usize,
        resolver: Option<Arc<dyn RemoteResolver>>,
        elicitor: Option<Arc<dyn Elicitor>>,
        tokens: Option<Arc<dyn TokenVault>>,
    ) -> Self {
        let slots = servers
            .into_iter()
            .map(|server| Slot {
                server,
                conn: tokio::sync::Mutex::new(Conn::Idle),
                stderr: Arc::default(),
                endpoint: Mutex::new(None),
                elicitor: elicitor.clone(),
                tokens: tokens.clone(),
                challenge: Mutex::new(None),
            })
            .collect();
        Self {
            slots: Arc::new(slots),
            defer_above,
            starts: Arc::default(),
            kicked: AtomicBool::new(false),
            offered: AtomicBool::new(false),
            late: Mutex::new(BTreeSet::new()),
            runtime: OnceLock::new(),
            resolver,
        }
    }

    /// Whether any server is configured.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn runtime(&self) -> Result<&tokio::runtime::Runtime, String> {
        self.runtime
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("noeta-mcp")
                    .enable_all()
                    .build()
                    .map_err(|e| format!("mcp: cannot start the runtime for MCP servers: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Runs `work` on the hub's runtime and awaits it from any executor; dropping the returned
    /// future aborts the work.
    async fn on_runtime<T, F>(&self, work: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, String>> + Send + 'static,
    {
        let runtime = self.runtime()?;
        let (done, answer) = futures::channel::oneshot::channel();
        let task = runtime.spawn(async move {
            let _ = done.send(work.await);
        });
        let _abort = AbortOnDrop(task.abort_handle());
        answer
            .await
            .map_err(|_| "mcp: the MCP runtime stopped".to_owned())?
    }

    /// Asks the host's resolver for every `type = "host"` server's endpoint, then starts every
    /// server not tried yet (and every failed one whose back-off has passed, when
    /// `retry_failed`), together, each within its startup deadline.
    pub(crate) async fn start(&self, retry_failed: bool) -> Result<(), String> {
        let slots = self.slots.clone();
        let resolver = self.resolver.clone();
        self.on_runtime(async move {
            resolve_hosted(&slots, resolver.as_deref(), true).await;
            let starts = (0..slots.len()).map(|i| {
                let slots = slots.clone();
                async move {
                    let slot = &slots[i];
                    let mut conn = slot.conn.lock().await;
                    let due = match &*conn {
                        Conn::Idle => true,
                        Conn::Failed { failures, at, .. } => {
                            retry_failed && at.elapsed() >= backoff(*failures)
                        }
                        Conn::Ready(_) => false,
                    };
                    if due {
                        connect_into(slot, &mut conn).await;
                    }
                }
            });
            futures::future::join_all(starts).await;
            Ok(())
        })
        .await
    }

    /// Starts, without waiting, every server not tried yet (and, with `retry_failed`, every
    /// failed one whose back-off has passed; the host's resolver is asked again then), each
    /// within its startup deadline.
    pub(crate) fn start_in_background(&self, retry_failed: bool) {
        if self.is_empty() {
            return;
        }
        let Ok(runtime) = self.runtime() else {
            return;
        };
        self.kicked.store(true, Ordering::SeqCst);
        {
            let mut starts = self.starts.0.lock().unwrap_or_else(PoisonError::into_inner);
            starts.running += 1;
            starts.latest = Some(Instant::now());
            starts.fresh = true;
        }
        let slots = self.slots.clone();
        let resolver = self.resolver.clone();
        let starts = Arc::clone(&self.starts);
        runtime.spawn(async move {
            resolve_hosted(&slots, resolver.as_deref(), retry_failed).await;
            let each = slots.iter().map(|slot| async move {
                let mut conn = slot.conn.lock().await;
                let due = match &*conn {
                    Conn::Idle => true,
                    Conn::Failed { failures, at, .. } => {
                        retry_failed && at.elapsed() >= backoff(*failures)
                    }
                    Conn::Ready(_) => false,
                };
                if due {
                    connect_into(slot, &mut conn).await;
                }
            });
            futures::future::join_all(each).await;
            let (lock, ended) = &*starts;
            lock.lock().unwrap_or_else(PoisonError::into_inner).running -= 1;
            ended.notify_all();
        });
    }

    /// Starts every server not tried yet and waits (blocking this thread) until each is up or
    /// failed: for an in-process server, whose tools are listed when it is resolved.
    pub(crate) fn start_blocking(&self) {
        self.start_in_background(false);
        let (lock, ended) = &*self.starts;
        let mut starts = lock.lock().unwrap_or_else(PoisonError::into_inner);
        while starts.running > 0 {
            starts = ended.wait(starts).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Before an offer of tools: starts the servers never tried (a resumed task offers tools
    /// before any intake), and, when starts began since the last offer, waits for them at
    /// most `wait` from when they began. At the first offer, the servers still not up are late.
    pub(crate) fn before_offer(&self, wait: Duration) {
        if self.is_empty() {
            return;
        }
        if !self.kicked.load(Ordering::SeqCst) {
            self.start_in_background(false);
        }
        let first = !self.offered.swap(true, Ordering::SeqCst);
        let (lock, ended) = &*self.starts;
        let mut starts = lock.lock().unwrap_or_else(PoisonError::into_inner);
        if std::mem::take(&mut starts.fresh) {
            let until = starts.latest.unwrap_or_else(Instant::now) + wait;
            while starts.running > 0 {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                starts = ended
                    .wait_timeout(starts, until - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        drop(starts);
        if first {
            let mut late = self.late.lock().unwrap_or_else(PoisonError::into_inner);
            for (index, slot) in self.slots.iter().enumerate() {
                if !matches!(slot.conn.try_lock().as_deref(), Ok(Conn::Ready(_))) {
                    late.insert(index);
                }
            }
        }
    }

    /// The tools of every server that is up, in alias order (each server's in its own order),
    /// each marked deferred when its server's are: `deferred = true`, or more than
    /// `defer_above` of them and no `deferred = false`.
    pub(crate) fn tools(&self) -> Vec<Listed> {
        let late = self
            .late
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, slot)| match slot.conn.try_lock().as_deref() {
                Ok(Conn::Ready(live)) => {
                    // A late server's tools join deferred: the request's tools stay as they were.
                    let deferred = late.contains(&index)
                        || slot
                            .server
                            .deferred
                            .unwrap_or(live.tools.len() > self.defer_above);
                    Some(
                        live.tools
                            .iter()
                            .map(move |tool| Listed {
                                deferred,
                                ..tool.clone()
                            })
                            .collect::<Vec<_>>(),
                    )
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The resources of every server that is up, in alias order.
    pub(crate) fn resources(&self) -> Vec<Resource> {
        self.slots
            .iter()
            .filter_map(|slot| match slot.conn.try_lock().as_deref() {
                Ok(Conn::Ready(live)) => Some(live.resources.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The prompts of every server that is up, in alias order.
    pub(crate) fn prompts(&self) -> Vec<Prompt> {
        self.slots
            .iter()
            .filter_map(|slot| match slot.conn.try_lock().as_deref() {
                Ok(Conn::Ready(live)) => Some(live.prompts.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Gets prompt `name` of server `alias` with `arguments` within the server's call
    /// deadline: the result as the protocol's JSON (`messages`), or why not.
    pub(crate) async fn get_prompt(
        &self,
        alias: &str,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, String> {
        let params =
            rmcp::model::GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments);
        self.ask(alias, format!("prompt `{name}`"), move |peer| async move {
            peer.get_prompt(params).await
        })
        .await
    }

    /// Reads resource `uri` of server `alias` within the server's call deadline: the result as
    /// the protocol's JSON (`contents`), or why not.
    pub(crate) async fn read_resource(&self, alias: &str, uri: &str) -> Result<Value, String> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
        self.ask(alias, format!("reading `{uri}`"), move |peer| async move {
            peer.read_resource(params).await
        })
        .await
    }

    /// One request to server `alias` (started if need be), within its call deadline; `what`
    /// names the request in errors. The answer as the protocol's JSON.
    async fn ask<T, F, Fut>(&self, alias: &str, what: String, request: F) -> Result<Value, String>
    where
        T: serde::Serialize + Send + 'static,
        F: FnOnce(rmcp::Peer<RoleClient>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, rmcp::ServiceError>> + Send + 'static,
    {
        let slots = self.slots.clone();
        let Some(index) = slots.iter().position(|s| s.server.alias == alias) else {
            let known: Vec<&str> = slots.iter().map(|s| s.server.alias.as_str()).collect();
            return Err(format!(
                "mcp: no server `{alias}` is configured (known: {})",
                known.join(", ")
            ));
        };
        self.on_runtime(async move {
            let slot = &slots[index];
            let peer = ready_peer(slot).await?;
            match tokio::time::timeout(slot.server.call_timeout, request(peer)).await {
                Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| e.to_string()),
                Ok(Err(err)) => Err(with_stderr(
                    format!("mcp server `{}`: {what} failed: {err}", slot.server.alias),
                    slot,
                )),
                Err(_) => Err(format!(
                    "mcp server `{}`: {what} gave no answer within {} s",
                    slot.server.alias,
                    slot.server.call_timeout.as_secs_f64()
                )),
            }
        })
        .await
    }

    /// Each server with its state: `Ok(tools)` when up, `Err(cause)` when it failed, and
    /// nothing when it was not tried.
    pub(crate) fn status(&self) -> Vec<(String, Option<State>)> {
        self.slots
            .iter()
            .map(|slot| {
                let state = match slot.conn.try_lock().as_deref() {
                    Ok(Conn::Ready(live)) => Some(Ok(live.tools.clone())),
                    Ok(Conn::Failed { error, .. }) => Some(Err(error.clone())),
                    Ok(Conn::Idle) => None,
                    Err(_) => Some(Err("busy".to_owned())),
                };
                (slot.server.alias.clone(), state)
            })
            .collect()
    }

    /// The `WWW-Authenticate` challenge server `alias` last refused the client with, if its
    /// last refusal was for want of sign-in.
    pub(crate) fn challenge(&self, alias: &str) -> Option<String> {
        let slot = self.slots.iter().find(|s| s.server.alias == alias)?;
        http::last_challenge(slot)
    }

    /// Calls tool `remote` of server `alias` with `arguments`, within the server's call
    /// deadline: the result as the protocol's JSON (`content`, `isError`, …), or why not.
    pub(crate) async fn call(
        &self,
        alias: &str,
        remote: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, String> {
        let slots = self.slots.clone();
        let Some(index) = slots.iter().position(|s| s.server.alias == alias) else {
            return Err(format!("mcp: no server `{alias}` is configured"));
        };
        let remote = remote.to_owned();
        self.on_runtime(async move {
            let slot = &slots[index];
            let peer = ready_peer(slot).await?;
            let params = CallToolRequestParams::new(remote.clone()).with_arguments(arguments);
            let deadline = slot.server.call_timeout;
            match tokio::time::timeout(deadline, peer.call_tool(params)).await {
                Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| {
                    format!(
                        "mcp server `{}`: its result does not serialise: {e}",
                        slot.server.alias
                    )
                }),
                Ok(Err(err)) => {
                    http::note_challenge(&slot.challenge, &err);
                    if let Some(line) = http::sign_in_needed(slot) {
                        return Err(line);
                    }
                    let cause = format!(
                        "mcp server `{}`: `{remote}` failed: {err}",
                        slot.server.alias
                    );
                    // The connection is gone (or never answered right): start afresh next time.
                    let closed = peer.is_transport_closed();
                    let cause = with_stderr(cause, slot);
                    if closed {
                        fail(slot, cause.clone()).await;
                    }
                    Err(cause)
                }
                Err(_) => {
                    let cause = with_stderr(
                        format!(
                            "mcp server `{}`: `{remote}` gave no answer within {} s (its deadline, \
                             `call_timeout_ms`)",
                            slot.server.alias,
                            deadline.as_secs_f64()
                        ),
                        slot,
                    );
                    // A server that hangs is restarted on the next call.
                    fail(slot, cause.clone()).await;
                    Err(cause)
                }
            }
        })
        .await
    }
}

impl Drop for Hub {
    /// Stops every connection — a command's process group is killed — before the hub is gone.
    /// The runtime is shut down on a thread of its own: the hub may be dropped inside another
    /// runtime's task, where tokio refuses to wait.
    fn drop(&mut self) {
        if let Some(Ok(runtime)) = self.runtime.take() {
            let _ = std::thread::Builder::new()
                .name("noeta-mcp-stop".to_owned())
                .spawn(move || drop(runtime))
                .map(std::thread::JoinHandle::join);
        }
    }
}

/// The peer of `slot`'s server, starting it when it is down and its back-off has passed.
async fn ready_peer(slot: &Slot) -> Result<rmcp::Peer<RoleClient>, String> {
    let mut conn = slot.conn.lock().await;
    if let Conn::Failed {
        error,
        failures,
        at,
    } = &*conn
    {
        let wait = backoff(*failures).saturating_sub(at.elapsed());
        if !wait.is_zero() {
            return Err(format!(
                "{error} (it is started again in {:.1} s)",
                wait.as_secs_f64()
            ));
        }
    }
    if !matches!(*conn, Conn::Ready(_)) {
        connect_into(slot, &mut conn).await;
    }
    match &*conn {
        Conn::Ready(live) => Ok(live.service.peer().clone()),
        Conn::Failed { error, .. } => Err(error.clone()),
        Conn::Idle => Err(format!("mcp server `{}`: not started", slot.server.alias)),
    }
}

/// Asks `resolver` for the endpoint of every `type = "host"` server (`all`: again; otherwise
/// only those never asked), within each server's startup deadline. A server whose endpoint
/// changed is disconnected, to be started afresh at the new one.
async fn resolve_hosted(slots: &[Slot], resolver: Option<&dyn RemoteResolver>, all: bool) {
    for slot in slots
        .iter()
        .filter(|s| s.server.transport == Transport::Host)
    {
        let asked = slot
            .endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if asked && !all {
            continue;
        }
        let alias = &slot.server.alias;
        let endpoint: Endpoint = match resolver {
            None => Err(format!(
                "`{alias}` is a `type = \"host\"` server and this host has no MCP server resolver \
                 (an embedding host sets `HostConfig::mcp_server_resolver`)"
            )),
            Some(resolver) => {
                match tokio::time::timeout(slot.server.startup_timeout, resolver.resolve(alias))
                    .await
                {
                    Ok(Ok(endpoint)) => Ok(endpoint),
                    Ok(Err(err)) => Err(format!("the host's resolver failed: {err}")),
                    Err(_) => Err(format!(
                        "the host's resolver gave no answer within {} s",
                        slot.server.startup_timeout.as_secs_f64()
                    )),
                }
            }
        };
        let changed = {
            let mut last = slot.endpoint.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = last.as_ref() != Some(&endpoint);
            *last = Some(endpoint);
            changed
        };
        if changed {
            let mut conn = slot.conn.lock().await;
            if let Conn::Ready(live) = std::mem::replace(&mut *conn, Conn::Idle) {
                let _ = live.service.cancel().await;
            }
        }
    }
}

/// Aborts a spawned task when the future awaiting it is dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
