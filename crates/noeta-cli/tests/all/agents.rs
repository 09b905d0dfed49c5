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
        stderr(&out).contains("`model: haiku` (agent `aliased`) names no model of the `openai` provider; it runs on the run's model `gpt-4.1` — map it with `[plugins.providers] model_aliases`"),
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

#[test]
fn an_alias_mapped_in_the_settings_runs_the_agent_on_that_model() {
    let env = CliEnv::new(NOETA);
    env.write_trusted(
        ".noeta/agents/aliased.md",
        "---\nname: aliased\ndescription: Claude Code alias\nmodel: haiku\n---\nHi.\n",
    );
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(
        env.home.join(".noeta/config.toml"),
        "[plugins.providers.model_aliases]\nhaiku = \"gpt-4o-mini\"\n",
    )
    .unwrap();
    let (base, server) = noeta_testkit::http::openai_text_server(1, "done");
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
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
    assert!(!stderr(&out).contains("model_aliases"), "{}", stderr(&out));
    let models: Vec<Value> = server
        .join()
        .unwrap()
        .iter()
        .map(|b| b["model"].clone())
        .collect();
    assert_eq!(models, [json!("gpt-4o-mini")]);
}

/// The `Task` tool of the first request `body` (an OpenAI chat request) and its description.
fn task_description(body: &Value) -> String {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "Task")
        .unwrap_or_else(|| panic!("no Task tool in {body}"))["function"]["description"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Twenty agent files in the shape the community collections use (a long description with
/// `<example>` blocks, a `tools` line on some).
fn twenty_agents(env: &CliEnv) {
    for i in 0..20 {
        let tools = if i % 2 == 0 {
            "tools: Read, Grep, Glob\n"
        } else {
            ""
        };
        let examples = "<example>Context: the user asks for it. user: \"do the thing\" \
                        assistant: \"I'll use the agent\"</example> "
            .repeat(8);
        env.write_trusted(
            format!(".claude/agents/agent-{i:02}.md"),
            &format!(
                "---\nname: agent-{i:02}\ndescription: Expert number {i} for its own kind of work. \
                 Use PROACTIVELY when the work is of kind {i}. {examples}\n{tools}model: inherit\n---\n\
                 You are agent {i}.\n"
            ),
        );
    }
}

#[test]
fn the_model_reads_each_agents_description_and_tools_within_the_listing_budget() {
    let env = CliEnv::new(NOETA);
    twenty_agents(&env);
    let (base, server) = noeta_testkit::http::openai_text_server(1, "done");
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(
        &["run", "--provider", "openai", "--model", "gpt-4.1", "hi"],
        None,
        &vars,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let bodies = server.join().unwrap();
    let description = task_description(&bodies[0]);
    let (_, listing) = description
        .split_once("Agents you can hand work to")
        .unwrap_or_else(|| panic!("no agent listing in {description}"));
    // The default budget is 3,000 tokens (4 bytes each).
    assert!(
        listing.len() <= 12_000,
        "{} bytes: {listing}",
        listing.len()
    );
    // Each agent file is named with the start of its description; those with a `tools` line
    // with their tools. The presets too.
    for i in 0..20 {
        let line = listing
            .lines()
            .find(|l| l.starts_with(&format!("- agent-{i:02}: ")))
            .unwrap_or_else(|| panic!("agent-{i:02} is not listed in {listing}"));
        assert!(
            line.contains(&format!("Expert number {i} for its own kind of work.")),
            "{line}"
        );
        if i % 2 == 0 {
            assert!(line.contains("(tools: Read, Grep, Glob"), "{line}");
        } else {
            assert!(line.ends_with("(tools: every tool)"), "{line}");
        }
    }
    assert!(listing.contains("\n- explore: "), "{listing}");
    assert!(
        !listing.contains("more agents are not described"),
        "{listing}"
    );
}

#[test]
fn over_a_small_budget_the_listing_says_how_many_agents_it_left_out() {
    let env = CliEnv::new(NOETA);
    twenty_agents(&env);
    env.write(
        ".noeta/config.toml",
        "[plugins.subagents]\nlisting_budget_tokens = 300\n",
    );
    // A budget tunes what the model reads: an untrusted project may set it.
    let (base, server) = noeta_testkit::http::openai_text_server(1, "done");
    let vars = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(
        &["run", "--provider", "openai", "--model", "gpt-4.1", "hi"],
        None,
        &vars,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let description = task_description(&server.join().unwrap()[0]);
    let (_, listing) = description
        .split_once("Agents you can hand work to")
        .unwrap();
    assert!(listing.len() <= 1_200, "{} bytes: {listing}", listing.len());
    let listed = listing.lines().filter(|l| l.starts_with("- ")).count();
    assert!(listed > 0, "{listing}");
    assert!(
        listing.contains("more agents are not described here for lack of room: every agent's name is among `subagent_type`'s values."),
        "{listing}"
    );
}

#[test]
fn a_bad_listing_budget_is_an_error_naming_the_setting() {
    let env = CliEnv::new(NOETA);
    env.write(
        ".noeta/config.toml",
        "[plugins.delegation]\nlisting_budget_tokens = 0\n",
    );
    env.trust();
    let out = env.run(&["run", "--provider", "scripted:none", "hi"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("delegation") && err.contains("listing_budget_tokens"),
        "{err}"
    );
}
