//! The `container` sandbox: every task's commands run in a container of its own, over the
//! Podman or Docker command line.
//!
//! A task's container is started at its first command, named after the task
//! (`noeta-<task>`), and found again by that name when the task is claimed again (a resume
//! after a crash reattaches it, started again if it was stopped). It is removed when the host
//! is done with the task ([`ExecEnv::task_done`]) or by `noeta sandbox prune`. The workspace is
//! bind-mounted at its own path, so paths mean the same inside and out; nothing else of the
//! host is shared, the network is off unless `network = true`, and the host's environment
//! variables are not passed in. A command the deadline (or an interrupt) ends is killed inside
//! the container with its whole process group, not only the engine's client outside. Commands
//! outside a task (hook commands) each run in a container of their own, removed after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::{
    ExecCommand, ExecEnv, ExecError, ExecJob, ExecOutput, JobOutput, JobStatus, LocalExecEnv,
};
use noeta_core::sandbox::SandboxFactory;
use noeta_toolkit::{SettingsTable, TimeUnit};
use serde_json::Value;

use crate::CONTAINER as NAME;

/// `[plugins.sandbox]` keys.
const KEYS: &[&str] = &[
    "provider",
    "engine",
    "image",
    "network",
    "memory",
    "max_processes",
    "timeout_ms",
    "runtime",
];

/// The label every container noeta starts carries: the workspace it serves.
const WORKSPACE_LABEL: &str = "noeta.workspace";

/// The label naming the task a container belongs to.
const TASK_LABEL: &str = "noeta.task";

/// Where, inside a container, each command leaves its process id (its process group's).
const PID_DIR: &str = "/tmp/.noeta-exec";

/// The exit code of `podman exec` when the engine itself failed (the container is not there,
/// or not running), not the command.
const ENGINE_FAILED: i32 = 125;

/// Whether an `exec` failed in the engine rather than in the command: Podman says so by its
/// exit code, Docker (whose client exits 1) by what it prints.
fn engine_failed(out: &ExecOutput) -> bool {
    match out.status {
        Some(ENGINE_FAILED) => true,
        Some(1) => {
            let said = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
            said.contains("no such container") || said.contains("is not running")
        }
        _ => false,
    }
}

/// How many processes a container allows unless the settings say otherwise.
const DEFAULT_MAX_PROCESSES: u32 = 512;

/// The settings of the container sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    /// `podman`, `docker`, or a path to either (`None`: the first on `PATH`).
    engine: Option<String>,
    image: String,
    network: bool,
    /// A memory limit as the engine reads it (`512m`, `2g`).
    memory: Option<String>,
    /// `0`: no limit.
    max_processes: u32,
    timeout: Option<Duration>,
    /// The OCI runtime the engine is asked to use (`runc`, `crun`, `runsc`).
    runtime: Option<String>,
}

impl Settings {
    fn parse(params: &Value) -> Result<Self, String> {
        let table = SettingsTable::new("sandbox", params, KEYS).map_err(|e| e.to_string())?;
        let text = |key: &str| table.string(key).map_err(|e| e.to_string());
        let image = text("image")?.ok_or_else(|| {
            "[plugins.sandbox] image: the container sandbox needs an image to run the \
             commands in (for example `image = \"debian:bookworm-slim\"`)"
                .to_owned()
        })?;
        if image.trim().is_empty() || image.starts_with('-') {
            return Err(format!(
                "[plugins.sandbox] image: `{image}` is not an image name"
            ));
        }
        let memory = text("memory")?;
        if let Some(memory) = &memory {
            let digits = memory.trim_end_matches(['b', 'k', 'm', 'g', 'B', 'K', 'M', 'G']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "[plugins.sandbox] memory: `{memory}` is not a size (a number with an \
                     optional unit: `512m`, `2g`)"
                ));
            }
        }
        Ok(Self {
            engine: text("engine")?,
            image,
            network: table
                .bool("network")
                .map_err(|e| e.to_string())?
                .unwrap_or(false),
            memory,
            max_processes: table
                .whole::<u32>("max_processes")
                .map_err(|e| e.to_string())?
                .unwrap_or(DEFAULT_MAX_PROCESSES),
            timeout: table
                .positive_duration("timeout_ms", TimeUnit::Milliseconds)
                .map_err(|e| e.to_string())?,
            runtime: text("runtime")?,
        })
    }
}

/// The engine's program: the one the settings name, else `podman` or `docker` on `PATH`.
fn engine(settings: &Settings) -> Result<PathBuf, String> {
    let on_path = |name: &str| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
    };
    match &settings.engine {
        Some(named) if named.contains('/') => {
            let path = PathBuf::from(named);
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "container: the engine `{named}` ([plugins.sandbox] engine) does not exist"
                ))
            }
        }
        Some(named) => on_path(named).ok_or_else(|| {
            format!(
                "container: `{named}` ([plugins.sandbox] engine) is not installed: apt-get \
                 install {}",
                if named == "docker" {
                    "docker.io"
                } else {
                    named.as_str()
                }
            )
        }),
        None => on_path("podman")
            .or_else(|| on_path("docker"))
            .ok_or_else(|| {
                "container: no container engine is installed (neither `podman` nor `docker` is on \
             PATH): apt-get install podman, or set [plugins.sandbox] engine to its path"
                    .to_owned()
            }),
    }
}

/// Runs the engine with `args` to its end: its standard output, or why it failed.
fn engine_output(engine: &Path, args: &[String]) -> Result<String, String> {
    let out = Command::new(engine)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("cannot start `{}`: {err}", engine.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{} {}` failed ({}): {}",
            engine.display(),
            args.first().map_or("", String::as_str),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// This process's limit `name` (a line of `/proc/self/limits`) as `soft:hard`, when finite,
/// and no higher than `cap`: a container gets no more than the host process starting it has
/// (an engine's own defaults can be higher, and a kernel that does not let this process raise
/// its limits refuses to start the container).
fn own_limit(name: &str, cap: Option<u64>) -> Option<String> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with(name))?;
    let mut fields = line[name.len()..].split_whitespace();
    let cap = cap.unwrap_or(u64::MAX);
    let soft: u64 = fields.next()?.parse::<u64>().ok()?.min(cap);
    let hard: u64 = fields.next()?.parse::<u64>().ok()?.min(cap);
    Some(format!("{soft}:{hard}"))
}

/// The most process ids the kernel hands out: no process limit above it means anything.
fn pid_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The `container` provider.
pub(crate) struct Container;

impl SandboxFactory for Container {
    fn build(&self, local: Arc<LocalExecEnv>, params: &Value) -> Result<Arc<dyn ExecEnv>, String> {
        let settings = Settings::parse(params)?;
        let engine = engine(&settings)?;
        // An engine whose daemon is not there is refused now, not at the first command.
        engine_output(&engine, &["version".to_owned()]).map_err(|why| {
            format!(
                "container: the engine `{}` does not answer: {why}",
                engine.display()
            )
        })?;
        let workspace = std::fs::canonicalize(local.workspace())
            .unwrap_or_else(|_| local.workspace().to_path_buf());
        Ok(Arc::new(Engine(Arc::new(Shared {
            local,
            engine,
            workspace,
            settings,
            tasks: Mutex::new(BTreeMap::new()),
        }))))
    }

    fn prune(&self, params: &Value, workspace: &Path) -> Result<Vec<String>, String> {
        let settings = Settings::parse(params)?;
        let engine = engine(&settings)?;
        let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.into());
        let listed = engine_output(
            &engine,
            &[
                "ps".to_owned(),
                "--all".to_owned(),
                "--filter".to_owned(),
                format!("label={WORKSPACE_LABEL}={}", workspace.display()),
                "--format".to_owned(),
                "{{.Names}}".to_owned(),
            ],
        )
        .map_err(|why| format!("container: cannot list the containers: {why}"))?;
        let mut names: Vec<String> = listed
            .lines()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        names.sort();
        if !names.is_empty() {
            let mut args = vec!["rm".to_owned(), "--force".to_owned()];
            args.extend(names.iter().cloned());
            engine_output(&engine, &args)
                .map_err(|why| format!("container: cannot remove the containers: {why}"))?;
        }
        Ok(names)
    }
}

/// What the host's environment and each task's share.
struct Shared {
    local: Arc<LocalExecEnv>,
    engine: PathBuf,
    workspace: PathBuf,
    settings: Settings,
    /// The tasks whose container this process has started or found, by task.
    tasks: Mutex<BTreeMap<String, Arc<TaskContainer>>>,
}

impl Shared {
    /// The options of `run` that make a container of this sandbox (up to the image).
    fn run_options(&self) -> Vec<String> {
        let settings = &self.settings;
        let workspace = self.workspace.display().to_string();
        let mut args = vec![
            "--label".to_owned(),
            format!("{WORKSPACE_LABEL}={workspace}"),
            "--volume".to_owned(),
            format!("{workspace}:{workspace}"),
            "--workdir".to_owned(),
            workspace,
            "--cap-drop".to_owned(),
            "ALL".to_owned(),
            "--security-opt".to_owned(),
            "no-new-privileges".to_owned(),
            // Removing it (`rm --force`) kills what is left after a second, not ten.
            "--stop-timeout".to_owned(),
            "1".to_owned(),
        ];
        if !settings.network {
            args.extend(["--network".to_owned(), "none".to_owned()]);
        }
        if let Some(memory) = &settings.memory {
            args.extend(["--memory".to_owned(), memory.clone()]);
        }
        if settings.max_processes > 0 {
            args.extend([
                "--pids-limit".to_owned(),
                settings.max_processes.to_string(),
            ]);
        }
        if let Some(runtime) = &settings.runtime {
            args.extend(["--runtime".to_owned(), runtime.clone()]);
        }
        for (limit, name, cap) in [
            ("Max open files", "nofile", None),
            ("Max processes", "nproc", pid_max()),
        ] {
            if let Some(value) = own_limit(limit, cap) {
                args.extend(["--ulimit".to_owned(), format!("{name}={value}")]);
            }
        }
        args
    }

    /// The directory a command runs in, inside the container (the same path as outside).
    fn dir(&self, command: &ExecCommand) -> String {
        match &command.cwd {
            Some(dir) => self.workspace.join(dir),
            None => self.workspace.clone(),
        }
        .display()
        .to_string()
    }

    /// `command` with its deadline no later than the settings' one.
    fn deadline(&self, command: &ExecCommand) -> Option<Duration> {
        match (command.timeout, self.settings.timeout) {
            (Some(own), Some(limit)) => Some(own.min(limit)),
            (own, limit) => own.or(limit),
        }
    }

    /// The engine's command line running `command` as `engine <head…> sh -c …`: the shell
    /// leaves its process id in `pid_file`, then becomes the command.
    fn wrap(&self, command: &ExecCommand, head: Vec<String>, pid_file: &str) -> ExecCommand {
        let mut wrapped = command.clone();
        let mut args = head;
        // The pid file's name is made here of digits and `-` only.
        args.extend([
            "sh".to_owned(),
            "-c".to_owned(),
            format!("mkdir -p {PID_DIR} && echo $$ > {pid_file} && exec \"$@\""),
            "sh".to_owned(),
            command.program.clone(),
        ]);
        args.extend(command.args.iter().cloned());
        wrapped.program = self.engine.display().to_string();
        wrapped.args = args;
        // The variables go in by `--env`; the engine's client keeps the host's own.
        wrapped.env = BTreeMap::new();
        wrapped.clear_env = false;
        wrapped.timeout = self.deadline(command);
        wrapped
    }

    /// `--env` options for the command's variables, and `--interactive` for its input.
    fn exec_options(&self, command: &ExecCommand) -> Vec<String> {
        let mut args = vec![
            "--interactive".to_owned(),
            "--workdir".to_owned(),
            self.dir(command),
        ];
        for (key, value) in &command.env {
            args.extend(["--env".to_owned(), format!("{key}={value}")]);
        }
        args
    }
}

/// A fresh name for one command's pid file.
fn pid_file() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{PID_DIR}/{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The container sandbox as the host holds it: commands outside a task run in a container of
/// their own; [`for_task`](ExecEnv::for_task) gives each task its container.
struct Engine(Arc<Shared>);

#[async_trait]
impl ExecEnv for Engine {
    fn name(&self) -> &str {
        NAME
    }

    fn workspace(&self) -> &Path {
        self.0.local.workspace()
    }

    fn isolation(&self) -> Option<String> {
        Some(isolation(&self.0, None))
    }

    async fn run(&self, command: &ExecCommand) -> Result<ExecOutput, ExecError> {
        let shared = &self.0;
        let name = format!("noeta-cmd-{}", pid_file().rsplit('/').next().unwrap_or("0"));
        let mut head = vec!["run".to_owned(), "--rm".to_owned(), "--name".to_owned()];
        head.push(name.clone());
        head.extend(shared.run_options());
        head.extend(shared.exec_options(command));
        head.extend([
            "--entrypoint".to_owned(),
            String::new(),
            shared.settings.image.clone(),
        ]);
        let wrapped = shared.wrap(command, head, &pid_file());
        let mut guard = Cleanup::remove(&shared.engine, &name);
        let out = shared.local.run(&wrapped).await;
        if matches!(&out, Ok(out) if !out.timed_out) {
            guard.disarm();
        }
        out
    }

    fn for_task(&self, task: &str) -> Option<Arc<dyn ExecEnv>> {
        let mut tasks = self.0.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let env = tasks.entry(task.to_owned()).or_insert_with(|| {
            Arc::new(TaskContainer {
                shared: Arc::clone(&self.0),
                task: task.to_owned(),
                name: container_name(task),
                ready: Arc::new(Mutex::new(false)),
            })
        });
        Some(Arc::clone(env) as Arc<dyn ExecEnv>)
    }

    fn task_done(&self, task: &str) {
        let held = self
            .0
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(task);
        // Removed whether this process started it or not: a task done is done.
        let name = held.map_or_else(|| container_name(task), |t| t.name.clone());
        let _ = engine_output(
            &self.0.engine,
            &["rm".to_owned(), "--force".to_owned(), name],
        );
    }
}

/// The container name for `task`: `noeta-` and the task id, with anything an engine refuses
/// in a name turned into `-`.
fn container_name(task: &str) -> String {
    let safe: String = task
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("noeta-{safe}")
}

/// What a command here cannot do, for the model.
fn isolation(shared: &Shared, container: Option<&str>) -> String {
    let settings = &shared.settings;
    let mut said = vec![match container {
        Some(name) => format!(
            "commands run in the container `{name}` (image `{}`), which the task keeps until it \
             ends",
            settings.image
        ),
        None => format!("commands run in a container of image `{}`", settings.image),
    }];
    said.push("only the workspace is shared with the host".to_owned());
    if !settings.network {
        said.push("no network".to_owned());
    }
    if settings.max_processes > 0 {
        said.push(format!("at most {} processes", settings.max_processes));
    }
    if let Some(memory) = &settings.memory {
        said.push(format!("at most {memory} of memory"));
    }
    said.join("; ")
}

/// One task's container.
struct TaskContainer {
    shared: Arc<Shared>,
    task: String,
    name: String,
    /// Whether the container is known to be running (checked once per process, then trusted
    /// until a command finds it gone).
    ready: Arc<Mutex<bool>>,
}

impl TaskContainer {
    /// Makes sure the container runs — found by name (started again when it was stopped), or
    /// created — on a thread of its own: creating one may pull its image.
    async fn ensure(&self) -> Result<(), ExecError> {
        let shared = Arc::clone(&self.shared);
        let (name, task, ready) = (
            self.name.clone(),
            self.task.clone(),
            Arc::clone(&self.ready),
        );
        let started = tokio::task::spawn_blocking(move || ensure(&shared, &name, &task, &ready))
            .await
            .map_err(|err| err.to_string())
            .and_then(|r| r);
        started.map_err(|message| self.failed(message))
    }

    fn failed(&self, message: String) -> ExecError {
        ExecError::Wait {
            program: self.shared.engine.display().to_string(),
            message: format!("container `{}`: {message}", self.name),
        }
    }

    /// The engine's `exec` command line for `command`, leaving its pid in `pid_file`.
    fn wrap(&self, command: &ExecCommand, pid_file: &str) -> ExecCommand {
        let mut head = vec!["exec".to_owned()];
        head.extend(self.shared.exec_options(command));
        head.push(self.name.clone());
        self.shared.wrap(command, head, pid_file)
    }

    /// After a command the engine could not run: whether the container is gone (a prune) or
    /// stopped, in which case the next command makes it run again.
    async fn gone(&self) -> bool {
        let shared = Arc::clone(&self.shared);
        let name = self.name.clone();
        let running = tokio::task::spawn_blocking(move || state(&shared.engine, &name))
            .await
            .ok()
            .flatten();
        if running == Some(true) {
            return false;
        }
        *self.ready.lock().unwrap_or_else(PoisonError::into_inner) = false;
        true
    }
}

/// [`start_container`] unless `ready` says it runs already.
fn ensure(shared: &Shared, name: &str, task: &str, ready: &Mutex<bool>) -> Result<(), String> {
    let mut ready = ready.lock().unwrap_or_else(PoisonError::into_inner);
    if !*ready {
        start_container(shared, name, task)?;
        *ready = true;
    }
    Ok(())
}

/// Whether the container `name` runs (`None`: there is none).
fn state(engine: &Path, name: &str) -> Option<bool> {
    engine_output(
        engine,
        &[
            "container".to_owned(),
            "inspect".to_owned(),
            "--format".to_owned(),
            "{{.State.Running}}".to_owned(),
            name.to_owned(),
        ],
    )
    .ok()
    .map(|out| out.trim() == "true")
}

/// Finds the container `name` and starts it when stopped, or creates it.
fn start_container(shared: &Shared, name: &str, task: &str) -> Result<(), String> {
    match state(&shared.engine, name) {
        Some(true) => return Ok(()),
        Some(false) => {
            return engine_output(&shared.engine, &["start".to_owned(), name.to_owned()])
                .map(drop)
                .map_err(|why| format!("cannot start it again: {why}"));
        }
        None => {}
    }
    let mut args = vec![
        "run".to_owned(),
        "--detach".to_owned(),
        "--name".to_owned(),
        name.to_owned(),
        "--label".to_owned(),
        format!("{TASK_LABEL}={task}"),
    ];
    args.extend(shared.run_options());
    // The container's own process waits, ending at once when the container is stopped.
    args.extend([
        "--entrypoint".to_owned(),
        "sh".to_owned(),
        shared.settings.image.clone(),
        "-c".to_owned(),
        "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done".to_owned(),
    ]);
    engine_output(&shared.engine, &args)
        .map(drop)
        .map_err(|why| format!("cannot create it: {why}"))
}

#[async_trait]
impl ExecEnv for TaskContainer {
    fn name(&self) -> &str {
        NAME
    }

    fn workspace(&self) -> &Path {
        self.shared.local.workspace()
    }

    fn isolation(&self) -> Option<String> {
        Some(isolation(&self.shared, Some(&self.name)))
    }

    async fn run(&self, command: &ExecCommand) -> Result<ExecOutput, ExecError> {
        let mut again = true;
        loop {
            self.ensure().await?;
            let pid_file = pid_file();
            let wrapped = self.wrap(command, &pid_file);
            let mut guard = Cleanup::kill_group(&self.shared.engine, &self.name, &pid_file);
            let out = self.shared.local.run(&wrapped).await;
            if let Ok(done) = &out
                && !done.timed_out
            {
                guard.disarm();
                // The engine could not run it: when the container was removed from outside (a
                // prune), it is made again and the command runs there, once.
                if again && engine_failed(done) && self.gone().await {
                    again = false;
                    continue;
                }
            }
            return out;
        }
    }

    fn spawn(&self, command: &ExecCommand) -> Result<Arc<dyn ExecJob>, ExecError> {
        // A background command's container must be running before it starts: the first one
        // waits for it on the caller's thread.
        ensure(&self.shared, &self.name, &self.task, &self.ready)
            .map_err(|message| self.failed(message))?;
        let pid_file = pid_file();
        let job = self.shared.local.spawn(&self.wrap(command, &pid_file))?;
        Ok(Arc::new(ContainerJob {
            job,
            cleanup: Mutex::new(Cleanup::kill_group(
                &self.shared.engine,
                &self.name,
                &pid_file,
            )),
        }))
    }
}

/// What is left to end inside the engine when a command's client outside is gone: the
/// command's process group in its container, or a throwaway container.
struct Cleanup {
    engine: PathBuf,
    args: Option<Vec<String>>,
}

impl Cleanup {
    /// Kills the process group whose leader left its pid in `pid_file` in `container`.
    fn kill_group(engine: &Path, container: &str, pid_file: &str) -> Self {
        Self {
            engine: engine.to_path_buf(),
            args: Some(vec![
                "exec".to_owned(),
                container.to_owned(),
                "sh".to_owned(),
                "-c".to_owned(),
                "pid=$(cat \"$0\" 2>/dev/null) && kill -KILL -- \"-$pid\" 2>/dev/null; rm -f \"$0\""
                    .to_owned(),
                pid_file.to_owned(),
            ]),
        }
    }

    /// Removes the container `name`.
    fn remove(engine: &Path, name: &str) -> Self {
        Self {
            engine: engine.to_path_buf(),
            args: Some(vec!["rm".to_owned(), "--force".to_owned(), name.to_owned()]),
        }
    }

    fn disarm(&mut self) {
        self.args = None;
    }

    /// Runs the cleanup now (once).
    fn run(&mut self) {
        if let Some(args) = self.args.take() {
            let _ = engine_output(&self.engine, &args);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
    }
}

/// A background command in a task's container.
struct ContainerJob {
    job: Arc<dyn ExecJob>,
    cleanup: Mutex<Cleanup>,
}

impl ExecJob for ContainerJob {
    fn take(&self) -> JobOutput {
        self.job.take()
    }

    fn status(&self) -> JobStatus {
        self.job.status()
    }

    fn kill(&self) {
        self.job.kill();
        self.cleanup
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .run();
    }
}

impl Drop for ContainerJob {
    fn drop(&mut self) {
        // A job that ended by itself leaves nothing to kill; one still running when dropped
        // is killed inside as well as outside.
        let cleanup = self
            .cleanup
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if self.job.status() != JobStatus::Running {
            cleanup.disarm();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bad_setting_is_named_with_its_key() {
        let none = Settings::parse(&json!({})).unwrap_err();
        assert!(none.contains("[plugins.sandbox] image"), "{none}");
        let flag = Settings::parse(&json!({ "image": "--privileged" })).unwrap_err();
        assert!(
            flag.contains("`--privileged` is not an image name"),
            "{flag}"
        );
        let memory = Settings::parse(&json!({ "image": "x", "memory": "lots" })).unwrap_err();
        assert!(
            memory.contains("[plugins.sandbox] memory: `lots`"),
            "{memory}"
        );
        let unknown = Settings::parse(&json!({ "image": "x", "hidden_paths": [] })).unwrap_err();
        assert!(unknown.contains("hidden_paths"), "{unknown}");
        let processes = Settings::parse(&json!({ "image": "x", "max_processes": -1 })).unwrap_err();
        assert!(processes.contains("max_processes"), "{processes}");
    }

    #[test]
    fn a_missing_engine_is_named_with_how_to_install_one() {
        let missing = |engine: &str| {
            let settings = Settings::parse(&json!({ "image": "x", "engine": engine }))
                .unwrap_or_else(|e| panic!("{e}"));
            super::engine(&settings).unwrap_err()
        };
        let path = missing("/nonexistent/podman");
        assert!(path.contains("`/nonexistent/podman`") && path.contains("does not exist"));
        let named = missing("no-such-engine-here");
        assert!(
            named.contains("apt-get install no-such-engine-here"),
            "{named}"
        );
    }

    #[test]
    fn an_engine_failure_is_told_from_a_failing_command() {
        let out = |status: i32, stderr: &str| {
            let mut out = ExecOutput::default();
            out.status = Some(status);
            out.stderr = stderr.as_bytes().to_vec();
            out
        };
        assert!(engine_failed(&out(125, "Error: no container with name")));
        assert!(engine_failed(&out(
            1,
            "Error response from daemon: No such container: noeta-t1"
        )));
        assert!(engine_failed(&out(
            1,
            "Error: container abc is not running"
        )));
        assert!(!engine_failed(&out(1, "grep found nothing")));
        assert!(!engine_failed(&out(
            2,
            "No such container (a command's own words)"
        )));
    }

    #[test]
    fn container_names_keep_only_what_an_engine_accepts() {
        assert_eq!(container_name("t-01ab_c.d"), "noeta-t-01ab_c.d");
        assert_eq!(container_name("a/b c"), "noeta-a-b-c");
    }

    #[test]
    fn a_task_command_runs_by_exec_with_its_variables_and_directory() {
        let shared = Arc::new(Shared {
            local: Arc::new(LocalExecEnv::new("/work/ws")),
            engine: PathBuf::from("/usr/bin/podman"),
            workspace: PathBuf::from("/work/ws"),
            settings: Settings::parse(&json!({ "image": "img", "timeout_ms": 1000 }))
                .unwrap_or_else(|e| panic!("{e}")),
            tasks: Mutex::new(BTreeMap::new()),
        });
        let task = TaskContainer {
            shared,
            task: "t1".to_owned(),
            name: container_name("t1"),
            ready: Arc::new(Mutex::new(false)),
        };
        let command = ExecCommand::new("echo", ["hi"])
            .in_dir("src")
            .with_env("SECRET_FREE", "1")
            .with_timeout(Duration::from_secs(5));
        let wrapped = task.wrap(&command, "/tmp/.noeta-exec/1-0");
        assert_eq!(wrapped.program, "/usr/bin/podman");
        let args = wrapped.args.join(" ");
        assert!(
            args.starts_with(
                "exec --interactive --workdir /work/ws/src --env SECRET_FREE=1 noeta-t1 sh -c"
            ),
            "{args}"
        );
        assert!(
            args.ends_with("echo $$ > /tmp/.noeta-exec/1-0 && exec \"$@\" sh echo hi"),
            "{args}"
        );
        assert!(wrapped.env.is_empty());
        assert_eq!(wrapped.timeout, Some(Duration::from_secs(1)));
    }
}
