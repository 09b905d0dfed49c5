//! The crash test: a scripted task whose shell commands each append one line to `effects.txt` is
//! killed at random points (seeded; the seed is printed, `NOETA_CRASH_SEED=N` replays its kill
//! points) — sometimes `noeta` alone, sometimes `noeta` with every process it started — and
//! carried on with `noeta resume --last`, itself killed again at random, until it ends.
//!
//! Then the log and the file are compared call by call: every task ends, every log is gapless,
//! no effect happens twice, every effect in the file belongs to a call the log holds, a call
//! the log says succeeded took effect exactly once, and a call whose effect may be missing is
//! shown to the model as "outcome unknown" (a retry-safe call is run again instead).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Rounds: each one task, killed up to `KILLS` times.
const ROUNDS: u64 = 20;
const KILLS: u32 = 4;

fn noeta(workspace: &Path, home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_noeta"));
    command
        .args(args)
        .env("HOME", home)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn output(workspace: &Path, home: &Path, args: &[&str]) -> Output {
    noeta(workspace, home, args).output().unwrap()
}

fn bash(command: &str) -> Value {
    json!({ "name": "Bash", "input": { "command": command } })
}

/// Five effects, each a line appended by one shell command: before a pause, after one, two
/// at once in one turn; retry-safe calls in between: reads of the file and a search of a big
/// one that takes a while (`big.txt`), so kills land in them too.
fn script() -> Value {
    let read = json!({ "name": "Read", "input": { "file_path": "effects.txt" } });
    let grep =
        json!({ "name": "Grep", "input": { "pattern": "needle[0-9]+x", "path": "big.txt" } });
    json!({ "turns": [
        { "calls": [bash("echo one >> effects.txt")] },
        { "calls": [grep] },
        { "calls": [bash("sleep 0.2; echo two >> effects.txt")] },
        { "calls": [read] },
        { "calls": [bash("echo three >> effects.txt; sleep 0.2")] },
        { "calls": [bash("echo four >> effects.txt"), bash("sleep 0.1; echo five >> effects.txt")] },
        { "calls": [read] },
        { "text": "all done" }
    ]})
}

/// The effect a shell command of the script has: the word it appends.
fn effect_of(command: &str) -> Option<&str> {
    command
        .split("echo ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
}

/// splitmix64: a small seeded generator, so a printed seed replays the same kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug)]
enum Kill {
    /// SIGKILL to `noeta` only: the commands it started run on.
    Alone,
    /// `noeta` stopped, then every process it started killed, then `noeta`.
    Tree,
}

/// The processes descended from `pid`, read from `/proc`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: the fields after the last `)`.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        parent_of.insert(child, ppid);
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let at = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, parent)| **parent == at)
                .map(|(child, _)| *child),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn signal(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .args(pids.iter().map(ToString::to_string))
        .stderr(Stdio::null())
        .status();
}

fn kill(child: &mut Child, how: Kill) {
    match how {
        Kill::Alone => {
            let _ = child.kill();
        }
        Kill::Tree => {
            // Stopped, it starts nothing new while its descendants are found and killed.
            signal("STOP", &[child.id()]);
            signal("KILL", &descendants(child.id()));
            let _ = child.kill();
        }
    }
    let _ = child.wait();
}

/// What the rounds saw.
#[derive(Default)]
struct Seen {
    kills: u32,
    rounds_killed: u32,
    /// Shell calls a kill cut off, answered "outcome unknown".
    unknown_after_kill: u32,
    /// How long the last run that was not killed took, from start to exit.
    whole_ms: u64,
    unknown: u32,
    reruns: u32,
}

/// One round: the task started, killed at random up to `kills` times, resumed to its end.
fn round(root: &Path, round: u64, rng: &mut Rng, span_ms: u64, kills: u32, seen: &mut Seen) {
    let home = root.join(format!("home-{round}"));
    let workspace = root.join(format!("ws-{round}"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    let script_path = workspace.join("script.json");
    std::fs::write(&script_path, script().to_string()).unwrap();
    std::fs::hard_link(root.join("big.txt"), workspace.join("big.txt")).unwrap();
    // The file the effects are appended to exists from the start: every shell call before a
    // read may end with its outcome unknown and no effect (killed before it ran), and the read,
    // retry-safe, must still find the file.
    std::fs::write(workspace.join("effects.txt"), "").unwrap();
    let provider = format!("scripted:{}", script_path.display());
    let flags = [
        "--provider",
        provider.as_str(),
        "--permission-mode",
        "bypassPermissions",
    ];
    let run: Vec<&str> = [&["run"], &flags[..], &["go"]].concat();
    let resume: Vec<&str> = [&["resume", "--last"], &flags[..]].concat();

    let mut started = false;
    let mut ended = false;
    let mut killed = false;
    // The calls each kill left open (started, not finished), by id, with their tool.
    let mut interrupted: BTreeMap<String, String> = BTreeMap::new();
    for _ in 0..kills {
        let mut child = noeta(&workspace, &home, if started { &resume } else { &run })
            .spawn()
            .unwrap();
        let at = rng.below(span_ms);
        let how = if rng.below(2) == 0 {
            Kill::Alone
        } else {
            Kill::Tree
        };
        let deadline = Instant::now() + Duration::from_millis(at);
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            assert!(status.success(), "round {round}: {}", text(&out.stderr));
            ended = true;
            break;
        }
        kill(&mut child, how);
        seen.kills += 1;
        killed = true;
        eprintln!("round {round}: killed {how:?} at {at} ms");
        started = task_started(&workspace, &home, &resume);
        if started {
            interrupted.extend(open_calls(&workspace, &home));
        }
    }
    if !ended {
        let begun = Instant::now();
        let last = output(&workspace, &home, if started { &resume } else { &run });
        assert!(
            last.status.success(),
            "round {round}: {}",
            text(&last.stderr)
        );
        seen.whole_ms = begun.elapsed().as_millis() as u64;
    }
    seen.rounds_killed += u32::from(killed);
    // Commands a lone kill left running finish what they do before the file is read.
    std::thread::sleep(Duration::from_millis(400));
    let log = check(&workspace, &home, round, seen);
    // A call a kill left open ended as "outcome unknown" — or, retry-safe, was run again.
    for (id, tool) in interrupted {
        let (outcome, said) = &log[&id];
        if tool == "Bash" {
            assert_eq!(
                outcome, "unknown",
                "round {round}: call {id} was cut off: {said}"
            );
            seen.unknown_after_kill += 1;
        } else {
            assert_eq!(outcome, "ok", "round {round}: retry-safe call {id}: {said}");
            seen.reruns += 1;
        }
    }
}

/// The task's log as JSON values.
fn log_of(workspace: &Path, home: &Path) -> Vec<Value> {
    let listed: Value =
        serde_json::from_str(text(&output(workspace, home, &["tasks", "--json"]).stdout).trim())
            .unwrap_or_else(|e| panic!("one task is listed: {e}"));
    let task = listed["id"].as_str().unwrap();
    text(&output(workspace, home, &["log", task, "--json"]).stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The calls the log shows started and not finished, with their tools.
fn open_calls(workspace: &Path, home: &Path) -> BTreeMap<String, String> {
    let mut open = BTreeMap::new();
    for event in log_of(workspace, home) {
        let data = &event["data"];
        let id = data["call_id"].as_str().unwrap_or_default().to_owned();
        match event["kind"].as_str() {
            Some("call_started") => {
                open.insert(id, data["tool"].as_str().unwrap().to_owned());
            }
            Some("call_finished") => {
                open.remove(&id);
            }
            _ => {}
        }
    }
    open
}

/// Whether the killed run left a task to resume; a task killed before its goal was recorded is
/// refused by `resume` (saying so) and removed, to be started afresh.
fn task_started(workspace: &Path, home: &Path, resume: &[&str]) -> bool {
    let listed = text(&output(workspace, home, &["tasks", "--json"]).stdout);
    if listed.trim().is_empty() {
        return false;
    }
    if listed.contains("never started") {
        let refused = output(workspace, home, resume);
        assert!(
            text(&refused.stderr).contains("there is nothing to resume"),
            "{}",
            text(&refused.stderr)
        );
        std::fs::remove_dir_all(workspace.join(".noeta")).unwrap();
        return false;
    }
    true
}

/// The log against the file, call by call; how each call finished (outcome, what the model read).
fn check(
    workspace: &Path,
    home: &Path,
    round: u64,
    seen: &mut Seen,
) -> BTreeMap<String, (String, String)> {
    let listed: Value =
        serde_json::from_str(text(&output(workspace, home, &["tasks", "--json"]).stdout).trim())
            .unwrap_or_else(|e| panic!("round {round}: one task is listed: {e}"));
    assert_eq!(listed["status"], "turn ended", "round {round}: {listed}");
    let log = log_of(workspace, home);
    let seqs: Vec<u64> = log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "round {round}: a gap or a duplicate");

    // Every call the model asked for, and how it finished.
    let mut asked: Vec<(String, String, Value)> = Vec::new();
    let mut finished: BTreeMap<String, (String, String)> = BTreeMap::new();
    for event in &log {
        let data = &event["data"];
        match (event["extension"].as_str(), event["kind"].as_str()) {
            (Some("core"), Some("assistant_reply")) => {
                for call in data["calls"].as_array().unwrap() {
                    asked.push((
                        call["id"].as_str().unwrap().to_owned(),
                        call["name"].as_str().unwrap().to_owned(),
                        call["input"].clone(),
                    ));
                }
            }
            (Some("core"), Some("call_finished")) => {
                let previous = finished.insert(
                    data["call_id"].as_str().unwrap().to_owned(),
                    (
                        data["outcome"].as_str().unwrap().to_owned(),
                        data["text"].as_str().unwrap_or_default().to_owned(),
                    ),
                );
                assert!(
                    previous.is_none(),
                    "round {round}: a call finished twice: {data}"
                );
            }
            _ => {}
        }
    }
    assert!(
        log.iter().any(|e| e["data"]["text"] == "all done"),
        "round {round}: the last turn was not played"
    );

    let effects = std::fs::read_to_string(workspace.join("effects.txt")).unwrap_or_default();
    let count = |word: &str| effects.lines().filter(|l| *l == word).count();
    let mut accounted = Vec::new();
    for (id, name, input) in &asked {
        let (outcome, said) = finished
            .get(id)
            .unwrap_or_else(|| panic!("round {round}: call {id} ({name}) never finished"));
        match name.as_str() {
            "Bash" => {
                let word = effect_of(input["command"].as_str().unwrap()).unwrap();
                accounted.push(word.to_owned());
                let n = count(word);
                assert!(
                    n <= 1,
                    "round {round}: `{word}` took effect {n} times: {effects:?}"
                );
                match outcome.as_str() {
                    "ok" => assert_eq!(
                        n, 1,
                        "round {round}: call {id} succeeded, but `{word}` is not in {effects:?}"
                    ),
                    "unknown" => {
                        seen.unknown += 1;
                        assert!(
                            said.contains("outcome unknown"),
                            "round {round}: call {id} is unknown but the model read: {said}"
                        );
                    }
                    other => panic!("round {round}: call {id} ended `{other}`: {said}"),
                }
            }
            // Retry-safe: run again after a crash, so it always ends well.
            "Read" | "Grep" => assert_eq!(outcome, "ok", "round {round}: call {id}: {said}"),
            other => panic!("round {round}: an unexpected call of {other}"),
        }
    }
    let finished_calls = finished.clone();
    for line in effects.lines() {
        assert!(
            accounted.iter().any(|w| w == line),
            "round {round}: the effect `{line}` belongs to no call the log holds"
        );
    }
    finished_calls
}

#[test]
fn a_task_killed_at_random_points_is_resumed_to_the_end_and_its_effects_match_its_log() {
    let seed = std::env::var("NOETA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash test seed: {seed} (NOETA_CRASH_SEED={seed} replays its kill points)");
    let mut rng = Rng(seed);
    let root = tempfile::tempdir().unwrap();
    let line = "a line of filler text that the search reads through, long enough to matter\n";
    std::fs::write(root.path().join("big.txt"), line.repeat(300_000)).unwrap();

    // The span kill points are drawn from: an uninterrupted run, and a little past its end.
    let mut baseline = Seen::default();
    round(root.path(), 0, &mut rng, 0, 0, &mut baseline);
    let span_ms = baseline.whole_ms.max(100) * 11 / 10;
    let effects = std::fs::read_to_string(root.path().join("ws-0/effects.txt")).unwrap();
    assert_eq!(effects, "one\ntwo\nthree\nfour\nfive\n");

    let mut seen = Seen::default();
    for n in 1..=ROUNDS {
        round(root.path(), n, &mut rng, span_ms, KILLS, &mut seen);
    }
    eprintln!(
        "{ROUNDS} rounds over {span_ms} ms: {} killed, {} kills; {} shell calls answered \
         \"outcome unknown\" ({} of them cut off by a kill), {} retry-safe calls cut off and run again",
        seen.rounds_killed, seen.kills, seen.unknown, seen.unknown_after_kill, seen.reruns
    );
    assert!(
        u64::from(seen.rounds_killed) >= ROUNDS / 2,
        "only {} of {ROUNDS} rounds were killed while running (seed {seed})",
        seen.rounds_killed
    );
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Lines in `file` (0 when it is not there yet).
fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

/// Whether `file` stops growing: the same length over half a second.
fn still(file: &Path) -> bool {
    let before = lines(file);
    std::thread::sleep(Duration::from_millis(500));
    lines(file) == before
}

/// A command running when `noeta` is killed with SIGKILL dies with it — its process group, what
/// it put in the background included — and what left the group (`setsid`) is killed by the
/// resume before it runs anything, so nothing the dead run started writes beside it.
#[test]
fn a_command_dies_with_a_sigkilled_noeta_and_the_resume_runs_alone() {
    let root = tempfile::tempdir().unwrap();
    let (workspace, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let looping = |file: &str| format!("while :; do echo tick >> {file}; sleep 0.05; done");
    let command = format!(
        "({}) & setsid sh -c '{}' & {}",
        looping("background.txt"),
        looping("away.txt"),
        looping("foreground.txt")
    );
    let script = json!({ "turns": [
        { "calls": [bash(&command)] },
        { "text": "carried on" }
    ] });
    std::fs::write(workspace.join("script.json"), script.to_string()).unwrap();
    let mut run = noeta(
        &workspace,
        &home,
        &[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--provider",
            "scripted:script.json",
            "loop",
        ],
    )
    .spawn()
    .unwrap();
    let start = Instant::now();
    while ["foreground.txt", "background.txt", "away.txt"]
        .iter()
        .any(|f| lines(&workspace.join(f)) < 3)
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the command never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal("KILL", &[run.id()]);
    let _ = run.wait();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        still(&workspace.join("foreground.txt")),
        "the command outlived noeta"
    );
    assert!(
        still(&workspace.join("background.txt")),
        "what the command put in the background outlived noeta"
    );
    // The resume first ends what left the group, then carries the task on.
    let resumed = output(&workspace, &home, &["resume", "--last"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(
        still(&workspace.join("away.txt")),
        "what the dead run left outside its group ran beside the resume"
    );
    assert!(
        text(&resumed.stdout).contains("carried on"),
        "{}",
        text(&resumed.stdout)
    );
}
