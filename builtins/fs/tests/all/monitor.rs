//! `Monitor`: a background shell whose standard output lines reach the model as notifications.

use std::time::{Duration, Instant};

use futures::executor::block_on;
use noeta_core::fold::TaskState;
use noeta_core::model::Role;
use noeta_core::runner::Runtime;
use noeta_core::session::Session;
use noeta_core::store::{Record, TaskId};
use noeta_core::{ToolContext, ToolError};
use serde_json::{Value, json};

use crate::common::{Run, Ws, call, extension, run_in, session, tools};

fn arbitrary() -> Value {
    json!({ "shell_mode": "arbitrary" })
}

fn monitor(command: &str, description: &str) -> (String, Value) {
    call(
        "Monitor",
        json!({ "command": command, "description": description }),
    )
}

fn background(command: &str) -> (String, Value) {
    call(
        "Bash",
        json!({ "command": command, "run_in_background": true }),
    )
}

fn kill(id: &str) -> (String, Value) {
    call("KillShell", json!({ "shell_id": id }))
}

/// What the run was told, then what later calls tell until a text contains `needle` — unless
/// the run was told it already (a quick command can end before the run does).
fn notified_until(run: &Run, needle: &str) -> Vec<String> {
    let mut texts = notified(run);
    if !texts.iter().any(|t| t.contains(needle)) {
        texts.extend(Watcher::of(run).until(needle));
    }
    texts
}

/// The notifications the run recorded in the conversation, in order.
fn notified(run: &Run) -> Vec<String> {
    let state = block_on(run.rt.load(&run.session, &run.task)).unwrap();
    state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Context && m.text.starts_with("[Monitor "))
        .map(|m| m.text.to_string())
        .collect()
}

/// The lines of `texts`, in order.
fn lines_of(texts: &[String]) -> Vec<String> {
    texts
        .iter()
        .flat_map(|t| t.lines().map(str::to_owned))
        .collect()
}

/// Calls the `fs` extension's reminders on a task's folded state, as the runner does before
/// each model request, folding in the records each call stages.
struct Watcher<'a> {
    session: &'a Session,
    task: &'a TaskId,
    state: TaskState,
    /// Every record the calls staged.
    staged: Vec<Record>,
}

impl<'a> Watcher<'a> {
    fn new(rt: &Runtime, session: &'a Session, task: &'a TaskId) -> Self {
        let state = block_on(rt.load(session, task)).unwrap();
        Self {
            session,
            task,
            state,
            staged: Vec::new(),
        }
    }

    fn of(run: &'a Run) -> Self {
        Self::new(&run.rt, &run.session, &run.task)
    }

    /// One call: the texts it returns.
    fn step(&mut self) -> Vec<String> {
        let fs = extension(self.session, "fs");
        let (texts, staged) = {
            let view = noeta_core::extension::View::new(
                self.task,
                "main",
                &self.state,
                &[],
                &self.session.extensions,
            );
            let texts = block_on(fs.reminders(&view)).unwrap();
            (texts, view.take_staged())
        };
        for record in staged {
            assert_eq!(record.extension, "fs");
            let slot = self.state.ext.entry("fs".to_owned()).or_insert(Value::Null);
            fs.reduce(slot, &record.kind, &record.data).unwrap();
            self.staged.push(record);
        }
        texts
    }

    /// Calls until a text contains `needle` (30 s at most); every text, in order.
    fn until(&mut self, needle: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut texts = Vec::new();
        loop {
            let got = self.step();
            let done = got.iter().any(|t| t.contains(needle));
            texts.extend(got);
            if done {
                return texts;
            }
            assert!(
                Instant::now() < deadline,
                "no `{needle}` within 30 s: {texts:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The data of the records of `kind` the calls staged.
    fn staged(&self, kind: &str) -> Vec<Value> {
        self.staged
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.data.clone())
            .collect()
    }
}

/// Waits (30 s at most) until `rel` exists in `ws`.
fn wait_for_file(ws: &Ws, rel: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.path(rel).exists() {
        assert!(Instant::now() < deadline, "`{rel}` did not appear");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_schema_needs_a_command_and_a_description_and_bounds_timeout_ms() {
    let s = session(Value::Null).unwrap();
    let tools = tools(&s);
    let tool = tools.iter().find(|t| t.name() == "Monitor").unwrap();
    let schema = tool.input_schema();
    assert_eq!(schema["required"], json!(["command", "description"]));
    assert_eq!(schema["additionalProperties"], false);
    let timeout = &schema["properties"]["timeout_ms"];
    assert_eq!(timeout["type"], "number");
    assert_eq!(timeout["minimum"], 1000);
    assert_eq!(timeout["maximum"], 3_600_000);
    assert_eq!(schema["properties"]["description"]["type"], "string");
    let flags = tool.flags();
    assert_eq!(flags.risk, noeta_core::Risk::High);
    assert!(flags.clearable);
    assert_eq!(flags.max_result_chars, Some(10_000));
    let description = tool.description();
    assert!(
        description.contains("Standard error is not streamed: read it with BashOutput."),
        "{description}"
    );
    assert!(description.contains("KillShell"), "{description}");
}

#[test]
fn a_monitored_command_streams_its_lines_in_order_then_its_end_once() {
    let ws = Ws::new();
    let command = "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo warn >&2; printf last";
    let run = run_in(Some(&ws), arbitrary(), &[monitor(command, "counting")]);
    assert_eq!(
        run.last(),
        (
            "Monitoring `bash_1` (counting). Each line it prints to standard output will arrive as a notification as it is printed, and one last line when it ends; its standard error is not streamed (read it with BashOutput, bash_id `bash_1`). It is killed after 300000 ms; stop it sooner with KillShell (shell_id `bash_1`).".to_owned(),
            false
        )
    );
    assert_eq!(
        run.records("monitor"),
        [json!({
            "id": "bash_1",
            "description": "counting",
            "command": command,
            "cwd": ".",
            "timeout_ms": 300000
        })]
    );
    assert_eq!(run.state()["jobs"], json!(["bash_1"]));
    // What the runner's reminders delivered during the run, then later calls.
    let mut texts = notified(&run);
    let mut watcher = Watcher::of(&run);
    texts.extend(watcher.until("ended:"));
    assert_eq!(
        lines_of(&texts),
        [
            "[Monitor bash_1: counting] line1",
            "[Monitor bash_1: counting] line2",
            "[Monitor bash_1: counting] line3",
            "[Monitor bash_1: counting] last",
            "[Monitor bash_1: counting] ended: exited with code 0",
        ]
    );
    assert_eq!(
        watcher.staged("monitor_ended"),
        [json!({ "id": "bash_1", "status": "exited with code 0" })]
    );
    assert_eq!(watcher.state.ext["fs"]["monitors"], json!({}));
    // Its end is told once; nothing more follows.
    assert!(watcher.step().is_empty());
    assert!(watcher.step().is_empty());
}

#[test]
fn bash_output_reads_what_the_monitor_did_not_deliver_and_the_standard_error() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            monitor("echo one; echo two; echo oops >&2", "pair"),
            call(
                "BashOutput",
                json!({ "bash_id": "bash_1", "block": true, "timeout": 10000 }),
            ),
        ],
    );
    let (polled, is_error) = run.last();
    assert!(!is_error, "{polled}");
    assert!(
        polled.starts_with("`bash_1`: exited with code 0; new output:\n"),
        "{polled}"
    );
    let texts = notified(&run);
    let streamed: Vec<String> = lines_of(&texts)
        .iter()
        .filter_map(|l| l.strip_prefix("[Monitor bash_1: pair] ").map(str::to_owned))
        .filter(|l| !l.starts_with("ended: "))
        .collect();
    let read: Vec<String> = polled
        .lines()
        .skip(1)
        .filter(|l| *l != "oops")
        .map(str::to_owned)
        .collect();
    // Each line reaches the model once, by one way or the other, in order.
    assert_eq!(
        [streamed, read].concat(),
        ["one", "two"],
        "{texts:?} {polled}"
    );
    assert!(polled.lines().any(|l| l == "oops"), "{polled}");
    // BashOutput waited for the end, so the next step told it.
    let ends: Vec<String> = lines_of(&texts)
        .into_iter()
        .filter(|l| l.contains("ended:"))
        .collect();
    assert_eq!(ends, ["[Monitor bash_1: pair] ended: exited with code 0"]);
    assert!(Watcher::of(&run).step().is_empty());
}

#[test]
fn a_step_keeps_its_notifications_within_10000_characters() {
    let ws = Ws::new();
    let flood = "while [ ! -f go ]; do sleep 0.05; done; for i in $(seq 1 200); do printf 'line%03d %0100d\\n' $i 0; done; touch finished";
    let run = run_in(Some(&ws), arbitrary(), &[monitor(flood, "flood")]);
    assert!(notified(&run).is_empty());
    ws.put("go", "");
    wait_for_file(&ws, "finished");
    std::thread::sleep(Duration::from_millis(500));
    let mut watcher = Watcher::of(&run);
    let first = watcher.step();
    assert_eq!(first.len(), 1, "{first:?}");
    let chars = first[0].chars().count();
    assert!(chars <= 10_000, "{chars}");
    let lines: Vec<&str> = first[0].lines().collect();
    let note = lines
        .iter()
        .rev()
        .find(|l| l.contains("more lines dropped"))
        .unwrap_or_else(|| panic!("no note in {lines:?}"));
    let dropped: usize = note
        .strip_prefix("[Monitor bash_1: flood] [")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!(
        note.ends_with(
            " more lines dropped: one step's notifications stay within 10000 characters]"
        )
    );
    let kept: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("] line"))
        .copied()
        .collect();
    assert!(kept.len() > 50, "{}", kept.len());
    for (i, line) in kept.iter().enumerate() {
        assert_eq!(
            *line,
            format!(
                "[Monitor bash_1: flood] line{:03} {}",
                i + 1,
                "0".repeat(100)
            )
        );
    }
    // Whatever was printed after that step comes later, after the dropped lines; the end
    // is told after the note, or in a later step.
    let mut rest = Vec::new();
    if !first[0].contains("ended:") {
        rest = lines_of(&watcher.until("ended:"));
    }
    let later = rest.iter().filter(|l| l.contains("] line")).count();
    assert_eq!(kept.len() + dropped + later, 200);
    let last = rest.last().map_or(lines[lines.len() - 1], String::as_str);
    assert_eq!(last, "[Monitor bash_1: flood] ended: exited with code 0");
    assert!(watcher.step().is_empty());
}

#[test]
fn timeout_ms_outside_its_bounds_and_bad_input_are_refused() {
    let ws = Ws::new();
    let with = |extra: Value| {
        let mut input = json!({ "command": "echo hi", "description": "greeting" });
        if let (Some(map), Some(extra)) = (input.as_object_mut(), extra.as_object()) {
            map.extend(extra.clone());
        }
        call("Monitor", input)
    };
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            with(json!({ "timeout_ms": 999 })),
            with(json!({ "timeout_ms": 3_600_001 })),
            with(json!({ "timeout_ms": "soon" })),
            call("Monitor", json!({ "command": "echo hi" })),
            with(json!({ "description": "  " })),
            with(json!({ "command": "   " })),
        ],
    );
    let results = run.results();
    assert!(results.iter().all(|(_, is_error)| *is_error), "{results:?}");
    let texts: Vec<&str> = results.iter().map(|(t, _)| t.as_str()).collect();
    assert!(
        texts[0].starts_with(
            "Monitor: invalid input — /timeout_ms: 999 is less than the minimum of 1000"
        ),
        "{texts:?}"
    );
    assert!(
        texts[1].starts_with(
            "Monitor: invalid input — /timeout_ms: 3600001 is greater than the maximum of 3600000"
        ),
        "{texts:?}"
    );
    assert!(
        texts[2].starts_with("Monitor: invalid input — /timeout_ms:"),
        "{texts:?}"
    );
    assert!(
        texts[3].starts_with("Monitor: invalid input") && texts[3].contains("description"),
        "{texts:?}"
    );
    assert_eq!(
        texts[4],
        "Monitor: `description` is empty: give a short label of what is watched"
    );
    assert_eq!(texts[5], "Monitor: the command is empty");
    assert!(run.records("monitor").is_empty());
    assert!(notified(&run).is_empty());
}

#[test]
fn the_tool_checks_its_input_itself_too() {
    let s = session(arbitrary()).unwrap();
    let tools = tools(&s);
    let tool = tools.iter().find(|t| t.name() == "Monitor").unwrap();
    let ctx = ToolContext::new("t", "c");
    let refusal = |input: Value| match block_on(tool.run(input, &ctx)) {
        Err(ToolError::RespondToModel(text)) => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refusal(json!({ "command": "echo", "description": "x", "timeout_ms": 500 })),
        "Monitor: `timeout_ms` 500 is not a number of milliseconds from 1000 to 3600000"
    );
    assert_eq!(
        refusal(json!({ "command": "echo", "description": "x", "timeout_ms": 4_000_000 })),
        "Monitor: `timeout_ms` 4000000 is not a number of milliseconds from 1000 to 3600000"
    );
    assert_eq!(
        refusal(json!({ "command": 3, "description": "x" })),
        "Monitor: `command` must be a string"
    );
    assert_eq!(
        refusal(json!({ "command": "echo" })),
        "Monitor: `description` must be a string"
    );
}

#[test]
fn the_deadline_is_capped_at_30_minutes_and_a_reached_deadline_is_told() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            call(
                "Monitor",
                json!({ "command": "sleep 20", "description": "long nap", "timeout_ms": 3_600_000 }),
            ),
            kill("bash_1"),
            call(
                "Monitor",
                json!({ "command": "echo dozing; sleep 20", "description": "nap", "timeout_ms": 1000 }),
            ),
        ],
    );
    let results = run.results();
    assert!(
        results[0].0.contains("It is killed after 1800000 ms;"),
        "{results:?}"
    );
    assert!(
        results[0].0.ends_with(
            "\n`timeout_ms` 3600000 is over the longest deadline of a monitored command, 1800000 ms, so it gets 1800000 ms."
        ),
        "{results:?}"
    );
    assert!(
        results[2].0.contains("It is killed after 1000 ms;"),
        "{results:?}"
    );
    let recorded: Vec<Value> = run
        .records("monitor")
        .iter()
        .map(|r| r["timeout_ms"].clone())
        .collect();
    assert_eq!(recorded, [json!(1_800_000), json!(1000)]);
    let mut texts = notified(&run);
    let mut watcher = Watcher::of(&run);
    texts.extend(watcher.until("[Monitor bash_2: nap] ended:"));
    let lines = lines_of(&texts);
    let nap: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("[Monitor bash_2: nap]"))
        .collect();
    assert_eq!(
        nap,
        [
            "[Monitor bash_2: nap] dozing",
            "[Monitor bash_2: nap] ended: deadline reached (1000 ms)"
        ]
    );
}

#[test]
fn allowlist_mode_gates_monitor_as_it_gates_bash() {
    let ws = Ws::new();
    ws.put("sub/f.txt", "x");
    let run = run_in(
        Some(&ws),
        json!({ "shell_allowlist": ["echo", "no-such-program-here"] }),
        &[
            monitor("rm -rf sub", "removal"),
            monitor("echo a | wc -l", "pipe"),
            monitor("echo a && echo b", "chain"),
            monitor("cd sub", "moving"),
            monitor("echo 'unclosed", "quote"),
            monitor("no-such-program-here --watch", "missing"),
            monitor("echo 'hello   world' $HOME", "greeting"),
        ],
    );
    let results = run.results();
    assert_eq!(
        results[0],
        (
            "Monitor: `rm` is not on the shell allowlist (allowed: echo, no-such-program-here)"
                .to_owned(),
            true
        )
    );
    for result in &results[1..3] {
        assert!(
            result.0.starts_with("Monitor: `")
                && result
                    .0
                    .contains("` is a shell operator, and shell_mode is `allowlist`"),
            "{results:?}"
        );
        assert!(result.1);
    }
    assert_eq!(
        results[3],
        (
            "Monitor: `cd` cannot run in the background".to_owned(),
            true
        )
    );
    assert_eq!(
        results[4],
        (
            "Monitor: the command has an unclosed quote or a trailing escape".to_owned(),
            true
        )
    );
    assert!(
        results[5]
            .0
            .starts_with("Monitor: cannot start `no-such-program-here`"),
        "{results:?}"
    );
    assert!(results[5].1);
    assert!(
        results[6].0.starts_with("Monitoring `bash_1` (greeting)."),
        "{results:?}"
    );
    assert!(ws.path("sub/f.txt").exists());
    let texts = notified_until(&run, "ended:");
    assert_eq!(
        lines_of(&texts),
        [
            "[Monitor bash_1: greeting] hello   world $HOME",
            "[Monitor bash_1: greeting] ended: exited with code 0"
        ]
    );
}

#[test]
fn shell_mode_off_mounts_no_monitor() {
    let off = session(json!({ "shell_mode": "off" })).unwrap();
    let names: Vec<String> = tools(&off).iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, ["Read", "Glob", "Grep", "Edit", "Write"]);
    for mode in ["allowlist", "arbitrary"] {
        let on = session(json!({ "shell_mode": mode })).unwrap();
        assert!(tools(&on).iter().any(|t| t.name() == "Monitor"), "{mode}");
    }
}

#[test]
fn kill_shell_stops_a_monitored_shell_and_the_next_step_tells_it_killed_once() {
    let ws = Ws::new();
    let run = run_in(
        Some(&ws),
        arbitrary(),
        &[
            monitor("echo ready; sh -c 'sleep 30' & wait", "sleeper"),
            kill("bash_1"),
        ],
    );
    assert_eq!(run.last(), ("Stopped `bash_1` (killed)".to_owned(), false));
    let lines = lines_of(&notified(&run));
    let ends: Vec<&String> = lines.iter().filter(|l| l.contains("ended:")).collect();
    assert_eq!(ends, ["[Monitor bash_1: sleeper] ended: killed"]);
    assert!(lines.iter().filter(|l| l.ends_with("] ready")).count() <= 1);
    assert_eq!(
        run.records("shell_killed"),
        [json!({ "id": "bash_1", "status": "killed" })]
    );
    assert_eq!(run.state()["monitors"], json!({}));
    assert!(Watcher::of(&run).step().is_empty());
}

#[test]
fn a_monitored_shell_killed_at_the_turns_end_is_told_at_the_next_request() {
    let ws = Ws::new();
    let run = crate::common::run_turns(
        Some(&ws),
        json!({ "shell_mode": "arbitrary", "background_ends_with_turn": true }),
        &[&[monitor("sh -c 'sleep 30' & wait", "sleeper")], &[]],
        |_| {},
    );
    assert_eq!(
        run.records("shell_killed"),
        [json!({ "id": "bash_1", "status": "killed when the turn ended" })]
    );
    assert_eq!(
        lines_of(&notified(&run)),
        ["[Monitor bash_1: sleeper] ended: killed when the turn ended"]
    );
    assert_eq!(
        run.records("monitor_ended"),
        [json!({ "id": "bash_1", "status": "killed when the turn ended" })]
    );
    assert_eq!(run.state()["monitors"], json!({}));
}

#[test]
fn monitors_share_the_ids_and_the_cap_of_background_shells() {
    let ws = Ws::new();
    let mut calls: Vec<(String, Value)> = (0..7).map(|_| background("sleep 5")).collect();
    calls.push(monitor("sleep 5", "eighth"));
    calls.push(monitor("sleep 5", "ninth"));
    calls.push(background("sleep 5"));
    calls.extend((1..=8).map(|i| kill(&format!("bash_{i}"))));
    let run = run_in(Some(&ws), arbitrary(), &calls);
    let results = run.results();
    assert!(
        results[7].0.starts_with("Monitoring `bash_8` (eighth)."),
        "{results:?}"
    );
    assert_eq!(
        results[8],
        (
            "Monitor: 8 background shells are already running in this task; stop one with KillShell first".to_owned(),
            true
        )
    );
    assert_eq!(
        results[9].0,
        "Bash: 8 background shells are already running in this task; stop one with KillShell first"
    );
    assert!(
        results[10..]
            .iter()
            .all(|(text, _)| text.starts_with("Stopped `bash_")),
        "{results:?}"
    );
    let jobs: Vec<String> = (1..=8).map(|i| format!("bash_{i}")).collect();
    assert_eq!(run.state()["jobs"], json!(jobs));
}

#[test]
fn a_monitor_from_a_worker_that_stopped_is_told_gone_once() {
    let ws = Ws::new();
    let run = run_in(Some(&ws), arbitrary(), &[monitor("sleep 2", "nap")]);
    // Another worker (a new session, with its own jobs) takes the task over.
    let second = session(arbitrary()).unwrap();
    let mut watcher = Watcher::new(&run.rt, &second, &run.task);
    assert_eq!(
        watcher.step(),
        [
            "[Monitor bash_1: nap] ran in a worker that has since stopped; its process and output are gone"
        ]
    );
    assert_eq!(
        watcher.staged("monitor_ended"),
        [json!({ "id": "bash_1", "status": "gone" })]
    );
    assert!(watcher.step().is_empty());
}

#[test]
fn the_fold_tracks_monitored_shells_and_a_continuation_leaves_them_behind() {
    let s = session(Value::Null).unwrap();
    let fs = extension(&s, "fs");
    let mut state = Value::Null;
    fs.reduce(
        &mut state,
        "shell_background",
        &json!({ "id": "bash_1", "command": "sleep 5", "cwd": "." }),
    )
    .unwrap();
    fs.reduce(
        &mut state,
        "monitor",
        &json!({ "id": "bash_2", "description": "tests", "command": "make test", "cwd": ".", "timeout_ms": 300000 }),
    )
    .unwrap();
    fs.reduce(&mut state, "reminder", &json!({})).unwrap();
    assert_eq!(
        state,
        json!({ "files": {}, "jobs": ["bash_1", "bash_2"], "monitors": { "bash_2": "tests" } })
    );
    assert_eq!(
        fs.continue_state(&state),
        json!({ "files": {}, "jobs": ["bash_1", "bash_2"] })
    );
    fs.reduce(
        &mut state,
        "monitor_ended",
        &json!({ "id": "bash_2", "status": "killed" }),
    )
    .unwrap();
    assert_eq!(state["monitors"], json!({}));
    let err = fs
        .reduce(&mut state, "monitor", &json!({ "id": "bash_3" }))
        .unwrap_err();
    assert!(err.contains("no string `description`"), "{err}");
    let err = fs.reduce(&mut state, "monitored", &json!({})).unwrap_err();
    assert_eq!(err, "unknown record kind `monitored`");
}
