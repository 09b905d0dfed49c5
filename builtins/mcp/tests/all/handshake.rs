//! The client's `initialize`: it names noeta and its version, asks for the newest protocol
//! version with a handshake, speaks an older one a server answers with, and refuses a version
//! it does not speak, naming it. Met by a minimal streamable-HTTP server written here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use noeta_builtin_mcp::{Mcp, Settings};
use serde_json::{Value, json};

/// Serves, on a loopback port, an MCP server that answers `initialize` with `version` and lists
/// one tool; the `initialize` requests it received.
fn server(version: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let heard = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&heard);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head, body) = loop {
                    let Ok(n) = stream.read(&mut chunk) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buffer).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .and_then(|v| v.trim().parse().ok())
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break (head.to_owned(), body.to_owned());
                        }
                    }
                };
                let reply = |status: &str, json: Option<Value>| {
                    let body = json.map(|j| j.to_string()).unwrap_or_default();
                    format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let answer = if !head.starts_with("POST") {
                    reply("405 Method Not Allowed", None)
                } else {
                    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    let id = request["id"].clone();
                    match request["method"].as_str() {
                        Some("initialize") => {
                            kept.lock().unwrap().push(request.clone());
                            reply(
                                "200 OK",
                                Some(json!({ "jsonrpc": "2.0", "id": id, "result": {
                                    "protocolVersion": version,
                                    "capabilities": { "tools": {} },
                                    "serverInfo": { "name": "test", "version": "1" }
                                } })),
                            )
                        }
                        Some("tools/list") => reply(
                            "200 OK",
                            Some(json!({ "jsonrpc": "2.0", "id": id, "result": { "tools": [{
                                "name": "hello",
                                "description": "Says hello.",
                                "inputSchema": { "type": "object" }
                            }] } })),
                        ),
                        Some(_) if id.is_null() => reply("202 Accepted", None),
                        Some(_) => reply(
                            "200 OK",
                            Some(json!({ "jsonrpc": "2.0", "id": id, "result": {} })),
                        ),
                        None => reply("400 Bad Request", None),
                    }
                };
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    (url, heard)
}

fn connect(url: &str) -> Vec<(String, noeta_builtin_mcp::ServerStatus)> {
    let mcp = Mcp::new(Settings::parse(&json!({ "servers": { "s": { "url": url } } })).unwrap());
    block_on(mcp.connect())
}

#[test]
fn the_client_names_noeta_and_speaks_an_older_version_the_server_answers_with() {
    let (url, heard) = server("2025-03-26");
    let status = connect(&url);
    assert_eq!(
        status[0].1,
        Ok(vec!["mcp__s__hello".to_owned()]),
        "{status:?}"
    );
    let initialize = heard.lock().unwrap()[0].clone();
    assert_eq!(initialize["params"]["clientInfo"]["name"], "noeta");
    assert_eq!(
        initialize["params"]["clientInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25");
}

#[test]
fn a_version_the_client_does_not_speak_is_refused_naming_it() {
    let (url, _) = server("2023-01-01");
    let status = connect(&url);
    let err = status[0].1.clone().unwrap_err();
    assert!(
        err.contains("mcp server `s` did not start")
            && err.contains("protocol version 2023-01-01, which noeta does not speak")
            && err.contains("2025-11-25"),
        "{err}"
    );
}
