//! Direct calls: a frontend calls a task's tools through the same gate, run and records as a model's call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, View};
use noeta_core::model::ToolCall;
use noeta_core::records::CallOutcome;
use noeta_core::runner::{DirectResult, RunError, Runtime};
use noeta_core::session::{Session, bare_session};
use noeta_core::store::TaskId;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput, Verdict};
use noeta_testkit::harness::Harness;
use serde_json::{Value, json};

/// Echoes its input and counts its runs.
struct Echo {
    name: &'static str,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Echoes its input."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"say": {"type": "string"}}, "required": ["say"]})
    }
    fn flags(&self) -> ToolFlags {
        ToolFlags::read_only()
    }
    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!(
            "echo: {}",
            input["say"].as_str().unwrap_or("")
        )))
    }
}

/// Offers the tools and answers every call of `Guarded` with its verdict.
struct Desk {
    tools: Vec<Arc<dyn Tool>>,
    verdict: Option<Verdict>,
    answer: Option<bool>,
}

#[async_trait]
impl Extension for Desk {
    fn name(&self) -> &str {
        "desk"
    }
    fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        Ok(self.tools.clone())
    }
    async fn before_tool(&self, _v: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        Ok(if call.name == "Guarded" {
            self.verdict.clone()
        } else {
            None
        })
    }
    async fn resolve_ask(
        &self,
        _v: &View<'_>,
        _c: &ToolCall,
        _asks: &[String],
    ) -> HookResult<Option<noeta_core::extension::AskAnswer>> {
        Ok(self.answer.map(noeta_core::extension::AskAnswer::from_bool))
    }
}

struct Setup {
    h: Harness,
    rt: Runtime,
    session: Session,
    task: TaskId,
    runs: Arc<AtomicUsize>,
}

fn setup(verdict: Option<Verdict>, answer: Option<bool>) -> Setup {
    let h = Harness::new();
    let rt = h.runtime(json!([]));
    let runs = Arc::new(AtomicUsize::new(0));
    let tools: Vec<Arc<dyn Tool>> = ["Echo", "Guarded"]
        .into_iter()
        .map(|name| {
            Arc::new(Echo {
                name,
                runs: runs.clone(),
            }) as Arc<dyn Tool>
        })
        .collect();
    let mut session = bare_session("main", "You are a careful assistant.");
    session.extensions.push(Arc::new(Desk {
        tools,
        verdict,
        answer,
    }));
    let task = TaskId::new("direct").unwrap();
    block_on(rt.create(&session, &task, "serve tools")).unwrap();
    Setup {
        h,
        rt,
        session,
        task,
        runs,
    }
}

fn refusal(asks: &[String]) -> String {
    format!("refused: {}", asks.join("; "))
}

fn call(s: &Setup, name: &str, input: Value) -> Result<DirectResult, RunError> {
    block_on(s.rt.call_direct(&s.session, &s.task, name, input, &refusal))
}

#[test]
fn the_tools_are_those_a_model_of_the_task_is_offered() {
    let s = setup(None, None);
    let tools = block_on(s.rt.direct_tools(&s.session, &s.task)).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["Echo", "Guarded"]);
}

#[test]
fn a_direct_call_runs_and_is_recorded_like_a_models_call() {
    let s = setup(None, None);
    let result = call(&s, "Echo", json!({"say": "hi"})).unwrap();
    assert_eq!(result.text, "echo: hi");
    assert!(!result.is_error);
    assert_eq!(result.outcome, CallOutcome::Ok);
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
    let kinds = s.h.core_kinds(&s.task);
    assert!(
        kinds.ends_with(&["call_started".to_owned(), "call_finished".to_owned()]),
        "{kinds:?}"
    );
    // A second call gets its own id, and the log stays readable.
    let again = call(&s, "Echo", json!({"say": "again"})).unwrap();
    assert_ne!(again.call_id, result.call_id);
    assert_eq!(again.text, "echo: again");
}

#[test]
fn bad_input_and_unknown_tools_are_error_results_not_failures() {
    let s = setup(None, None);
    let bad = call(&s, "Echo", json!({"say": 3})).unwrap();
    assert!(bad.is_error);
    assert!(
        bad.text.starts_with("Echo: invalid input — /say: "),
        "{}",
        bad.text
    );
    let unknown = call(&s, "Nope", json!({})).unwrap();
    assert!(unknown.is_error);
    assert!(unknown.text.contains("Nope"), "{}", unknown.text);
    assert!(unknown.text.contains("Echo"), "{}", unknown.text);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn a_call_the_gate_would_ask_about_is_refused_with_the_frontends_reason() {
    let s = setup(
        Some(Verdict::Ask {
            reason: "Guarded writes things".to_owned(),
            firm: false,
        }),
        None,
    );
    let result = call(&s, "Guarded", json!({"say": "x"})).unwrap();
    assert!(result.is_error);
    assert_eq!(result.outcome, CallOutcome::Denied);
    assert_eq!(result.text, "refused: Guarded writes things");
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);
    let state = block_on(s.rt.load(&s.session, &s.task)).unwrap();
    assert!(
        state.core.parked.is_empty(),
        "nothing waits on a direct call"
    );
}

#[test]
fn an_ask_answered_on_the_users_behalf_runs_or_is_declined() {
    let ask = Verdict::Ask {
        reason: "Guarded writes things".to_owned(),
        firm: false,
    };
    let yes = setup(Some(ask.clone()), Some(true));
    assert_eq!(
        call(&yes, "Guarded", json!({"say": "x"})).unwrap().text,
        "echo: x"
    );
    let no = setup(Some(ask), Some(false));
    let declined = call(&no, "Guarded", json!({"say": "x"})).unwrap();
    assert!(declined.is_error);
    assert_eq!(no.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn a_denied_call_carries_the_guards_reason() {
    let s = setup(
        Some(Verdict::Deny {
            reason: "not here".to_owned(),
        }),
        None,
    );
    let result = call(&s, "Guarded", json!({"say": "x"})).unwrap();
    assert_eq!(result.outcome, CallOutcome::Denied);
    assert!(result.text.contains("not here"), "{}", result.text);
}

#[test]
fn ending_the_direct_calls_ends_the_turn_once() {
    let s = setup(None, None);
    call(&s, "Echo", json!({"say": "hi"})).unwrap();
    block_on(s.rt.end_direct(&s.session, &s.task, "the client left")).unwrap();
    let state = block_on(s.rt.load(&s.session, &s.task)).unwrap();
    assert_eq!(
        state.core.turn,
        noeta_core::fold::TurnState::Ended {
            reason: "the client left".to_owned()
        }
    );
    let before = s.h.events(&s.task).len();
    block_on(s.rt.end_direct(&s.session, &s.task, "again")).unwrap();
    assert_eq!(
        s.h.events(&s.task).len(),
        before,
        "an ended turn is not ended twice"
    );
}

#[test]
fn a_task_not_made_yet_lists_what_a_new_task_would_be_offered() {
    let s = setup(None, None);
    let unborn = TaskId::new("not-yet").unwrap();
    let tools = block_on(s.rt.direct_tools(&s.session, &unborn)).unwrap();
    assert_eq!(tools.len(), 2);
    let made = block_on(s.rt.log().tasks()).unwrap();
    assert!(
        made.iter().all(|t| t.id != unborn),
        "listing creates nothing"
    );
}
