//! Property tests: a settings file, an agent file or a secret reference of any text —
//! arbitrary, shaped like the real thing, or a valid one with a piece changed — parses or is
//! refused naming its file; it never panics. Inputs that once broke a parser are kept in
//! `proptest-regressions/`.

use std::path::Path;

use noeta::secrets::SecretRef;
use noeta::{AgentFile, Layer, Settings};
use noeta_testkit::fuzz;
use proptest::prelude::*;

const SETTINGS_FILE: &str = "/home/fuzz/.noeta/config.toml";
const AGENT_FILE: &str = "/work/fuzz/.noeta/agents/reviewer.md";

const SETTINGS_KEYS: &[&str] = &[
    "enabled",
    "add_plugins",
    "allowed_plugins",
    "blocked_plugins",
    "disabled",
    "plugins",
    "agents",
    "policy",
    "model",
    "provider",
    "api_key",
    "shell_mode",
    "shell_allowlist",
    "write_mode",
    "max_retries",
    "max_retry_time_ms",
    "idle_timeout_ms",
    "compaction",
    "env",
    "command",
    "tools",
    "description",
];
const SETTINGS_TABLES: &[&str] = &[
    "plugins",
    "plugins.fs",
    "plugins.providers",
    "plugins.react",
    "plugins.web",
    "plugins.governance",
    "agents",
    "agents.main",
    "agents.reviewer.plugins",
    "policy",
];
const VALID_SETTINGS: &str = r#"[plugins.web]
enabled = false

[plugins.providers]
max_retries = 3
idle_timeout_ms = 90000

[plugins.fs]
shell_mode = "allowlist"
shell_allowlist = ["cargo test", "git status"]
"#;

const AGENT_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "model",
    "plugins",
    "enabled",
    "agents",
    "structured_output",
    "color",
    "permissionMode",
    "skills",
    "mcpServers",
    "hooks",
    "disallowedTools",
];
const VALID_AGENT: &str = "---\nname: reviewer\ndescription: Reviews a change for bugs.\ntools: Read, Grep, Glob\n---\nYou review changes. Say what is wrong and where.\n";

fn check_settings(text: &str) -> Result<(), TestCaseError> {
    for layer in [Layer::User, Layer::Project, Layer::Flags] {
        if let Err(err) = Settings::parse(text, SETTINGS_FILE, layer) {
            let message = err.to_string();
            prop_assert!(message.contains(SETTINGS_FILE), "{message}");
        }
    }
    Ok(())
}

fn check_agent(text: &str) -> Result<(), TestCaseError> {
    if let Err(err) = AgentFile::parse(text, Path::new(AGENT_FILE)) {
        let message = err.to_string();
        prop_assert!(message.contains(AGENT_FILE), "{message}");
    }
    Ok(())
}

#[test]
fn the_valid_files_the_changes_start_from_are_valid() {
    Settings::parse(VALID_SETTINGS, SETTINGS_FILE, Layer::User).unwrap();
    let agent = AgentFile::parse(VALID_AGENT, Path::new(AGENT_FILE)).unwrap();
    assert_eq!(agent.name, "reviewer");
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn settings_of_any_text_are_parsed_or_refused(text in fuzz::any_text()) {
        check_settings(&text)?;
    }

    #[test]
    fn settings_shaped_toml_is_parsed_or_refused(
        text in fuzz::toml_doc(SETTINGS_KEYS, SETTINGS_TABLES),
    ) {
        check_settings(&text)?;
    }

    #[test]
    fn valid_settings_changed_are_parsed_or_refused(
        text in fuzz::mutated(VALID_SETTINGS.to_owned()),
    ) {
        check_settings(&text)?;
    }

    #[test]
    fn an_agent_file_of_any_text_is_parsed_or_refused(text in fuzz::any_text()) {
        check_agent(&text)?;
    }

    #[test]
    fn an_agent_file_shaped_like_one_is_parsed_or_refused(
        text in fuzz::frontmatter_doc(AGENT_KEYS),
    ) {
        check_agent(&text)?;
    }

    #[test]
    fn a_valid_agent_file_changed_is_parsed_or_refused(
        text in fuzz::mutated(VALID_AGENT.to_owned()),
    ) {
        check_agent(&text)?;
    }

    #[test]
    fn a_secret_reference_of_any_text_is_read_or_refused(
        text in prop_oneof![
            fuzz::any_text(),
            "\\{(env|keyring|ENV|file)?:?[a-zA-Z0-9_/:{}-]{0,20}\\}?",
        ],
    ) {
        if let Some(Ok(reference)) = SecretRef::parse(&text) {
            // What it reads back to names the same secret.
            prop_assert_eq!(
                SecretRef::parse(&reference.to_string()).and_then(Result::ok),
                Some(reference)
            );
        }
    }
}
