//! `noeta doctor` checks what `run` checks and exits 1 on any problem, naming it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

fn env() -> CliEnv {
    CliEnv::new(env!("CARGO_BIN_EXE_noeta"))
}

/// A workspace whose model is a script: nothing is wrong with it.
fn healthy() -> CliEnv {
    let env = env();
    let provider = env.script(json!([{ "text": "hi" }]));
    env.write_trusted(
        ".noeta/config.toml",
        &format!("[plugins.providers]\nprovider = \"{provider}\"\n"),
    );
    env
}

#[test]
fn a_healthy_workspace_passes_and_says_what_it_checked() {
    let env = healthy();
    env.write_trusted(
        ".noeta/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes.\n---\nReview the change.\n",
    );
    env.write(
        ".noeta/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy it.\n---\nSteps.\n",
    );
    let out = env.run(&["doctor"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    for line in [
        "settings: ok",
        "agent files: reviewer",
        "plugins: 18 loaded",
        "agents: 2 of 2 build",
        "skills: 1 indexed",
        "model: `noeta run` uses scripted (scripted)",
        "(created on the first run)",
    ] {
        assert!(text.contains(line), "{line:?} missing from {text}");
    }
    assert!(!text.contains("problem"), "{text}");

    // A store that exists is opened and counted.
    let provider = env.script(json!([{ "text": "hi" }]));
    assert!(
        env.run(&["run", "--provider", &provider, "hello"])
            .status
            .success()
    );
    let out = env.run(&["doctor"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("(1 task(s))"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("store: SQLite's quick check finds it sound"),
        "{}",
        stdout(&out)
    );
}

/// Runs doctor in `env`; asserts it fails and names `needle` in a problem line.
fn fails_naming(env: &CliEnv, needle: &str) {
    let out = env.run(&["doctor"]);
    let text = env.redact(&stdout(&out));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("problem: ") && l.contains(needle)),
        "no problem naming {needle:?} in:\n{text}"
    );
    assert!(text.contains("problem(s)"), "{text}");
}

#[test]
fn an_agent_file_without_a_description_fails_only_itself_and_doctor() {
    let env = healthy();
    env.write_trusted(
        ".claude/agents/helper.md",
        "---\nname: helper\ntools: Read\n---\nHelp.\n",
    );
    fails_naming(
        &env,
        "agent files: [WORKSPACE]/.claude/agents/helper.md: `description` is missing from the frontmatter: say what the agent is for — the model chooses agents by it",
    );
    let out = env.run(&["agents", "list"]);
    assert!(!out.status.success());
    assert!(
        env.redact(&stdout(&out))
            .contains("`description` is missing"),
        "{}",
        stdout(&out)
    );
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        env.redact(&stderr(&out)).contains(
            "warning: agent file skipped: [WORKSPACE]/.claude/agents/helper.md: `description` is missing"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_broken_agent_file_is_a_problem() {
    let env = healthy();
    env.write_trusted(
        ".noeta/agents/reviewer.md",
        "---\nname: [unclosed\ndescription: Reviews\n---\nReview.\n",
    );
    fails_naming(
        &env,
        "agent files: [WORKSPACE]/.noeta/agents/reviewer.md: invalid YAML frontmatter",
    );
    // It fails only itself: the default agent still runs, with a warning naming the file.
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = env.redact(&stderr(&out));
    assert!(
        err.contains(
            "warning: agent file skipped: [WORKSPACE]/.noeta/agents/reviewer.md: invalid YAML"
        ),
        "{err}"
    );
    let out = env.run(&[
        "run",
        "--agent",
        "reviewer",
        "--provider",
        &provider,
        "hello",
    ]);
    assert!(!out.status.success());
    assert!(
        env.redact(&stderr(&out))
            .contains("agent `reviewer` cannot be used: [WORKSPACE]/.noeta/agents/reviewer.md"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_agent_file_naming_a_plugin_nobody_loads_is_a_problem() {
    let env = healthy();
    env.write_trusted(
        ".noeta/agents/helper.md",
        "---\nname: helper\ndescription: Helps.\nplugins: [nonexistent]\n---\nHelp.\n",
    );
    fails_naming(
        &env,
        "agent `helper`: unknown plugin activation `nonexistent`",
    );
}

#[test]
fn an_unknown_key_of_a_plugin_is_a_problem() {
    let env = healthy();
    let provider = env.script(json!([{ "text": "hi" }]));
    env.write_trusted(
        ".noeta/config.toml",
        &format!("[plugins.providers]\nprovider = \"{provider}\"\n\n[plugins.fs]\nwrite_mod = \"apply\"\n"),
    );
    fails_naming(&env, "settings [plugins.fs]: unknown key `write_mod`");
}

#[test]
fn a_misspelt_plugin_table_is_a_problem_with_a_suggestion() {
    let env = healthy();
    env.write_trusted(
        ".noeta/config.toml",
        "[plugins.provider]\nprovider = \"anthropic\"\n",
    );
    fails_naming(
        &env,
        "settings: [plugins.provider] names no plugin or extension this host has — did you mean `providers`?",
    );
}

#[test]
fn plugins_check_names_a_misspelt_plugin_table_too_and_a_known_one_passes() {
    let env = healthy();
    env.write_trusted(
        ".noeta/config.toml",
        "[plugins.provider]\nprovider = \"anthropic\"\n",
    );
    let out = env.run(&["plugins", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "settings: [plugins.provider] names no plugin or extension this host has — did you mean `providers`?"
        ),
        "{}",
        stdout(&out)
    );
    // A named extension's table (`hooks` of `governance`) is known.
    env.write_trusted(".noeta/config.toml", "[plugins.permissions]\n");
    let out = env.run(&["plugins", "check"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn a_broken_skill_is_a_problem_and_a_shadowed_one_is_not() {
    let env = healthy();
    env.write(
        ".noeta/skills/broken/SKILL.md",
        "---\nname: broken\n---\nNo description.\n",
    );
    env.write(
        ".noeta/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy it.\n---\nSteps.\n",
    );
    env.write(
        ".agents/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Older.\n---\nSteps.\n",
    );
    fails_naming(
        &env,
        "skill [WORKSPACE]/.noeta/skills/broken/SKILL.md (workspace): the frontmatter has no `description`",
    );
    let out = env.run(&["doctor"]);
    assert_eq!(
        stdout(&out).matches("problem: ").count(),
        1,
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_broken_manifest_and_a_damaged_store_are_problems() {
    let env = healthy();
    env.user_plugin(
        "broken",
        "name = \"broken\"\n\n[[contributions]]\nsurface = \"tools\"\nname = \"x\"\n",
    );
    fails_naming(
        &env,
        "plugins: manifest file `[HOME]/.noeta/plugins/broken/noeta-plugin.toml`",
    );

    let env = healthy();
    env.write(".noeta/noeta.db", "this is not an SQLite database, just text that is long enough to look like a header but is not one at all");
    fails_naming(&env, "store [WORKSPACE]/.noeta/noeta.db");
}

#[test]
fn a_store_with_damaged_pages_is_a_problem_naming_what_sqlite_found() {
    let env = healthy();
    for goal in ["one", "two", "three"] {
        let provider =
            env.script(json!([{ "text": "a reply long enough to fill a page ".repeat(40) }]));
        assert!(
            env.run(&["run", "--provider", &provider, goal])
                .status
                .success()
        );
    }
    // The last page loses its page type: the store still opens and lists its tasks.
    let path = env.workspace.join(".noeta/noeta.db");
    let mut bytes = std::fs::read(&path).unwrap();
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    assert!(bytes.len() >= 3 * page, "a store of {} bytes", bytes.len());
    let last = bytes.len() - page;
    bytes[last] = 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let out = env.run(&["doctor"]);
    let text = env.redact(&stdout(&out));
    assert!(text.contains("(3 task(s))"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines().any(|l| l
            == "problem: store [WORKSPACE]/.noeta/noeta.db is damaged; SQLite's quick check says: database disk image is malformed \
                — `noeta store check` says more, `noeta store salvage NEW.db` copies what is readable"),
        "{text}"
    );
}

#[test]
fn no_model_is_a_problem() {
    let env = env();
    fails_naming(&env, "model: no model is configured");
}

/// A server on the loopback interface answering every request with `status` and `body`; its
/// base URL, and the request lines and headers it received.
fn endpoint(
    status: u16,
    body: &'static str,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let mut reader = BufReader::new(socket.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            log.lock().unwrap().push(head);
            let answer = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes());
        }
    });
    (base, seen)
}

#[test]
fn online_the_model_endpoint_is_asked_whether_it_answers_and_takes_the_key() {
    let env = env();
    // Answers: the models are listed with the key, by GET, without a model call.
    let (base, seen) = endpoint(200, r#"{"data": [{"id": "claude-test"}]}"#);
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-test"),
        ("ANTHROPIC_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(&["doctor", "--online"], None, &vars);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains(&format!(
            "model: reachable: GET {base}/v1/models: HTTP 200 OK"
        )),
        "{text}"
    );
    let requests = seen.lock().unwrap().join("");
    assert!(requests.starts_with("GET /v1/models "), "{requests}");
    assert!(
        requests.to_lowercase().contains("x-api-key: sk-test"),
        "{requests}"
    );
    // Without --online nothing is asked.
    let (quiet, untouched) = endpoint(200, "{}");
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-test"),
        ("ANTHROPIC_BASE_URL", quiet.as_str()),
    ];
    assert!(env.run_with(&["doctor"], None, &vars).status.success());
    assert!(untouched.lock().unwrap().is_empty());

    // A key the endpoint refuses is a problem naming the endpoint and what it said.
    let (base, _) = endpoint(
        401,
        r#"{"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}"#,
    );
    let vars = [
        ("OPENAI_API_KEY", "sk-bad"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(&["doctor", "--online"], None, &vars);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("problem: model: openai is not reachable: ")
            && text.contains(&format!("openai: GET {base}/models: HTTP 401"))
            && text.contains("invalid x-api-key"),
        "{text}"
    );

    // Nothing listening: the transport error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let vars = [
        ("ANTHROPIC_API_KEY", "sk-test"),
        ("ANTHROPIC_BASE_URL", base.as_str()),
    ];
    let out = env.run_with(&["doctor", "--online"], None, &vars);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("problem: model: anthropic is not reachable: "),
        "{text}"
    );
    assert!(text.contains(&base), "{text}");

    // A scripted model has nothing to reach.
    let env = healthy();
    let out = env.run(&["doctor", "--online"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("model: scripted has no endpoint to reach"));
}
