//! One running plugin program: its pipes, the thread that reads its answers, and calls waiting
//! for them (blocking for the kernel's synchronous hooks, async for the others).
//!
//! Messages are JSON-RPC 2.0, one per line. Several calls may be in flight at once (one per
//! task step that reaches the plugin); the reader thread hands each answer to its caller by
//! id, and a request the program makes while a call is in flight (`view/messages`, …) to the
//! caller whose id it names in `params.call`, who answers it from the view it holds.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a write that found the program gone waits for its reader to say how it ended.
const GONE_WAIT: Duration = Duration::from_millis(500);

use futures::StreamExt;
use futures::channel::mpsc as async_mpsc;
use serde_json::{Value, json};

use crate::watchdog::Watchdog;

/// The longest line a program may write (a message); longer is a broken program.
const MAX_LINE: u64 = 64 * 1024 * 1024;

/// Something the program sent a caller.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// The answer to the call: its `result`, or its `error` message.
    Reply(Result<Value, String>),
    /// A request the program makes while the call is in flight.
    Request {
        /// Its id, for the answer.
        id: Value,
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// A notification about the call (`tool/progress`).
    Notice {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// The program died or broke the protocol; the call will get no answer.
    Broken(String),
}

enum Waiter {
    Blocking(std::sync::mpsc::Sender<Incoming>),
    Async(async_mpsc::UnboundedSender<Incoming>),
}

impl Waiter {
    fn send(&self, incoming: Incoming) {
        // A caller that stopped waiting dropped its receiver; nothing to do then.
        match self {
            Waiter::Blocking(tx) => drop(tx.send(incoming)),
            Waiter::Async(tx) => drop(tx.unbounded_send(incoming)),
        }
    }
}

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The program answered with a JSON-RPC error.
    Refused(String),
    /// The program is gone or broke the protocol (crash, garbage, missed deadline).
    Broken(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused(message) => write!(f, "it answered with an error: {message}"),
            CallError::Broken(reason) => f.write_str(reason),
        }
    }
}

/// Answers the program's requests made during a call (`view/…`); `Err` is the error message.
pub(crate) type Serve<'a> = dyn Fn(&str, &Value) -> Result<Value, String> + Sync + 'a;

/// Receives a call's notifications (`tool/progress`).
pub(crate) type Notices<'a> = dyn Fn(&str, &Value) + Sync + 'a;

/// How many of the program's last stderr lines an exit reason quotes.
const STDERR_TAIL_LINES: usize = 5;
/// The characters of one quoted stderr line.
const STDERR_LINE_CHARS: usize = 300;

struct Shared {
    label: String,
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    pending: Mutex<HashMap<u64, Waiter>>,
    broken: Mutex<Option<String>>,
    deadlines: Watchdog,
    /// The program's last stderr lines, and whether its stderr has ended: a program that exits
    /// says why there, and the exit reason quotes it.
    stderr_tail: Mutex<(VecDeque<String>, bool)>,
}

impl Shared {
    /// Marks the connection broken (the first reason wins), ends the program, and tells every
    /// waiting caller.
    fn fail(&self, reason: String) {
        {
            let mut broken = self.broken.lock().unwrap_or_else(PoisonError::into_inner);
            if broken.is_none() {
                *broken = Some(reason);
            }
        }
        self.deadlines.stop();
        self.stdin
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        drop(child.kill());
        drop(child.wait());
        drop(child);
        let reason = self.broken_reason().unwrap_or_default();
        let waiters: Vec<Waiter> = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, w)| w)
            .collect();
        for waiter in waiters {
            waiter.send(Incoming::Broken(reason.clone()));
        }
    }

    fn broken_reason(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn write(&self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pipe) = stdin.as_mut() else {
            return Err(self
                .broken_reason()
                .unwrap_or_else(|| "its input is closed".to_owned()));
        };
        pipe.write_all(line.as_bytes())
            .and_then(|()| pipe.flush())
            .map_err(|err| {
                // A program that is gone is told by how it ended (its exit status, what it
                // wrote to stderr), which its reader records as soon as its output closes.
                if err.kind() == std::io::ErrorKind::BrokenPipe {
                    let deadline = std::time::Instant::now() + GONE_WAIT;
                    while std::time::Instant::now() < deadline {
                        if let Some(reason) = self.broken_reason() {
                            return reason;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                format!("writing to it failed: {err}")
            })
    }

    /// The reader thread's loop: route every line until the program's output ends.
    fn read_loop(self: Arc<Self>, stdout: impl Read) {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        let reason = loop {
            line.clear();
            match reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) => break self.exit_reason(),
                Ok(_) if line.last() != Some(&b'\n') && line.len() as u64 >= MAX_LINE => {
                    break format!("it wrote a line over {MAX_LINE} bytes");
                }
                Ok(_) => {}
                Err(err) => break format!("reading its output failed: {err}"),
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            if let Err(reason) = self.route(text) {
                break reason;
            }
        };
        let reason = self.quoting_stderr(reason);
        self.fail(reason);
    }

    fn exit_reason(&self) -> String {
        let exited = {
            let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
            // The output closed; give the program a moment to be reaped for its status.
            let mut status = None;
            for _ in 0..50 {
                if let Ok(Some(done)) = child.try_wait() {
                    status = Some(done);
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            status
        };
        match exited {
            Some(status) => format!("it exited ({status})"),
            None => "it closed its output".to_owned(),
        }
    }

    /// `reason` with the program's last stderr lines, where a program says why it failed (a
    /// traceback, a missing module): read until its stderr ends, or for half a second.
    fn quoting_stderr(&self, reason: String) -> String {
        for _ in 0..250 {
            if self
                .stderr_tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .1
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let tail: Vec<String> = self
            .stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .iter()
            .cloned()
            .collect();
        if tail.is_empty() {
            reason
        } else {
            format!("{reason}; its stderr ends: {}", tail.join(" | "))
        }
    }

    /// Routes one line; `Err` when it is not a JSON-RPC message.
    fn route(&self, text: &str) -> Result<(), String> {
        let garbage = || {
            let shown: String = text.chars().take(200).collect();
            format!("it wrote a line that is not a JSON-RPC message: `{shown}`")
        };
        let message: Value = serde_json::from_str(text).map_err(|_| garbage())?;
        let Some(object) = message.as_object() else {
            return Err(garbage());
        };
        if let Some(method) = object.get("method").and_then(Value::as_str) {
            let params = object.get("params").cloned().unwrap_or(Value::Null);
            let call = params.get("call").and_then(Value::as_u64);
            let waiter_found = call.is_some_and(|call| {
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&call)
                    .map(|waiter| {
                        waiter.send(match object.get("id") {
                            Some(id) => Incoming::Request {
                                id: id.clone(),
                                method: method.to_owned(),
                                params: params.clone(),
                            },
                            None => Incoming::Notice {
                                method: method.to_owned(),
                                params: params.clone(),
                            },
                        });
                    })
                    .is_some()
            });
            if !waiter_found && let Some(id) = object.get("id") {
                let reply = json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32602,
                    "message": format!("`{method}` must name a call in progress in `params.call`"),
                }});
                drop(self.write(&reply));
            }
            return Ok(());
        }
        let Some(id) = object.get("id").and_then(Value::as_u64) else {
            return Err(garbage());
        };
        let outcome = match (object.get("result"), object.get("error")) {
            (Some(result), None) => Ok(result.clone()),
            (None, Some(error)) => Err(error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned)),
            _ => return Err(garbage()),
        };
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(waiter) = waiter {
            waiter.send(Incoming::Reply(outcome));
        }
        Ok(())
    }
}

/// Why a call that missed its deadline failed.
fn missed_reason(method: &str, deadline: Duration) -> String {
    format!(
        "it did not answer `{method}` within {} ms",
        deadline.as_millis()
    )
}

/// A running plugin program.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    next_id: AtomicU64,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.fail("the host let it go".to_owned());
    }
}

impl Connection {
    /// Takes over a spawned program whose stdin, stdout and stderr are piped; `label` names it
    /// in the log.
    pub(crate) fn start(label: String, mut child: Child) -> Result<Self, String> {
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("its output is not piped")?;
        let stderr = child.stderr.take();
        let shared = Arc::new(Shared {
            label,
            stdin: Mutex::new(stdin),
            child: Mutex::new(child),
            pending: Mutex::new(HashMap::new()),
            broken: Mutex::new(None),
            deadlines: Watchdog::default(),
            stderr_tail: Mutex::new((VecDeque::new(), stderr.is_none())),
        });
        let watched = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("noeta-extproc-deadlines".to_owned())
            .spawn(move || {
                watched.deadlines.run(|id, reason| {
                    // A call still waiting past its deadline: the program is ended (a hook that
                    // hangs must not hold the worker), which answers every waiter.
                    let waiting = watched
                        .pending
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .contains_key(&id);
                    if waiting {
                        watched.fail(reason);
                    }
                });
            })
            .map_err(|err| format!("cannot start its deadline thread: {err}"))?;
        let reader = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("noeta-extproc-read".to_owned())
            .spawn(move || reader.read_loop(stdout))
            .map_err(|err| format!("cannot start its reader thread: {err}"))?;
        if let Some(stderr) = stderr {
            let heard = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("noeta-extproc-stderr".to_owned())
                .spawn(move || {
                    for line in BufReader::new(stderr).lines() {
                        let Ok(line) = line else { break };
                        tracing::debug!(target: "noeta::plugin", plugin = %heard.label, "{line}");
                        let line = line.trim();
                        if line.is_empty() {
                            continue;
                        }
                        let mut tail = heard
                            .stderr_tail
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        if tail.0.len() == STDERR_TAIL_LINES {
                            tail.0.pop_front();
                        }
                        tail.0
                            .push_back(line.chars().take(STDERR_LINE_CHARS).collect());
                    }
                    heard
                        .stderr_tail
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .1 = true;
                })
                .map_err(|err| format!("cannot start its stderr thread: {err}"))?;
        }
        Ok(Self {
            shared,
            next_id: AtomicU64::new(1),
        })
    }

    /// Why the connection broke, if it did.
    pub(crate) fn broken(&self) -> Option<String> {
        self.shared.broken_reason()
    }

    /// Breaks the connection with `reason` (a missed deadline): the program is ended.
    pub(crate) fn break_with(&self, reason: String) {
        self.shared.fail(reason);
    }

    fn register(&self, waiter: Waiter) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, waiter);
        id
    }

    fn forget(&self, id: u64) -> bool {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .is_some()
    }

    fn send_request(&self, id: u64, method: &str, params: &Value) -> Result<(), CallError> {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.shared.write(&message).map_err(|reason| {
            self.forget(id);
            CallError::Broken(reason)
        })
    }

    /// Answers a request the program made during a call.
    fn answer(&self, id: Value, outcome: Result<Value, String>) {
        let reply = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(message) => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": message,
            }}),
        };
        drop(self.shared.write(&reply));
    }

    fn missed(&self, method: &str, deadline: Duration) -> CallError {
        let reason = missed_reason(method, deadline);
        self.break_with(reason.clone());
        CallError::Broken(reason)
    }

    /// Handles one incoming message; `Some` once the call is over.
    fn handle(
        &self,
        incoming: Incoming,
        serve: &Serve<'_>,
        notices: &Notices<'_>,
    ) -> Option<Result<Value, CallError>> {
        match incoming {
            Incoming::Reply(Ok(result)) => Some(Ok(result)),
            Incoming::Reply(Err(message)) => Some(Err(CallError::Refused(message))),
            Incoming::Broken(reason) => Some(Err(CallError::Broken(reason))),
            Incoming::Request { id, method, params } => {
                self.answer(id, serve(&method, &params));
                None
            }
            Incoming::Notice { method, params } => {
                notices(&method, &params);
                None
            }
        }
    }

    /// Calls `method` and blocks until the answer or `deadline` (a missed deadline ends the
    /// program: a hook that hangs must not hold the worker).
    pub(crate) fn call_blocking(
        &self,
        method: &str,
        params: &Value,
        deadline: Duration,
        serve: &Serve<'_>,
    ) -> Result<Value, CallError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let id = self.register(Waiter::Blocking(tx));
        self.send_request(id, method, params)?;
        let until = std::time::Instant::now() + deadline;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(incoming) => {
                    if let Some(done) = self.handle(incoming, serve, &|_, _| {}) {
                        return done;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    self.forget(id);
                    return Err(self.missed(method, deadline));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(CallError::Broken(
                        self.broken()
                            .unwrap_or_else(|| "the connection closed".to_owned()),
                    ));
                }
            }
        }
    }

    /// Calls `method` and waits for the answer; with a `deadline`, a missed one ends the
    /// program. Dropping the future (a cancelled task) tells the program with `$/cancel`.
    pub(crate) async fn call(
        &self,
        method: &str,
        params: &Value,
        deadline: Option<Duration>,
        serve: &Serve<'_>,
        notices: &Notices<'_>,
    ) -> Result<Value, CallError> {
        let (tx, mut rx) = async_mpsc::unbounded();
        let id = self.register(Waiter::Async(tx));
        let mut guard = CancelGuard {
            connection: self,
            id,
            armed: true,
        };
        if let Some(deadline) = deadline {
            self.shared
                .deadlines
                .arm(id, deadline, missed_reason(method, deadline));
        }
        self.send_request(id, method, params)?;
        loop {
            let Some(incoming) = rx.next().await else {
                guard.armed = false;
                return Err(CallError::Broken(
                    self.broken()
                        .unwrap_or_else(|| "the connection closed".to_owned()),
                ));
            };
            if let Some(done) = self.handle(incoming, serve, notices) {
                guard.armed = false;
                return done;
            }
        }
    }
}

/// Tells the program a call was given up (its future dropped before the answer).
struct CancelGuard<'a> {
    connection: &'a Connection,
    id: u64,
    armed: bool,
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        self.connection.shared.deadlines.disarm(self.id);
        if self.armed && self.connection.forget(self.id) {
            let notice = json!({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": self.id}});
            drop(self.connection.shared.write(&notice));
        }
    }
}
