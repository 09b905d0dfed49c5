//! The task commands: `run`, `resume`, `chat`, `tasks`, `log`, `answer`.

use std::future::Future;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use noeta::tasks::Answer;
use noeta::{HostPaths, TaskRun, new_task_id};
use noeta_core::extension::CommandReply;
use noeta_core::fold::TurnState;
use noeta_core::records::hydrate;
use noeta_core::runner::RunOutcome;
use noeta_core::store::{EventLog, TaskId, TaskInfo};
use serde_json::json;

use crate::agent::{AgentArgs, AgentHost, open_store, read_store};
use crate::interact::answer_question;
use crate::overview::{self, status};
use crate::stdio::{eoutln, outln};

/// The exit code of a run cut short by Ctrl-C.
const INTERRUPTED: u8 = 130;

/// Runs `work` until it ends, or Ctrl-C or SIGTERM; `None` when interrupted (the work is
/// dropped, which cancels the step in flight: what it committed stays, the rest is redone on
/// resume; the commands and MCP servers it started are ended as the run's host goes).
async fn interruptible<F: Future>(work: F) -> Option<F::Output> {
    tokio::select! {
        out = work => Some(out),
        () = crate::worker::terminate_or_interrupt() => None,
    }
}

/// Runs the task (and the subagents it starts) until its turn ends, answering parked
/// questions at the terminal, the subagents' included.
async fn drive(host: &AgentHost, task: &TaskId) -> Result<RunOutcome> {
    loop {
        let ran = host.runtime.run_tree(host.sessions.as_ref(), task).await;
        if let Err(err) = &ran
            && let Some(wait) = held_elsewhere(host.wait, &host.printer, task, err)?
        {
            tokio::time::sleep(wait).await;
            continue;
        }
        let (stopped, outcome) = ran
            .inspect_err(|_| {
                host.stop_commands(false);
                host.printer.reset();
            })
            .with_context(|| format!("running task {task}"))?;
        let RunOutcome::Parked { call_id, question } = &outcome else {
            return Ok(outcome);
        };
        // The task that waits may be a subagent's: answer it with its own agent's session.
        let state = host.runtime.load(&host.session, &stopped).await?;
        let session = match &state.core.agent {
            Some(agent) if stopped != *task => host.sessions.session(agent)?,
            _ => host.session.clone(),
        };
        let asks_a_person = state
            .core
            .parked
            .get(call_id)
            .is_some_and(|p| p.question.is_some() && p.wake.is_none());
        if !asks_a_person {
            return Ok(outcome);
        }
        let Some(answer) = answer_question(&host.printer, &state, call_id, question).await else {
            return Ok(outcome);
        };
        host.runtime
            .reply(&session, &stopped, call_id, answer)
            .await?;
    }
}

/// When `err` says another process runs `task`: with `--wait`, how long to wait before trying
/// again (said once on the terminal); without, the error saying who holds it and what to do.
fn held_elsewhere(
    wait: bool,
    printer: &crate::output::Printer,
    task: &TaskId,
    err: &noeta_core::runner::RunError,
) -> Result<Option<std::time::Duration>> {
    let noeta_core::runner::RunError::Store(noeta_core::store::StoreError::Leased {
        holder,
        until_ms,
        ..
    }) = err
    else {
        return Ok(None);
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let left = until_ms.saturating_sub(now);
    let ends = format!("its lease ends in {} s unless renewed", left.div_ceil(1000));
    if !wait {
        bail!(
            "task {task} is being run by another process, worker `{holder}` ({ends}): let it finish, or pass --wait to wait for it"
        );
    }
    printer.note(&format!(
        "task {task} is being run by worker `{holder}`; waiting ({ends})"
    ));
    Ok(Some(std::time::Duration::from_millis(
        left.clamp(200, 5_000),
    )))
}

/// Drives `task` for `run` and `resume`, whose process ends with the turn: however the run
/// ends — its turn over, a question parked, Ctrl-C, an error — every command it started is
/// ended first, the background shells too (they would outlive the process otherwise).
async fn run_to_exit(host: &AgentHost, task: &TaskId) -> Result<ExitCode> {
    let started = std::time::Instant::now();
    let outcome = interruptible(drive(host, task)).await;
    host.stop_commands(true);
    let outcome = outcome.transpose()?;
    if outcome.as_ref().is_some_and(crate::agent::leaves_task_done) {
        host.done_with(task).await;
    }
    let summary = match &outcome {
        Some(_) => summary(host, task, started.elapsed()).await,
        None => None,
    };
    Ok(report(host, task, outcome, summary))
}

/// What the task has cost so far, in one line: model and tool calls, tokens, the price when
/// every call had one, and this run's time.
async fn summary(host: &AgentHost, task: &TaskId, took: std::time::Duration) -> Option<String> {
    let state = host.runtime.load(&host.session, task).await.ok()?;
    let core = &state.core;
    let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    let mut parts = vec![
        plural(core.model_calls, "model call"),
        plural(core.tool_calls, "tool call"),
    ];
    let usage = &core.usage;
    if usage.input_tokens + usage.output_tokens + usage.cache_read_tokens > 0 {
        let cached = if usage.cache_read_tokens > 0 {
            format!(" ({} cached)", grouped(usage.cache_read_tokens))
        } else {
            String::new()
        };
        parts.push(format!(
            "{} tokens in{cached}, {} out",
            grouped(usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens),
            grouped(usage.output_tokens)
        ));
    }
    if let Some(micros) = usage.cost_micros.filter(|_| core.unpriced_calls == 0) {
        parts.push(format!("${:.4}", micros as f64 / 1_000_000.0));
    }
    parts.push(format!("{:.1} s", took.as_secs_f64()));
    Some(parts.join(", "))
}

/// `n` with thousands separated by commas.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Prints how a run ended (with the task's summary, on a terminal-readable line) and turns it
/// into an exit code.
fn report(
    host: &AgentHost,
    task: &TaskId,
    outcome: Option<RunOutcome>,
    summary: Option<String>,
) -> ExitCode {
    let Some(outcome) = outcome else {
        host.printer.reset();
        host.printer.note(&format!(
            "interrupted: the step in flight was cancelled; `noeta resume {task}` carries on"
        ));
        return ExitCode::from(INTERRUPTED);
    };
    let (note, code) = match &outcome {
        RunOutcome::Ended { .. } => (format!("task {task}: turn ended"), ExitCode::SUCCESS),
        RunOutcome::Parked { call_id, question } => (
            format!(
                "task {task} waits for an answer about call {call_id}: {question}\n  answer it with `noeta answer {task} …`, then `noeta resume {task}`"
            ),
            ExitCode::from(2),
        ),
        RunOutcome::TurnFailed { reason } => (
            format!("task {task}: the turn failed: {reason}"),
            ExitCode::FAILURE,
        ),
        RunOutcome::TaskFailed { reason } => {
            (format!("task {task} failed: {reason}"), ExitCode::FAILURE)
        }
        RunOutcome::Idle => (format!("task {task}: nothing to do"), ExitCode::SUCCESS),
        _ => (format!("task {task}: {outcome:?}"), ExitCode::SUCCESS),
    };
    if host.printer.json() {
        host.printer.note(&note);
    } else {
        eoutln!("{note}");
        if let Some(summary) = summary {
            eoutln!("  {summary}");
        }
    }
    code
}

/// The offline demo's scripted model session (`noeta demo`).
const DEMO_SCRIPT: &str = include_str!("demo/script.json");

/// `noeta demo`: a task in this directory with the bundled scripted model (real Glob calls, a
/// fixed answer), kept in memory: noeta at work with no key and nothing left behind.
pub(crate) async fn demo(paths: &HostPaths, json: bool) -> Result<ExitCode> {
    let file = std::env::temp_dir().join(format!("noeta-demo-{}.json", std::process::id()));
    std::fs::write(&file, DEMO_SCRIPT)
        .with_context(|| format!("cannot write the demo's script to {}", file.display()))?;
    let args = AgentArgs {
        provider: Some(format!("scripted:{}", file.display())),
        store: Some("memory:".to_owned()),
        json,
        ..AgentArgs::default()
    };
    let goal = "Show me what this directory holds.".to_owned();
    // The demo runs on noeta's own defaults: no user settings or plugins (a broken or
    // half-written `~/.noeta/config.toml` does not stop it), and no project settings or
    // plugins either (without the user's trust store, the workspace is not trusted).
    let paths = HostPaths {
        home: None,
        workspace: paths.workspace.clone(),
    };
    let result = run(&paths, &args, Some(goal)).await;
    let _ = std::fs::remove_file(&file);
    result
}

/// `noeta run [GOAL]`.
pub(crate) async fn run(
    paths: &HostPaths,
    args: &AgentArgs,
    goal: Option<String>,
) -> Result<ExitCode> {
    let goal = match goal {
        Some(goal) if !goal.trim().is_empty() => goal,
        _ => bail!(
            "give the task's goal: `noeta run \"fix the failing test\"` (or `noeta chat` for a conversation)"
        ),
    };
    // No store until there is a task: a store file this run made and left without one (it
    // failed before its task was created, or the goal was a command that only shows text) is
    // taken away again.
    let fresh = noeta::store_file(paths, args.store.as_deref())
        .ok()
        .filter(|file| !file.exists());
    let result = run_new(paths, args, goal).await;
    if let Some(file) = fresh.filter(|file| file.exists()) {
        remove_if_empty(paths, args, &file).await;
        crate::store::keep_out_of_git(paths, &file);
    }
    result
}

/// The store file `file` (with its SQLite companions, and the `.noeta` directory when that is
/// left empty) removed when it holds no task.
async fn remove_if_empty(paths: &HostPaths, args: &AgentArgs, file: &std::path::Path) {
    let empty = match open_store(paths, args.store.as_deref()) {
        Ok((log, _)) => log.tasks().await.is_ok_and(|tasks| tasks.is_empty()),
        Err(_) => false,
    };
    if !empty {
        return;
    }
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(std::path::PathBuf::from(name));
    }
    if let Some(dir) = file.parent() {
        // Only when empty: the directory may hold settings, skills, plugins.
        let _ = std::fs::remove_dir(dir);
    }
}

/// [`run`] once the goal is known: the task made and run.
async fn run_new(paths: &HostPaths, args: &AgentArgs, goal: String) -> Result<ExitCode> {
    let host = AgentHost::open(paths, args)?;
    // A scratch id for what is asked before the task exists.
    let scratch = new_task_id()?;
    host.warn_unoffered_tools(&scratch).await;
    // `/name args`, when a plugin offers `/name`: its expansion is the goal (a command that
    // only shows text prints it); any other goal starting with `/` is taken as written.
    let goal = match command_goal(&host, &scratch, &goal).await? {
        Some(CommandReply::Send(text)) => text,
        Some(reply) => {
            outln!("{}", reply.text());
            return Ok(ExitCode::SUCCESS);
        }
        None => goal,
    };
    let task = noeta::tasks::create_task(&host.runtime, &host.session, &goal)
        .await
        .context("creating the task")?;
    if args.detach {
        host.stores
            .queue
            .enqueue(&task, 0)
            .await
            .with_context(|| format!("queueing task {task}"))?;
        outln!("{task}");
        eoutln!(
            "task {task} is queued in {}: `noeta worker` runs it; `noeta log {task}` shows it",
            host.stores.url
        );
        return Ok(ExitCode::SUCCESS);
    }
    host.printer.note(&format!("task {task}"));
    let code = run_to_exit(&host, &task).await;
    if matches!(host.stores.url, noeta::backends::StoreUrl::Memory) {
        // The process ends with the run, and an in-memory log goes with it: it is not taken
        // apart record by record first.
        std::mem::forget(std::sync::Arc::clone(&host.stores.log));
    }
    code
}

/// Whether `task`'s tree was submitted to the queue (`run --detach`): a worker runs it.
async fn queued(log: &dyn EventLog, task: &TaskId) -> Result<bool> {
    Ok(TaskRun::of_tree(log, task).await?.queued)
}

/// What `goal` comes to when it is `/name args` and a plugin offers `/name`.
async fn command_goal(host: &AgentHost, task: &TaskId, goal: &str) -> Result<Option<CommandReply>> {
    let Some(command) = goal.trim_start().strip_prefix('/') else {
        return Ok(None);
    };
    let (name, args) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    let offered = host.runtime.commands(&host.session, task).await?;
    if !offered.iter().any(|(_, c)| c.name == name) {
        return Ok(None);
    }
    Ok(Some(
        host.runtime
            .run_command(&host.session, task, name, args)
            .await?,
    ))
}

/// The id of the latest task in the store (`--last`), or the one given, checked to exist.
async fn pick_task(log: &dyn EventLog, id: Option<&str>, last: bool) -> Result<TaskId> {
    let tasks = log.tasks().await?;
    match (id, last) {
        (Some(id), _) => {
            let task = TaskId::new(id)?;
            if !tasks.iter().any(|t| t.id == task) {
                bail!("no task `{id}` in this store (`noeta tasks` lists them)");
            }
            Ok(task)
        }
        (None, true) => tasks
            .iter()
            .filter(|t| t.parent.is_none())
            .max_by_key(|t| (t.created_ms, t.id.as_str().to_owned()))
            .map(|t| t.id.clone())
            .context("no task in this store yet"),
        (None, false) => bail!("name the task, or pass --last for the latest"),
    }
}

/// `args` for running `task` on: the agent the task was started with (`--agent` may only
/// repeat it).
pub(crate) async fn for_task(
    log: &dyn EventLog,
    task: &TaskId,
    args: &AgentArgs,
) -> Result<AgentArgs> {
    let run = TaskRun::of_task(log, task).await?;
    let recorded = run.agent;
    let mut args = args.clone();
    // The model the task was made with, unless the flags name another: the recorded model
    // only with the recorded provider.
    if args.provider.is_none() {
        args.provider = run.provider.clone();
        if args.model.is_none() {
            args.model = run.model;
        }
    } else if args.model.is_none() && args.provider == run.provider {
        args.model = run.model;
    }
    // A submitted task also recorded its permission mode and sandbox.
    if args.permission_mode.is_none() {
        args.permission_mode = run.permission_mode;
    }
    if args.sandbox.is_none() {
        args.sandbox = run.sandbox;
    }
    match (&args.agent, recorded) {
        (Some(given), Some(recorded)) if *given != recorded => bail!(
            "task {task} was started with agent `{recorded}`, not `{given}`: leave out --agent to carry on with it"
        ),
        (_, Some(recorded)) => args.agent = Some(recorded),
        (_, None) => {}
    }
    Ok(args)
}

/// `noeta resume TASK | --last`.
pub(crate) async fn resume(
    paths: &HostPaths,
    args: &AgentArgs,
    id: Option<&str>,
    last: bool,
) -> Result<ExitCode> {
    let log = read_store(paths, args.store.as_deref())?.log;
    let task = pick_task(log.as_ref(), id, last).await?;
    if log.info(&task).await?.head == 0 {
        bail!(
            "task {task} was {}: there is nothing to resume; start it again with `noeta run`",
            overview::NEVER_STARTED
        );
    }
    let args = for_task(log.as_ref(), &task, args).await?;
    drop(log);
    let host = AgentHost::open(paths, &args)?;
    host.printer.note(&format!("resuming task {task}"));
    run_to_exit(&host, &task).await
}

/// One line from standard input, or `None` at its end or on Ctrl-C.
async fn prompt_line(prompt: &str) -> Option<String> {
    interruptible(crate::interact::read(prompt, crate::editor::Kind::Message))
        .await
        .flatten()
}

/// The chat's own slash commands, for completion.
const CHAT_COMMANDS: [&str; 11] = [
    "/help",
    "/tasks",
    "/status",
    "/cost",
    "/clear",
    "/show",
    "/last",
    "/mode",
    "/reload-plugins",
    "/exit",
    "/quit",
];

/// Tells the line editor the slash commands (the chat's and the plugins') and the agents.
async fn completions(host: &AgentHost, task: Option<&TaskId>) {
    let mut commands: Vec<String> = CHAT_COMMANDS.iter().map(|c| (*c).to_owned()).collect();
    let target = match task {
        Some(task) => Some(task.clone()),
        None => new_task_id().ok(),
    };
    if let Some(target) = target
        && let Ok(listed) = host.runtime.commands(&host.session, &target).await
    {
        commands.extend(listed.into_iter().map(|(_, c)| format!("/{}", c.name)));
    }
    let agents = host.session.spec.spawnable.clone();
    crate::editor::set_completions(commands, agents);
}

const CHAT_HELP: &str = "/help this list · /tasks the tasks in this store · /status (or /cost) the model, mode, tokens and cost · /model [NAME] show or switch the model · /diff what this task changed · /compact summarise the conversation now · /init write NOETA.md · /clear a new task · /show N a tool result in full (/last the latest) · /reload-plugins load plugins and settings again · /<command> [args] a plugin's command · /exit (or Ctrl-D) leave";

/// `noeta chat`: one task, many turns.
pub(crate) async fn chat(
    paths: &HostPaths,
    args: &AgentArgs,
    carry_on: Option<&str>,
) -> Result<ExitCode> {
    // `--task ID`: the task's own agent, provider and model, unless the flags name others.
    let (args, mut task) = match carry_on {
        Some(id) => {
            let (log, _) = open_store(paths, args.store.as_deref())?;
            let task = pick_task(log.as_ref(), Some(id), false).await?;
            if log.info(&task).await?.head == 0 {
                bail!(
                    "task {task} was {}: start a new chat instead",
                    overview::NEVER_STARTED
                );
            }
            (for_task(log.as_ref(), &task, args).await?, Some(task))
        }
        None => (args.clone(), None),
    };
    let mut args = AgentArgs { chat: true, ..args };
    let mut host = AgentHost::open(paths, &args)?;
    host.warn_unoffered_tools(&new_task_id()?).await;
    crate::editor::keep_history(paths.home.as_deref(), &paths.workspace);
    completions(&host, task.as_ref()).await;
    eoutln!("noeta chat — {CHAT_HELP}");
    let mut waiting = false;
    if let Some(task) = &task {
        eoutln!("carrying on with task {task}");
    }
    loop {
        let Some(line) = prompt_line("› ").await else {
            eoutln!();
            host.stop_commands(true);
            if let Some(task) = &task
                && !waiting
            {
                host.done_with(task).await;
            }
            return Ok(ExitCode::SUCCESS);
        };
        let mut line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        if let Some(command) = line.clone().strip_prefix('/') {
            let mut expanded = false;
            let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
            match name {
                "help" => {
                    eoutln!("{CHAT_HELP}");
                    let target = match &task {
                        Some(task) => task.clone(),
                        None => new_task_id()?,
                    };
                    match host.runtime.commands(&host.session, &target).await {
                        Ok(commands) => {
                            for (owner, command) in commands {
                                eoutln!("  /{}  {} [{owner}]", command.name, command.description);
                            }
                        }
                        Err(err) => eoutln!("error: {err:#}"),
                    }
                }
                "exit" | "quit" => {
                    host.stop_commands(true);
                    return Ok(ExitCode::SUCCESS);
                }
                "show" | "last" => match rest.trim() {
                    "" => host.printer.show(None),
                    n => match n.parse::<usize>() {
                        Ok(n) => host.printer.show(Some(n)),
                        Err(_) => eoutln!("/show takes a result's number (`/show 3`), not `{n}`"),
                    },
                },
                "tasks" => {
                    if let Err(err) = print_tasks(host.log.as_ref()).await {
                        eoutln!("error: {err:#}");
                    }
                }
                "status" | "cost" => {
                    let flagged = args.permission_mode.as_deref();
                    if let Err(err) =
                        crate::overview::chat_status(&host, task.as_ref(), flagged).await
                    {
                        eoutln!("error: {err:#}");
                    }
                }
                "diff" => {
                    if let Err(err) =
                        crate::chat_commands::diff(&host, task.as_ref(), &paths.workspace).await
                    {
                        eoutln!("error: {err:#}");
                    }
                }
                "model" => crate::chat_commands::model(&mut host, &mut args, paths, rest),
                "clear" => match task.take() {
                    Some(done) => eoutln!(
                        "a new task starts with your next message; task {done} stays in the \
                         store (`noeta resume {done}` carries it on)"
                    ),
                    None => eoutln!("no task yet: your next message starts one"),
                },
                // Before the first message there is no task to record a switch in: the chat's
                // permission mode is set instead, and its first task starts in it.
                "mode" if task.is_none() && !rest.trim().is_empty() => {
                    match crate::agent::permission_mode(rest.trim()) {
                        Ok(mode) => {
                            let asked = AgentArgs {
                                permission_mode: Some(mode.clone()),
                                ..args.clone()
                            };
                            match host.reload(paths, &asked) {
                                Ok((reloaded, _)) => {
                                    host = reloaded;
                                    args = asked;
                                    eoutln!(
                                        "permission mode: {mode} (the chat's first task starts in it)"
                                    );
                                }
                                Err(err) => eoutln!("error: {err:#}"),
                            }
                        }
                        Err(err) => eoutln!("{err}"),
                    }
                }
                "reload-plugins" => match host.reload(paths, &args) {
                    Ok((reloaded, restart)) => {
                        host = reloaded;
                        eoutln!("plugins reloaded");
                        if let Some(restart) = restart {
                            eoutln!("note: {restart}");
                        }
                    }
                    Err(err) => eoutln!("error: {err:#} (the plugins loaded before stay)"),
                },
                _ => {
                    // Before the first message the command sees the task about to be made.
                    let target = match &task {
                        Some(task) => task.clone(),
                        None => new_task_id()?,
                    };
                    match host
                        .runtime
                        .run_command(&host.session, &target, name, rest)
                        .await
                    {
                        Ok(CommandReply::Send(text)) => {
                            // Sent as if typed: the turn below runs on it.
                            line = text;
                            expanded = true;
                        }
                        Ok(reply) => {
                            outln!("{}", reply.text());
                            continue;
                        }
                        Err(err) => {
                            eoutln!("{err}");
                            continue;
                        }
                    }
                }
            }
            if !expanded {
                continue;
            }
        }
        let line = line.as_str();
        let current = match &task {
            Some(task) => {
                let mut sent = host.runtime.send(&host.session, task, line).await;
                if let Err(noeta_core::runner::RunError::Busy { .. }) = &sent {
                    // The turn a Ctrl-C cut short goes on first, then the new message.
                    eoutln!("(finishing the interrupted turn first)");
                    match interruptible(drive(&host, task)).await {
                        Some(Ok(_)) => sent = host.runtime.send(&host.session, task, line).await,
                        Some(Err(err)) => {
                            eoutln!("error: {err:#}");
                            continue;
                        }
                        None => {
                            host.stop_commands(false);
                            host.printer.reset();
                            eoutln!("interrupted again; your message was not sent");
                            continue;
                        }
                    }
                }
                if let Err(err) = sent {
                    eoutln!("error: {err:#}");
                    continue;
                }
                task.clone()
            }
            None => {
                let id = match noeta::tasks::create_task(&host.runtime, &host.session, line).await {
                    Ok(id) => id,
                    Err(err) => {
                        eoutln!("error: {err:#}");
                        continue;
                    }
                };
                eoutln!("task {id}");
                if let Ok(file) = noeta::store_file(paths, args.store.as_deref()) {
                    crate::store::keep_out_of_git(paths, &file);
                }
                task = Some(id.clone());
                id
            }
        };
        let ran = interruptible(drive(&host, &current)).await;
        // A chat left while its task waits for a person (or was interrupted) keeps what the
        // sandbox holds for it, for `noeta resume`.
        waiting = !matches!(&ran, Some(Ok(outcome)) if crate::agent::leaves_task_done(outcome));
        match ran {
            Some(Ok(RunOutcome::Ended { .. } | RunOutcome::Idle)) => {}
            Some(Ok(other)) => {
                report(&host, &current, Some(other), None);
            }
            Some(Err(err)) => eoutln!("error: {err:#}"),
            None => {
                host.stop_commands(false);
                host.printer.reset();
                eoutln!(
                    "interrupted: the step was cancelled; your next message carries on (Ctrl-C again, or Ctrl-D, to leave)"
                );
            }
        }
    }
}

async fn print_tasks(log: &dyn EventLog) -> Result<()> {
    let mut tasks: Vec<TaskInfo> = log.tasks().await?;
    tasks.sort_by_key(|t| (t.created_ms, t.id.as_str().to_owned()));
    for t in tasks {
        let parent = t
            .parent
            .map(|p| format!("  child of {p}"))
            .unwrap_or_default();
        outln!("{}  {} event(s){parent}", t.id, t.head);
    }
    Ok(())
}

/// `noeta tasks`.
pub(crate) async fn tasks(
    paths: &HostPaths,
    store: Option<&str>,
    json_out: bool,
) -> Result<ExitCode> {
    let stores = read_store(paths, store)?;
    let rows = overview::rows(&stores).await?;
    if json_out {
        for row in &rows {
            outln!("{}", row.json());
        }
    } else if rows.is_empty() {
        eoutln!("no tasks in this store yet");
    } else {
        for row in rows {
            let goal: String = row.goal.chars().take(60).collect();
            let held = row
                .worker
                .as_ref()
                .map(|worker| format!("  [{worker}]"))
                .unwrap_or_default();
            outln!(
                "{}  {}  {}{held}  {goal}",
                row.info.id,
                row.agent,
                row.status
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `noeta log (TASK | --last) [--json] [--follow]`.
pub(crate) async fn log(
    paths: &HostPaths,
    store: Option<&str>,
    id: Option<&str>,
    last: bool,
    json_out: bool,
    follow: bool,
) -> Result<ExitCode> {
    let stores = read_store(paths, store)?;
    let (log, content) = (stores.log, stores.content);
    let task = pick_task(log.as_ref(), id, last).await?;
    let mut seen = 0;
    let mut transcript = crate::transcript::Transcript::default();
    loop {
        let how = if json_out {
            Ok(())
        } else {
            Err(&mut transcript)
        };
        seen = print_events(log.as_ref(), content.as_ref(), &task, seen, how).await?;
        if !follow {
            // Calls the log ends on (running, or waiting for a person) are shown as they are.
            for line in transcript.finish() {
                outln!("{line}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        crate::stdio::flush_out();
        let pause = tokio::time::sleep(std::time::Duration::from_millis(250));
        if interruptible(pause).await.is_none() {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// Prints the events of `task` after `after`, as JSON (`Ok(())`) or into the transcript;
/// returns the last sequence number printed.
async fn print_events(
    log: &dyn EventLog,
    content: &dyn noeta_core::store::ContentStore,
    task: &TaskId,
    after: u64,
    mut how: Result<(), &mut crate::transcript::Transcript>,
) -> Result<u64> {
    let mut last = after;
    for event in log.read(task, after).await? {
        last = event.seq;
        let event = hydrate(event, content).await?;
        let record = &event.record;
        let Err(transcript) = &mut how else {
            outln!(
                "{}",
                json!({
                    "seq": event.seq,
                    "extension": record.extension,
                    "kind": record.kind,
                    "data": record.data,
                    "message": record.message,
                })
            );
            continue;
        };
        for line in transcript.lines(record) {
            outln!("{line}");
        }
    }
    Ok(last)
}

/// `noeta answer TASK [CALL] (--allow | --deny | ANSWER)`: answers what a task waits for.
pub(crate) async fn answer(
    paths: &HostPaths,
    args: &AgentArgs,
    id: &str,
    allow: bool,
    deny: bool,
    text: Option<String>,
) -> Result<ExitCode> {
    // Answering records only: the task's host (its recorded workspace and settings), no model.
    let stores = read_store(paths, args.store.as_deref())?;
    let task = pick_task(stores.log.as_ref(), Some(id), false).await?;
    let args = for_task(stores.log.as_ref(), &task, args).await?;
    let tasks = noeta::Tasks::new(
        paths.clone(),
        stores,
        crate::agent::configure(args.clone(), noeta::process_worker("cli")),
    );
    let printer = crate::output::Printer::new(args.json, args.verbose, false);
    let state = tasks.state(&task).await?;
    let TurnState::Parked { call_id, question } = &state.core.turn else {
        bail!("task {task} waits for no answer ({})", status(&state));
    };
    let tool_question = state
        .core
        .parked
        .get(call_id)
        .is_some_and(|p| p.question.is_some());
    let answer = if tool_question {
        if allow || deny {
            bail!(
                "call {call_id} asks a question ({question}), not permission: give the answer instead of --allow/--deny"
            );
        }
        Answer::Reply(match text {
            Some(text) => {
                noeta::tasks::typed_answer(&state, call_id, &text).map_err(anyhow::Error::msg)?
            }
            None => match answer_question(&printer, &state, call_id, question).await {
                Some(answer) => answer,
                None => bail!("no answer given for call {call_id}: {question}"),
            },
        })
    } else {
        Answer::Allow(match (allow, deny) {
            (true, false) => true,
            (false, true) => false,
            _ if text.is_some() => bail!(
                "call {call_id} asks permission ({question}), not a question: pass --allow or --deny, not an answer"
            ),
            _ => bail!("call {call_id} asks permission ({question}): pass --allow or --deny"),
        })
    };
    loop {
        match tasks.answer(&task, call_id, answer.clone()).await {
            Ok(()) => break,
            Err(noeta::TaskOpError::Run(err)) => {
                match held_elsewhere(args.wait, &printer, &task, &err)? {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(err.into()),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
    if queued(tasks.stores().log.as_ref(), &task).await? {
        tasks.queue(&task).await?;
        eoutln!("answered call {call_id} of task {task}; it is queued for a worker");
    } else {
        eoutln!("answered call {call_id} of task {task}; `noeta resume {task}` carries on");
    }
    Ok(ExitCode::SUCCESS)
}
