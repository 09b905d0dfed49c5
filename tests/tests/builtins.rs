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
    for name in ["mcp", "providers", "storage"] {
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
    assert_eq!(noeta::DEFAULT_PLUGINS, ["fs", "web"]);
    assert!(agent.spec.spawnable.is_empty());
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

    let plain = compile_agent(&set, &merged, &default_agent(), &activation_rules()).unwrap();
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
