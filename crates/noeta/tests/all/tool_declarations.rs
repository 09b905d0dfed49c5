//! Every model-visible tool a built-in offers is declared on the `tool` or `control_tool`
//! surface: listings name each with its plugin, and a third-party tool of the same name is a
//! merge collision naming both plugins.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::{BTreeMap, BTreeSet};

use noeta_core::extension::View;
use noeta_core::fold::TaskState;
use noeta_core::store::TaskId;
use noeta_core::{
    AgentOptions, LoadOptions, PluginSet, PluginSource, compile_agent, load_plugins,
    standard_registry,
};
use serde_json::{Value, json};

fn builtins(extra: Vec<PluginSource>) -> PluginSet {
    let sources: Vec<PluginSource> = noeta::builtins::linked()
        .into_iter()
        .map(PluginSource::Linked)
        .chain(extra)
        .collect();
    load_plugins(&sources, &LoadOptions::new(standard_registry())).unwrap()
}

/// (tool name, plugin) for every tool a plugin's `tool` and `control_tool` contributions name.
fn declared(set: &PluginSet) -> BTreeSet<(String, String)> {
    let listing = noeta::listing::plugins_json(set, &set.merged());
    let mut out = BTreeSet::new();
    for plugin in listing["plugins"].as_array().unwrap() {
        let name = plugin["name"].as_str().unwrap();
        for surface in ["tool", "control_tool"] {
            for c in plugin["contributions"][surface]
                .as_array()
                .into_iter()
                .flatten()
            {
                for tool in c["tools"].as_array().unwrap() {
                    out.insert((tool.as_str().unwrap().to_owned(), name.to_owned()));
                }
            }
        }
    }
    out
}

#[test]
fn plugins_list_json_names_every_pack_mounted_tool_with_its_plugin() {
    let declared = declared(&builtins(Vec::new()));
    let expected = [
        ("Read", "fs"),
        ("Glob", "fs"),
        ("Grep", "fs"),
        ("Edit", "fs"),
        ("Write", "fs"),
        ("Bash", "fs"),
        ("BashOutput", "fs"),
        ("KillShell", "fs"),
        ("Monitor", "fs"),
        ("WebFetch", "web"),
        ("WebSearch", "web"),
        ("memory_write", "memory"),
        ("memory_read", "memory"),
        ("memory_search", "memory"),
        ("memory_archive", "memory"),
        ("ToolSearch", "react"),
    ];
    for (tool, plugin) in expected {
        assert!(
            declared.contains(&(tool.to_owned(), plugin.to_owned())),
            "`{tool}` of `{plugin}` is not listed: {declared:?}"
        );
    }
}

#[test]
fn every_tool_a_builtin_offers_is_declared_by_that_builtin() {
    // Every built-in on, with the settings that make each pack offer all it can.
    let set = builtins(Vec::new());
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("everything");
    options.plugins = noeta::builtins::NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    let compiled = compile_agent(&set, &merged, &options, &noeta::activation_rules()).unwrap();
    let memories = tempfile::tempdir().unwrap();
    let config: BTreeMap<String, Value> = BTreeMap::from([
        ("web".to_owned(), json!({ "search_api_key": "test-key" })),
        (
            "memory".to_owned(),
            json!({ "dir": memories.path().display().to_string() }),
        ),
    ]);
    let session = noeta::build_session(&set, &compiled, &config).unwrap();
    let task = TaskId::new("tools").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "everything", &state, &[], &session.extensions);
    let declared = declared(&set);
    let mut offered = 0;
    for ext in &session.extensions {
        // Packs and contributions are named `<plugin>/<name>`; the kernel's own entries are
        // `core/...` and mount control tools, which `control_tool` declares.
        let plugin = ext.name().split('/').next().unwrap_or_default();
        for tool in ext.tools(&view).unwrap() {
            offered += 1;
            let owner = if plugin == "core" {
                declared
                    .iter()
                    .find(|(name, _)| name == tool.name())
                    .map(|(_, p)| p.clone())
            } else {
                Some(plugin.to_owned())
            };
            let owner =
                owner.unwrap_or_else(|| panic!("`{}` is declared by no plugin", tool.name()));
            assert!(
                declared.contains(&(tool.name().to_owned(), owner.clone())),
                "extension `{}` offers `{}`, which plugin `{owner}` does not declare",
                ext.name(),
                tool.name()
            );
        }
    }
    assert!(offered >= 20, "only {offered} tools were offered");
}

#[test]
fn a_third_party_tool_named_like_a_builtin_tool_collides_naming_both_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("lint-kit");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::write(
        plugin.join("noeta-plugin.toml"),
        "name = \"lint-kit\"\nversion = \"1.0.0\"\n\n[[contributions]]\nsurface = \"tool\"\nname = \"Read\"\nref = \"lint_kit::Read\"\n",
    )
    .unwrap();
    let set = builtins(vec![PluginSource::Path(plugin.clone())]);
    assert!(set.problems().is_empty(), "{:?}", set.problems());
    let err = set.merged().unwrap_err();
    let message = err.to_string();
    assert!(message.contains("`Read`"), "{message}");
    assert!(message.contains("plugin `fs`"), "{message}");
    assert!(message.contains("plugin `lint-kit`"), "{message}");

    // A control tool mounting a built-in tool's name collides too.
    std::fs::write(
        plugin.join("noeta-plugin.toml"),
        "name = \"lint-kit\"\nversion = \"1.0.0\"\n\n[[contributions]]\nsurface = \"control_tool\"\nname = \"fetcher\"\nref = \"lint_kit::fetcher\"\ntools = \"WebFetch\"\n",
    )
    .unwrap();
    let set = builtins(vec![PluginSource::Path(plugin)]);
    let message = set.merged().unwrap_err().to_string();
    assert_eq!(
        message,
        "model-visible tool `WebFetch` is mounted by both plugin `lint-kit` and plugin `web` — no override"
    );
}
