//! The files noeta reads at start, made hostile: a named pipe as a plugin's manifest or as the
//! trust store, a Claude Code `plugin.json` far over its limit, a binary `NOETA.md`. Every
//! command ends promptly with the file named, and nothing unreadable reaches the model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stderr, stdout};
use serde_json::json;

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// `noeta ARGS`, which must end within 20 seconds.
fn timed(env: &CliEnv, args: &[&str]) -> Output {
    let mut child = env
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!(
                "`noeta {}` hung on a file it reads at start",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo (coreutils) is needed")
            .success()
    );
}

#[test]
fn a_named_pipe_as_a_plugins_manifest_or_as_the_trust_store_is_named_not_waited_on() {
    let env = CliEnv::new(NOETA);
    let manifest = env.home.join(".noeta/plugins/piped/noeta-plugin.toml");
    mkfifo(&manifest);
    let provider = env.script(json!([{ "text": "fine" }]));
    for args in [
        vec!["plugins", "list"],
        vec!["doctor"],
        vec!["run", "--provider", provider.as_str(), "hi"],
    ] {
        let out = timed(&env, &args);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            said.contains("noeta-plugin.toml") && said.contains("a named pipe, not a regular file"),
            "`{}`: {said}",
            args.join(" ")
        );
    }
    std::fs::remove_file(&manifest).unwrap();

    let store = env.home.join(".noeta/trust.json");
    mkfifo(&store);
    for args in [
        vec!["plugins", "list"],
        vec!["doctor"],
        vec!["run", "--provider", provider.as_str(), "hi"],
        vec!["trust", "."],
    ] {
        let out = timed(&env, &args);
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            said.contains("trust.json") && said.contains("a named pipe, not a regular file"),
            "`{}`: {said}",
            args.join(" ")
        );
    }
}

#[test]
fn a_claude_code_plugin_json_over_its_limit_is_refused_naming_it() {
    let env = CliEnv::new(NOETA);
    let file = env
        .home
        .join(".noeta/plugins/big/.claude-plugin/plugin.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // 45 MB (sparse): refused by its size before a byte of it is read.
    std::fs::File::create(&file)
        .unwrap()
        .set_len(45 * 1024 * 1024)
        .unwrap();
    let out = timed(&env, &["plugins", "list"]);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("plugin.json")
            && said.contains("47185920 bytes, over the 1048576-byte limit"),
        "{said}"
    );
}

#[test]
fn a_binary_instruction_file_is_skipped_with_a_warning_and_the_next_one_is_used() {
    let env = CliEnv::new(NOETA);
    std::fs::write(
        env.workspace.join("NOETA.md"),
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\xff\xfe binary",
    )
    .unwrap();
    env.write("AGENTS.md", "Use tabs, not spaces.\n");
    let provider = env.script(json!([{ "text": "ok" }]));
    let out = timed(&env, &["run", "--json", "--provider", &provider, "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("instruction file skipped:")
            && stderr(&out).contains("NOETA.md is not text"),
        "{}",
        stderr(&out)
    );
    let events = stdout(&out);
    assert!(
        events.contains("\"file\":\"AGENTS.md\"") && events.contains("Use tabs, not spaces."),
        "{events}"
    );
    assert!(!events.contains("ELF"), "{events}");
}
