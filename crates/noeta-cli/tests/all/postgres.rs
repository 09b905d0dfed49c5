//! `noeta` on a PostgreSQL store (`--store postgres://…`), against a real server the test starts:
//! a task runs and answers, `tasks` and `log` read it back from the database, two processes
//! run tasks on the same database at once, and a server that cannot be reached is named without
//! its password.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use noeta_testkit::pg::PgServer;
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

#[test]
fn tasks_run_on_a_postgres_store_and_read_back_from_it() {
    let pg = PgServer::start(false).unwrap_or_else(|why| panic!("{why}"));
    let url = pg.database().unwrap();
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "echo from-the-shell >> effects.txt; cat effects.txt" } }] },
        { "text": "done" }
    ]));
    // Two processes at once, each with its own task, on the same database.
    let runs: Vec<_> = (0..2)
        .map(|i| {
            env.command(&[
                "run",
                "--store",
                &url,
                "--permission-mode",
                "bypassPermissions",
                "--provider",
                &provider,
                &format!("task {i}"),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for run in runs {
        let out = run.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), "done\n");
    }
    let effects = std::fs::read_to_string(env.workspace.join("effects.txt")).unwrap();
    assert_eq!(effects.lines().count(), 2, "{effects}");
    // `doctor --store` reaches the database and counts its tasks.
    let doctor = env.run(&["doctor", "--store", &url]);
    assert!(
        stdout(&doctor).contains("answers, its schema is one this build reads (2 task(s))"),
        "{}{}",
        stdout(&doctor),
        stderr(&doctor)
    );
    // Nothing went to the workspace's SQLite file.
    assert!(!env.workspace.join(".noeta/noeta.db").exists());

    let listed = env.run(&["tasks", "--json", "--store", &url]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let tasks = events(&stdout(&listed));
    assert_eq!(tasks.len(), 2, "{}", stdout(&listed));
    for task in &tasks {
        assert_eq!(task["status"], "turn ended", "{task}");
        let log = env.run(&[
            "log",
            "--json",
            "--store",
            &url,
            task["id"].as_str().unwrap(),
        ]);
        assert!(log.status.success(), "{}", stderr(&log));
        let seqs: Vec<u64> = events(&stdout(&log))
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .collect();
        assert!(seqs.len() > 5, "{}", stdout(&log));
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        assert!(stdout(&log).contains("from-the-shell"), "{}", stdout(&log));
    }
}

#[test]
fn an_unreachable_database_is_named_without_its_password() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "never" }]));
    // Port 1 on loopback: nothing listens.
    let out = env.run(&[
        "run",
        "--store",
        "postgres://noeta:hunter2@127.0.0.1:1/noeta",
        "--provider",
        &provider,
        "hello",
    ]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("postgres://noeta:***@127.0.0.1:1/noeta"),
        "{said}"
    );
    assert!(said.contains("Connection refused"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
    let doctor = env.run(&[
        "doctor",
        "--store",
        "postgres://noeta:hunter2@127.0.0.1:1/noeta",
    ]);
    assert_eq!(doctor.status.code(), Some(1));
    let said = stdout(&doctor);
    assert!(
        said.contains(
            "problem: store: cannot open the store `postgres://noeta:***@127.0.0.1:1/noeta`"
        ),
        "{said}"
    );
    assert!(!said.contains("hunter2"), "{said}");
}
