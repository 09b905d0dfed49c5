//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, the version
//! `noeta-testkit` pins and `cargo xtask test` installs) against noeta's MCP client: every
//! client scenario of that version that needs no sign-in passes, driven through `noeta mcp
//! call` by `tests/conformance/client.sh`; and the sign-in (`auth/…`) scenarios noeta answers
//! pass, with curl as the browser that follows the authorization server's redirect back to
//! noeta's loopback listener.

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

/// The sign-in scenarios that pass: metadata discovery in its four layouts, client-metadata
/// ids, scope selection and step-up, the retry limit, the three ways a client authenticates
/// at the token endpoint, a pre-registered client, the 2025-03-26 endpoint fallback, resource
/// mismatch and `offline_access`.
const AUTH_PASSING: [&str; 18] = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
];

/// The sign-in scenarios noeta does not answer, each with why.
const AUTH_NOT_ANSWERED: [(&str, &str); 4] = [
    (
        "auth/2025-03-26-oauth-metadata-backcompat",
        "its authorization server's metadata names an issuer other than the URL it is served          from, which the OAuth client refuses (RFC 8414 asks the two to match)",
    ),
    (
        "auth/client-credentials-jwt",
        "the client-credentials extension (machine sign-in, no person) is not supported",
    ),
    (
        "auth/client-credentials-basic",
        "the client-credentials extension (machine sign-in, no person) is not supported",
    ),
    (
        "auth/cross-app-access-complete-flow",
        "the enterprise-managed (cross-app access) extension is not supported",
    ),
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
        .collect();
    let plain: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !name.starts_with("auth/"))
        .collect();
    assert_eq!(
        plain, SCENARIOS,
        "the suite's scenarios changed: answer the new ones"
    );
    let mut auth: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| name.starts_with("auth/"))
        .collect();
    auth.sort_unstable();
    let mut known: Vec<&str> = AUTH_PASSING
        .iter()
        .copied()
        .chain(AUTH_NOT_ANSWERED.iter().map(|(name, _)| *name))
        .collect();
    known.sort_unstable();
    assert_eq!(
        auth, known,
        "the suite's sign-in scenarios changed: answer the new ones"
    );
}

/// Runs `scenario` of the suite with `command` as the client (the server's URL appended),
/// in a fresh home, curl as the browser: `None` when it passed, else the suite's report.
fn run_scenario(scenario: &str, command: &str, env: &CliEnv) -> Option<String> {
    let (node, script) = noeta_testkit::npm::conformance();
    let out = env
        .program(&node)
        .arg(&script)
        .args(["client", "--command", command])
        .args(["--scenario", scenario, "--timeout", "60000"])
        .env("NOETA", env!("CARGO_BIN_EXE_noeta"))
        .env("BROWSER", "curl -sS -L -o /dev/null")
        .output()
        .unwrap();
    // The suite reports on both streams; its verdict comes last, on standard error.
    let text = format!("{}{}", stdout(&out), stderr(&out));
    (!out.status.success() || !text.contains("OVERALL: PASSED"))
        .then(|| format!("{scenario} ({}):\n{text}", out.status))
}

#[test]
fn every_client_scenario_without_sign_in_passes() {
    let failed: Vec<String> = SCENARIOS
        .iter()
        .filter_map(|scenario| {
            let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
            run_scenario(scenario, &format!("sh {}", client_script()), &env)
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn the_sign_in_scenarios_noeta_answers_pass() {
    let failed: Vec<String> = AUTH_PASSING
        .iter()
        .filter_map(|scenario| {
            let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
            run_scenario(scenario, &format!("sh {}", client_script()), &env)
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        AUTH_PASSING.len(),
        failed.join("\n\n")
    );
}

/// A sign-in's life through the CLI, against the suite's protected server and its
/// authorization server (which registers noeta as a confidential client): a configured server
/// that needs sign-in says which command signs in; `mcp login` keeps the tokens in a file the
/// user alone reads; later connections send them without signing in again; `mcp logout`
/// forgets them.
#[test]
fn a_sign_in_is_kept_used_and_forgotten() {
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let log = env.root().join("steps.log");
    let steps = format!(
        r#"set -u
url="$1"
log='{log}'
mkdir -p "$HOME/.noeta"
printf '[plugins.mcp.servers.docs]
url = "%s"
' "$url" > "$HOME/.noeta/config.toml"
{{ echo "== list before"; "$NOETA" mcp list 2>&1; }} >> "$log"
{{ echo "== login"; "$NOETA" mcp login docs 2>&1; echo "exit $?"; }} >> "$log"
{{ echo "== mode"; stat -c %a "$HOME"/.noeta/mcp-sign-in/*.json "$HOME/.noeta/mcp-sign-in"; }} >> "$log"
{{ echo "== call"; BROWSER=false "$NOETA" mcp call docs test-tool 2>&1; echo "exit $?"; }} >> "$log"
{{ echo "== logout"; "$NOETA" mcp logout docs 2>&1; ls "$HOME/.noeta/mcp-sign-in"; }} >> "$log"
{{ echo "== list after"; "$NOETA" mcp list 2>&1; }} >> "$log"
exit 0
"#,
        log = log.display()
    );
    let script = env.root().join("steps.sh");
    std::fs::write(&script, steps).unwrap();
    let report = run_scenario(
        "auth/token-endpoint-auth-basic",
        &format!("sh {}", script.display()),
        &env,
    );
    let log = std::fs::read_to_string(&log).unwrap();
    let section = |name: &str| {
        let start = log
            .find(&format!("== {name}\n"))
            .unwrap_or_else(|| panic!("no `{name}` in:\n{log}"));
        let rest = &log[start + name.len() + 4..];
        rest[..rest.find("\n== ").unwrap_or(rest.len())].to_owned()
    };
    assert!(
        section("list before").contains("needs sign-in — run `noeta mcp login docs`"),
        "{log}"
    );
    assert!(section("login").contains("signed in to"), "{log}");
    assert!(section("login").contains("exit 0"), "{log}");
    assert_eq!(
        section("mode").split_whitespace().collect::<Vec<_>>(),
        ["600", "700"],
        "{log}"
    );
    let call = section("call");
    assert!(call.contains("test\nexit 0"), "{log}");
    assert!(!call.contains("asks for sign-in"), "{log}");
    assert!(section("logout").contains("signed out of"), "{log}");
    assert!(
        section("list after").contains("needs sign-in — run `noeta mcp login docs`"),
        "{log}"
    );
    assert!(report.is_none(), "{}", report.unwrap_or_default());
}

/// A loopback proxy in front of `upstream` (`host:port`) that adds `Authorization: Bearer
/// <token>` to every request and asks for one request per connection, as a client holding the
/// token would send it: the suite's server scenarios send no credential, and `noeta mcp serve
/// --http` answers nobody without one. The proxy's own port in `Host` and `Origin` becomes the
/// server's (as if the client had reached it directly); everything else, another host's name
/// included, goes through as sent. Returns the proxy's `host:port`.
fn bearing_proxy(upstream: String, token: String) -> String {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap().to_string();
    let own_port = format!(":{}", listener.local_addr().unwrap().port());
    let upstream_port = format!(":{}", upstream.rsplit(':').next().unwrap());
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = upstream.clone();
            let token = token.clone();
            let (own_port, upstream_port) = (own_port.clone(), upstream_port.clone());
            std::thread::spawn(move || {
                let mut client = client;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match client.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let mut lines: Vec<String> = head
                    .trim_end()
                    .split("\r\n")
                    .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                    .map(|l| {
                        let lower = l.to_ascii_lowercase();
                        if lower.starts_with("host:") || lower.starts_with("origin:") {
                            l.replace(&own_port, &upstream_port)
                        } else {
                            l.to_owned()
                        }
                    })
                    .collect();
                lines.push(format!("Authorization: Bearer {token}"));
                lines.push("Connection: close".to_owned());
                let Ok(mut server) = std::net::TcpStream::connect(&upstream) else {
                    return;
                };
                if server
                    .write_all(format!("{}\r\n\r\n", lines.join("\r\n")).as_bytes())
                    .is_err()
                {
                    return;
                }
                let (mut from_client, mut to_server) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut from_client, &mut to_server));
                let _ = std::io::copy(&mut server, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    at
}

#[test]
fn the_server_scenarios_that_apply_pass_against_mcp_serve() {
    let (node, script) = noeta_testkit::npm::conformance();
    let env = CliEnv::new(env!("CARGO_BIN_EXE_noeta"));
    let (mut server, url) = noeta_testkit::serve::mcp_serve_http(&env);
    let upstream = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let token = noeta_testkit::serve::kept_token(&env).expect("a token in ~/.noeta/serve-token");
    let proxy = bearing_proxy(upstream, token);
    let port = proxy.rsplit(':').next().unwrap().to_owned();
    let mut failed = Vec::new();
    for scenario in SERVER_SCENARIOS {
        let out = std::process::Command::new(&node)
            .arg(&script)
            .args(["server", "--url", &format!("http://localhost:{port}/mcp")])
            .args(["--scenario", scenario])
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&out), stderr(&out));
        if !out.status.success() || !text.contains("0 failed") {
            failed.push(format!("{scenario} ({}):\n{text}", out.status));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        SERVER_SCENARIOS.len(),
        failed.join("\n\n")
    );
}

/// The suite's server scenarios that apply to `noeta mcp serve`: the handshake, logging, ping,
/// listing and calling its tools (an error result too), several SSE streams, the empty
/// resource and prompt lists, and DNS-rebinding protection. The other 22 call the suite's
/// fixture tools, resources and prompts (`test_image_content`, `test://static-text`, …),
/// completions or sampling, which an agent's tools are not.
const SERVER_SCENARIOS: [&str; 10] = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "server-sse-multiple-streams",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
];
