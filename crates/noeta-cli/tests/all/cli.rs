//! End-to-end tests of the `noeta` binary: surfaces, plugins list and check, and trust.
//!
//! Every test runs the real binary with `HOME` and the working directory set
//! to fresh temporary directories, so nothing of the real user is read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::Output;

use noeta_testkit::cli::CliEnv;

use serde_json::Value;

/// A fresh home and workspace for the real binary.
fn new_env() -> CliEnv {
    CliEnv::new(env!("CARGO_BIN_EXE_noeta"))
}

fn write_plugin(dir: &Path, manifest: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("noeta-plugin.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const FRAGMENT: &str = r#"
name = "house"
version = "1.2.0"
requires-noeta = ">=0.1"

[[contributions]]
surface = "prompt_fragment"
name = "house-style"
text = "Answer in at most three sentences."
"#;

#[test]
fn surfaces_json_is_the_golden_table() {
    let env = new_env();
    let out = env.run(&["surfaces", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let golden = std::fs::read(repo_root().join("tests/golden/surfaces.json")).unwrap();
    assert_eq!(out.stdout, golden);
    let table = json(&out);
    assert_eq!(table.as_array().unwrap().len(), 16);
    let control = table
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "control_tool")
        .unwrap();
    assert_eq!(control["activation_binding"], "elsewhere");
    assert_eq!(control["ordering"], "priority");
}

#[test]
fn surfaces_text_lists_every_surface() {
    let out = new_env().run(&["surfaces"]);
    let text = stdout(&out);
    for name in noeta_core::STANDARD_SURFACES {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert!(text.contains("single-valued") && text.contains("host-wired"));
}

#[test]
fn plugins_list_json_is_byte_identical_across_runs_and_lists_all_builtins() {
    let env = new_env();
    let first = env.run(&["plugins", "list", "--json"]);
    let second = env.run(&["plugins", "list", "--json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(first.stdout, second.stdout);
    let listing = json(&first);
    let plugins = listing["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 18);
    assert!(plugins.iter().all(|p| p["source"] == "builtin"));
    let presets = plugins.iter().find(|p| p["name"] == "presets").unwrap();
    let agents: Vec<&str> = presets["contributions"]["agent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        agents,
        [
            "__consolidation__",
            "explore",
            "general-purpose",
            "main",
            "plan",
            "web"
        ]
    );
    assert_eq!(listing["problems"], Value::Array(vec![]));
}

#[test]
fn plugins_list_shows_user_plugins_and_broken_manifests() {
    let env = new_env();
    env.user_plugin("house", FRAGMENT);
    let broken = env.user_plugin(
        "broken",
        "name = \"broken\"\n[[contributions]]\nname = \"x\"\n",
    );
    let out = env.run(&["plugins", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listing = json(&out);
    let house = listing["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "house")
        .unwrap();
    assert_eq!(house["source"], "user");
    assert_eq!(house["version"], "1.2.0");
    assert_eq!(
        house["contributions"]["prompt_fragment"][0]["name"],
        "house-style"
    );
    let problem = &listing["problems"][0];
    assert_eq!(problem["plugin"], "broken");
    let message = problem["message"].as_str().unwrap();
    assert!(message.contains(&broken.display().to_string()), "{message}");
    assert!(
        message.contains("contribution #1") && message.contains("surface"),
        "{message}"
    );

    let text = stdout(&env.run(&["plugins", "list"]));
    assert!(text.contains("house 1.2.0 (user, file"), "{text}");
    assert!(text.contains("plugins that failed to load:"), "{text}");
}

#[test]
fn an_untrusted_workspace_plugin_is_skipped_until_trusted() {
    let env = new_env();
    env.workspace_plugin("house", FRAGMENT);
    let out = env.run(&["plugins", "list", "--json"]);
    assert!(out.status.success());
    assert!(!stdout(&out).contains("\"house\""));
    assert!(
        stderr(&out).contains("skipping untrusted workspace plugin directory"),
        "{}",
        stderr(&out)
    );

    let trust = env.run(&["trust", "."]);
    assert!(trust.status.success(), "{}", stderr(&trust));
    assert!(stdout(&trust).contains("trusted "), "{}", stdout(&trust));
    let store = std::fs::read_to_string(env.home.join(".noeta/trust.json")).unwrap();
    assert!(
        store.ends_with("\n") && store.contains("\"trusted\""),
        "{store}"
    );

    let out = env.run(&["plugins", "list", "--json"]);
    let listing = json(&out);
    let house = listing["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "house")
        .unwrap();
    assert_eq!(house["source"], "workspace");
    assert!(!stderr(&out).contains("untrusted"));
}

#[test]
fn a_malformed_trust_store_is_an_error_naming_it() {
    let env = new_env();
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(env.home.join(".noeta/trust.json"), "{not json").unwrap();
    let out = env.run(&["plugins", "list"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("trust.json"), "{}", stderr(&out));
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
}

#[test]
fn trusting_a_missing_directory_fails_naming_it() {
    let env = new_env();
    let out = env.run(&["trust", "no-such-dir"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no-such-dir"), "{}", stderr(&out));
}

#[test]
fn a_user_plugin_named_like_a_builtin_is_shadowed_with_a_warning() {
    let env = new_env();
    let path = env.user_plugin("fs", "name = \"fs\"\nversion = \"9.0.0\"\n");
    let out = env.run(&["plugins", "list", "--json"]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("plugin `fs` from crate `noeta-builtin-fs` shadows"),
        "{err}"
    );
    assert!(err.contains(&path.display().to_string()), "{err}");
    let listing = json(&out);
    let fs = listing["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "fs")
        .unwrap();
    assert_eq!(fs["source"], "builtin");
}

#[test]
fn two_on_disk_plugins_with_one_name_are_an_error_naming_both() {
    let env = new_env();
    let a = env.user_plugin("a", FRAGMENT);
    let extra = env.workspace.join("extra");
    let b = write_plugin(&extra.join("b"), FRAGMENT);
    let out = env.run(&["plugins", "list", "--plugin-dir", extra.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("duplicate plugin name `house`"), "{err}");
    assert!(
        err.contains(&a.display().to_string()) && err.contains(&b.display().to_string()),
        "{err}"
    );
}

#[test]
fn plugins_check_passes_on_the_builtins() {
    let out = new_env().run(&["plugins", "check", "--resolve"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("checked presets 0.1.0 (builtin, crate `noeta-builtin-presets`): agent 6"),
        "{text}"
    );
    assert!(
        text.contains("18 plugin(s) checked, 0 warning(s), 0 problem(s)"),
        "{text}"
    );
}

#[test]
fn plugins_check_reports_a_bad_manifest_naming_file_and_field() {
    let env = new_env();
    let bad = env.workspace.join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"bad\"\n[[contributions]]\nsurface = \"reminder\"\nname = \"r\"\nref = \"x::r\"\npriority = \"high\"\n",
    )
    .unwrap();
    let out = env.run(&["plugins", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("problem: manifest file"), "{text}");
    assert!(text.contains("bad.toml"), "{text}");
    assert!(
        text.contains("plugin `bad`") && text.contains("`priority` must be an integer"),
        "{text}"
    );
}

#[test]
fn plugins_check_reports_an_unreadable_path() {
    let env = new_env();
    let out = env.run(&["plugins", "check", "missing/noeta-plugin.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("cannot read manifest file `missing/noeta-plugin.toml`"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn plugins_check_reports_unknown_surfaces_and_collisions() {
    let env = new_env();
    let dir = env.workspace.join("plugins");
    write_plugin(
        &dir.join("one"),
        "name = \"one\"\n[[contributions]]\nsurface = \"prompt_fragment\"\nname = \"memory-policy\"\ntext = \"x\"\n",
    );
    write_plugin(
        &dir.join("two"),
        "name = \"two\"\n[[contributions]]\nsurface = \"http_route\"\nname = \"r\"\n",
    );
    let out = env.run(&["plugins", "check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("prompt_fragment `memory-policy` is contributed by both plugin `memory` and plugin `one` — no override"), "{text}");
    assert!(
        text.contains("names unknown surface `http_route`"),
        "{text}"
    );
}

#[test]
fn requires_noeta_warns_by_default_and_fails_under_strict() {
    let env = new_env();
    let path = env.workspace.join("future.toml");
    std::fs::write(&path, "name = \"future\"\nrequires-noeta = \">=9\"\n").unwrap();
    let p = path.to_str().unwrap();

    let out = env.run(&["plugins", "check", p]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("requires noeta >=9, but the kernel is 0.1.0 — loading it anyway"),
        "{}",
        stdout(&out)
    );
    assert!(
        !stderr(&out).contains("requires noeta"),
        "printed once, in the report"
    );
    let as_json = env.run(&["plugins", "check", "--json", p]);
    assert!(
        stderr(&as_json).contains("warning: plugin `future`"),
        "{}",
        stderr(&as_json)
    );
    assert!(
        json(&as_json)["warnings"][0]
            .as_str()
            .unwrap()
            .contains("requires noeta >=9")
    );

    let strict = env.run(&["plugins", "check", "--strict", p]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(
        stdout(&strict).contains("refused (strict)"),
        "{}",
        stdout(&strict)
    );

    std::fs::write(&path, "name = \"future\"\nrequires-noeta = \"soon\"\n").unwrap();
    let unparseable = env.run(&["plugins", "check", p]);
    assert!(unparseable.status.success());
    assert!(
        stdout(&unparseable).contains("is not a semver range"),
        "{}",
        stdout(&unparseable)
    );
}

#[test]
fn plugins_check_resolve_reports_refs_no_compiled_resolver_knows() {
    let env = new_env();
    let example = repo_root().join("examples/hello-plugin");
    let out = env.run(&["plugins", "check", example.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("checked hello 0.1.0 (path, file"),
        "{}",
        stdout(&out)
    );

    let resolved = env.run(&[
        "plugins",
        "check",
        "--resolve",
        "--json",
        example.to_str().unwrap(),
    ]);
    assert_eq!(resolved.status.code(), Some(1));
    let report = json(&resolved);
    assert_eq!(report["ok"], false);
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("plugin `hello`")
            && p.contains("ref `hello_plugin::Hello`")
            && p.contains("no compiled resolver")),
        "{problems:?}"
    );
}

#[test]
fn the_surfaces_table_is_aligned() {
    let text = stdout(&new_env().run(&["surfaces"]));
    let columns: Vec<Option<usize>> = text
        .lines()
        .map(|l| {
            l.find("per-agent")
                .or(l.find("process"))
                .or(l.find("host-wired"))
                .or(l.find("scope"))
        })
        .collect();
    assert!(columns.windows(2).all(|w| w[0] == w[1]), "{text}");
}

#[test]
fn an_error_names_its_cause_once() {
    let out = new_env().run(&["trust", "nope"]);
    let err = stderr(&out);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// The binary is position-independent (an ELF of type `ET_DYN`, not `ET_EXEC`): its own code,
/// like its libraries, stack and heap, is at a random address in every process. `build.rs`
/// links every profile alike, so this debug build stands for the release one.
#[test]
#[cfg(target_os = "linux")]
fn the_binary_is_position_independent() {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_noeta")).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "not an ELF file");
    let kind = u16::from_le_bytes([bytes[16], bytes[17]]);
    assert_eq!(
        kind, 3,
        "e_type {kind}: 2 is a fixed-address executable, 3 position-independent"
    );
}

#[test]
fn a_plugin_no_agent_uses_is_a_warning_saying_how_to_use_it() {
    let env = new_env();
    env.user_plugin("house", FRAGMENT);
    let provider =
        env.script(serde_json::json!([{ "text": "hi" }, { "text": "hi" }, { "text": "hi" }]));
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "warning: plugin `house` is loaded but no agent uses it: give its manifest `add-to = \"*\"` (every agent) or add it to one (`[agents.main] add_plugins = [\"house\"]`)"
        ),
        "{}",
        stderr(&out)
    );
    // Used, it is not.
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(
        env.home.join(".noeta/config.toml"),
        "[agents.main]\nadd_plugins = [\"house\"]\n",
    )
    .unwrap();
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("no agent uses it"),
        "{}",
        stderr(&out)
    );
    env.user_plugin("house", &format!("add-to = \"*\"\n{FRAGMENT}"));
    std::fs::remove_file(env.home.join(".noeta/config.toml")).unwrap();
    let out = env.run(&["run", "--provider", &provider, "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("no agent uses it"),
        "{}",
        stderr(&out)
    );
}
