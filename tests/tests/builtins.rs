//! The eighteen built-ins together: they load, merge and resolve, and agents compile against them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeSet;

use noeta::{HostError, HostOptions, HostPaths, activation_rules, default_agent};
use noeta_core::{
    AgentOptions, CompileError, LoadError, LoadOptions, PluginSource, canonical, compile_agent,
    load_plugins, standard_registry,
};

fn paths() -> HostPaths {
    HostPaths {
        home: None,
        workspace: std::env::temp_dir().join("noeta-tests-no-workspace"),
    }
}

fn builtins() -> noeta_core::PluginSet {
    noeta::load(&paths(), &HostOptions::default()).unwrap()
}

#[test]
fn all_eighteen_builtins_load_merge_and_resolve() {
    let set = builtins();
    assert_eq!(set.names(), noeta::builtins::NAMES);
    assert!(set.problems().is_empty() && set.warnings().is_empty());
    let merged = set.merged().unwrap();
    assert_eq!(set.resolve_everything(&merged), vec![]);
    for name in ["providers", "storage"] {
        assert!(
            set.get(name).unwrap().manifest.contributions.is_empty(),
            "{name} is declaration-only"
        );
    }
}

#[test]
fn every_builtin_tool_contribution_names_the_tools_it_mounts() {
    let set = builtins();
    for plugin in set.plugins() {
        for c in &plugin.manifest.contributions {
            if matches!(c.surface.as_str(), "tool" | "control_tool") {
                assert!(!c.tool_names().is_empty(), "{} {}", plugin.name(), c.name);
            }
        }
    }
}

#[test]
fn discovery_order_never_changes_the_merged_bytes() {
    let linked = noeta::builtins::linked();
    let bytes = |order: &[usize]| {
        let sources: Vec<PluginSource> = order
            .iter()
            .map(|&i| PluginSource::Linked(linked[i].clone()))
            .collect();
        let set = load_plugins(&sources, &LoadOptions::new(standard_registry())).unwrap();
        canonical::to_bytes(&set.merged().unwrap().to_json())
    };
    let forward: Vec<usize> = (0..linked.len()).collect();
    let backward: Vec<usize> = forward.iter().rev().copied().collect();
    let interleaved: Vec<usize> = forward.iter().map(|i| (i * 7) % linked.len()).collect();
    assert_eq!(
        interleaved.iter().collect::<BTreeSet<_>>().len(),
        linked.len()
    );
    assert_eq!(bytes(&forward), bytes(&backward));
    assert_eq!(bytes(&forward), bytes(&interleaved));
}

#[test]
fn the_default_agent_compiles_with_the_always_on_builtins() {
    let set = builtins();
    let merged = set.merged().unwrap();
    let agent = compile_agent(&set, &merged, &default_agent(), &activation_rules()).unwrap();
    let mut expected: Vec<&str> = noeta::ALWAYS_ON.to_vec();
    expected.extend(noeta::DEFAULT_PLUGINS);
    expected.sort_unstable();
    assert_eq!(agent.spec.plugins, expected);
    assert_eq!(
        noeta::DEFAULT_PLUGINS,
        ["ask_user_question", "delegation", "fs", "todo_write", "web"]
    );
    assert_eq!(agent.spec.spawnable, ["explore", "general-purpose", "plan"]);
}

#[test]
fn an_agent_naming_presets_gets_them_on_its_roster_and_nobody_else_does() {
    let set = builtins();
    let merged = set.merged().unwrap();
    let mut main = default_agent();
    main.agents = vec![
        "plan".into(),
        "general-purpose".into(),
        "explore".into(),
        "__consolidation__".into(),
    ];
    let agent = compile_agent(&set, &merged, &main, &activation_rules()).unwrap();
    assert_eq!(agent.spec.spawnable, ["explore", "general-purpose", "plan"]);
    assert_eq!(agent.roster.len(), 4);
    assert_eq!(
        agent.roster["plan"].plugins,
        ["fs", "web", "ask_user_question"]
    );

    let mut alone = default_agent();
    alone.agents.clear();
    let plain = compile_agent(&set, &merged, &alone, &activation_rules()).unwrap();
    assert!(plain.roster.is_empty());
}

#[test]
fn identity_is_byte_identical_across_loads() {
    let compile = || {
        let set = builtins();
        let merged = set.merged().unwrap();
        let mut main = default_agent();
        main.instructions = "You are a coding agent.".into();
        main.plugins.push("memory".into());
        main.agents = vec!["explore".into()];
        compile_agent(&set, &merged, &main, &activation_rules())
            .unwrap()
            .spec
    };
    let (a, b) = (compile(), compile());
    assert_eq!(a.canonical_bytes(), b.canonical_bytes());
    assert_eq!(a.identity_hash(), b.identity_hash());
    assert_eq!(
        a.identity_hash(),
        canonical::sha256_hex(&a.canonical_bytes())
    );
    assert!(
        a.instructions
            .starts_with("You are a coding agent.\n\n# Memory\n")
    );
    assert_eq!(a.prompt_fragments[0].name, "memory-policy");
}

#[test]
fn activating_an_unknown_plugin_names_it() {
    let set = builtins();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = vec!["fz".into()];
    let err = compile_agent(&set, &merged, &options, &activation_rules()).unwrap_err();
    assert!(matches!(err, CompileError::UnknownActivation { .. }));
    assert!(
        err.to_string()
            .contains("unknown plugin activation `fz` on agent `main`"),
        "{err}"
    );
}

#[test]
fn react_cannot_be_disabled_and_others_can() {
    let options = HostOptions {
        disabled_builtins: BTreeSet::from(["react".to_owned()]),
        ..HostOptions::default()
    };
    let err = noeta::load(&paths(), &options).unwrap_err();
    assert!(matches!(
        err,
        HostError::Load(LoadError::NonRemovable { .. })
    ));
    assert!(
        err.to_string()
            .contains("built-in `react` cannot be disabled"),
        "{err}"
    );

    let options = HostOptions {
        disabled_builtins: BTreeSet::from(["web".to_owned()]),
        ..HostOptions::default()
    };
    let set = noeta::load(&paths(), &options).unwrap();
    assert!(!set.contains("web"));
    let merged = set.merged().unwrap();
    let err = compile_agent(&set, &merged, &default_agent(), &activation_rules()).unwrap_err();
    assert!(
        err.to_string()
            .contains("plugin `web` activated on agent `main` is disabled"),
        "{err}"
    );
}

mod todos_and_reminders {
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use futures::executor::block_on;
    use noeta_core::extension::{Extension, HookResult, View};
    use noeta_core::fold::Folder;
    use noeta_core::model::{ModelReply, ModelRequest};
    use noeta_core::provider::{Provider, ProviderError, ScriptedProvider};
    use noeta_core::runner::{RunOutcome, Runtime};
    use noeta_core::store::{EventLog, ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
    use noeta_core::{AgentOptions, Tool, ToolContext, ToolError, ToolOutput, compile_agent};
    use serde_json::{Value, json};

    /// Records the tail of every request.
    struct Tails {
        inner: ScriptedProvider,
        tails: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait]
    impl Provider for Tails {
        fn name(&self) -> &str {
            "tails"
        }
        fn model(&self) -> &str {
            "tails"
        }
        fn context_window(&self) -> u64 {
            100_000
        }
        async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
            self.tails.lock().unwrap().push(request.tail.clone());
            self.inner.complete(request).await
        }
    }

    struct Noop;

    #[async_trait]
    impl Tool for Noop {
        fn name(&self) -> &str {
            "Noop"
        }
        fn description(&self) -> &str {
            "Does nothing."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        async fn run(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("ok"))
        }
    }

    struct OffersNoop;

    #[async_trait]
    impl Extension for OffersNoop {
        fn name(&self) -> &str {
            "test-tools"
        }
        fn tools(&self, _view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
            Ok(vec![Arc::new(Noop)])
        }
    }

    #[test]
    fn an_untouched_todo_list_is_recalled_every_ten_replies_and_never_recorded() {
        let set = super::builtins();
        let merged = set.merged().unwrap();
        let mut options = AgentOptions::named("main");
        options.plugins = vec!["todo_write".into()];
        let compiled = compile_agent(&set, &merged, &options, &noeta::activation_rules()).unwrap();
        let mut session = noeta::build_session(&set, &compiled, &Default::default()).unwrap();
        session.extensions.push(Arc::new(OffersNoop));
        session.folder = Folder::new(&session.extensions, "test");

        let todo = json!({"todos": [
            {"content": "Write the parser", "status": "in_progress", "activeForm": "Writing the parser"},
            {"content": "Test it", "status": "pending", "activeForm": "Testing it"}
        ]});
        let mut turns = vec![json!({"calls": [{"name": "TodoWrite", "input": todo}]})];
        turns.extend((0..11).map(|_| json!({"calls": [{"name": "Noop", "input": {}}]})));
        turns.push(json!({"text": "done"}));
        let script = json!({"turns": turns}).to_string();
        let provider = Arc::new(Tails {
            inner: ScriptedProvider::from_json(&script, "test").unwrap(),
            tails: Mutex::new(Vec::new()),
        });
        let log = Arc::new(MemoryEventLog::new(ManualClock::at(0)));
        let rt = Runtime::new(
            log.clone(),
            Arc::new(MemoryContentStore::new()),
            provider.clone(),
        );
        let task = TaskId::new("todos").unwrap();
        block_on(rt.create(&session, &task, "build the parser")).unwrap();
        assert!(matches!(
            block_on(rt.run(&session, &task)).unwrap(),
            RunOutcome::Ended { .. }
        ));

        let tails = provider.tails.lock().unwrap();
        assert_eq!(tails.len(), 13);
        let reminded: Vec<usize> = tails
            .iter()
            .enumerate()
            .filter(|(_, t)| t.iter().any(|s| s.starts_with("Reminder: your todo list")))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            reminded,
            [11],
            "ten replies after the list was written, once"
        );
        assert!(tails[11][0].contains("- Write the parser (in progress)"));
        let events = block_on(log.read(&task, 0)).unwrap();
        assert!(
            !serde_json::to_string(&events)
                .unwrap()
                .contains("Reminder: your todo list")
        );
    }
}
