//! What tools and hooks see of a runtime's execution environment, and what a tool posts for a later
//! step or an idle task.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::exec::{ExecCommand, LocalExecEnv};
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::{Tool, ToolContext, ToolError, ToolOutput};
use noeta_testkit::harness::Harness;
use serde_json::{Value, json};

use super::support::{call, offers, result_text, session, task, texts};

/// Runs `echo` through the context's environment, and posts a follow-up for later.
struct Shell;

#[async_trait]
impl Tool for Shell {
    fn name(&self) -> &str {
        "Shell"
    }
    fn description(&self) -> &str {
        "Echoes through the execution environment."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(env) = ctx.exec_env() else {
            return Err(ToolError::RespondToModel(
                "Shell: no execution environment".into(),
            ));
        };
        let out = env
            .run(&ExecCommand::new("echo", ["from the environment"]))
            .await
            .map_err(|e| ToolError::RespondToModel(e.to_string()))?;
        if let Some(poster) = ctx.poster() {
            poster.post(
                "shell",
                "finished",
                json!({"job": 1}),
                Some("Background job 1 finished."),
            );
        }
        Ok(ToolOutput::text(
            String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
        ))
    }
}

#[test]
fn tools_reach_the_environment_and_their_posts_arrive_at_the_next_step() {
    let h = Harness::new();
    let dir = tempfile::tempdir().unwrap();
    let rt = h
        .runtime(json!([{ "calls": [call("Shell", json!({}))] }, { "text": "ok" }]))
        .with_exec_env(Arc::new(LocalExecEnv::new(dir.path())));
    let s = session(vec![offers(vec![Arc::new(Shell)])]);
    let t = task("shell");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(result_text(&rt, &s, &t), "from the environment");
    let state = block_on(rt.load(&s, &t)).unwrap();
    let texts = texts(&state);
    assert_eq!(
        texts,
        [
            "go",
            "",
            "from the environment",
            "Background job 1 finished.",
            "ok"
        ]
    );
    assert_eq!(
        block_on(rt.deliver(&s, &t)).unwrap(),
        0,
        "nothing left to deliver"
    );
}

#[test]
fn without_an_environment_a_tool_is_told_so() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "calls": [call("Shell", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(Shell)])]);
    let t = task("noshell");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(result_text(&rt, &s, &t), "Shell: no execution environment");
}

/// Posts from a background thread after the tool returned.
struct Later(Arc<std::sync::Barrier>);

#[async_trait]
impl Tool for Later {
    fn name(&self) -> &str {
        "Later"
    }
    fn description(&self) -> &str {
        "Finishes in the background."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(&self, _input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let poster = ctx.poster().expect("the runner gives tools an inbox");
        let barrier = self.0.clone();
        std::thread::spawn(move || {
            barrier.wait();
            poster.post(
                "later",
                "done",
                json!({}),
                Some("The background work is done."),
            );
            barrier.wait();
        });
        Ok(ToolOutput::text("started"))
    }
}

#[test]
fn posts_to_an_idle_task_are_delivered_on_request() {
    let h = Harness::new();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let rt = h.runtime(json!([{ "calls": [call("Later", json!({}))] }, { "text": "ok" }]));
    let s = session(vec![offers(vec![Arc::new(Later(barrier.clone()))])]);
    let t = task("later");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    barrier.wait(); // let the thread post
    barrier.wait(); // and finish posting
    assert_eq!(block_on(rt.deliver(&s, &t)).unwrap(), 1);
    let state = block_on(rt.load(&s, &t)).unwrap();
    assert_eq!(
        state.core.messages.last().unwrap().text,
        "The background work is done."
    );
}

#[test]
fn hooks_see_the_workspace_of_the_runtimes_execution_environment() {
    struct Where(Arc<Mutex<Vec<Option<std::path::PathBuf>>>>);
    #[async_trait]
    impl Extension for Where {
        fn name(&self) -> &str {
            "where"
        }
        async fn on_start(&self, v: &View<'_>) -> HookResult<()> {
            self.0
                .lock()
                .unwrap()
                .push(v.workspace().map(std::path::Path::to_path_buf));
            Ok(())
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = session(vec![Arc::new(Where(seen.clone()))]);
    let turns = json!([{ "text": "ok" }]);
    let h = Harness::new();
    let bare = h.runtime(turns.clone());
    block_on(bare.create(&s, &task("nowhere"), "go")).unwrap();
    block_on(bare.run(&s, &task("nowhere"))).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let placed = h
        .runtime(turns)
        .with_exec_env(Arc::new(noeta_core::exec::LocalExecEnv::new(dir.path())));
    block_on(placed.create(&s, &task("somewhere"), "go")).unwrap();
    block_on(placed.run(&s, &task("somewhere"))).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![None, Some(dir.path().to_path_buf())]
    );
}
