//! Background shells: `Bash` with `run_in_background` and `Monitor`, read by `BashOutput`,
//! stopped by `KillShell`.
//!
//! A job runs in the worker that started it (the execution environment's
//! `spawn`); the session pack's [`Jobs`] holds it by task and id. Its start is
//! recorded (`shell_background`, or `monitor`), so ids (`bash_1`, `bash_2`, …) never repeat
//! within a task and a job from a worker that stopped is named as gone rather
//! than unknown. Output nobody read yet is kept up to 1 MiB a stream; past it,
//! bytes are counted as dropped.
//!
//! Every read goes through [`Jobs`], the jobs' one consumer: a monitored job's standard
//! output is taken line by line by the `fs` extension's reminders ([`Jobs::look`]), which
//! hold its standard error (and the start of an unfinished line) for `BashOutput`, so no
//! output is shown twice.
//!
//! With `background_ends_with_turn`, the `fs` extension's `before_finish` calls
//! [`end_with_turn`]: every job of the task still running is killed with its process group and
//! recorded as `shell_killed`, once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use noeta_core::exec::{ExecJob, JobOutput, JobStatus};
use noeta_core::extension::View;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use regex::Regex;
use serde_json::{Value, json};

use crate::bash::elide_middle;
use crate::paths::{fail, off_thread};
use crate::registry::EXTENSION;

/// Background jobs running at once in one task, at most.
pub(crate) const MAX_RUNNING: usize = 8;
/// Characters of output one `BashOutput` returns; the middle of more is elided.
const MAX_POLL_CHARS: usize = 30_000;
/// How long `BashOutput` with `block` waits by default, and at most (milliseconds).
const DEFAULT_BLOCK_MS: u64 = 30_000;
const MAX_BLOCK_MS: u64 = 600_000;

/// The jobs this worker runs, by task and id.
#[derive(Default)]
pub(crate) struct Jobs {
    running: Mutex<HashMap<(String, String), Entry>>,
}

/// One job: the process (or what is kept of it once it ended), and, when `Monitor` started
/// it, what the monitor holds.
struct Entry {
    job: Arc<dyn ExecJob>,
    watch: Option<Watch>,
    /// It was killed because the task's turn ended.
    ended_with_turn: bool,
}

/// What `Monitor` holds of a job it watches: the start of a line not ended yet, and the
/// standard error it took along with the lines, kept for `BashOutput`.
pub(crate) struct Watch {
    /// When the monitor's deadline passes.
    deadline: Instant,
    /// That deadline, in milliseconds from the start.
    timeout_ms: u64,
    /// Standard output after the last newline.
    partial: Vec<u8>,
    /// Standard error not read yet.
    stderr: Vec<u8>,
    /// Bytes of standard error past `HELD_CAP`.
    stderr_dropped: u64,
    /// `KillShell` stopped it.
    stopped: bool,
    /// It was killed because the task's turn ended.
    ended_with_turn: bool,
    /// When the job was first seen ended.
    ended_at: Option<Instant>,
    /// Its end was delivered: nothing more is said.
    done: bool,
}

impl Watch {
    /// A watch whose job is killed `timeout` from now.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            deadline: Instant::now() + timeout,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            partial: Vec::new(),
            stderr: Vec::new(),
            stderr_dropped: 0,
            stopped: false,
            ended_with_turn: false,
            ended_at: None,
            done: false,
        }
    }

    /// Keeps `bytes` of standard error for `BashOutput`, up to `HELD_CAP`.
    fn hold(&mut self, bytes: &[u8]) {
        let room = HELD_CAP.saturating_sub(self.stderr.len()).min(bytes.len());
        self.stderr.extend_from_slice(&bytes[..room]);
        self.stderr_dropped += (bytes.len() - room) as u64;
    }

    /// Notes when the job was first seen ended.
    fn saw(&mut self, status: JobStatus) {
        if status != JobStatus::Running && self.ended_at.is_none() {
            self.ended_at = Some(Instant::now());
        }
    }

    /// How the job ended, in words.
    fn ending(&self, status: JobStatus) -> String {
        match status {
            JobStatus::Killed if self.ended_with_turn => ENDED_WITH_TURN.to_owned(),
            JobStatus::Killed
                if !self.stopped && self.ended_at.is_some_and(|at| at >= self.deadline) =>
            {
                format!("deadline reached ({} ms)", self.timeout_ms)
            }
            other => describe(other),
        }
    }
}

/// The status of a job killed because its task's turn ended.
const ENDED_WITH_TURN: &str = "killed when the turn ended";

/// Bytes of a monitored job's standard error held for `BashOutput`.
const HELD_CAP: usize = 1024 * 1024;
/// Bytes of a line without its newline kept before it is delivered as it stands.
const LONGEST_PARTIAL: usize = 64 * 1024;

/// What one look at a monitored job gives `Monitor`.
#[derive(Debug, Default)]
pub(crate) struct Look {
    /// The lines it printed to standard output since the last look.
    pub(crate) lines: Vec<String>,
    /// Bytes of output dropped because they were not read in time.
    pub(crate) dropped: u64,
    /// How it ended, the first time it is seen ended.
    pub(crate) ended: Option<String>,
}

impl Jobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The id the task's next job gets, or why `tool` may not start one.
    pub(crate) fn next_id(&self, ctx: &ToolContext, tool: &str) -> Result<String, ToolError> {
        let task = ctx.task_id().to_owned();
        let running = self
            .lock()
            .iter()
            .filter(|((t, _), entry)| *t == task && entry.job.status() == JobStatus::Running)
            .count();
        if running >= MAX_RUNNING {
            return Err(fail(
                tool,
                format!(
                    "{MAX_RUNNING} background shells are already running in this task; stop one with KillShell first"
                ),
            ));
        }
        Ok(format!("bash_{}", started(ctx).len() + 1))
    }

    /// Keeps `job` as the task's `id`, watched by `Monitor` when `watch` is given.
    pub(crate) fn keep(
        &self,
        ctx: &ToolContext,
        id: &str,
        job: Arc<dyn ExecJob>,
        watch: Option<Watch>,
    ) {
        self.lock().insert(
            (ctx.task_id().to_owned(), id.to_owned()),
            Entry {
                job,
                watch,
                ended_with_turn: false,
            },
        );
    }

    /// Takes what the task's job `id` printed and nobody read yet (with what its monitor
    /// holds), and its status; once it ended and all of it was read, only its status is kept.
    fn read(&self, ctx: &ToolContext, id: &str) -> Option<JobOutput> {
        let mut jobs = self.lock();
        let entry = jobs.get_mut(&(ctx.task_id().to_owned(), id.to_owned()))?;
        let mut taken = entry.job.take();
        if let Some(watch) = &mut entry.watch {
            watch.saw(taken.status);
            let mut stdout = std::mem::take(&mut watch.partial);
            stdout.append(&mut taken.stdout);
            taken.stdout = stdout;
            let mut stderr = std::mem::take(&mut watch.stderr);
            stderr.append(&mut taken.stderr);
            taken.stderr = stderr;
            taken.dropped += std::mem::take(&mut watch.stderr_dropped);
        }
        if taken.status != JobStatus::Running {
            // Everything it printed is in `taken`: nothing is left to keep it for.
            entry.job = Arc::new(Ended(taken.status));
        }
        Some(taken)
    }

    /// Marks the task's job `id` as stopped by `KillShell`, so its monitor says killed.
    fn stopping(&self, ctx: &ToolContext, id: &str) {
        if let Some(Entry {
            watch: Some(watch), ..
        }) = self
            .lock()
            .get_mut(&(ctx.task_id().to_owned(), id.to_owned()))
        {
            watch.stopped = true;
        }
    }

    /// The new complete lines of the monitored job `id` of `task`, and how it ended once it
    /// did (said once); `None` when this worker does not run it.
    pub(crate) fn look(&self, task: &str, id: &str) -> Option<Look> {
        let mut jobs = self.lock();
        let entry = jobs.get_mut(&(task.to_owned(), id.to_owned()))?;
        let watch = entry.watch.as_mut()?;
        if watch.done {
            return Some(Look::default());
        }
        let taken = entry.job.take();
        watch.saw(taken.status);
        watch.hold(&taken.stderr);
        watch.partial.extend_from_slice(&taken.stdout);
        let ended = taken.status != JobStatus::Running;
        let mut look = Look {
            dropped: taken.dropped,
            ..Look::default()
        };
        let buffer = std::mem::take(&mut watch.partial);
        let mut pieces: Vec<&[u8]> = buffer.split(|b| *b == b'\n').collect();
        let rest = pieces.pop().unwrap_or_default();
        for piece in pieces {
            look.lines.push(line_of(piece));
        }
        if ended || rest.len() > LONGEST_PARTIAL {
            if !rest.is_empty() {
                look.lines.push(line_of(rest));
            }
        } else {
            watch.partial = rest.to_vec();
        }
        if ended {
            look.ended = Some(watch.ending(taken.status));
            watch.done = true;
            entry.job = Arc::new(Ended(taken.status));
        }
        Some(look)
    }

    /// Kills every job of `task` still running that the end of a turn has not killed yet, and
    /// gives their ids and jobs, in id order.
    fn kill_for_turn(&self, task: &str) -> Vec<(String, Arc<dyn ExecJob>)> {
        let mut killed = Vec::new();
        for ((t, id), entry) in self.lock().iter_mut() {
            if t != task || entry.ended_with_turn || entry.job.status() != JobStatus::Running {
                continue;
            }
            entry.ended_with_turn = true;
            if let Some(watch) = &mut entry.watch {
                watch.ended_with_turn = true;
            }
            entry.job.kill();
            killed.push((id.clone(), Arc::clone(&entry.job)));
        }
        killed.sort_by_key(|(id, _)| crate::monitor::job_number(id));
        killed
    }

    /// The task's job `id`, or the error the model sees.
    fn find(&self, ctx: &ToolContext, tool: &str, id: &str) -> Result<Arc<dyn ExecJob>, ToolError> {
        if let Some(entry) = self.lock().get(&(ctx.task_id().to_owned(), id.to_owned())) {
            return Ok(Arc::clone(&entry.job));
        }
        let known = started(ctx);
        if known.iter().any(|k| k == id) {
            return Err(fail(
                tool,
                format!(
                    "`{id}` ran in a worker that has since stopped; its process and output are gone"
                ),
            ));
        }
        Err(fail(
            tool,
            if known.is_empty() {
                format!("no background shell `{id}`: none was started in this task")
            } else {
                format!("no background shell `{id}` (started: {})", known.join(", "))
            },
        ))
    }
}

/// One line of output, without its newline (and carriage return), as text.
fn line_of(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// What is kept of a job that ended and was read: its status, and no buffers.
struct Ended(JobStatus);

impl ExecJob for Ended {
    fn take(&self) -> noeta_core::exec::JobOutput {
        noeta_core::exec::JobOutput {
            stdout: Vec::new(),
            stderr: Vec::new(),
            dropped: 0,
            status: self.0,
        }
    }

    fn status(&self) -> JobStatus {
        self.0
    }

    fn kill(&self) {}
}

/// The ids of the background jobs the task started, in order.
fn started(ctx: &ToolContext) -> Vec<String> {
    ctx.state(EXTENSION)
        .and_then(|s| s.get("jobs"))
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn describe(status: JobStatus) -> String {
    match status {
        JobStatus::Running => "running".to_owned(),
        JobStatus::Exited(code) => format!("exited with code {code}"),
        JobStatus::Killed => "killed".to_owned(),
    }
}

/// Kills the task's background shells still running as its turn ends, waits (5 s at most)
/// for them to stop, and records each as `shell_killed`; a shell killed by an earlier call
/// (a refused end of the same turn) is not killed or recorded again.
pub(crate) async fn end_with_turn(jobs: &Jobs, view: &View<'_>) {
    let killed = jobs.kill_for_turn(view.task_id().as_str());
    if killed.is_empty() {
        return;
    }
    let waited: Vec<Arc<dyn ExecJob>> = killed.iter().map(|(_, job)| Arc::clone(job)).collect();
    // The thread only waits; should it fail, each status is recorded as it stands.
    let _ = off_thread("fs", move |cancelled| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while waited.iter().any(|j| j.status() == JobStatus::Running)
            && Instant::now() < deadline
            && !cancelled.is_set()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await;
    for (id, job) in killed {
        let status = match job.status() {
            JobStatus::Killed => ENDED_WITH_TURN.to_owned(),
            other => describe(other),
        };
        view.record(
            EXTENSION,
            "shell_killed",
            json!({ "id": id, "status": status }),
        );
    }
}

/// Waits (off the executor) until `job` ends or `limit` passes.
async fn wait_for(job: &Arc<dyn ExecJob>, tool: &str, limit: Duration) -> Result<(), ToolError> {
    let job = Arc::clone(job);
    off_thread(tool, move |cancelled| {
        let deadline = Instant::now() + limit;
        while job.status() == JobStatus::Running && Instant::now() < deadline && !cancelled.is_set()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
}

/// `BashOutput`: what a background shell printed since the last look.
pub(crate) struct BashOutput {
    jobs: Arc<Jobs>,
}

impl BashOutput {
    pub(crate) fn new(jobs: Arc<Jobs>) -> Self {
        Self { jobs }
    }
}

#[async_trait]
impl Tool for BashOutput {
    fn name(&self) -> &str {
        "BashOutput"
    }

    fn description(&self) -> &str {
        "Reads what a background shell (started by Bash with `run_in_background`) printed since the last read, and whether it is still running.\n\n\
         - `filter` keeps only the lines matching a regular expression (the others are gone for good).\n\
         - `block` waits until the shell ends or `timeout` milliseconds pass (default 30000, at most 600000)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "bash_id": { "type": "string", "description": "The background shell's id, as Bash gave it." },
                "filter": { "type": "string", "description": "A regular expression; only matching lines are returned." },
                "block": { "type": "boolean", "description": "Wait for the shell to end first." },
                "timeout": { "type": "number", "minimum": 0, "maximum": MAX_BLOCK_MS, "description": "How long `block` waits, in milliseconds." }
            },
            "required": ["bash_id"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .clearable()
            .with_max_result_chars(MAX_POLL_CHARS + 2_000)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const NAME: &str = "BashOutput";
        let id = input
            .get("bash_id")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(NAME, "`bash_id` must be a string"))?;
        let filter = match input.get("filter").and_then(Value::as_str) {
            Some(pattern) => Some(Regex::new(pattern).map_err(|err| {
                fail(
                    NAME,
                    format!("`filter` is not a valid regular expression: {err}"),
                )
            })?),
            None => None,
        };
        let job = self.jobs.find(ctx, NAME, id)?;
        if input.get("block").and_then(Value::as_bool) == Some(true) {
            let ms = input
                .get("timeout")
                .and_then(Value::as_f64)
                .map_or(DEFAULT_BLOCK_MS, |ms| ms as u64);
            wait_for(&job, NAME, Duration::from_millis(ms)).await?;
        }
        let taken = self.jobs.read(ctx, id).unwrap_or_else(|| job.take());
        let mut text = String::from_utf8_lossy(&taken.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&taken.stderr);
        if !stderr.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&stderr);
        }
        if let Some(filter) = &filter {
            text = text
                .lines()
                .filter(|line| filter.is_match(line))
                .collect::<Vec<_>>()
                .join("\n");
        }
        let mut shown = format!("`{id}`: {}", describe(taken.status));
        let body = elide_middle(text.trim_end(), MAX_POLL_CHARS);
        if body.is_empty() {
            shown.push_str("; no new output");
        } else {
            shown.push_str(&format!("; new output:\n{body}"));
        }
        if taken.dropped > 0 {
            shown.push_str(&format!(
                "\n[{} bytes of output were dropped before they were read]",
                taken.dropped
            ));
        }
        ctx.record(
            EXTENSION,
            "shell_polled",
            json!({ "id": id, "status": describe(taken.status) }),
        );
        Ok(ToolOutput::text(shown))
    }
}

/// `KillShell`: stops a background shell and everything it started.
pub(crate) struct KillShell {
    jobs: Arc<Jobs>,
}

impl KillShell {
    pub(crate) fn new(jobs: Arc<Jobs>) -> Self {
        Self { jobs }
    }
}

#[async_trait]
impl Tool for KillShell {
    fn name(&self) -> &str {
        "KillShell"
    }

    fn description(&self) -> &str {
        "Stops a background shell started by Bash with `run_in_background`, and every process it started."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "shell_id": { "type": "string", "description": "The background shell's id, as Bash gave it." }
            },
            "required": ["shell_id"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default().with_risk(Risk::High).clearable()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        const NAME: &str = "KillShell";
        let id = input
            .get("shell_id")
            .and_then(Value::as_str)
            .ok_or_else(|| fail(NAME, "`shell_id` must be a string"))?;
        let job = self.jobs.find(ctx, NAME, id)?;
        let status = job.status();
        if status != JobStatus::Running {
            return Ok(ToolOutput::text(format!(
                "`{id}` had already ended ({})",
                describe(status)
            )));
        }
        self.jobs.stopping(ctx, id);
        job.kill();
        wait_for(&job, NAME, Duration::from_secs(5)).await?;
        let status = job.status();
        ctx.record(
            EXTENSION,
            "shell_killed",
            json!({ "id": id, "status": describe(status) }),
        );
        match status {
            JobStatus::Running => Err(fail(NAME, format!("`{id}` did not stop within 5 s"))),
            other => Ok(ToolOutput::text(format!(
                "Stopped `{id}` ({})",
                describe(other)
            ))),
        }
    }
}
