//! Composing a model request (`runner/compose.rs`): the tool list (deferred, listed last, mounted
//! control tools, the agent's allow-list), residents by content kind, and the stable prefix the
//! prompt cache hashes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::extension::{Extension, HookResult, OfferedTool, ToolChanges, View};
use noeta_core::model::{ModelRequest, Role};
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::session::{Session, bare_session, build_session};
use noeta_core::{ContentKindSpec, PluginSource, Resolved, Tool};
use noeta_testkit::harness::Harness;
use serde_json::json;

use super::support::{
    Capturing, TestTool, built, call, flagged, offers, result_text, session, task,
};
use crate::support::{Fixtures, Manifest, ResolveWith, agent, assert_mentions, compile};

/// Loads every held-back tool whose search hint appears in the newest user message.
struct Loader;

#[async_trait]
impl Extension for Loader {
    fn name(&self) -> &str {
        "loader"
    }
    fn tool_changes(&self, view: &View<'_>, offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        let wanted = view
            .messages()
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.text.clone())
            .unwrap_or_default();
        let mut changes = ToolChanges::none();
        changes.add = offered
            .iter()
            .filter(|t| t.deferred)
            .filter(|t| {
                t.tool
                    .flags()
                    .search_hint
                    .is_some_and(|hint| wanted.contains(&hint))
            })
            .map(|t| t.tool.clone())
            .collect();
        Ok(changes)
    }
}

#[test]
fn a_deferred_tool_is_held_back_until_loaded_and_then_sent_with_its_loaded_description() {
    let h = Harness::new();
    let deep = flagged("Deep", |f| {
        f.deferred = true;
        f.search_hint = Some("spelunk".into());
        f.loaded_description = Some("Deep, loaded.".into());
    });
    let provider = Capturing::new(json!([
        { "calls": [call("Deep", json!({}))] },
        { "text": "ok" },
        { "calls": [call("Deep", json!({}))] },
        { "text": "ok" }
    ]));
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let s = session(vec![
        offers(vec![deep.clone(), Arc::new(TestTool::new("Plain"))]),
        Arc::new(Loader),
    ]);
    let t = task("deferred");
    block_on(rt.create(&s, &t, "look around")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(0), ["Plain"]);
    assert_eq!(
        deep.runs.load(Ordering::SeqCst),
        0,
        "a held-back tool cannot be called"
    );
    block_on(rt.send(&s, &t, "now spelunk")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(2), ["Plain", "Deep"]);
    assert_eq!(provider.seen.lock().unwrap()[2][1].1, "Deep, loaded.");
    assert_eq!(deep.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn listed_last_tools_go_after_the_others() {
    let h = Harness::new();
    let provider = Capturing::new(json!([{ "text": "ok" }]));
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let s = session(vec![offers(vec![
        flagged("Tail", |f| f.listed_last = true),
        Arc::new(TestTool::new("Head")),
        flagged("Also", |f| f.listed_last = true),
    ])]);
    let t = task("listed");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(0), ["Head", "Tail", "Also"]);
}

#[test]
fn a_mounted_control_tool_runs_like_a_tool_and_is_offered_after_the_others() {
    let h = Harness::new();
    let s = built(
        vec![PluginSource::Linked(
            Manifest::new("ctl")
                .with("tool", "Echo", "")
                .with("control_tool", "ask_user", "priority = 300")
                .linked("noeta-ctl", Fixtures),
        )],
        &["ctl"],
    );
    let provider = Capturing::new(
        json!([{ "calls": [call("ask_user", json!({"text": "hi"}))] }, { "text": "ok" }]),
    );
    let rt = Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
    let t = task("control");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    assert_eq!(provider.tools(0), ["Echo", "ask_user"]);
    assert!(result_text(&rt, &s, &t).starts_with("hi (key "));
    assert_eq!(
        s.pins.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["ctl"]
    );
}

/// A pack mounting two tools, noting the allow-list it was built with.
struct TwoTools(Arc<Mutex<Option<Option<Vec<String>>>>>);

impl noeta_core::SessionPackFactory for TwoTools {
    fn build(
        &self,
        ctx: &noeta_core::SessionBuildContext,
    ) -> Result<noeta_core::PackContribution, String> {
        *self.0.lock().unwrap() = Some(ctx.tools.clone());
        let mut pack = noeta_core::PackContribution::empty();
        pack.tools = vec![
            Arc::new(crate::support::EchoTool::new("Echo")),
            Arc::new(crate::support::EchoTool::new("Shout")),
        ];
        Ok(pack)
    }
}

#[test]
fn the_agents_tool_allow_list_filters_pack_tools_and_is_part_of_its_identity() {
    let seen = Arc::new(Mutex::new(None));
    let pack = TwoTools(seen.clone());
    let pack = Arc::new(pack);
    let set = crate::support::load(&[PluginSource::Linked(
        Manifest::new("packed")
            .with("session_pack", "two", "priority = 100")
            .linked(
                "noeta-packed",
                ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                    Ok(Resolved::SessionPack(pack.clone()))
                }),
            ),
    )]);
    let offered = |options: &noeta_core::AgentOptions| -> (Vec<String>, String) {
        let compiled = compile(&set, options).unwrap();
        let session = build_session(&set, &compiled, &Default::default(), None).unwrap();
        let task_id = task("offer");
        let state = noeta_core::fold::TaskState::default();
        let view = View::new(&task_id, "main", &state, &[], &session.extensions);
        let names = session
            .extensions
            .iter()
            .flat_map(|e| e.tools(&view).unwrap())
            .map(|t| t.name().to_owned())
            .collect();
        (names, compiled.spec.identity_hash())
    };
    let all = agent("main", &["packed"]);
    let (names, open) = offered(&all);
    assert_eq!(names, ["Echo", "Shout"]);
    assert_eq!(*seen.lock().unwrap(), Some(None));
    let mut listed = all.clone();
    listed.tools = Some(vec!["Shout".into(), "Read".into(), "Shout".into()]);
    let (names, limited) = offered(&listed);
    assert_eq!(names, ["Shout"]);
    assert_eq!(
        *seen.lock().unwrap(),
        Some(Some(vec!["Read".to_owned(), "Shout".to_owned()])),
        "packs see the list sorted, once each"
    );
    assert_ne!(open, limited, "the allow-list is identity-bearing");
}

/// A pack declaring content kinds whose extension gives one resident of each (and one
/// of no kind, and one of `stray` when told).
struct KindPack {
    name: &'static str,
    kinds: Vec<ContentKindSpec>,
    stray: bool,
}

struct KindResidents {
    name: String,
    kinds: Vec<String>,
    stray: bool,
}

#[async_trait]
impl Extension for KindResidents {
    fn name(&self) -> &str {
        &self.name
    }
    fn context(&self, _v: &View<'_>) -> HookResult<Vec<noeta_core::extension::ContextPart>> {
        use noeta_core::extension::ContextPart;
        let mut parts = vec![ContextPart::resident(format!("{} plain", self.name))];
        for kind in &self.kinds {
            parts.push(ContextPart::resident_of(
                kind,
                format!("{} {kind}", self.name),
            ));
        }
        if self.stray {
            parts.push(ContextPart::resident_of("stray", "lost"));
        }
        Ok(parts)
    }
}

impl noeta_core::SessionPackFactory for KindPack {
    fn build(
        &self,
        _ctx: &noeta_core::SessionBuildContext,
    ) -> Result<noeta_core::PackContribution, String> {
        let mut pack = noeta_core::PackContribution::empty();
        pack.content_kinds = self.kinds.clone();
        pack.extensions.push(Arc::new(KindResidents {
            name: self.name.to_owned(),
            kinds: self.kinds.iter().map(|k| k.kind.clone()).collect(),
            stray: self.stray,
        }));
        Ok(pack)
    }
}

fn kind(name: &str, band: i64, title: &str) -> ContentKindSpec {
    ContentKindSpec {
        kind: name.to_owned(),
        band,
        title: title.to_owned(),
    }
}

fn kind_plugin(plugin: &'static str, priority: i64, pack: KindPack) -> PluginSource {
    let pack = Arc::new(pack);
    PluginSource::Linked(
        Manifest::new(plugin)
            .with(
                "session_pack",
                &format!("{plugin}-residents"),
                &format!("priority = {priority}"),
            )
            .linked(
                &format!("noeta-{plugin}"),
                ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                    Ok(Resolved::SessionPack(pack.clone()))
                }),
            ),
    )
}

/// Keeps every request it is sent and answers "done".
#[derive(Default)]
struct Capture(Mutex<Vec<ModelRequest>>);

#[async_trait]
impl noeta_core::provider::Provider for Capture {
    fn name(&self) -> &str {
        "capture"
    }
    fn model(&self) -> &str {
        "capture"
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    async fn complete(
        &self,
        request: &ModelRequest,
    ) -> Result<noeta_core::model::ModelReply, noeta_core::provider::ProviderError> {
        self.0.lock().unwrap().push(request.clone());
        Ok(noeta_core::model::ModelReply {
            text: "done".into(),
            ..Default::default()
        })
    }
}

fn first_request(s: &Session) -> Result<ModelRequest, RunOutcome> {
    let h = Harness::new();
    let capture = Arc::new(Capture::default());
    let rt = Runtime::new(h.log.clone(), h.content.clone(), capture.clone()).with_lease_ttl(1_000);
    let t = task("kinds");
    block_on(rt.create(s, &t, "go")).unwrap();
    let outcome = block_on(rt.run(s, &t)).unwrap();
    capture.0.lock().unwrap().first().cloned().ok_or(outcome)
}

#[test]
fn residents_are_laid_out_by_content_kind_band_then_pack_order_and_unkinded_ones_last() {
    // Pack order is `first` (100) then `second` (200); bands put `second`'s `skills`
    // first, and `rules` and `facts` (both band 20) keep pack order.
    let s = built(
        vec![
            kind_plugin(
                "first",
                100,
                KindPack {
                    name: "first",
                    kinds: vec![kind("notes", 30, ""), kind("rules", 20, "")],
                    stray: false,
                },
            ),
            kind_plugin(
                "second",
                200,
                KindPack {
                    name: "second",
                    kinds: vec![kind("skills", 10, "## Skills"), kind("facts", 20, "")],
                    stray: false,
                },
            ),
        ],
        &["first", "second"],
    );
    let kinds: Vec<&str> = s.kinds.iter().map(|k| k.kind.as_str()).collect();
    assert_eq!(kinds, ["skills", "rules", "facts", "notes"]);
    let request = first_request(&s).unwrap();
    assert_eq!(
        request.residents,
        [
            "## Skills",
            "second skills",
            "first rules",
            "second facts",
            "first notes",
            "first plain",
            "second plain"
        ]
    );
}

#[test]
fn a_resident_of_a_kind_the_agent_lacks_fails_the_turn_naming_extension_and_kind() {
    let s = built(
        vec![kind_plugin(
            "first",
            100,
            KindPack {
                name: "first",
                kinds: vec![kind("notes", 30, "")],
                stray: true,
            },
        )],
        &["first"],
    );
    let outcome = first_request(&s).unwrap_err();
    let RunOutcome::TurnFailed { reason } = outcome else {
        panic!("{outcome:?}");
    };
    assert_mentions(
        &reason,
        &[
            "extension `first`",
            "content kind `stray`",
            "agent `main`",
            "(kinds: notes)",
        ],
    );
}

#[test]
fn two_packs_declaring_one_content_kind_is_an_error_naming_both() {
    let set = crate::support::load(&[
        kind_plugin(
            "first",
            100,
            KindPack {
                name: "first",
                kinds: vec![kind("notes", 30, "")],
                stray: false,
            },
        ),
        kind_plugin(
            "second",
            200,
            KindPack {
                name: "second",
                kinds: vec![kind("notes", 10, "")],
                stray: false,
            },
        ),
    ]);
    let compiled = compile(&set, &agent("main", &["first", "second"])).unwrap();
    let err = build_session(&set, &compiled, &Default::default(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `main`: content kind `notes` is declared by both first/first-residents and second/second-residents — a kind has one owner"
    );
}

#[test]
fn the_stable_prefix_changes_exactly_when_the_tools_or_the_system_text_change() {
    /// Offers `Extra` once the conversation has three messages.
    struct Grows;
    #[async_trait]
    impl Extension for Grows {
        fn name(&self) -> &str {
            "grows"
        }
        fn tools(&self, v: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
            Ok(if v.messages().len() >= 3 {
                vec![Arc::new(TestTool::new("Extra"))]
            } else {
                vec![]
            })
        }
    }
    let h = Harness::new();
    let turns = json!([
        { "calls": [call("Work", json!({}))] },
        { "calls": [call("Work", json!({}))] },
        { "text": "done" },
        { "text": "again" }
    ]);
    let rt = h.runtime(turns.clone());
    let s = session(vec![
        offers(vec![Arc::new(TestTool::new("Work"))]),
        Arc::new(Grows),
    ]);
    let t = task("prefix");
    block_on(rt.create(&s, &t, "go")).unwrap();
    block_on(rt.run(&s, &t)).unwrap();
    // A resume in a new runtime (new caches) keeps the bytes.
    block_on(rt.send(&s, &t, "more")).unwrap();
    let fresh = h.runtime(turns);
    block_on(fresh.run(&s, &t)).unwrap();
    let stable: Vec<String> = h
        .events(&t)
        .iter()
        .filter(|e| e.record.kind == "request_composed")
        .map(|e| e.record.data["stable"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stable.len(), 4);
    assert_ne!(stable[0], stable[1], "the tool set grew");
    assert_eq!(stable[1], stable[2], "nothing changed");
    assert_eq!(stable[2], stable[3], "identical across a resume");
    // The session remembers the last prefix for its next claims, but only while it matches:
    // a new task, whose first request has no `Extra`, hashes as the first one did.
    let t3 = task("prefix3");
    let rt3 = h.runtime(json!([{ "text": "x" }]));
    block_on(rt3.create(&s, &t3, "go")).unwrap();
    block_on(rt3.run(&s, &t3)).unwrap();
    let third = h
        .events(&t3)
        .into_iter()
        .find(|e| e.record.kind == "request_composed")
        .unwrap();
    assert_eq!(third.record.data["stable"].as_str().unwrap(), stable[0]);
    // Changing the system text changes it.
    let mut other = session(vec![
        offers(vec![Arc::new(TestTool::new("Work"))]),
        Arc::new(Grows),
    ]);
    other.extensions[0] = bare_session("main", "Different instructions.").extensions[0].clone();
    let t2 = task("prefix2");
    let rt2 = h.runtime(json!([{ "text": "x" }]));
    block_on(rt2.create(&other, &t2, "go")).unwrap();
    block_on(rt2.run(&other, &t2)).unwrap();
    let first = h
        .events(&t2)
        .into_iter()
        .find(|e| e.record.kind == "request_composed")
        .unwrap();
    assert_ne!(first.record.data["stable"].as_str().unwrap(), stable[0]);
}

#[test]
fn the_allow_list_bounds_every_offered_tool_mcp_and_control_tools_included() {
    let h = Harness::new();
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let offered = |allowed: Option<Vec<&str>>| {
        let provider = Capturing::new(json!([{ "text": "ok" }]));
        let rt =
            Runtime::new(h.log.clone(), h.content.clone(), provider.clone()).with_lease_ttl(1_000);
        let mut s = session(vec![offers(vec![
            Arc::new(TestTool::new("Read")),
            Arc::new(TestTool::new("TodoWrite")),
            Arc::new(TestTool::new("mcp__docs__search")),
            Arc::new(TestTool::new("mcp__docs__fetch")),
            Arc::new(TestTool::new("mcp__docsearch__x")),
            Arc::new(TestTool::new("mcp__git__commit")),
            flagged("structured_output", |f| f.past_agent_lists = true),
        ])]);
        s.spec.allowed_tools = allowed.map(|a| a.into_iter().map(str::to_owned).collect());
        let t = task(&format!("allow-{}", runs.fetch_add(1, Ordering::SeqCst)));
        block_on(rt.create(&s, &t, "go")).unwrap();
        block_on(rt.run(&s, &t)).unwrap();
        provider.tools(0)
    };
    assert_eq!(
        offered(None),
        [
            "Read",
            "TodoWrite",
            "mcp__docs__search",
            "mcp__docs__fetch",
            "mcp__docsearch__x",
            "mcp__git__commit",
            "structured_output"
        ],
        "no list: every tool"
    );
    assert_eq!(
        offered(Some(vec!["Read"])),
        ["Read", "structured_output"],
        "a control tool and MCP tools the list does not name are not offered"
    );
    assert_eq!(
        offered(Some(vec!["Read", "mcp__docs"])),
        [
            "Read",
            "mcp__docs__search",
            "mcp__docs__fetch",
            "structured_output"
        ],
        "a server's name takes all its tools, and only its own"
    );
    assert_eq!(
        offered(Some(vec!["mcp__git__commit", "mcp__docs__*", "TodoWrite"])),
        [
            "TodoWrite",
            "mcp__docs__search",
            "mcp__docs__fetch",
            "mcp__git__commit",
            "structured_output"
        ]
    );
    assert_eq!(
        offered(Some(vec!["mcp__*"])),
        [
            "mcp__docs__search",
            "mcp__docs__fetch",
            "mcp__docsearch__x",
            "mcp__git__commit",
            "structured_output"
        ]
    );
}
