//! The container sandbox against a real engine (Podman, or Docker): built only with the
//! `container` feature, on a machine with an engine. The image is made here from the host's
//! static BusyBox (`engine import`), so no registry is needed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use noeta_core::exec::{ExecCommand, ExecEnv, JobStatus, LocalExecEnv};
use serde_json::{Value, json};

use noeta_testkit::container::{engine, engine_out, image};

fn settings(extra: Value) -> Value {
    let mut params = json!({ "provider": "container", "image": image(), "engine": engine() });
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    params
}

/// A sandbox over a fresh workspace (kept alive by the returned directory).
fn sandbox(extra: Value) -> (tempfile::TempDir, Arc<dyn ExecEnv>) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let env = build(dir.path(), extra);
    (dir, env)
}

fn build(workspace: &Path, extra: Value) -> Arc<dyn ExecEnv> {
    let local = Arc::new(LocalExecEnv::new(workspace));
    noeta_builtin_sandbox::container()
        .0
        .build(local, &settings(extra))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A task id no other test (or earlier run) uses.
fn task(label: &str) -> String {
    format!("test-{label}-{}", std::process::id())
}

async fn sh(env: &Arc<dyn ExecEnv>, script: &str) -> (Option<i32>, String, String) {
    let out = env
        .run(&ExecCommand::new("sh", ["-c", script]).with_timeout(Duration::from_secs(60)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn container_exists(name: &str) -> bool {
    engine_out(&["container", "inspect", name]).status.success()
}

/// Removes the task's container however the test ends.
struct Removed(String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = engine_out(&["rm", "--force", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_in_its_own_container_sharing_only_the_workspace() {
    let (dir, env) = sandbox(json!({}));
    let id = task("shared");
    let _removed = Removed(format!("noeta-{id}"));
    let task = env.for_task(&id).unwrap_or_else(|| panic!("no task env"));
    let workspace = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let outside = PathBuf::from(format!("/var/tmp/noeta-escape-{}", std::process::id()));
    let (status, out, err) = sh(
        &task,
        &format!(
            "pwd; echo inside > made.txt; echo escaped > {}; ls /; env",
            outside.display()
        ),
    )
    .await;
    assert_eq!(status, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("{}\n", workspace.display())),
        "{out}"
    );
    // The workspace is the host's; what is written elsewhere stays in the container.
    assert_eq!(
        std::fs::read_to_string(workspace.join("made.txt")).unwrap_or_default(),
        "inside\n"
    );
    assert!(
        !outside.exists(),
        "a write outside the workspace reached the host"
    );
    assert!(
        !out.contains("\nusr\n"),
        "the host's root is visible: {out}"
    );
    assert!(
        !out.contains("CARGO_MANIFEST_DIR"),
        "the host's variables leaked: {out}"
    );
    assert!(
        task.isolation()
            .is_some_and(|said| said.contains("no network") && said.contains(&id)),
        "{:?}",
        task.isolation()
    );
    // No network: the container has only its loopback interface.
    let (_, devices, _) = sh(&task, "cat /proc/net/dev").await;
    let interfaces: Vec<&str> = devices
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"], "{devices}");
    env.task_done(&id);
    assert!(!container_exists(&format!("noeta-{id}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_task_finds_its_container_again_even_stopped() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id = task("resume");
    let name = format!("noeta-{id}");
    let _removed = Removed(name.clone());
    {
        let first = build(dir.path(), json!({}));
        let task = first.for_task(&id).unwrap_or_else(|| panic!("no task env"));
        let (status, _, err) = sh(&task, "echo kept > /root/mark").await;
        assert_eq!(status, Some(0), "{err}");
        // The host goes away without being done with the task (a crash).
    }
    assert!(container_exists(&name));
    let stopped = engine_out(&["stop", "--time", "1", &name]);
    assert!(stopped.status.success());
    let again = build(dir.path(), json!({}));
    let task = again.for_task(&id).unwrap_or_else(|| panic!("no task env"));
    let (status, out, err) = sh(&task, "cat /root/mark").await;
    assert_eq!((status, out.as_str()), (Some(0), "kept\n"), "{err}");
    again.task_done(&id);
    assert!(!container_exists(&name));
}

/// The processes inside `name` whose command line holds `needle`.
fn inside(name: &str, needle: &str) -> usize {
    let out = engine_out(&["exec", name, "ps", "-o", "args"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_or_a_kill_ends_the_whole_command_inside_the_container() {
    let (_dir, env) = sandbox(json!({}));
    let id = task("kill");
    let name = format!("noeta-{id}");
    let _removed = Removed(name.clone());
    let task = env.for_task(&id).unwrap_or_else(|| panic!("no task env"));
    let out = task
        .run(
            &ExecCommand::new("sh", ["-c", "sleep 301 & sleep 302"])
                .with_timeout(Duration::from_millis(1500)),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.timed_out);
    assert_eq!(
        inside(&name, "sleep 30"),
        0,
        "the command outlived its deadline"
    );

    let job = task
        .spawn(&ExecCommand::new("sh", ["-c", "sleep 303 & sleep 304"]))
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(job.status(), JobStatus::Running);
    assert_eq!(inside(&name, "sleep 30"), 2);
    job.kill();
    assert_eq!(
        inside(&name, "sleep 30"),
        0,
        "the background command outlived its kill"
    );
    env.task_done(&id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_flood_stops_at_the_limit() {
    let (_dir, env) = sandbox(json!({ "max_processes": 16 }));
    let id = task("flood");
    let _removed = Removed(format!("noeta-{id}"));
    let task = env.for_task(&id).unwrap_or_else(|| panic!("no task env"));
    let (status, out, err) = sh(
        &task,
        "n=0; for i in $(seq 1 2000); do sleep 2 & n=$((n+1)); done; echo \"all $n started\"",
    )
    .await;
    assert_ne!(status, Some(0), "{out}{err}");
    assert!(!out.contains("all 2000 started"), "{out}");
    assert!(err.contains("Resource temporarily unavailable"), "{err}");
    // The container is not broken for what comes next, once the flood is over.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, out, err) = sh(&task, "echo fine").await;
    assert_eq!((status, out.as_str()), (Some(0), "fine\n"), "{err}");
    env.task_done(&id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_outside_a_task_runs_in_a_container_removed_after() {
    let (dir, env) = sandbox(json!({}));
    let label = format!(
        "label=noeta.workspace={}",
        std::fs::canonicalize(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .display()
    );
    let (status, out, err) = sh(&env, "echo hook; test -d /root").await;
    assert_eq!((status, out.as_str()), (Some(0), "hook\n"), "{err}");
    let left = engine_out(&["ps", "--all", "--filter", &label, "--format", "{{.Names}}"]);
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_the_containers_a_workspace_left_behind() {
    let (dir, env) = sandbox(json!({}));
    let id = task("prune");
    let _removed = Removed(format!("noeta-{id}"));
    let task = env.for_task(&id).unwrap_or_else(|| panic!("no task env"));
    assert_eq!(sh(&task, "true").await.0, Some(0));
    let pruned = noeta_builtin_sandbox::container()
        .0
        .prune(&settings(json!({})), dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pruned, [format!("noeta-{id}")]);
    assert!(!container_exists(&format!("noeta-{id}")));
    // The task's next command makes it again.
    let (status, _, err) = sh(&task, "true").await;
    assert_eq!(status, Some(0), "{err}");
    env.task_done(&id);
}

#[test]
fn an_engine_that_does_not_answer_is_refused_at_build_naming_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let fake = dir.path().join("docker");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut permissions = std::fs::metadata(&fake)
        .unwrap_or_else(|e| panic!("{e}"))
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&fake, permissions).unwrap_or_else(|e| panic!("{e}"));
    let local = Arc::new(LocalExecEnv::new(dir.path()));
    let params = json!({ "image": "x", "engine": fake.display().to_string() });
    let Err(why) = noeta_builtin_sandbox::container().0.build(local, &params) else {
        panic!("a sandbox was built over an engine that does not answer");
    };
    assert!(why.contains("does not answer"), "{why}");
    assert!(why.contains("Cannot connect to the Docker daemon"), "{why}");
}
