//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, the version
//! `noeta-testkit` pins and `cargo xtask test` installs) against noeta's MCP client: every
//! client scenario of that version that needs no sign-in passes, driven through `noeta mcp
//! call` by `tests/conformance/client.sh`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::path::Path;

use noeta_testkit::cli::{CliEnv, stderr, stdout};

/// The client scenarios that need no sign-in, which `client.sh` answers.
const SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

fn client_script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/client.sh")
        .display()
        .to_string()
}

#[test]
fn the_pinned_suites_client_scenarios_without_sign_in_are_the_ones_answered() {
    let (node, script) = noeta_testkit::npm::conformance();
    let out = std::process::Command::new(node)
        .arg(script)
        .arg("list")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&out);
    let (_, clients) = listed
        .split_once("Client scenarios")
        .unwrap_or_else(|| panic!("no client scenarios in {listed}"));
    let names: Vec<&str> = clients
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| !name.starts_with("auth/"))
        .collect();
    assert_eq!(
        names, SCENARIOS,
        "the suite's scenarios changed: answer the new ones"
    );
}

#[test]
fn every_client_scenario_without_sign_in_passes() {
    let (node, script) = noeta_testkit::npm::conformance();
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let out = env
            .program(&node)
            .arg(&script)
            .args(["client", "--command"])
            .arg(format!("sh {}", client_script()))
            .args(["--scenario", scenario, "--timeout", "60000"])
            .env("NOETA", env!("CARGO_BIN_EXE_noeta"))
            .output()
            .unwrap();
        // The suite reports on both streams; its verdict comes last, on standard error.
        let text = format!("{}{}", stdout(&out), stderr(&out));
        if !out.status.success() || !text.contains("OVERALL: PASSED") {
            failed.push(format!("{scenario} ({}):\n{text}", out.status));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
