//! One plugin instance (a plugin and its parameters): starts its program on first use,
//! performs the handshake, and restarts it with backoff after it crashed, hung or broke the
//! protocol.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::connection::{CallError, Connection, Notices, Serve};
use crate::protocol::{Handshake, PROTOCOL_VERSION};

/// How a plugin's program is started, with its environment's secrets already resolved.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The plugin's name.
    pub(crate) plugin: String,
    /// The plugin directory.
    pub(crate) dir: PathBuf,
    /// The program.
    pub(crate) command: String,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Variables added to its environment.
    pub(crate) env: Vec<(String, String)>,
    /// Its working directory.
    pub(crate) cwd: PathBuf,
    /// A hook call's deadline.
    pub(crate) hook_timeout: Duration,
}

impl Launch {
    /// The program's path: one with a slash is relative to the plugin directory.
    fn program(&self) -> PathBuf {
        let path = Path::new(&self.command);
        if self.command.contains('/') && path.is_relative() {
            self.dir.join(path)
        } else {
            path.to_path_buf()
        }
    }

    fn spawn(&self) -> Result<std::process::Child, String> {
        let mut command = Command::new(self.program());
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("NOETA_PLUGIN_DIR", &self.dir)
            .env("NOETA_PLUGIN", &self.plugin)
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: a Ctrl-C at the terminal reaches the host, which cancels the
        // calls (`$/cancel`), not the plugin behind its back.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command.spawn().map_err(|err| {
            format!(
                "cannot start `{}` (in {}): {err}",
                self.program().display(),
                self.cwd.display()
            )
        })
    }
}

/// The first wait after a failure; it doubles with each failure in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

struct Running {
    connection: Arc<Connection>,
    handshake: Arc<Handshake>,
}

#[derive(Default)]
struct State {
    running: Option<Running>,
    /// Failures in a row since the last answered call.
    failures: u32,
    /// No restart before this.
    retry_at: Option<Instant>,
    /// What went wrong last.
    last_failure: Option<String>,
}

/// One plugin instance's program.
pub(crate) struct Supervisor {
    launch: Launch,
    params: Value,
    state: Mutex<State>,
}

impl Supervisor {
    pub(crate) fn new(launch: Launch, params: Value) -> Self {
        Self {
            launch,
            params,
            state: Mutex::new(State::default()),
        }
    }

    /// The plugin's name.
    pub(crate) fn plugin(&self) -> &str {
        &self.launch.plugin
    }

    /// A hook call's deadline.
    pub(crate) fn hook_timeout(&self) -> Duration {
        self.launch.hook_timeout
    }

    /// The running program, started (and its handshake done) when it is not running.
    pub(crate) fn running(&self) -> Result<(Arc<Connection>, Arc<Handshake>), String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = &state.running {
            match running.connection.broken() {
                None => {
                    return Ok((
                        Arc::clone(&running.connection),
                        Arc::clone(&running.handshake),
                    ));
                }
                Some(reason) => {
                    state.running = None;
                    self.failed(&mut state, reason);
                }
            }
        }
        if let Some(at) = state.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(format!(
                    "its program is restarting after a failure (next try in {} ms; last failure: {})",
                    (at - now).as_millis(),
                    state.last_failure.as_deref().unwrap_or("unknown")
                ));
            }
        }
        match self.start() {
            Ok(running) => {
                let out = (
                    Arc::clone(&running.connection),
                    Arc::clone(&running.handshake),
                );
                state.running = Some(running);
                Ok(out)
            }
            Err(reason) => {
                self.failed(&mut state, reason.clone());
                Err(reason)
            }
        }
    }

    fn failed(&self, state: &mut State, reason: String) {
        state.failures = state.failures.saturating_add(1);
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << state.failures.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        state.retry_at = Some(Instant::now() + wait);
        tracing::warn!(
            plugin = %self.launch.plugin,
            "plugin program failed ({reason}); restart allowed in {} ms",
            wait.as_millis()
        );
        state.last_failure = Some(reason);
    }

    fn start(&self) -> Result<Running, String> {
        let child = self.launch.spawn()?;
        let connection = Connection::start(self.launch.plugin.clone(), child)?;
        let params = json!({
            "protocol": PROTOCOL_VERSION,
            "plugin": self.launch.plugin,
            "params": self.params,
            "host": {"name": "noeta", "version": noeta_core::KERNEL_VERSION},
        });
        let no_requests: &Serve<'_> =
            &|method, _| Err(format!("`{method}` is not available during the handshake"));
        let answer = connection
            .call_blocking("initialize", &params, self.launch.hook_timeout, no_requests)
            .map_err(|err| format!("its handshake (`initialize`) failed: {err}"))?;
        let handshake = Handshake::parse(&answer).map_err(|problem| {
            connection.break_with(format!("its handshake was refused: {problem}"));
            format!("its handshake answer is invalid: {problem}")
        })?;
        tracing::debug!(
            plugin = %self.launch.plugin,
            exports = ?handshake.exports.keys().collect::<Vec<_>>(),
            "plugin program started"
        );
        Ok(Running {
            connection: Arc::new(connection),
            handshake: Arc::new(handshake),
        })
    }

    /// Notes a failed call: a broken program is replaced on the next call, after the backoff.
    fn note(&self, outcome: &Result<Value, CallError>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(_) | Err(CallError::Refused(_)) => {
                state.failures = 0;
                state.retry_at = None;
            }
            Err(CallError::Broken(reason)) => {
                if state
                    .running
                    .as_ref()
                    .is_some_and(|r| r.connection.broken().is_some())
                {
                    state.running = None;
                    self.failed(&mut state, reason.clone());
                }
            }
        }
    }

    /// A blocking call with the hook deadline.
    pub(crate) fn call_blocking(
        &self,
        method: &str,
        params: &Value,
        serve: &Serve<'_>,
    ) -> Result<Value, CallError> {
        let (connection, _) = self.running().map_err(CallError::Broken)?;
        let outcome = connection.call_blocking(method, params, self.launch.hook_timeout, serve);
        self.note(&outcome);
        outcome
    }

    /// An async call; `deadline` `None` waits as long as it takes (a tool call).
    pub(crate) async fn call(
        &self,
        method: &str,
        params: &Value,
        deadline: Option<Duration>,
        serve: &Serve<'_>,
        notices: &Notices<'_>,
    ) -> Result<Value, CallError> {
        let (connection, _) = self.running().map_err(CallError::Broken)?;
        let outcome = connection
            .call(method, params, deadline, serve, notices)
            .await;
        self.note(&outcome);
        outcome
    }
}
