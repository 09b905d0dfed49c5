//! Claude Code plugin directories under `~/.noeta/plugins`, laid out as the public Claude Code
//! plugins are (`.claude-plugin/plugin.json` with a custom commands path, and the bare
//! layout): listed and checked, their agents run as subagents through `Task`, their commands
//! expand with `${CLAUDE_PLUGIN_ROOT}`, their skills are indexed, their PreToolUse hook reads
//! `CLAUDE_PLUGIN_ROOT` and blocks, their MCP server starts; a malformed `plugin.json` fails
//! only that plugin.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::PathBuf;

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// Writes the `safety` plugin (with `plugin.json`) under `~/.noeta/plugins`; its root.
fn safety_plugin(env: &CliEnv) -> PathBuf {
    let root = env.home.join(".noeta/plugins/safety");
    let put = |path: &str, text: &str| {
        env.write(root.join(path).to_str().unwrap(), text);
    };
    put(
        ".claude-plugin/plugin.json",
        r#"{"name": "safety", "version": "1.2.0", "description": "Guards the workspace",
            "author": {"name": "A. Maintainer"}, "commands": "./extra-commands"}"#,
    );
    put(
        "agents/checker.md",
        "---\nname: checker\ndescription: Use this agent when: something must be checked\n\
         tools: Read, Grep\ncolor: red\n---\nYou check things.\n",
    );
    put(
        "commands/check.md",
        "---\ndescription: Check a part\nargument-hint: <part>\n---\n\
         Check $ARGUMENTS against ${CLAUDE_PLUGIN_ROOT}/rules.txt; notes in ${CLAUDE_PLUGIN_DATA}.\n",
    );
    put("extra-commands/more.md", "More checks of $ARGUMENTS.\n");
    put(
        "skills/lint-rules/SKILL.md",
        "---\nname: lint-rules\ndescription: The house lint rules.\n---\nRules.\n",
    );
    put(
        "hooks/hooks.json",
        r#"{"description": "guards", "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/guard.sh", "timeout": 10}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
    );
    put(
        "hooks/guard.sh",
        "if grep -q 'rm -rf build'; then\n  echo \"blocked by $(basename \"$CLAUDE_PLUGIN_ROOT\")\" >&2\n  exit 2\nfi\n",
    );
    put(
        ".mcp.json",
        &json!({ "mcpServers": { "everything": {
            "command": noeta_testkit::npm::reference_server("mcp-server-everything"),
            "args": ["stdio"]
        } } })
        .to_string(),
    );
    put("monitors/watch.json", "{}");
    root
}

/// The first user message of the latest task, whole.
fn first_message(env: &CliEnv) -> String {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    stdout(&env.run(&["log", task["id"].as_str().unwrap(), "--json"]))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "user_message")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .unwrap()
}

/// The latest task's id.
fn last_task(env: &CliEnv) -> String {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    task["id"].as_str().unwrap().to_owned()
}

/// The latest task's events.
fn last_log(env: &CliEnv) -> String {
    stdout(&env.run(&["log", "--json", &last_task(env)]))
}

#[test]
fn a_claude_code_plugin_is_listed_with_what_it_brings_and_what_is_not_loaded() {
    let env = CliEnv::new(NOETA);
    let root = safety_plugin(&env);
    // The bare layout: no plugin.json, named after its directory.
    env.write(
        env.home
            .join(".noeta/plugins/bare/commands/hello.md")
            .to_str()
            .unwrap(),
        "Say hello.\n",
    );
    let out = env.run(&["plugins", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "safety 1.2.0 (claude-code, {}): agents 1, commands 2, skills 1, hooks PreToolUse 1 SessionEnd 1, MCP servers 1; not loaded: monitors",
            root.display()
        )),
        "{text}"
    );
    assert!(text.contains("bare (no version) (claude-code, "), "{text}");
    let listed: Value =
        serde_json::from_str(&stdout(&env.run(&["plugins", "list", "--json"]))).unwrap();
    let plugins = listed["claude_code_plugins"]["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 2);
    let safety = plugins.iter().find(|p| p["name"] == "safety").unwrap();
    assert_eq!(safety["components"]["agents"], 1);
    assert_eq!(safety["components"]["mcp_servers"], json!(["everything"]));
    assert_eq!(safety["not_loaded"], json!(["monitors"]));

    let skills = stdout(&env.run(&["skills", "list"]));
    assert!(skills.contains("safety:lint-rules (plugin) "), "{skills}");
    let agents = stdout(&env.run(&["agents", "list"]));
    assert!(agents.contains("safety:checker  (agent file: "), "{agents}");
    let mcp = stdout(&env.run(&["mcp", "list"]));
    assert!(mcp.contains("mcp__plugin_safety_everything__echo"), "{mcp}");
}

#[test]
fn the_plugins_hook_knows_its_root_and_blocks_with_its_message() {
    let env = CliEnv::new(NOETA);
    safety_plugin(&env);
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "rm -rf build" } }] },
        { "text": "could not clean" }
    ]));
    let out = env.run(&["run", "--provider", &provider, "clean up"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = last_log(&env);
    assert!(
        log.contains("\"outcome\":\"denied\",\"text\":\"blocked by safety\""),
        "{log}"
    );
    assert!(
        log.contains(
            "/safety/hooks/hooks.json: hooks.SessionEnd[0]: noeta does not run `SessionEnd` hooks"
        ),
        "{log}"
    );
}

#[test]
fn the_plugins_commands_and_agents_are_named_after_it() {
    let env = CliEnv::new(NOETA);
    let root = safety_plugin(&env);
    let provider = env.script(json!([{ "text": "checked" }]));
    let out = env.run(&["run", "--provider", &provider, "/safety:check the parser"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let data = env.home.join(".noeta/plugin-data/safety");
    assert_eq!(
        first_message(&env),
        format!(
            "Check the parser against {}/rules.txt; notes in {}.",
            root.display(),
            data.display()
        )
    );
    assert!(data.is_dir(), "CLAUDE_PLUGIN_DATA is made on first use");

    std::fs::write(env.workspace.join("notes.txt"), "all good\n").unwrap();
    let provider = env.script_file(json!({
        "turns": [
            { "calls": [{ "name": "Task", "input": {
                "description": "check the notes",
                "prompt": "Read notes.txt",
                "subagent_type": "safety:checker"
            } }] },
            { "text": "The checker is happy." }
        ],
        "agents": { "safety:checker": { "turns": [
            { "calls": [{ "name": "Read", "input": { "file_path": "notes.txt" } }] },
            { "text": "notes.txt says all good." }
        ] } }
    }));
    let out = env.run(&["run", "--provider", &provider, "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().last(), Some("The checker is happy."));
    assert!(
        stderr(&out).contains("● Read(notes.txt)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_malformed_plugin_json_fails_only_that_plugin_and_an_empty_directory_is_no_plugin() {
    let env = CliEnv::new(NOETA);
    safety_plugin(&env);
    let broken = env
        .home
        .join(".noeta/plugins/broken/.claude-plugin/plugin.json");
    env.write(
        broken.to_str().unwrap(),
        r#"{"name": "broken", "commands": 7}"#,
    );
    let out = env.run(&["plugins", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!(
            "problem: {}: `commands` must be a path or a list of paths relative to the plugin",
            broken.display()
        )),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("checked safety 1.2.0 (claude-code, "),
        "{}",
        stdout(&out)
    );
    let doctor = stdout(&env.run(&["doctor"]));
    assert!(doctor.contains("problem: plugins: "), "{doctor}");
    // The rest still runs.
    let provider = env.script(json!([{ "text": "fine" }]));
    let out = env.run(&["run", "--provider", &provider, "/safety:more things"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(first_message(&env), "More checks of things.");

    let empty = env.root().join("nothing-here");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env.run(&["plugins", "check", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("holds no plugin"), "{}", stdout(&out));
}

#[test]
fn a_trusted_workspace_plugin_loads_but_never_starts_an_mcp_server() {
    let env = CliEnv::new(NOETA);
    let plugins = env.workspace.join(".noeta/plugins");
    env.write(
        ".noeta/plugins/local/.mcp.json",
        r#"{"mcpServers": {"sneaky": {"command": "sh", "args": ["-c", "touch started"]}}}"#,
    );
    env.write(".noeta/plugins/local/commands/hi.md", "Hi $ARGUMENTS\n");
    // Untrusted: not read at all.
    assert!(!stdout(&env.run(&["plugins", "list"])).contains("local (no version)"));
    let trusted = env.run(&["trust", plugins.to_str().unwrap()]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    let text = stdout(&env.run(&["plugins", "list"]));
    assert!(
        text.contains(
            "MCP servers 0; not loaded: MCP server `sneaky` (a workspace plugin never starts one)"
        ),
        "{text}"
    );
    let provider = env.script(json!([{ "text": "hello" }]));
    let out = env.run(&["run", "--provider", &provider, "/local:hi there"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!env.workspace.join("started").exists());
}

#[test]
fn hooks_json_files_outside_plugins_run_and_a_projects_only_once_trusted() {
    let env = CliEnv::new(NOETA);
    let guard = |word: &str| {
        json!({ "hooks": { "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command",
            "command": format!("if grep -q '{word}'; then echo \"no {word} in $CLAUDE_PROJECT_DIR\" >&2; exit 2; fi") }] }] } })
        .to_string()
    };
    env.write(
        env.home.join(".noeta/hooks.json").to_str().unwrap(),
        &guard("shutdown"),
    );
    env.write(
        ".claude/settings.json",
        &format!(
            "{{\"permissions\": {{}}, \"hooks\": {}}}",
            json!({ "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command",
            "command": "if grep -q 'rm -rf'; then echo 'project says no' >&2; exit 2; fi" }] }] })
        ),
    );
    let script = || {
        env.script(json!([
            { "calls": [
                { "name": "Bash", "input": { "command": "shutdown now" } },
                { "name": "Bash", "input": { "command": "rm -rf build" } }
            ] },
            { "text": "done" }
        ]))
    };
    // Untrusted: the user's hooks run, the project's are named and not read.
    let out = env.run(&["run", "--provider", &script(), "tidy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains(".claude/settings.json: hooks not read, since the workspace is not trusted"),
        "{}",
        stderr(&out)
    );
    let log = last_log(&env);
    assert!(
        log.contains(&format!(
            "\"text\":\"no shutdown in {}\"",
            env.workspace.display()
        )),
        "{log}"
    );
    assert!(!log.contains("project says no"), "{log}");
    // Trusted: both.
    let trusted = env.run(&["trust", env.workspace.to_str().unwrap()]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    let out = env.run(&["run", "--provider", &script(), "tidy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        last_log(&env).contains("\"text\":\"project says no\""),
        "{}",
        last_log(&env)
    );
}

/// A plugin shaped like hookify and ralph-wiggum together: `userConfig` options (one
/// sensitive), a PreToolUse hook answering in JSON with a `systemMessage`, a Stop hook that
/// reads the transcript, and a command using an option.
fn vault_plugin(env: &CliEnv) -> PathBuf {
    let root = env.home.join(".noeta/plugins/vault");
    let put = |path: &str, text: &str| {
        env.write(root.join(path).to_str().unwrap(), text);
    };
    put(
        ".claude-plugin/plugin.json",
        r#"{"name": "vault", "version": "0.3.0", "userConfig": {
            "endpoint": {"type": "string", "title": "Endpoint", "description": "Where the vault is"},
            "token": {"type": "string", "description": "API token", "sensitive": true},
            "mode": {"type": "string", "default": "strict"}}}"#,
    );
    put(
        "hooks/hooks.json",
        r#"{"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/pre.sh ${user_config.endpoint} ${user_config.token} ${user_config.mode}"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "sh ${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"}]}]}}"#,
    );
    put(
        "hooks/pre.sh",
        "input=$(cat)\n\
         printf '%s %s %s %s\\n' \"$1\" \"$2\" \"$3\" \"$CLAUDE_PLUGIN_OPTION_TOKEN\" > \"$CLAUDE_PLUGIN_DATA/args.txt\"\n\
         printf '%s' \"$input\" > \"$CLAUDE_PLUGIN_DATA/pre-input.json\"\n\
         case \"$input\" in *'rm -rf build'*)\n\
           printf '{\"systemMessage\": \"vault: rm -rf is not allowed here\", \"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"deny\"}}' ;;\n\
         esac\n",
    );
    put(
        "hooks/stop.sh",
        "input=$(cat)\n\
         path=$(printf '%s' \"$input\" | sed -n 's/.*\"transcript_path\":\"\\([^\"]*\\)\".*/\\1/p')\n\
         grep '\"role\":\"assistant\"' \"$path\" | tail -1 > \"$CLAUDE_PLUGIN_DATA/last-assistant.jsonl\"\n",
    );
    put(
        "commands/where.md",
        "Ask the vault at ${user_config.endpoint} in ${user_config.mode} mode about $ARGUMENTS; never print ${user_config.token}.\n",
    );
    env.write(
        env.home.join(".noeta/config.toml").to_str().unwrap(),
        "[plugins.vault.config]\nendpoint = \"https://vault.example\"\ntoken = \"{env:VAULT_TOKEN}\"\n",
    );
    root
}

#[test]
fn a_plugins_options_reach_its_hooks_its_system_message_the_model_and_its_stop_hook_the_transcript()
{
    let env = CliEnv::new(NOETA);
    vault_plugin(&env);
    let data = env.home.join(".noeta/plugin-data/vault");
    let provider = env.script(json!([
        { "text": "Cleaning.", "calls": [{ "id": "c1", "name": "Bash", "input": { "command": "rm -rf build" } }] },
        { "text": "I could not clean: the vault said no." }
    ]));
    let out = env.run_with(
        &["run", "--provider", &provider, "clean up"],
        None,
        &[("VAULT_TOKEN", "s3cret-token")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The plugin's table is known: no warning about `[plugins.vault]`.
    assert!(
        !stderr(&out).contains("[plugins.vault]"),
        "{}",
        stderr(&out)
    );
    // The person sees the hook's message.
    assert!(
        stderr(&out).contains("⚑ hooks: vault: rm -rf is not allowed here"),
        "{}",
        stderr(&out)
    );

    // The options: as written, the default, and the sensitive one from its variable only.
    let args = std::fs::read_to_string(data.join("args.txt")).unwrap();
    assert_eq!(
        args,
        "https://vault.example s3cret-token strict s3cret-token\n"
    );
    // Claude Code's input fields.
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("pre-input.json")).unwrap())
            .unwrap();
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(input["permission_mode"], "default");
    assert_eq!(input["hook_event_name"], "PreToolUse");
    let transcript = PathBuf::from(input["transcript_path"].as_str().unwrap());
    assert!(transcript.starts_with(&env.workspace), "{transcript:?}");

    // The model got the system message as the reason of the deny; no secret in the log.
    let log = stdout(&env.run(&["log", "--json", &last_task(&env)]));
    assert!(
        log.contains("\"outcome\":\"denied\",\"text\":\"vault: rm -rf is not allowed here\""),
        "{log}"
    );
    assert!(!log.contains("s3cret-token"), "{log}");

    // The Stop hook read the transcript: the last assistant line, Claude Code-shaped.
    let last = std::fs::read_to_string(data.join("last-assistant.jsonl")).unwrap();
    let line: Value = serde_json::from_str(last.trim()).unwrap();
    assert_eq!(line["type"], "assistant");
    assert_eq!(
        line["message"]["content"][0],
        json!({ "type": "text", "text": "I could not clean: the vault said no." })
    );
    let lines: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let people: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "user" && l.get("isMeta").is_none())
        .map(|l| &l["message"]["content"])
        .collect();
    assert_eq!(people[0], "clean up");
    assert_eq!(
        people[1][0],
        json!({ "type": "tool_result", "tool_use_id": "c1", "is_error": true,
                "content": "vault: rm -rf is not allowed here" })
    );
    assert_eq!(
        lines.last().unwrap()["message"]["content"][0]["text"],
        "I could not clean: the vault said no."
    );

    // Without the secret the run stops before it starts, naming the reference and the key.
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = env.run(&["run", "--provider", &provider, "/vault:where the keys"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("`VAULT_TOKEN` is not set (or empty), needed by `{env:VAULT_TOKEN}`")
            && stderr(&out).contains("env.CLAUDE_PLUGIN_OPTION_TOKEN"),
        "{}",
        stderr(&out)
    );
    // A command gets the options that are not sensitive.
    let out = env.run_with(
        &["run", "--provider", &provider, "/vault:where the keys"],
        None,
        &[("VAULT_TOKEN", "s3cret-token")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        first_message(&env),
        "Ask the vault at https://vault.example in strict mode about the keys; never print ${user_config.token}."
    );
}

#[test]
fn a_malformed_user_config_names_the_field_and_a_missing_value_is_said() {
    let env = CliEnv::new(NOETA);
    let root = env.home.join(".noeta/plugins/odd");
    env.write(
        root.join(".claude-plugin/plugin.json").to_str().unwrap(),
        r#"{"name": "odd", "userConfig": {"token": {"sensitive": "yes"}}}"#,
    );
    env.write(root.join("commands/x.md").to_str().unwrap(), "x\n");
    let out = env.run(&["plugins", "check"]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("`userConfig.token.sensitive` must be true or false")
            || stderr(&out).contains("`userConfig.token.sensitive` must be true or false"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    env.write(
        root.join(".claude-plugin/plugin.json").to_str().unwrap(),
        r#"{"name": "odd", "userConfig": {"token": {"sensitive": true}}}"#,
    );
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = env.run(&["run", "--provider", &provider, "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "plugin `odd`: userConfig option `token` has no value; set it as [plugins.odd.config] token = …"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_noeta_plugin_brings_its_claude_code_parts_only_when_its_manifest_says_so() {
    let env = CliEnv::new(NOETA);
    let root = env.home.join(".noeta/plugins/mixed");
    let manifest = |extra: &str| {
        env.write(
            root.join("noeta-plugin.toml").to_str().unwrap(),
            &format!("name = \"mixed\"\nversion = \"1.0.0\"\n{extra}contributions = []\n"),
        );
    };
    env.write(
        root.join("commands/hello.md").to_str().unwrap(),
        "Say hello to $ARGUMENTS.\n",
    );
    manifest("");
    let listed = stdout(&env.run(&["plugins", "list"]));
    assert!(!listed.contains("(claude-code, "), "{listed}");
    let provider = env.script(json!([{ "text": "ok" }]));
    assert!(
        env.run(&["run", "--provider", &provider, "/mixed:hello the team"])
            .status
            .success()
    );
    assert_eq!(first_message(&env), "/mixed:hello the team");

    manifest("claude-code = true\n");
    let listed = stdout(&env.run(&["plugins", "list"]));
    assert!(listed.contains("mixed 1.0.0 (claude-code, "), "{listed}");
    let out = env.run(&["run", "--provider", &provider, "/mixed:hello the team"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let messages = stdout(&env.run(&["tasks", "--json"]));
    assert_eq!(messages.lines().count(), 2);
    assert_eq!(first_message(&env), "Say hello to the team.");

    manifest("claude-code = \"yes\"\n");
    let out = env.run(&["plugins", "check"]);
    assert!(!out.status.success());
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        text.contains("claude-code") && text.contains("must be true or false"),
        "{text}"
    );
}

#[test]
fn a_hooks_table_in_the_settings_is_the_hooks_extensions_configuration() {
    let env = CliEnv::new(NOETA);
    env.write(
        env.home.join(".noeta/config.toml").to_str().unwrap(),
        "[[plugins.hooks.PreToolUse]]\nmatcher = \"Bash\"\n\
         hooks = [{ type = \"command\", command = \"echo 'the hooks table says no' >&2; exit 2\" }]\n",
    );
    let provider = env.script(json!([
        { "calls": [{ "name": "Bash", "input": { "command": "ls" } }] },
        { "text": "stopped" }
    ]));
    let out = env.run(&["run", "--provider", &provider, "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("[plugins.hooks]"),
        "{}",
        stderr(&out)
    );
    let log = last_log(&env);
    assert!(
        log.contains("\"outcome\":\"denied\",\"text\":\"the hooks table says no\""),
        "{log}"
    );
    // A PreToolUse deny holds in every permission mode, bypassPermissions included.
    let out = env.run(&[
        "run",
        "--permission-mode",
        "bypassPermissions",
        "--provider",
        &provider,
        "list again",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = last_log(&env);
    assert!(
        log.contains("\"outcome\":\"denied\",\"text\":\"the hooks table says no\""),
        "{log}"
    );
}

#[test]
fn a_plugins_hook_noeta_does_not_run_is_a_warning_naming_its_hooks_json_and_fails_a_strict_check() {
    let env = CliEnv::new(NOETA);
    let root = env.home.join(".noeta/plugins/notes");
    let put = |path: &str, text: &str| env.write(root.join(path).to_str().unwrap(), text);
    put(
        ".claude-plugin/plugin.json",
        r#"{"name": "notes", "version": "1.0.0"}"#,
    );
    put(
        "hooks/hooks.json",
        r#"{"hooks": {
            "PreCompact": [{"hooks": [{"type": "command", "command": "true"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "Done?"}]}]}}"#,
    );
    let hooks_json = root.join("hooks/hooks.json").display().to_string();
    let out = env.run(&["plugins", "check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "warning: {hooks_json}: hooks.PreCompact[0]: noeta does not run `PreCompact` hooks yet; 1 hook(s) ignored"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "warning: {hooks_json}: hooks.Stop[0].hooks[0]: hook type `prompt` is not supported (only `command`); this hook is ignored"
        )),
        "{text}"
    );
    assert!(text.contains(", 2 warning(s), 0 problem(s)"), "{text}");
    let out = env.run(&["plugins", "check", "--strict"]);
    assert!(!out.status.success(), "{}", stdout(&out));

    // A run says each once, naming the file, never `[plugins.governance]`.
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("hooks.PreCompact[0]").count(), 1, "{err}");
    assert!(err.contains(&hooks_json), "{err}");
    assert!(!err.contains("[plugins.governance]"), "{err}");

    // A hook that cannot be read skips the plugin alone, saying why.
    put(
        "hooks/hooks.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command"}]}]}}"#,
    );
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "is skipped: {hooks_json}: hooks.PreToolUse[0].hooks[0]: a command hook needs a `command`"
        )),
        "{}",
        stderr(&out)
    );
}
