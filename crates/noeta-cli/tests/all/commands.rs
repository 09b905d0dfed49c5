//! Markdown commands as Claude Code writes them (`.claude/commands`, `.noeta/commands`,
//! `~/.noeta/commands`): `/name args` in `noeta run` and `noeta chat` sends the expanded body —
//! `$ARGUMENTS`, `$1`…, `@file` — as the message recorded in the task's log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// The first user message of the only task.
fn first_message(env: &CliEnv) -> String {
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    let log = stdout(&env.run(&["log", task["id"].as_str().unwrap(), "--json"]));
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "user_message")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no user message in {log}"))
}

fn review_command(env: &CliEnv) {
    env.write("notes.txt", "remember the parser\n");
    env.write_trusted(
        ".claude/commands/review.md",
        "---\ndescription: Review a part of the code\nargument-hint: <part>\n\
         allowed-tools: Read, Grep\nmodel: sonnet\n---\n\
         Review $ARGUMENTS carefully; start with $1.\nContext: @notes.txt\n",
    );
}

#[test]
fn run_sends_the_expanded_command_as_the_goal() {
    let env = CliEnv::new(NOETA);
    review_command(&env);
    let provider = env.script(json!([{ "text": "reviewed" }]));
    let out = env.run(&["run", "--provider", &provider, "/review the parser module"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), "reviewed");
    assert_eq!(
        first_message(&env),
        "Review the parser module carefully; start with the.\nContext: notes.txt:\n```\nremember the parser\n```"
    );
}

#[test]
fn a_body_without_arguments_gets_them_appended_and_a_project_command_beats_the_users() {
    let env = CliEnv::new(NOETA);
    env.write(
        env.home.join(".noeta/commands/hello.md").to_str().unwrap(),
        "Say hello from home.\n",
    );
    env.write_trusted(
        ".noeta/commands/tools/hello.md",
        "Say hello from the project.\n",
    );
    let provider = env.script(json!([{ "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "/hello to everyone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        first_message(&env),
        "Say hello from the project.\n\nARGUMENTS: to everyone"
    );
}

#[test]
fn a_goal_starting_with_a_slash_that_names_no_command_is_taken_as_written() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = env.run(&["run", "--provider", &provider, "/etc/hosts looks wrong"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(first_message(&env), "/etc/hosts looks wrong");
}

#[test]
fn files_outside_the_workspace_and_ungranted_shell_pre_execution_are_refused_and_nothing_starts() {
    let env = CliEnv::new(NOETA);
    env.write_trusted(".noeta/commands/leak.md", "Show @../home/.bashrc please\n");
    env.write_trusted(
        ".noeta/commands/shell.md",
        "---\nallowed-tools: Bash(git status:*)\n---\nStatus: !`git status && touch pwned`\n",
    );
    std::fs::write(env.home.join(".bashrc"), "secret\n").unwrap();
    let provider = env.script(json!([{ "text": "never" }]));
    let out = env.run(&["run", "--provider", &provider, "/leak"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("/leak: `@../home/.bashrc` is outside the workspace"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["run", "--provider", &provider, "/shell"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "shell.md: `git status && touch pwned` is not read-only and not granted by its `allowed-tools` (add a rule such as `Bash(git:*)`"
        ),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&env.run(&["tasks", "--json"])).trim().is_empty());
    assert!(!env.workspace.join("pwned").exists());
}

#[test]
fn a_granted_pre_execution_runs_and_its_output_is_in_the_message_unless_the_gate_denies_it() {
    let env = CliEnv::new(NOETA);
    env.write("notes.txt", "! `not run` @ from a file\n");
    env.write_trusted(
        ".claude/commands/commit.md",
        "---\ndescription: Commit the work\nallowed-tools: Bash(printf:*), Bash(echo:*)\n---\n\
         Branch: !`printf main`\nStatus: !`echo \"$1 changed\"`\nNotes: @notes.txt\n",
    );
    let provider = env.script(json!([{ "text": "committed" }]));
    let out = env.run(&["run", "--provider", &provider, "/commit parser.rs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        first_message(&env),
        "Branch: main\nStatus: parser.rs changed\nNotes: notes.txt:\n```\n! `not run` @ from a file\n```"
    );

    // The permission settings' deny list still holds.
    env.write_trusted(
        ".noeta/config.toml",
        "[plugins.permissions]\ndeny = [\"Bash\"]\n",
    );
    let out = env.run(&["run", "--provider", &provider, "/commit x"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "commit.md: `printf main` is denied: `Bash` is denied by the permission settings"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn chat_lists_the_commands_in_help_and_sends_one_as_a_message() {
    let env = CliEnv::new(NOETA);
    review_command(&env);
    let provider = env.script(json!([{ "text": "reviewed it" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/help\n/review the lexer\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "/review  Review a part of the code (project) — arguments: <part> [markdown_commands]"
        ),
        "{err}"
    );
    assert_eq!(stdout(&out).trim_end(), "reviewed it");
    assert!(first_message(&env).starts_with("Review the lexer carefully; start with the."));
}

/// A skill only a person activates (`disable-model-invocation`), taking arguments.
fn deploy_skill(env: &CliEnv) {
    env.write(
        ".noeta/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy the service\nargument-hint: <env>\n\
         disable-model-invocation: true\nallowed-tools: Bash\n---\nDeploy to $ARGUMENTS, then report.\n",
    );
    env.write(
        ".noeta/skills/internal/SKILL.md",
        "---\nname: internal\ndescription: Model only\nuser-invocable: false\n---\nHidden.\n",
    );
}

#[test]
fn a_skill_is_a_slash_command_that_activates_it_with_its_arguments() {
    let env = CliEnv::new(NOETA);
    deploy_skill(&env);
    let provider = env.script(json!([{ "text": "deployed" }]));
    let out = env.run(&["run", "--provider", &provider, "/deploy staging"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim_end(), "deployed");
    let message = first_message(&env);
    assert!(
        message.starts_with("Skill `deploy` is active."),
        "{message}"
    );
    assert!(
        message
            .trim_end()
            .ends_with("Deploy to staging, then report."),
        "{message}"
    );

    // In a started task (chat's second message) the activation is recorded too.
    let provider = env.script(json!([{ "text": "hello" }, { "text": "deployed again" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("hi\n/deploy prod\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&env.run(&["tasks", "--json"]));
    let task: Value = serde_json::from_str(listed.lines().last().unwrap()).unwrap();
    let log = stdout(&env.run(&["log", task["id"].as_str().unwrap(), "--json"]));
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| format!("{}/{}", e["extension"], e["kind"]).replace('"', ""))
        .collect();
    let activated = kinds.iter().position(|k| k == "skills/activated").unwrap();
    assert!(
        kinds[activated..].iter().any(|k| k == "core/user_message"),
        "{kinds:?}"
    );
    // The next intake keeps the activation made for its message.
    let cleared = events
        .iter()
        .find(|e| e["kind"] == "cleared")
        .expect("an intake after an activation");
    assert_eq!(cleared["data"]["keep"], json!(["deploy"]));
    assert!(log.contains("Deploy to prod, then report."), "{log}");

    // Not user-invocable: no command, so the text is the goal as written.
    let provider = env.script(json!([{ "text": "as written" }]));
    let out = env.run(&["run", "--provider", &provider, "/internal now"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn help_lists_the_skills_a_person_may_invoke() {
    let env = CliEnv::new(NOETA);
    deploy_skill(&env);
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/help\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("/deploy  Deploy the service (skill, workspace) — arguments: <env> [skills]"),
        "{err}"
    );
    assert!(!err.contains("/internal"), "{err}");
}

#[test]
fn a_list_argument_hint_is_text_and_a_broken_command_is_refused_naming_file_and_field() {
    let env = CliEnv::new(NOETA);
    // As Anthropic's agent-sdk-dev writes it: YAML reads `[project-name]` as a list.
    env.write_trusted(
        ".claude/commands/new-app.md",
        "---\ndescription: Start an app\nargument-hint: [project-name]\n---\nCreate the app $ARGUMENTS.\n",
    );
    env.write_trusted(
        ".claude/commands/broken.md",
        "---\ndescription:\n  nested: map\n---\nNever sent.\n",
    );
    let provider = env.script(json!([{ "text": "made" }]));
    let out = env.run(&["run", "--provider", &provider, "/new-app demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(first_message(&env), "Create the app demo.");

    let out = env.run(&["run", "--provider", &provider, "/broken now"]);
    assert!(!out.status.success(), "refused, not sent as text");
    let err = stderr(&out);
    assert!(err.contains("command `/broken` cannot be used"), "{err}");
    assert!(err.contains("broken.md"), "names the file: {err}");
    assert!(
        err.contains("`description` must be text or a list of text"),
        "names the field: {err}"
    );
    let listed = stdout(&env.run(&["tasks", "--json"]));
    assert_eq!(listed.lines().count(), 1, "no task made for it: {listed}");
}

/// `git ARGS` in `dir`, which must succeed.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git is installed");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}

#[test]
fn read_only_commands_run_from_bang_lines_without_an_allowed_tools_entry_as_in_claude_codes_commit()
{
    let env = CliEnv::new(NOETA);
    let ws = env.workspace.clone();
    git(&ws, &["init", "-q", "-b", "main"]);
    env.write("parser.rs", "fn parse() {}\n");
    git(&ws, &["add", "parser.rs"]);
    git(&ws, &["commit", "-q", "-m", "Add the parser"]);
    env.write("parser.rs", "fn parse() { todo() }\n");
    // The shape of Anthropic's commit command: the grants name only what writes.
    env.write_trusted(
        ".claude/commands/commit.md",
        "---\nallowed-tools: Bash(git add:*), Bash(git commit:*)\ndescription: Create a git commit\n---\n\
         ## Context\n\n- Current git status: !`git status --short`\n\
         - Current git diff (staged and unstaged changes): !`git diff HEAD`\n\
         - Current branch: !`git branch --show-current`\n\
         - Recent commits: !`git log --oneline -10`\n\n## Your task\n\nCommit the change.\n",
    );
    let provider = env.script(json!([{ "text": "committed" }]));
    let out = env.run(&["run", "--provider", &provider, "/commit"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let message = first_message(&env);
    assert!(
        message.contains("- Current git status:  M parser.rs\n"),
        "{message}"
    );
    assert!(message.contains("+fn parse() { todo() }"), "{message}");
    assert!(message.contains("- Current branch: main\n"), "{message}");
    assert!(message.contains("Add the parser"), "{message}");
    assert!(!message.contains("!`"), "{message}");
}

#[test]
fn a_fenced_bang_block_runs_like_a_bang_line_granted_by_the_plugins_own_script_rule() {
    let env = CliEnv::new(NOETA);
    let root = env.home.join(".noeta/plugins/looper");
    let put = |path: &str, text: &str| env.write(root.join(path).to_str().unwrap(), text);
    put(
        ".claude-plugin/plugin.json",
        r#"{"name": "looper", "version": "1.0.0", "description": "Loops"}"#,
    );
    // The shape of the ralph-loop command: a quoted script path, the arguments unquoted.
    put(
        "commands/start-loop.md",
        "---\ndescription: \"Start a loop\"\nargument-hint: \"PROMPT [--max-iterations N]\"\n\
         allowed-tools: [\"Bash(${CLAUDE_PLUGIN_ROOT}/scripts/setup-loop.sh:*)\"]\n---\n\n\
         Setting up the loop:\n\n```!\n\"${CLAUDE_PLUGIN_ROOT}/scripts/setup-loop.sh\" $ARGUMENTS\n```\n\n\
         Work on the task.\n",
    );
    let script = root.join("scripts/setup-loop.sh");
    put(
        "scripts/setup-loop.sh",
        "#!/bin/sh\nprintf 'loop set up (%s words): %s\\n' \"$#\" \"$*\"\n",
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A block the grant does not cover is refused, and nothing runs.
    put(
        "commands/sneaky.md",
        "---\nallowed-tools: [\"Bash(${CLAUDE_PLUGIN_ROOT}/scripts/setup-loop.sh:*)\"]\n---\n\
         ```!\n\"${CLAUDE_PLUGIN_ROOT}/scripts/setup-loop.sh\" x\ntouch pwned\n```\n",
    );
    let provider = env.script(json!([{ "text": "looping" }]));
    let out = env.run(&[
        "run",
        "--provider",
        &provider,
        "/looper:start-loop build the parser --max-iterations 5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        first_message(&env),
        "Setting up the loop:\n\nloop set up (5 words): build the parser --max-iterations 5\n\nWork on the task."
    );
    let out = env.run(&["run", "--provider", &provider, "/looper:sneaky"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not read-only and not granted by its `allowed-tools`"),
        "{}",
        stderr(&out)
    );
    assert!(!env.workspace.join("pwned").exists());
}

#[test]
fn chat_status_shows_model_mode_and_usage_and_clear_starts_a_new_task() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "one" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/status\nhello\n/mode plan\n/status\n/clear\nagain\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("agent main\n"), "{err}");
    assert!(err.contains("model scripted"), "{err}");
    assert!(
        err.contains("no task yet: your next message starts one"),
        "{err}"
    );
    assert!(err.contains("permission mode plan"), "{err}");
    assert!(
        err.contains(": 1 model call(s), 0 tool call(s); tokens"),
        "{err}"
    );
    assert!(
        err.contains("a new task starts with your next message; task "),
        "{err}"
    );
    // Each task runs the script from its start.
    assert_eq!(stdout(&out).trim_end(), "one\npermission mode: plan\none");
    let listed = stdout(&env.run(&["tasks", "--json"]));
    assert_eq!(listed.lines().count(), 2, "{listed}");
}

#[test]
fn chat_mode_before_the_first_message_sets_the_mode_the_first_task_starts_in() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "planned" }]));
    let out = env.run_with(
        &["chat", "--provider", &provider],
        Some("/mode yolo\n/mode plan\nhello\n/status\n/exit\n"),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--permission-mode `yolo` is not one of"),
        "{err}"
    );
    assert!(
        err.contains("permission mode: plan (the chat's first task starts in it)"),
        "{err}"
    );
    assert!(err.contains("permission mode plan\n"), "{err}");
    assert_eq!(stdout(&out).trim_end(), "planned");
}

/// `/init` sends the exploration prompt (mentioning an instruction file already there), and
/// the agent's `Write` makes `NOETA.md`, which the next run reads as its instructions.
#[test]
fn init_has_the_agent_explore_and_write_noeta_md() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    env.write("CLAUDE.md", "Run `make test`.\n");
    let provider = env.script(json!([
        { "calls": [{ "name": "Write", "input": {
            "file_path": "NOETA.md",
            "content": "# Working here\n\n- Test: `make test`\n"
        } }] },
        { "text": "NOETA.md written." }
    ]));
    let out = env.run(&[
        "run",
        "--provider",
        &provider,
        "--permission-mode",
        "acceptEdits",
        "/init the test commands",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written = std::fs::read_to_string(env.workspace.join("NOETA.md")).unwrap();
    assert!(written.contains("make test"), "{written}");
    let task: Value = serde_json::from_str(
        stdout(&env.run(&["tasks", "--json"]))
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    let log = stdout(&env.run(&["log", task["id"].as_str().unwrap(), "--json"]));
    assert!(
        log.contains("write a file named NOETA.md at its root"),
        "{log}"
    );
    assert!(log.contains("CLAUDE.md exists: read it first"), "{log}");
    assert!(log.contains("pay attention to: the test commands"), "{log}");
}

/// Chat's `/model` shows and switches the model, `/diff` shows what the task's writes changed
/// (against git's HEAD in a repository, a new file as all added), and `/compact` summarises the
/// conversation now.
#[test]
fn chat_model_diff_and_compact() {
    let env = CliEnv::new(NOETA);
    env.write("notes.txt", "alpha\nbeta\n");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&env.workspace)
            .env("HOME", &env.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "add",
        "notes.txt",
    ]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "notes",
    ]);
    let provider = env.script_file(json!({
        "turns": [
            { "calls": [{ "name": "Read", "input": { "file_path": "notes.txt" } }] },
            { "calls": [
                { "name": "Edit", "input": { "file_path": "notes.txt", "old_string": "beta", "new_string": "BETA" } },
                { "name": "Write", "input": { "file_path": "new.txt", "content": "one\n" } }
            ] },
            { "text": "edited" },
            { "text": "after the summary" }
        ],
        "auxiliary": ["THE SUMMARY"]
    }));
    let out = env.run_with(
        &[
            "chat",
            "--provider",
            &provider,
            "--permission-mode",
            "acceptEdits",
        ],
        Some("/diff\n/model\nedit the notes\n/diff\n/compact\n/model no-such-model-here\nmore\n/exit\n"),
        &[("NO_COLOR", "1")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let all = format!("{}{err}", stdout(&out));
    assert!(
        err.contains("no task yet: your next message starts one"),
        "{err}"
    );
    assert!(err.contains("model: scripted · "), "{err}");
    assert!(all.contains("-beta\n+BETA"), "{all}");
    assert!(all.contains("+++ b/new.txt"), "{all}");
    assert!(all.contains("+++ b/notes.txt"), "{all}");
    assert!(all.contains("+one"), "{all}");
    assert!(all.contains("compacted: the conversation's first"), "{all}");
    assert!(
        stdout(&out).contains("after the summary"),
        "{}",
        stdout(&out)
    );
}
