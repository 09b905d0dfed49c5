//! Slash commands (`runner/commands.rs`): listing and running them through the offering extension.

use std::sync::Arc;

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookError, HookResult, View};
use noeta_core::runner::RunOutcome;
use noeta_testkit::harness::Harness;
use serde_json::json;

use super::support::{session, task};

/// Stands in for compaction: asks the others, and reports what they said.
struct Compacting;

#[async_trait]
impl Extension for Compacting {
    fn name(&self) -> &str {
        "compacting"
    }
    fn commands(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::CommandSpec>> {
        Ok(vec![noeta_core::extension::CommandSpec {
            name: "compact".into(),
            description: "Compact now.".into(),
        }])
    }
    async fn run_command(
        &self,
        v: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<noeta_core::extension::CommandReply> {
        if args == "fail" {
            return Err(HookError::new("nothing to compact"));
        }
        let advice: Vec<String> = v
            .ask_before_compact("compacting")
            .into_iter()
            .map(|(n, a)| format!("{n}:{:?}", a.refuse))
            .collect();
        let residents: Vec<String> = v
            .ask_residents("compacting")
            .into_iter()
            .map(|(n, t)| format!("{n}:{t}"))
            .collect();
        let leads: Vec<String> = v
            .ask_lead_residents("compacting")
            .into_iter()
            .map(|(n, t)| format!("{n}:{t}"))
            .collect();
        v.record("compacting", "ran", json!({ "command": name }));
        Ok(noeta_core::extension::CommandReply::Show(format!(
            "{} | {} | {}",
            advice.join(","),
            residents.join(","),
            leads.join(",")
        )))
    }
}

struct Keeps;

#[async_trait]
impl Extension for Keeps {
    fn name(&self) -> &str {
        "keeps"
    }
    fn before_compact(&self, _v: &View<'_>) -> HookResult<noeta_core::extension::CompactAdvice> {
        let mut advice = noeta_core::extension::CompactAdvice::default();
        advice.refuse = Some("mid-edit".into());
        Ok(advice)
    }
    fn resident(&self, _v: &View<'_>) -> HookResult<Option<String>> {
        Ok(Some("the plan".into()))
    }
    fn lead_resident(&self, _v: &View<'_>) -> HookResult<Option<String>> {
        Err(HookError::new("broken lead"))
    }
}

#[test]
fn commands_run_through_the_offering_extension_which_may_ask_the_others() {
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "ok" }]));
    let s = session(vec![Arc::new(Compacting), Arc::new(Keeps)]);
    let t = task("commands");
    block_on(rt.create(&s, &t, "go")).unwrap();
    let listed = block_on(rt.commands(&s, &t)).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "compacting");
    let out = block_on(rt.run_command(&s, &t, "compact", "")).unwrap();
    assert_eq!(
        out.text(),
        "keeps:Some(\"mid-edit\") | keeps:the plan | ",
        "a failing lead_resident is skipped"
    );
    assert!(
        h.events(&t).iter().any(|e| e.record.kind == "ran"),
        "a command's records are committed"
    );
    let err = block_on(rt.run_command(&s, &t, "compact", "fail")).unwrap_err();
    assert_eq!(err.to_string(), "/compact: nothing to compact");
    let err = block_on(rt.run_command(&s, &t, "nope", "")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/nope: no such command (available: /compact)"
    );
}

#[test]
fn broken_on_empty_reply_and_commands_are_skipped() {
    struct Flaky;
    #[async_trait]
    impl Extension for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        async fn on_empty_reply(
            &self,
            _v: &View<'_>,
            _r: &noeta_core::model::ModelReply,
        ) -> HookResult<Option<String>> {
            Err(HookError::new("no idea"))
        }
        fn commands(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::CommandSpec>> {
            Err(HookError::new("cannot list"))
        }
    }
    let h = Harness::new();
    let rt = h.runtime(json!([{ "text": "" }]));
    let s = session(vec![Arc::new(Flaky), Arc::new(Compacting)]);
    let t = task("flaky");
    block_on(rt.create(&s, &t, "go")).unwrap();
    assert_eq!(
        block_on(rt.run(&s, &t)).unwrap(),
        RunOutcome::Ended {
            reason: "empty_reply".into()
        }
    );
    let commands = block_on(rt.commands(&s, &t)).unwrap();
    assert_eq!(
        commands.len(),
        1,
        "the failing extension is skipped, the other still lists"
    );
}
