//! A Claude Code plugin's `userConfig`: options read from `plugin.json`, values from the
//! settings, and `${user_config.KEY}` substituted per place (hook commands, MCP specs,
//! command files).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::collections::BTreeMap;

use noeta::user_config::{UserOption, UserValues, env_name};
use serde_json::{Value, json};

/// The options of a plugin.json holding `user_config`, read through a plugin directory.
fn options(user_config: Value) -> Result<BTreeMap<String, UserOption>, String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    std::fs::create_dir_all(root.join(".claude-plugin")).unwrap();
    std::fs::write(
        root.join(".claude-plugin/plugin.json"),
        json!({ "name": "p", "userConfig": user_config }).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("commands")).unwrap();
    let paths = noeta::HostPaths {
        home: Some(dir.path().join("home")),
        workspace: dir.path().join("ws"),
    };
    let found = noeta::claude_plugins::discover(&paths, std::slice::from_ref(&root));
    match found.plugins.first() {
        Some(plugin) => Ok(plugin.user_config.clone()),
        None => Err(found.problems.join("\n")),
    }
}

fn values() -> UserValues {
    let options = options(json!({
        "endpoint": { "type": "string", "title": "Endpoint" },
        "token": { "type": "string", "sensitive": true },
        "retries": { "type": "number", "default": 3 }
    }))
    .unwrap();
    let params = json!({ "config": { "endpoint": "https://x.example", "token": "{env:TOKEN}" } });
    let (values, warnings) = UserValues::read("p", &options, &params);
    assert!(warnings.is_empty(), "{warnings:?}");
    values
}

#[test]
fn options_are_substituted_per_place_and_a_secret_never_stands_in_a_command() {
    let values = values();
    assert_eq!(
        values.in_command("run ${user_config.endpoint} ${user_config.token} ${user_config.retries} ${user_config.other}"),
        "run https://x.example ${CLAUDE_PLUGIN_OPTION_TOKEN} 3 ${user_config.other}"
    );
    assert_eq!(values.in_spec("${user_config.token}"), "{env:TOKEN}");
    assert_eq!(
        values.in_content("at ${user_config.endpoint}, not ${user_config.token}"),
        "at https://x.example, not ${user_config.token}"
    );
    assert_eq!(values.env()["CLAUDE_PLUGIN_OPTION_TOKEN"], "{env:TOKEN}");
    assert_eq!(env_name("api_key"), "CLAUDE_PLUGIN_OPTION_API_KEY");
    assert_eq!(
        values.public().keys().collect::<Vec<_>>(),
        ["endpoint", "retries"]
    );
    assert!(values.sensitive_inside("${user_config.token}").is_empty());
    assert_eq!(
        values.sensitive_inside("Bearer ${user_config.token}"),
        ["token"]
    );

    let hooks = values.in_hooks(&json!({ "PreToolUse": [{ "hooks": [
        { "type": "command", "command": "check ${user_config.token}" }
    ] }] }));
    let hook = &hooks["PreToolUse"][0]["hooks"][0];
    assert_eq!(hook["command"], "check ${CLAUDE_PLUGIN_OPTION_TOKEN}");
    assert_eq!(
        hook["env"]["CLAUDE_PLUGIN_OPTION_ENDPOINT"],
        "https://x.example"
    );
}

#[test]
fn missing_and_plain_sensitive_values_are_said_and_bad_options_name_the_field() {
    let declared = options(json!({ "token": { "sensitive": true }, "region": {} })).unwrap();
    let (_, warnings) = UserValues::read(
        "p",
        &declared,
        &json!({ "config": { "token": "plain-secret" } }),
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("`region` has no value")));
    assert!(warnings.iter().any(|w| w.contains("`token` is sensitive")));
    assert!(!warnings.iter().any(|w| w.contains("plain-secret")));

    for (bad, field) in [
        (
            json!({ "token": { "sensitive": "yes" } }),
            "`userConfig.token.sensitive` must be true or false",
        ),
        (
            json!({ "token": 3 }),
            "`userConfig.token` must be an object",
        ),
        (
            json!({ "to ken": {} }),
            "`userConfig.to ken`: an option's key is letters",
        ),
        (
            json!({ "t": { "default": [1] } }),
            "`userConfig.t.default` must be text",
        ),
        (json!([1]), "`userConfig` must be an object of options"),
    ] {
        let err = options(bad).unwrap_err();
        assert!(err.contains(field) && err.contains("plugin.json"), "{err}");
    }
}
