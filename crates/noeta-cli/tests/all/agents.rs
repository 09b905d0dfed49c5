//! `noeta agents list`: the presets, agent files (Claude Code's included) with their tools and
//! the tools they name that nothing offers, and a broken file with its error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

fn listed(env: &CliEnv) -> (bool, Vec<Value>) {
    let out = env.run(&["agents", "list", "--json"]);
    let rows = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.success(), rows)
}

fn row<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no agent `{name}` in {rows:?}"))
}

#[test]
fn the_presets_and_agent_files_are_listed_with_their_tools() {
    let env = CliEnv::new(NOETA);
    let (ok, rows) = listed(&env);
    assert!(ok);
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names[0], "main");
    assert!(names.contains(&"explore"), "{names:?}");
    let explore = row(&rows, "explore");
    assert_eq!(explore["kind"], "preset");
    assert!(
        explore["tools"]
            .as_array()
            .unwrap()
            .contains(&"Read".into())
    );
    assert!(
        !explore["tools"]
            .as_array()
            .unwrap()
            .contains(&"Write".into())
    );

    env.write_trusted(
        ".claude/agents/code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Use this agent when: a review is asked for\n\
         tools: Read, Grep, LS\ncolor: blue\n---\nReview.\n",
    );
    let (ok, rows) = listed(&env);
    assert!(ok);
    let reviewer = row(&rows, "code-reviewer");
    assert_eq!(reviewer["kind"], "agent file");
    assert!(
        reviewer["source"]
            .as_str()
            .unwrap()
            .ends_with(".claude/agents/code-reviewer.md")
    );
    assert_eq!(
        reviewer["description"],
        "Use this agent when: a review is asked for"
    );
    let tools = reviewer["tools"].as_array().unwrap();
    assert!(
        tools.contains(&"Read".into()) && tools.contains(&"Grep".into()),
        "{tools:?}"
    );
    assert!(!tools.contains(&"Bash".into()), "{tools:?}");
    assert_eq!(reviewer["unknown_tools"], serde_json::json!(["LS"]));
    let main = row(&rows, "main");
    assert!(main["tools"].as_array().unwrap().contains(&"Task".into()));
}

#[test]
fn a_broken_agent_file_is_listed_with_its_error_and_the_exit_is_one() {
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".noeta/agents/broken.md",
        "---\nname: [unclosed\n---\nBody\n",
    );
    let (ok, rows) = listed(&env);
    assert!(!ok);
    let broken = row(&rows, "broken");
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains(".noeta/agents/broken.md: invalid YAML frontmatter"),
        "{broken}"
    );
    assert!(row(&rows, "main")["error"].is_null());
    let text = env.run(&["agents", "list"]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    assert!(
        stdout(&text).contains("broken  (agent file: "),
        "{}",
        stdout(&text)
    );
}

#[test]
fn run_names_the_tools_an_agent_file_lists_that_no_plugin_offers_and_runs_without_them() {
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".claude/agents/lister.md",
        "---\nname: lister\ndescription: Lists things\ntools: Read, LS, MultiEdit, Glob\n---\nList.\n",
    );
    let provider = env.script(json!([{ "text": "listed" }]));
    let out = env.run(&["run", "--agent", "lister", "--provider", &provider, "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), "listed");
    let err = stderr(&out);
    assert_eq!(
        err.matches("tools not offered by any plugin").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains(
            "warning: agent `lister`: tools not offered by any plugin, left out: LS, MultiEdit"
        ),
        "{err}"
    );
}

#[test]
fn an_agent_file_runs_on_its_own_model_when_the_provider_knows_it() {
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".noeta/agents/fast.md",
        "---\nname: fast\ndescription: Quick answers\nmodel: gpt-4o-mini\n---\nBe quick.\n",
    );
    env.write_trusted(
        ".noeta/agents/aliased.md",
        "---\nname: aliased\ndescription: Claude Code alias\nmodel: haiku\n---\nHi.\n",
    );
    let (base, server) = noeta_testkit::http::openai_text_server(2, "done");
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(
        &[
            "run",
            "--agent",
            "fast",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "hi",
        ],
        None,
        &vars,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), "done");
    let out = env.run_with(
        &[
            "run",
            "--agent",
            "aliased",
            "--provider",
            "openai",
            "--model",
            "gpt-4.1",
            "hi",
        ],
        None,
        &vars,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`model: haiku` is not a model the `openai` provider knows; it runs on the run's model `gpt-4.1`"),
        "{}",
        stderr(&out)
    );
    let models: Vec<Value> = server
        .join()
        .unwrap()
        .iter()
        .map(|b| b["model"].clone())
        .collect();
    assert_eq!(models, [json!("gpt-4o-mini"), json!("gpt-4.1")]);
}
