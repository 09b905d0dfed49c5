//! `[plugins.skills]` errors: each names the plugin, the key and the value.

use noeta_builtin_skills::listing::index_for_listing;
use serde_json::{Value, json};

use crate::common::session_with;

fn error(settings: Value) -> String {
    index_for_listing(&settings, None, None, &[]).unwrap_err()
}

#[test]
fn each_bad_value_names_the_plugin_the_key_and_the_value() {
    for (settings, message) in [
        (
            json!("yes"),
            "settings [plugins.skills]: expected a table, got `\"yes\"`",
        ),
        (
            json!({ "extra_skill_dirs": "/a" }),
            "settings [plugins.skills] extra_skill_dirs: expected a list of absolute directory paths, got `\"/a\"`",
        ),
        (
            json!({ "extra_skill_dirs": ["relative/dir"] }),
            "settings [plugins.skills] extra_skill_dirs: expected an absolute directory path or one starting with `~/`, got `\"relative/dir\"`",
        ),
        (
            json!({ "extra_skill_dirs": [3] }),
            "settings [plugins.skills] extra_skill_dirs: expected an absolute directory path or one starting with `~/`, got `3`",
        ),
        (
            json!({ "global_agents_skills_dir": 1 }),
            "settings [plugins.skills] global_agents_skills_dir: expected true, false, or an absolute directory path, got `1`",
        ),
        (
            json!({ "global_skills_dir": "skills" }),
            "settings [plugins.skills] global_skills_dir: expected an absolute directory path or one starting with `~/`, got `\"skills\"`",
        ),
        (
            json!({ "skills_dir": "" }),
            "settings [plugins.skills] skills_dir: expected a directory path, got `\"\"`",
        ),
        (
            json!({ "workspace_skills_trust": "closed" }),
            "settings [plugins.skills] workspace_skills_trust: expected `open` or `trust-store`, got `\"closed\"`",
        ),
        (
            json!({ "tool_enforcement": "block" }),
            "settings [plugins.skills] tool_enforcement: expected `off`, `deny` or `approve`, got `\"block\"`",
        ),
        (
            json!({ "allow_skill_scripts": "yes" }),
            "settings [plugins.skills] allow_skill_scripts: expected true or false, got `\"yes\"`",
        ),
        (
            json!({ "listing_budget_tokens": 0 }),
            "settings [plugins.skills] listing_budget_tokens: expected a positive integer, got `0`",
        ),
        (
            json!({ "script_timeout_secs": -1 }),
            "settings [plugins.skills] script_timeout_secs: expected a positive integer, got `-1`",
        ),
    ] {
        assert_eq!(error(settings), message);
    }
}

#[test]
fn an_unknown_key_is_an_error_listing_the_known_ones() {
    let err = error(json!({ "skill_dirs": [] }));
    assert!(
        err.starts_with(
            "settings [plugins.skills]: unknown key `skill_dirs` (known: extra_skill_dirs, "
        ),
        "{err}"
    );
}

#[test]
fn bad_settings_fail_the_agent_naming_plugin_control_tool_and_key() {
    let err = session_with(json!({ "tool_enforcement": "block" }), Vec::new())
        .err()
        .unwrap();
    for needle in [
        "plugin `skills`",
        "control tool `skill`",
        "settings [plugins.skills] tool_enforcement",
        "`\"block\"`",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err}");
    }
}

#[test]
fn good_settings_build_a_session_with_the_extension_and_the_control_tool() {
    let session = session_with(
        json!({ "allow_skill_scripts": true, "tool_enforcement": "deny" }),
        Vec::new(),
    )
    .unwrap();
    let names: Vec<&str> = session.extensions.iter().map(|e| e.name()).collect();
    assert!(names.contains(&"skills"), "{names:?}");
    assert!(names.contains(&"skills/skills"), "{names:?}");
    assert!(names.contains(&"core/control"), "{names:?}");
    let control: Vec<(&str, i64, &str)> = session
        .spec
        .control_tools
        .iter()
        .map(|c| (c.name.as_str(), c.priority, c.plugin.as_str()))
        .collect();
    assert_eq!(control, [("skill", 400, "skills")]);
    let kinds: Vec<(&str, i64)> = session
        .kinds
        .iter()
        .map(|k| (k.kind.as_str(), k.band))
        .collect();
    assert_eq!(kinds, [("skill_listing", 110)]);
}

#[test]
fn bad_settings_fail_the_session_pack_naming_plugin_pack_and_key() {
    // The agent compiled without settings, the session built with bad ones.
    let set = noeta_core::load_plugins(
        &[noeta_core::PluginSource::Linked(
            noeta_builtin_skills::plugin(),
        )],
        &noeta_core::LoadOptions::new(noeta_core::standard_registry()),
    )
    .unwrap();
    let merged = set.merged().unwrap();
    let mut options = noeta_core::AgentOptions::named("main");
    options.plugins = vec!["skills".into()];
    let compiled = noeta_core::compile_agent(
        &set,
        &merged,
        &options,
        &noeta_core::ActivationRules::default(),
    )
    .unwrap();
    let config = std::collections::BTreeMap::from([(
        "skills".to_owned(),
        json!({ "listing_budget_tokens": "lots" }),
    )]);
    let err = noeta_core::session::build_session(&set, &compiled, &config, None)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "plugin `skills`: session pack `skills` failed for agent `main`: settings [plugins.skills] listing_budget_tokens: expected a positive integer, got `\"lots\"`"
    );
}
