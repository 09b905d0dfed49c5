//! Execution environments: where tools run commands. A small backend interface with a local implementation.
//!
//! The local environment runs a program directly (no shell) in the
//! workspace, on a helper thread so no async runtime is required, in a
//! process group of its own, and kills the whole group when its deadline
//! passes — and when the command exits, so nothing it started lingers. Sandboxed environments implement the same
//! trait in their own crates.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;

mod ledger;

/// A command to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working directory, relative to the workspace (default: the workspace).
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Bytes written to its standard input.
    pub stdin: Option<Vec<u8>>,
    /// The deadline; the command is killed when it passes.
    pub timeout: Option<Duration>,
    /// Start from an empty environment (only `env` is set) instead of inheriting the host's.
    pub clear_env: bool,
    /// Bytes kept of each of standard output and error; the rest is read and dropped.
    pub output_cap: Option<usize>,
    /// Told each line the command prints, as it prints it (live progress; not its output).
    pub on_line: Option<LineSink>,
}

/// The host value under which a host hands plugins the environment its commands run in (an
/// `Arc<dyn ExecEnv>`: the local one or the bound sandbox), for commands a plugin runs outside
/// a tool call (a command hook). Inside a call, `ToolContext::exec_env` is the same one.
pub const COMMAND_ENV: &str = "command_env";

/// A function told one line of text at a time (live progress).
pub type LineFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Receives a running command's lines as they come (standard output and error alike).
#[derive(Clone)]
pub struct LineSink(pub LineFn);

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

/// Sinks compare equal: a command is the same command whoever watches it.
impl PartialEq for LineSink {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for LineSink {}

/// The longest piece of a line a [`LineSink`] is told at once.
const LINE_PIECE: usize = 4096;

impl ExecCommand {
    /// Runs `program` with `args`.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Sets the deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the working directory (relative to the workspace).
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Feeds `bytes` to standard input.
    pub fn with_stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Sets the environment variable `key`.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Runs with only the variables set by `with_env`, not the host's.
    pub fn without_host_env(mut self) -> Self {
        self.clear_env = true;
        self
    }

    /// Keeps at most `bytes` of each output stream (the command still runs to its end).
    pub fn with_output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = Some(bytes);
        self
    }

    /// Tells `sink` each line the command prints, as it prints it.
    pub fn with_line_sink(mut self, sink: LineFn) -> Self {
        self.on_line = Some(LineSink(sink));
        self
    }
}

/// How a command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecOutput {
    /// The exit code (`None` when killed by a signal or the deadline).
    pub status: Option<i32>,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Whether the deadline killed it.
    pub timed_out: bool,
    /// Bytes of standard output and error dropped past the command's output cap.
    pub dropped: u64,
}

/// Why a command could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The working directory is outside the workspace.
    #[error("the directory `{dir}` is outside the workspace `{workspace}`")]
    OutsideWorkspace {
        /// The directory asked for.
        dir: PathBuf,
        /// The workspace.
        workspace: PathBuf,
    },
    /// Waiting for the command failed.
    #[error("waiting for `{program}` failed: {message}")]
    Wait {
        /// The program.
        program: String,
        /// What failed.
        message: String,
    },
    /// The environment cannot run commands in the background.
    #[error("the `{env}` environment cannot run commands in the background")]
    NoBackground {
        /// The environment's name.
        env: String,
    },
}

/// Where a background command stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Still running.
    Running,
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (a kill among them).
    Killed,
}

/// What a background command printed since the last look, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    /// New standard output.
    pub stdout: Vec<u8>,
    /// New standard error.
    pub stderr: Vec<u8>,
    /// Bytes dropped since the last look because nobody read them in time.
    pub dropped: u64,
    /// Where it stands (after the output was taken).
    pub status: JobStatus,
}

/// A command running in the background.
pub trait ExecJob: Send + Sync {
    /// Takes what it printed since the last call, and its status.
    fn take(&self) -> JobOutput;

    /// Its status, without taking output.
    fn status(&self) -> JobStatus;

    /// Kills its whole process group (a no-op once it ended).
    fn kill(&self);
}

/// Where tools run commands.
#[async_trait]
pub trait ExecEnv: Send + Sync {
    /// The environment's name (`local`, or a sandbox's).
    fn name(&self) -> &str;

    /// The workspace root commands run in.
    fn workspace(&self) -> &Path;

    /// What a command cannot do here, in a sentence the model reads with its environment
    /// (`None`: nothing is isolated).
    fn isolation(&self) -> Option<String> {
        None
    }

    /// Runs a command to completion (or its deadline).
    async fn run(&self, command: &ExecCommand) -> Result<ExecOutput, ExecError>;

    /// Starts a command in the background (its deadline, if any, still kills it); environments
    /// that cannot refuse with [`ExecError::NoBackground`].
    fn spawn(&self, _command: &ExecCommand) -> Result<Arc<dyn ExecJob>, ExecError> {
        Err(ExecError::NoBackground {
            env: self.name().to_owned(),
        })
    }

    /// The environment one task's commands run in, for environments that keep something per
    /// task (a container named after it, reattached when the task is claimed again). `None`:
    /// this one serves every task. The runner asks once per claim; it must not start anything
    /// yet (a claim may run no command at all).
    fn for_task(&self, _task: &str) -> Option<Arc<dyn ExecEnv>> {
        None
    }

    /// The host is done with `task` (its turn ended, or it failed, and nothing here will run
    /// it again): what [`for_task`](Self::for_task) kept for it can go. A task waiting for a
    /// person, or interrupted, is not done: a resume finds what it left.
    fn task_done(&self, _task: &str) {}
}

/// Runs commands as local processes in a workspace directory.
#[derive(Debug, Clone)]
pub struct LocalExecEnv {
    workspace: PathBuf,
    /// The process groups of the commands running now, shared by clones, so
    /// [`stop`](Self::stop) can end them.
    running: Arc<RunningSet>,
}

/// The process groups of the commands running now, each with whether it runs in the
/// background, and the ledger that says so to later processes.
#[derive(Debug, Default)]
struct RunningSet {
    groups: Mutex<BTreeMap<u32, bool>>,
    ledger: Option<ledger::Ledger>,
}

impl RunningSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, bool>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keeps a running command's process group in its environment's set until it ends.
struct Running {
    set: Arc<RunningSet>,
    pid: u32,
}

impl Running {
    fn new(set: &Arc<RunningSet>, pid: u32, background: bool) -> Self {
        let mut groups = set.lock();
        if groups.is_empty()
            && let Some(ledger) = &set.ledger
        {
            ledger.opened();
        }
        groups.insert(pid, background);
        Self {
            set: Arc::clone(set),
            pid,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut groups = self.set.lock();
        groups.remove(&self.pid);
        if groups.is_empty()
            && let Some(ledger) = &self.set.ledger
        {
            ledger.closed();
        }
    }
}

impl LocalExecEnv {
    /// An environment rooted at `workspace`.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            running: Arc::new(RunningSet::default()),
        }
    }

    /// The same environment keeping its ledger in `dir` (a directory of the user's, such as
    /// `~/.noeta/run`): each command carries this process's mark, and before a task is claimed
    /// what the commands of a noeta process that is gone left running is killed (see
    /// [`LocalExecEnv::sweep`]).
    pub fn with_ledger(mut self, dir: &Path) -> Self {
        self.running = Arc::new(RunningSet {
            groups: Mutex::new(BTreeMap::new()),
            ledger: ledger::Ledger::new(dir),
        });
        self
    }

    /// Kills what the commands of noeta processes that are gone left running (their first
    /// process died with them; what they started may not have): how many processes it killed.
    /// Nothing without a ledger.
    pub fn sweep(&self) -> usize {
        self.running
            .ledger
            .as_ref()
            .map_or(0, ledger::Ledger::sweep)
    }

    /// How many commands (foreground or background) are running now.
    pub fn running(&self) -> usize {
        self.running.lock().len()
    }

    /// Ends the commands running now — the background ones too when `background` — with
    /// everything in their process groups: SIGTERM, then SIGKILL for whatever is still there
    /// after `grace`. Returns once every group is gone (or was sent SIGKILL). A frontend calls
    /// it when the user interrupts, before it says so.
    pub fn stop(&self, grace: Duration, background: bool) {
        let groups: Vec<u32> = self
            .running
            .lock()
            .iter()
            .filter(|(_, in_background)| background || !**in_background)
            .map(|(pid, _)| *pid)
            .collect();
        if groups.is_empty() {
            return;
        }
        for pid in &groups {
            signal_group(*pid, "TERM");
        }
        let until = Instant::now() + grace;
        let mut left = groups;
        while !left.is_empty() && Instant::now() < until {
            left.retain(|pid| group_alive(*pid));
            if !left.is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for pid in left {
            kill_group(pid);
        }
    }

    fn resolve_dir(&self, dir: Option<&Path>) -> Result<PathBuf, ExecError> {
        let Some(dir) = dir else {
            return Ok(self.workspace.clone());
        };
        let joined = self.workspace.join(dir);
        let real = std::fs::canonicalize(&joined).unwrap_or(joined);
        let root = real_root(&self.workspace).unwrap_or_else(|_| self.workspace.clone());
        if real.starts_with(&root) {
            Ok(real)
        } else {
            Err(ExecError::OutsideWorkspace {
                dir: dir.to_path_buf(),
                workspace: self.workspace.clone(),
            })
        }
    }
}

/// Bytes of each stream a background job keeps unread, unless its command sets a cap.
const DEFAULT_JOB_BUFFER: usize = 1024 * 1024;

/// A local background command: its process group and what it printed, unread.
struct LocalJob {
    pid: u32,
    cap: usize,
    state: Mutex<JobState>,
}

struct JobState {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: u64,
    status: JobStatus,
}

impl LocalJob {
    fn lock(&self) -> std::sync::MutexGuard<'_, JobState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `bytes` unless the stream's unread buffer is full (then they are counted).
    fn append(&self, err: bool, bytes: &[u8]) {
        let mut state = self.lock();
        let cap = self.cap;
        let buffer = if err {
            &mut state.stderr
        } else {
            &mut state.stdout
        };
        let room = cap.saturating_sub(buffer.len()).min(bytes.len());
        buffer.extend_from_slice(&bytes[..room]);
        state.dropped += (bytes.len() - room) as u64;
    }
}

impl ExecJob for LocalJob {
    fn take(&self) -> JobOutput {
        let mut state = self.lock();
        JobOutput {
            stdout: std::mem::take(&mut state.stdout),
            stderr: std::mem::take(&mut state.stderr),
            dropped: std::mem::take(&mut state.dropped),
            status: state.status,
        }
    }

    fn status(&self) -> JobStatus {
        self.lock().status
    }

    fn kill(&self) {
        if self.status() == JobStatus::Running {
            kill_group(self.pid);
        }
    }
}

/// Kills the command's whole process group (its children and theirs too).
#[cfg(unix)]
fn kill_group(pid: u32) {
    signal_group(pid, "KILL");
}

/// Sends `signal` to the process group `pid` leads (its id is the group's).
#[cfg(unix)]
fn signal_group(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether any process of the group `pid` leads is still there.
#[cfg(unix)]
fn group_alive(pid: u32) -> bool {
    signal_group(pid, "0")
}

#[cfg(not(unix))]
fn kill_group(_pid: u32) {}

#[cfg(not(unix))]
fn signal_group(_pid: u32, _signal: &str) -> bool {
    false
}

#[cfg(not(unix))]
fn group_alive(_pid: u32) -> bool {
    false
}

/// The process for `command` in `cwd`: under its guardian, in its own process group, output
/// piped, marked with `mark` (this process, see [`ledger`]).
fn prepare(command: &ExecCommand, cwd: PathBuf, mark: Option<&str>) -> Command {
    let (program, args) = ledger::guarded(&command.program, &command.args);
    let mut process = Command::new(program);
    if command.clear_env {
        process.env_clear();
    }
    if let Some(mark) = mark {
        process.env(ledger::MARK, mark);
    }
    if command.clear_env && !command.env.contains_key("PWD") {
        process.env(ledger::GUARD_UNSET, "1");
    }
    process
        .args(&args)
        .current_dir(cwd)
        .envs(&command.env)
        .stdin(if command.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        process.process_group(0);
    }
    process
}

/// How long the output readers may take once the command's group is gone: a process that
/// left the group (`setsid`) can hold the pipes open, and is not waited for.
const READER_GRACE: Duration = Duration::from_secs(2);

/// Said in standard error when the readers were not waited for.
const INCOMPLETE: &str = "[output incomplete: a process the command started outside its process group still holds it open]";

/// A started command: its process, its job, the channel its readers say they are done on, and
/// its tie to this process (held until it is waited for).
type Started = (
    std::process::Child,
    Arc<LocalJob>,
    std::sync::mpsc::Receiver<()>,
    Option<ledger::Tie>,
);

/// Starts `command`: its process, a reader per stream appending into the returned job's
/// buffers (each says on the channel when it is done), and a writer for its input.
fn start(
    command: &ExecCommand,
    cwd: PathBuf,
    cap: usize,
    mark: Option<&str>,
) -> Result<Started, ExecError> {
    // The guardian always starts: a program it could not start is told apart first.
    if cfg!(target_os = "linux") {
        let path = match command.env.get("PATH") {
            Some(path) => path.clone(),
            None if command.clear_env => "/usr/local/bin:/usr/bin:/bin".to_owned(),
            None => std::env::var("PATH").unwrap_or_default(),
        };
        ledger::findable(&command.program, &path, &cwd).map_err(|source| ExecError::Spawn {
            program: command.program.clone(),
            source,
        })?;
    }
    let mut process = prepare(command, cwd, mark);
    let spawn = |source| ExecError::Spawn {
        program: command.program.clone(),
        source,
    };
    // The command's group is tied to this process for as long as the tie is held.
    #[cfg(target_os = "linux")]
    let (tie, loose) = ledger::tie(&mut process).map_err(spawn)?;
    #[cfg(not(target_os = "linux"))]
    let tie = None::<ledger::Tie>;
    let mut child = process.spawn().map_err(spawn)?;
    #[cfg(target_os = "linux")]
    let tie = {
        drop(loose);
        Some(tie)
    };
    let job = Arc::new(LocalJob {
        pid: child.id(),
        cap,
        state: Mutex::new(JobState {
            stdout: Vec::new(),
            stderr: Vec::new(),
            dropped: 0,
            status: JobStatus::Running,
        }),
    });
    let (done, finished) = std::sync::mpsc::channel();
    // Readers start first and input is written on its own thread, so a command that
    // writes while it reads never deadlocks against us.
    let pipe = |stream: Option<Box<dyn Read + Send>>, err: bool| {
        let job = Arc::clone(&job);
        let done = done.clone();
        let sink = command.on_line.clone();
        std::thread::spawn(move || {
            if let Some(mut stream) = stream {
                let mut chunk = [0u8; 8192];
                let mut line = Vec::new();
                loop {
                    match stream.read(&mut chunk) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            job.append(err, &chunk[..n]);
                            if let Some(LineSink(sink)) = &sink {
                                tell_lines(&mut line, &chunk[..n], sink.as_ref());
                            }
                        }
                    }
                }
                if let (Some(LineSink(sink)), false) = (&sink, line.is_empty()) {
                    sink(&String::from_utf8_lossy(&line));
                }
            }
            let _ = done.send(());
        });
    };
    pipe(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        false,
    );
    pipe(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        true,
    );
    if let (Some(bytes), Some(mut stdin)) = (command.stdin.clone(), child.stdin.take()) {
        // A program that does not read its input just closes the pipe; that is not an error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    Ok((child, job, finished, tie))
}

/// Adds `bytes` to the unfinished `line` and tells `sink` every line that is now whole (or a
/// piece of [`LINE_PIECE`] bytes of a longer one).
fn tell_lines(line: &mut Vec<u8>, bytes: &[u8], sink: &(dyn Fn(&str) + Send + Sync)) {
    for &byte in bytes {
        if byte == b'\n' {
            sink(String::from_utf8_lossy(line).trim_end_matches('\r'));
            line.clear();
        } else {
            line.push(byte);
            if line.len() >= LINE_PIECE {
                sink(&String::from_utf8_lossy(line));
                line.clear();
            }
        }
    }
}

/// Waits for both readers, at most `READER_GRACE`; whether they finished.
fn drain(finished: &std::sync::mpsc::Receiver<()>) -> bool {
    let until = Instant::now() + READER_GRACE;
    (0..2).all(|_| {
        finished
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .is_ok()
    })
}

/// Waits for `child` until it exits or `deadline` passes (then kills its group); then ends
/// what it left in its group and gives the readers their grace. Whether the deadline killed
/// it, its exit status, and whether the output is complete.
fn finish(
    mut child: std::process::Child,
    deadline: Option<Instant>,
    finished: &std::sync::mpsc::Receiver<()>,
    cancelled: &dyn Fn() -> bool,
) -> std::io::Result<(bool, std::process::ExitStatus, bool)> {
    let mut timed_out = false;
    // Quick commands are seen to end quickly: the wait between looks grows from 50 µs to 5 ms.
    let mut pause = Duration::from_micros(50);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        // A deadline passed, or nobody waits for the result any more (the step was
        // cancelled): the whole group goes.
        if deadline.is_some_and(|d| Instant::now() >= d) || cancelled() {
            timed_out = true;
            kill_group(child.id());
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    };
    // Whatever the command left running in its group (background children holding the
    // pipes) ends with it, so the output is complete and nothing lingers.
    kill_group(child.id());
    let complete = drain(finished);
    Ok((timed_out, status, complete))
}

fn run_blocking(
    command: ExecCommand,
    cwd: PathBuf,
    cancelled: &dyn Fn() -> bool,
    running: &Arc<RunningSet>,
) -> Result<ExecOutput, ExecError> {
    let mark = running.ledger.as_ref().map(ledger::Ledger::mark);
    let (child, job, finished, _tie) = start(
        &command,
        cwd,
        command.output_cap.unwrap_or(usize::MAX),
        mark,
    )?;
    let _running = Running::new(running, child.id(), false);
    let deadline = command.timeout.map(|t| Instant::now() + t);
    let (timed_out, status, complete) =
        finish(child, deadline, &finished, cancelled).map_err(|err| ExecError::Wait {
            program: command.program.clone(),
            message: err.to_string(),
        })?;
    let mut output = job.take();
    if !complete {
        if !output.stderr.is_empty() {
            output.stderr.push(b'\n');
        }
        output.stderr.extend_from_slice(INCOMPLETE.as_bytes());
    }
    Ok(ExecOutput {
        status: if timed_out { None } else { status.code() },
        stdout: output.stdout,
        stderr: output.stderr,
        timed_out,
        dropped: output.dropped,
    })
}

#[async_trait]
impl ExecEnv for LocalExecEnv {
    fn name(&self) -> &str {
        "local"
    }

    fn workspace(&self) -> &Path {
        &self.workspace
    }

    async fn run(&self, command: &ExecCommand) -> Result<ExecOutput, ExecError> {
        let cwd = self.resolve_dir(command.cwd.as_deref())?;
        let command = command.clone();
        let program = command.program.clone();
        let (done, result) = futures::channel::oneshot::channel();
        let running = Arc::clone(&self.running);
        std::thread::spawn(move || {
            let output = run_blocking(command, cwd, &|| done.is_canceled(), &running);
            let _ = done.send(output);
        });
        result.await.unwrap_or_else(|_| {
            Err(ExecError::Wait {
                program,
                message: "the runner thread stopped".to_owned(),
            })
        })
    }

    fn spawn(&self, command: &ExecCommand) -> Result<Arc<dyn ExecJob>, ExecError> {
        let cwd = self.resolve_dir(command.cwd.as_deref())?;
        let cap = command.output_cap.unwrap_or(DEFAULT_JOB_BUFFER);
        let command = command.clone();
        let running = Arc::clone(&self.running);
        // Started from the thread that waits for it, which lives as long as it runs: the
        // parent-death signal follows the thread that starts a process.
        let (started, job) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mark = running.ledger.as_ref().map(ledger::Ledger::mark);
            let (child, job, finished, _tie) = match start(&command, cwd, cap, mark) {
                Ok(parts) => parts,
                Err(err) => {
                    let _ = started.send(Err(err));
                    return;
                }
            };
            let _running = Running::new(&running, child.id(), true);
            let waiter = Arc::clone(&job);
            let deadline = command.timeout.map(|t| Instant::now() + t);
            let _ = started.send(Ok(job));
            let status = match finish(child, deadline, &finished, &|| false) {
                Ok((false, status, complete)) => {
                    if !complete {
                        waiter.append(true, INCOMPLETE.as_bytes());
                    }
                    status.code().map_or(JobStatus::Killed, JobStatus::Exited)
                }
                Ok((true, _, _)) | Err(_) => JobStatus::Killed,
            };
            // Its last output is in before it is seen as ended.
            waiter.lock().status = status;
        });
        let job: Arc<dyn ExecJob> = job.recv().unwrap_or_else(|_| {
            Err(ExecError::Wait {
                program: String::new(),
                message: "the thread starting the command stopped".to_owned(),
            })
        })?;
        Ok(job)
    }

    fn for_task(&self, _task: &str) -> Option<Arc<dyn ExecEnv>> {
        // A task is about to be claimed: nothing a dead run of it started may run beside it.
        self.sweep();
        None
    }
}

/// Workspace roots already resolved, by the path given, with the identity of that path
/// (device and inode) when it was resolved.
#[cfg(unix)]
type RealRoots = std::collections::HashMap<PathBuf, ((u64, u64), PathBuf)>;
#[cfg(unix)]
static REAL_ROOTS: std::sync::LazyLock<std::sync::Mutex<RealRoots>> =
    std::sync::LazyLock::new(Default::default);

/// `given` (a workspace root) with every symlink resolved, remembered while the path given
/// still names the same directory: one `stat` instead of resolving each part on every call.
///
/// # Errors
/// When `given` cannot be resolved (it does not exist, or a part of it cannot be read).
#[cfg(unix)]
pub fn real_root(given: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(given)?;
    let id = (meta.dev(), meta.ino());
    let mut roots = REAL_ROOTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((seen, real)) = roots.get(given)
        && *seen == id
    {
        return Ok(real.clone());
    }
    let real = std::fs::canonicalize(given)?;
    if roots.len() >= 256 {
        roots.clear();
    }
    roots.insert(given.to_path_buf(), (id, real.clone()));
    Ok(real)
}

/// `given` with every symlink resolved.
///
/// # Errors
/// When `given` cannot be resolved.
#[cfg(not(unix))]
pub fn real_root(given: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(given)
}
