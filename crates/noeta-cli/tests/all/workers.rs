//! `noeta worker` and `noeta run --detach` through the real binary: tasks submitted to a
//! store's queue and run by worker processes — on PostgreSQL, three workers through a SIGKILL
//! of one of them; on SQLite, two workers on one machine; an ask answered with `noeta answer`
//! going back to the queue; a graceful SIGTERM; and the errors of a bad worker setup.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Stdio};

use noeta_testkit::reap::Reaped;
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use noeta_testkit::pg::PgServer;
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Main runs a retry-unsafe command whose every execution leaves a distinct line in
/// `effects.txt` (and prints it), hands a question to `explore`, then answers.
fn script(env: &CliEnv, delay_ms: u64) -> String {
    env.script_file(json!({
        "turns": [
            { "calls": [{ "name": "Bash", "input": {
                "command": "echo \"$(date +%s%N)-$$\" | tee -a effects.txt"
            } }], "delay_ms": delay_ms },
            { "calls": [{ "name": "Task", "input": {
                "description": "look", "prompt": "Look around.", "subagent_type": "explore"
            } }], "delay_ms": delay_ms },
            { "text": "all done", "delay_ms": delay_ms }
        ],
        "agents": { "explore": { "turns": [{ "text": "looked", "delay_ms": delay_ms }] } }
    }))
}

fn submit(env: &CliEnv, store: &str, provider: &str, goal: &str, mode: &str) -> String {
    let out = env.run(&[
        "run",
        "--detach",
        "--store",
        store,
        "--permission-mode",
        mode,
        "--provider",
        provider,
        goal,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_owned();
    assert!(stderr(&out).contains("is queued in"), "{}", stderr(&out));
    id
}

fn worker(env: &CliEnv, store: &str, slots: &str, log: &str) -> Reaped {
    let file = std::fs::File::create(env.root().join(log)).unwrap();
    Reaped::new(
        env.command(&["worker", "--store", store, "-n", slots, "--lease-secs", "3"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap(),
    )
}

fn listed(env: &CliEnv, store: &str) -> Vec<Value> {
    let out = env.run(&["tasks", "--store", store, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    lines(&stdout(&out))
}

/// Waits until every task of `ids` has `status`, listing the store every half second.
fn wait_for(env: &CliEnv, store: &str, ids: &BTreeSet<String>, status: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let tasks = listed(env, store);
        let done = tasks
            .iter()
            .filter(|t| ids.contains(t["id"].as_str().unwrap()) && t["status"] == status)
            .count();
        if done == ids.len() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{done} of {} tasks reached `{status}` in {limit:?}",
            ids.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn terminate(child: &mut Child) {
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                status.success(),
                "a worker stops cleanly on SIGTERM: {status}"
            );
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the worker did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every event of `task`, as `log --json` gives them.
fn log_of(env: &CliEnv, store: &str, task: &str) -> Vec<Value> {
    let out = env.run(&["log", task, "--store", store, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    lines(&stdout(&out))
}

#[test]
fn three_workers_on_postgres_run_300_tasks_with_children_through_a_sigkill() {
    let pg = PgServer::start(false).unwrap_or_else(|why| panic!("{why}"));
    let url = pg.database().unwrap();
    let env = CliEnv::new(NOETA);
    let provider = script(&env, 15);
    let ids: BTreeSet<String> = (0..300)
        .map(|n| {
            submit(
                &env,
                &url,
                &provider,
                &format!("job {n}"),
                "bypassPermissions",
            )
        })
        .collect();
    assert_eq!(ids.len(), 300);
    let mut workers: Vec<Reaped> = (0..3)
        .map(|n| worker(&env, &url, "4", &format!("worker{n}.log")))
        .collect();

    // Kill the first worker while it holds tasks.
    let victim = format!("worker@{}", workers[0].id());
    let start = Instant::now();
    let held: Vec<String> = loop {
        let held: Vec<String> = listed(&env, &url)
            .iter()
            .filter(|t| {
                t["worker"]
                    .as_str()
                    .is_some_and(|w| w.ends_with(&format!("#{}", workers[0].id())))
            })
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect();
        if !held.is_empty() {
            break held;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{victim} never held a task"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    workers[0].kill().unwrap();
    workers[0].wait().unwrap();

    wait_for(&env, &url, &ids, "turn ended", Duration::from_secs(150));
    for worker in &mut workers[1..] {
        terminate(worker);
    }

    // The killed worker's tasks were finished by the others.
    let tasks = listed(&env, &url);
    let by_id: BTreeMap<&str, &Value> = tasks
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t))
        .collect();
    for task in &held {
        assert_eq!(by_id[task.as_str()]["status"], "turn ended", "{task}");
    }
    // Every task completed, children included, and nobody holds one.
    assert_eq!(tasks.len(), 600, "300 tasks and a child each");
    for task in &tasks {
        assert_eq!(task["status"], "turn ended", "{task}");
        assert!(task["worker"].is_null(), "{task}");
    }
    // Every log is gapless; each effect recorded by a task happened once, and no task's
    // command ran twice.
    let effects = std::fs::read_to_string(env.workspace.join("effects.txt")).unwrap();
    let mut happened: BTreeMap<&str, usize> = BTreeMap::new();
    for line in effects.lines() {
        *happened.entry(line).or_default() += 1;
    }
    let mut recorded = 0;
    let mut cut = 0;
    for id in &ids {
        let events = log_of(&env, &url, id);
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{id}");
        let runs: Vec<&Value> = events
            .iter()
            .filter(|e| e["kind"] == "call_finished" && e["data"]["tool"] == "Bash")
            .collect();
        assert_eq!(runs.len(), 1, "{id}: one Bash call finished");
        if runs[0]["data"]["outcome"] == "ok" {
            let text = runs[0]["data"]["text"].as_str().unwrap().trim();
            assert_eq!(happened.get(text), Some(&1), "{id}: effect {text}");
            recorded += 1;
        } else {
            // Cut by the kill: the crash left its outcome unknown.
            assert_eq!(runs[0]["data"]["outcome"], "unknown", "{id}");
            cut += 1;
        }
    }
    // A command killed with its worker may have run without its result being recorded (its
    // outcome is then unknown, and it is never run again): at most one effect per task cut,
    // and only the victim's tasks were cut, at most its four slots. (The victim may claim
    // more tasks between the listing above and the kill, so `held` is no bound.)
    let unrecorded = effects.lines().count() - recorded;
    assert!(
        unrecorded <= cut,
        "{unrecorded} effects without a record, {cut} commands cut"
    );
    assert!(cut <= 4, "{cut} commands cut, the victim had four slots");
    let survivor = std::fs::read_to_string(env.root().join("worker1.log")).unwrap();
    assert!(
        survivor.contains("pin fs"),
        "the worker logs its pins: {survivor}"
    );
    assert!(survivor.contains("stopped"), "{survivor}");
}

#[test]
fn two_workers_share_a_sqlite_store_and_an_answered_ask_goes_back_to_the_queue() {
    let env = CliEnv::new(NOETA);
    let store = "sqlite:queue.db";
    let provider = script(&env, 0);
    let ids: BTreeSet<String> = (0..12)
        .map(|n| {
            submit(
                &env,
                store,
                &provider,
                &format!("job {n}"),
                "bypassPermissions",
            )
        })
        .collect();
    // One task in the default mode: its command waits for a person.
    let asking = submit(&env, store, &provider, "ask first", "default");
    let mut workers: Vec<Reaped> = (0..2)
        .map(|n| worker(&env, store, "2", &format!("worker{n}.log")))
        .collect();
    wait_for(&env, store, &ids, "turn ended", Duration::from_secs(60));
    let one = BTreeSet::from([asking.clone()]);
    let start = Instant::now();
    loop {
        let tasks = listed(&env, store);
        let task = tasks.iter().find(|t| t["id"] == asking.as_str()).unwrap();
        if task["status"].as_str().unwrap().starts_with("waiting") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{task}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = env.run(&["answer", &asking, "--allow", "--store", store]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("it is queued for a worker"),
        "{}",
        stderr(&out)
    );
    wait_for(&env, store, &one, "turn ended", Duration::from_secs(30));
    // `doctor --store` sees the queue empty and both workers alive.
    let doctor = stdout(&env.run(&["doctor", "--store", store]));
    assert!(
        doctor.contains(
            "queue: 0 ready, 0 running, 0 waiting for a time; 2 worker(s) seen in the last minute"
        ),
        "{doctor}"
    );
    for worker in &mut workers {
        terminate(worker);
    }
    let effects = std::fs::read_to_string(env.workspace.join("effects.txt")).unwrap();
    assert_eq!(effects.lines().count(), 13, "{effects}");
    // `log --follow` prints what is there and goes on until interrupted.
    let mut follow = env
        .command(&["log", &asking, "--store", store, "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(follow.try_wait().unwrap().is_none(), "it keeps following");
    follow.kill().unwrap();
    let out = follow.wait_with_output().unwrap();
    assert!(
        stdout(&out).contains("\"kind\":\"turn_ended\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_worker_refuses_a_task_whose_workspace_is_missing_and_a_bad_setup_is_named() {
    let env = CliEnv::new(NOETA);
    let store = env.root().join("shared.db");
    let store = format!("sqlite:{}", store.display());
    let provider = script(&env, 0);
    // Submitted from a workspace that is gone by the time a worker takes it.
    let gone = env.root().join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let out = env
        .command(&[
            "run",
            "--detach",
            "--store",
            &store,
            "--provider",
            &provider,
            "elsewhere",
        ])
        .current_dir(&gone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let task = stdout(&out).trim().to_owned();
    std::fs::remove_dir_all(&gone).unwrap();
    let mut child = worker(&env, &store, "1", "worker.log");
    let log = env.root().join("worker.log");
    let start = Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(&log).unwrap();
        if said.contains("not run here") {
            break said;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{said}");
        std::thread::sleep(Duration::from_millis(100));
    };
    terminate(&mut child);
    assert!(
        said.contains(&format!(
            "task {task} not run here: its workspace `{}` does not exist on this host",
            gone.display()
        )),
        "{said}"
    );
    // Nothing was recorded for it: it waits for a worker that has the workspace.
    let tasks = listed(&env, &store);
    assert_eq!(tasks[0]["events"], 3, "{tasks:?}");

    let out = env.run(&["worker", "-n", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("-n must be at least 1"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["worker", "--store", "mysql://x/y"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("`postgres://…`"), "{}", stderr(&out));
}
