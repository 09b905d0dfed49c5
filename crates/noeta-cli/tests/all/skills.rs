//! `noeta skills list` on a temporary workspace and home: tiers, shadowing, skipped skills with
//! their reasons, plugin-contributed directories, settings errors, and byte-stable JSON.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::Output;

use noeta_testkit::cli::CliEnv;

use serde_json::{Value, json};

/// A fresh home and workspace for the real binary.
fn new_env() -> CliEnv {
    CliEnv::new(env!("CARGO_BIN_EXE_noeta"))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn skill(dir: &Path, name: &str, description: &str) -> PathBuf {
    let path = dir.join(name).join("SKILL.md");
    write(
        &path,
        &format!("---\nname: {name}\ndescription: {description}\n---\nSteps.\n"),
    );
    path
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A workspace with a skill in each workspace tier (one shadowed), a broken one, a user
/// plugin contributing a directory, and a home tier switched on.
fn populated() -> (CliEnv, PathBuf, PathBuf, PathBuf, PathBuf, PathBuf) {
    let env = new_env();
    let deploy = skill(&env.workspace.join(".noeta/skills"), "deploy", "Deploy it.");
    let shadowed = skill(&env.workspace.join(".agents/skills"), "deploy", "Older.");
    let broken = env.workspace.join(".noeta/skills/broken/SKILL.md");
    write(&broken, "---\nname: broken\n---\nNo description.\n");
    let plugin_skills = env.home.join("house-skills");
    let style = skill(&plugin_skills, "house-style", "Write like the house.");
    write(
        &env.home.join(".noeta/plugins/house/noeta-plugin.toml"),
        &format!(
            "name = \"house\"\nversion = \"1.0.0\"\n\n[[contributions]]\nsurface = \"skills\"\nname = \"style\"\npath = \"{}\"\n",
            plugin_skills.display()
        ),
    );
    write(
        &env.home.join(".noeta/config.toml"),
        "[plugins.skills]\nglobal_skills_dir = true\n",
    );
    let personal = skill(&env.home.join(".noeta/skills"), "personal", "Mine.");
    (env, deploy, shadowed, broken, style, personal)
}

#[test]
fn json_lists_indexed_and_skipped_skills_with_tiers_and_sources() {
    let (env, deploy, shadowed, broken, style, personal) = populated();
    let out = env.run(&["skills", "list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    let skills: Vec<(String, String, String)> = listing["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["tier"].as_str().unwrap().to_owned(),
                s["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let text = |p: &Path| p.to_string_lossy().into_owned();
    assert_eq!(
        skills,
        vec![
            ("deploy".to_owned(), "workspace".to_owned(), text(&deploy)),
            ("house-style".to_owned(), "plugin".to_owned(), text(&style)),
            ("personal".to_owned(), "global".to_owned(), text(&personal)),
        ]
    );
    let skipped: Vec<(String, String)> = listing["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap().to_owned(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        vec![
            (
                text(&shadowed),
                format!(
                    "shadowed by the workspace tier's `deploy` at `{}`",
                    deploy.display()
                )
            ),
            (
                text(&broken),
                "the frontmatter has no `description`".to_owned()
            ),
        ]
    );
    let tiers: Vec<(String, String)> = listing["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tier"].as_str().unwrap().to_owned(),
                t["origin"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        tiers,
        vec![
            ("plugin".to_owned(), "house".to_owned()),
            ("global".to_owned(), "global_skills_dir".to_owned()),
            ("workspace-agents".to_owned(), "workspace".to_owned()),
            ("workspace-claude".to_owned(), "workspace".to_owned()),
            ("workspace".to_owned(), "workspace".to_owned()),
        ]
    );
    assert_eq!(listing["skills"][0]["model_invocable"], json!(true));
}

#[test]
fn json_output_is_byte_deterministic() {
    let (env, ..) = populated();
    let first = env.run(&["skills", "list", "--json"]);
    let second = env.run(&["skills", "list", "--json"]);
    assert!(first.status.success());
    assert_eq!(first.stdout, second.stdout);
}

#[test]
fn text_lists_tiers_skills_and_skipped_ones() {
    let (env, deploy, _, broken, ..) = populated();
    let out = env.run(&["skills", "list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    for needle in [
        "tiers (lowest precedence first):\n".to_owned(),
        "skills (3):\n".to_owned(),
        format!(
            "  deploy (workspace) {}\n    Deploy it.\n",
            deploy.display()
        ),
        "skipped (2):\n".to_owned(),
        format!(
            "  {} (workspace): the frontmatter has no `description`\n",
            broken.display()
        ),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from:\n{text}");
    }
}

#[test]
fn an_empty_workspace_lists_its_three_missing_tiers() {
    let env = new_env();
    let out = env.run(&["skills", "list", "--json"]);
    assert!(out.status.success());
    let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listing["skills"], json!([]));
    assert_eq!(listing["skipped"], json!([]));
    let states: Vec<&str> = listing["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["missing (an empty tier)"; 3]);
}

#[test]
fn a_bad_setting_fails_naming_the_plugin_key_and_value() {
    let env = new_env();
    write(
        &env.home.join(".noeta/config.toml"),
        "[plugins.skills]\ntool_enforcement = \"block\"\n",
    );
    let out = env.run(&["skills", "list"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "settings [plugins.skills] tool_enforcement: expected `off`, `deny` or `approve`, got `\"block\"`"
        ),
        "{err}"
    );
}
