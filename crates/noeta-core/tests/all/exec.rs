//! The local execution environment: programs run in the workspace under deadlines and output caps,
//! background jobs, and process groups that end with their run.

use std::time::Duration;

use futures::executor::block_on;
use noeta_core::exec::{ExecCommand, ExecEnv, ExecError, LocalExecEnv};

#[test]
fn the_local_environment_runs_programs_in_the_workspace_and_enforces_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let env = LocalExecEnv::new(dir.path());
    let out =
        block_on(env.run(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("sub"))).unwrap();
    assert_eq!(out.status, Some(0));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end()
            .ends_with("/sub")
    );
    let out = block_on(env.run(&ExecCommand::new("cat", Vec::<String>::new()).with_stdin("piped")))
        .unwrap();
    assert_eq!(out.stdout, b"piped");
    let out = block_on(env.run(&ExecCommand::new("sh", ["-c", "echo oops >&2; exit 3"]))).unwrap();
    assert_eq!((out.status, out.stderr), (Some(3), b"oops\n".to_vec()));
    let slow = ExecCommand::new("sleep", ["5"]).with_timeout(Duration::from_millis(100));
    let out = block_on(env.run(&slow)).unwrap();
    assert!(out.timed_out && out.status.is_none());
    // A run nobody waits for any more (a cancelled step) takes its whole group down.
    let marker = dir.path().join("still-running");
    let script = format!("sleep 1 && touch {}", marker.display());
    let dropped = ExecCommand::new("sh", ["-c", script.as_str()]);
    {
        let mut run = Box::pin(env.run(&dropped));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(std::future::Future::poll(run.as_mut(), &mut cx).is_pending());
    }
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        !marker.exists(),
        "the command ran on after its run was dropped"
    );
    let err = block_on(env.run(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("../..")))
        .unwrap_err();
    assert!(matches!(err, ExecError::OutsideWorkspace { .. }), "{err}");
    let err = block_on(env.run(&ExecCommand::new(
        "no-such-program-here",
        Vec::<String>::new(),
    )))
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot start `no-such-program-here`"),
        "{err}"
    );
}

/// Polls `job` until it ends (ten seconds at most), gathering its output.
fn until_done(
    job: &dyn noeta_core::exec::ExecJob,
) -> (String, String, noeta_core::exec::JobStatus) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (mut out, mut err) = (String::new(), String::new());
    loop {
        let taken = job.take();
        out.push_str(&String::from_utf8_lossy(&taken.stdout));
        err.push_str(&String::from_utf8_lossy(&taken.stderr));
        if taken.status != noeta_core::exec::JobStatus::Running {
            return (out, err, taken.status);
        }
        assert!(std::time::Instant::now() < deadline, "the job did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn background_jobs_stream_their_output_and_die_by_kill_or_deadline() {
    use noeta_core::exec::JobStatus;
    let dir = tempfile::tempdir().unwrap();
    let env = LocalExecEnv::new(dir.path());
    let job = env
        .spawn(&ExecCommand::new(
            "sh",
            ["-c", "echo one; sleep 0.2; echo two >&2; exit 4"],
        ))
        .unwrap();
    assert_eq!(
        until_done(job.as_ref()),
        ("one\n".to_owned(), "two\n".to_owned(), JobStatus::Exited(4))
    );
    let job = env
        .spawn(&ExecCommand::new("sh", ["-c", "sleep 30 & wait"]))
        .unwrap();
    assert_eq!(job.status(), JobStatus::Running);
    job.kill();
    assert_eq!(until_done(job.as_ref()).2, JobStatus::Killed);
    let job = env
        .spawn(&ExecCommand::new("sleep", ["30"]).with_timeout(Duration::from_millis(100)))
        .unwrap();
    assert_eq!(until_done(job.as_ref()).2, JobStatus::Killed);
    let capped = ExecCommand::new("sh", ["-c", "head -c 5000 /dev/zero"]).with_output_cap(1000);
    let job = env.spawn(&capped).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while job.status() == JobStatus::Running {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let taken = job.take();
    assert_eq!((taken.stdout.len(), taken.dropped), (1000, 4000));
    let err = env
        .spawn(&ExecCommand::new("pwd", Vec::<String>::new()).in_dir("../.."))
        .err()
        .unwrap();
    assert!(matches!(err, ExecError::OutsideWorkspace { .. }), "{err}");
}

#[test]
fn large_input_does_not_deadlock_and_a_deadline_kills_the_whole_group() {
    use noeta_core::exec::{ExecCommand, ExecEnv, LocalExecEnv};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let env = LocalExecEnv::new(dir.path());
    let big = vec![b'z'; 300_000];
    let out =
        block_on(env.run(&ExecCommand::new("cat", Vec::<String>::new()).with_stdin(big.clone())))
            .unwrap();
    assert_eq!(out.stdout.len(), big.len());
    let started = Instant::now();
    let slow = ExecCommand::new("sh", ["-c", "sleep 30 & sleep 30"])
        .with_timeout(Duration::from_millis(200));
    let out = block_on(env.run(&slow)).unwrap();
    assert!(out.timed_out);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the grandchild was killed too"
    );
    let capped = ExecCommand::new("cat", Vec::<String>::new())
        .with_stdin(big.clone())
        .with_output_cap(1000);
    let out = block_on(env.run(&capped)).unwrap();
    assert_eq!((out.stdout.len(), out.dropped), (1000, 299_000));
    let bare = ExecCommand::new("/usr/bin/env", Vec::<String>::new())
        .without_host_env()
        .with_env("ONLY", "this");
    let out = block_on(env.run(&bare)).unwrap();
    assert_eq!(out.stdout, b"ONLY=this\n");
    // A process that leaves the group keeps the pipe open: not waited for past the grace.
    let started = Instant::now();
    // The shell ends only once the sleep has left its group (else the group's end could
    // take the sleep with it first, as on a busy machine it did).
    let escaped = ExecCommand::new(
        "sh",
        [
            "-c",
            "setsid sh -c ': > escaped; exec sleep 8' & \
             while [ ! -e escaped ]; do sleep 0.01; done; echo hi",
        ],
    );
    let out = block_on(env.run(&escaped)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        (out.status, out.stdout.as_slice()),
        (Some(0), b"hi\n".as_slice())
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("[output incomplete"),
        "{out:?}"
    );
    let started = Instant::now();
    let lingering = ExecCommand::new("sh", ["-c", "sleep 30 & echo started"]);
    let out = block_on(env.run(&lingering)).unwrap();
    assert_eq!(out.stdout, b"started\n");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "what the command left running ends with it"
    );
}
