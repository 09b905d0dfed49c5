//! Starting one MCP server and keeping what it offers: the transport for its kind (a command in
//! its own process group, streamable HTTP through `http.rs`, a host-resolved endpoint, an
//! in-process server), the handshake and the version check, the tool, resource and prompt
//! lists; and the words a person reads when it fails — the cause, the fix, the last lines of
//! its stderr — with the back-off before it is started again.

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::ProtocolVersion;
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use crate::elicit::Client;
use crate::http;
use crate::hub::{Conn, Listed, Live, Prompt, Resource, Slot};
use crate::settings::Transport;

/// How long the error of a server that failed to start waits for the rest of its stderr.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Lines of a server's stderr kept for its error messages.
const STDERR_LINES: usize = 20;

/// The longest wait between restarts of a failing server.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The protocol versions noeta's client speaks: every version with an `initialize` handshake
/// that the specification lists. It asks for the newest; a server answering with any of these
/// is spoken to in it.
const SPOKEN_VERSIONS: [ProtocolVersion; 4] = [
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// The wait before starting a server again after `failures` failures in a row.
pub(crate) fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(5)).min(MAX_BACKOFF)
}

/// Marks `slot` failed with `error` (shutting its connection down).
pub(crate) async fn fail(slot: &Slot, error: String) {
    let mut conn = slot.conn.lock().await;
    let failures = match &*conn {
        Conn::Failed { failures, .. } => failures + 1,
        _ => 1,
    };
    if let Conn::Ready(live) = std::mem::replace(&mut *conn, Conn::Idle) {
        let _ = live.service.cancel().await;
    }
    *conn = Conn::Failed {
        error,
        failures,
        at: Instant::now(),
    };
}

/// `cause`, followed on the same line by the last lines the server wrote to stderr, if any.
pub(crate) fn with_stderr(cause: String, slot: &Slot) -> String {
    let lines = slot.stderr.lock().unwrap_or_else(PoisonError::into_inner);
    let tail: Vec<String> = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .rev()
        .take(STDERR_SHOWN)
        .map(|l| clip(l, 200))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if tail.is_empty() {
        return cause;
    }
    format!("{cause}; its stderr ends: {}", tail.join(" | "))
}

/// Lines of a server's stderr quoted in its error.
const STDERR_SHOWN: usize = 3;

/// `text` on one line, at most `max` characters.
fn clip(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Why a server could not be reached or started, in a person's words with what to do, from
/// the client library's error (`raw`, which names its internals).
fn explain(transport: &Transport, raw: &str) -> String {
    let lower = raw.to_lowercase();
    let has = |needle: &str| lower.contains(needle);
    match transport {
        Transport::Http { url, .. } => {
            if has("connection refused") {
                format!("cannot reach {url}: connection refused — is the server running?")
            } else if has("dns error")
                || has("failed to lookup")
                || has("name or service not known")
            {
                format!("cannot reach {url}: the host name does not resolve — check the URL")
            } else if has("401") || has("unauthorized") || has("403") || has("forbidden") {
                format!(
                    "{url} refused the client (it needs sign-in) — give a token in the server's \
                     `headers`, or remove it"
                )
            } else if has("certificate") || has("tls") {
                format!(
                    "cannot reach {url}: its TLS certificate is not trusted — {}",
                    clip(raw, 160)
                )
            } else if has("404") || has("not found") {
                format!("{url} answered 404 — check the URL's path (it is often `/mcp`)")
            } else if has("timed out") || has("timeout") {
                format!("{url} did not answer in time — is the server up?")
            } else {
                format!("cannot reach {url}: {}", clip(raw, 200))
            }
        }
        Transport::Stdio { command, .. } => {
            if has("no such file") || (has("not found") && has("cannot start")) {
                format!(
                    "{} — is `{command}` installed and on the PATH?",
                    clip(raw, 200)
                )
            } else if has("permission denied") {
                format!("{} — `{command}` is not executable", clip(raw, 200))
            } else if has("connection closed") || has("transport") || has("channel closed") {
                format!(
                    "`{command}` ended before it answered `initialize` — run it by hand to see \
                     why"
                )
            } else {
                clip(raw, 200)
            }
        }
        _ => clip(raw, 200),
    }
}

/// Connects `slot` (replacing whatever `conn` held) within its startup deadline.
pub(crate) async fn connect_into(slot: &Slot, conn: &mut Conn) {
    let failures = match conn {
        Conn::Failed { failures, .. } => *failures,
        _ => 0,
    };
    if let Conn::Ready(live) = std::mem::replace(conn, Conn::Idle) {
        let _ = live.service.cancel().await;
    }
    let deadline = slot.server.startup_timeout;
    let alias = &slot.server.alias;
    *slot
        .challenge
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = None;
    *conn = match tokio::time::timeout(deadline, connect(slot)).await {
        Ok(Ok(live)) => Conn::Ready(live),
        Ok(Err(error)) => Conn::Failed {
            error: match http::sign_in_needed(slot) {
                Some(line) => line,
                None => with_stderr(
                    format!(
                        "mcp server `{alias}` did not start: {}",
                        explain(&slot.server.transport, &error)
                    ),
                    slot,
                ),
            },
            failures: failures + 1,
            at: Instant::now(),
        },
        Err(_) => Conn::Failed {
            error: with_stderr(
                format!(
                    "mcp server `{alias}` did not start within {} s — raise its \
                     `startup_timeout_ms` if it is slow to start, or switch it off with \
                     `enabled = false`",
                    deadline.as_secs_f64()
                ),
                slot,
            ),
            failures: failures + 1,
            at: Instant::now(),
        },
    };
    if let Conn::Failed { error, .. } = conn {
        tracing::warn!("{error}");
    }
}

async fn connect(slot: &Slot) -> Result<Live, String> {
    let client = Client::new(&slot.server.alias, slot.elicitor.clone());
    let service = match &slot.server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut wrapped = process_wrap::tokio::CommandWrap::with_new(command, |c| {
                c.args(args).envs(env);
                if let Some(cwd) = cwd {
                    c.current_dir(cwd);
                }
            });
            // Its own process group, killed with it: whatever it starts goes too.
            wrapped
                .wrap(process_wrap::tokio::ProcessGroup::leader())
                .wrap(process_wrap::tokio::KillOnDrop);
            let (transport, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let reader = stderr.map(|stderr| {
                let kept = slot.stderr.clone();
                kept.lock().unwrap_or_else(PoisonError::into_inner).clear();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                        if kept.len() == STDERR_LINES {
                            kept.pop_front();
                        }
                        kept.push_back(line);
                    }
                })
            });
            match client.serve(transport).await {
                Ok(service) => service,
                Err(e) => {
                    // What a server that failed to start wrote to stderr says why: let the
                    // reader take in the rest before the error is reported (briefly — one that
                    // still runs keeps stderr open).
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
                    }
                    return Err(e.to_string());
                }
            }
        }
        Transport::Http { url, headers } => {
            http::service(client, url, headers, slot.tokens.as_ref(), &slot.challenge).await?
        }
        Transport::Host => {
            let endpoint = slot
                .endpoint
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            match endpoint {
                Some(Ok(Some(remote))) => {
                    http::service(client, &remote.url, &remote.headers, None, &slot.challenge)
                        .await?
                }
                Some(Ok(None)) => {
                    return Err("the host's resolver offers no endpoint for it now".to_owned());
                }
                Some(Err(err)) => return Err(err),
                None => return Err("the host's resolver was not asked yet".to_owned()),
            }
        }
        Transport::InProcess(server) => client
            .serve(server.connect())
            .await
            .map_err(|e| e.to_string())?,
    };
    // The version the server answered must be one noeta speaks (the specification's own
    // rule: a client that does not support it disconnects).
    if let Some(info) = service.peer_info()
        && !SPOKEN_VERSIONS.contains(&info.protocol_version)
    {
        let spoken: Vec<String> = SPOKEN_VERSIONS.iter().map(ToString::to_string).collect();
        let _ = service.cancel().await;
        return Err(format!(
            "it answered with protocol version {}, which noeta does not speak (it speaks {})",
            info.protocol_version,
            spoken.join(", ")
        ));
    }
    let listed = service.peer().list_all_tools().await.map_err(|e| {
        http::note_challenge(&slot.challenge, &e);
        format!("its tool list cannot be read: {e}")
    })?;
    let tools = listed
        .into_iter()
        .filter_map(|tool| {
            let json = serde_json::to_value(&tool).ok()?;
            let annotations = json.get("annotations");
            let hint = |key: &str| {
                annotations
                    .and_then(|a| a.get(key))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            Some(Listed {
                alias: slot.server.alias.clone(),
                remote: tool.name.to_string(),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                schema: json
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({ "type": "object" })),
                read_only: hint("readOnlyHint"),
                idempotent: hint("idempotentHint"),
                deferred: false,
            })
        })
        .collect();
    // Resources and prompts, when the server says it has them (its `initialize` answer's
    // capabilities).
    let capabilities = service
        .peer_info()
        .and_then(|info| serde_json::to_value(&*info).ok())
        .map(|info| info["capabilities"].clone())
        .unwrap_or_default();
    let offers_resources = capabilities.get("resources").is_some();
    let resources = if offers_resources {
        service
            .peer()
            .list_all_resources()
            .await
            .map_err(|e| format!("its resource list cannot be read: {e}"))?
            .into_iter()
            .filter_map(|resource| {
                let json = serde_json::to_value(&resource).ok()?;
                let text = |key: &str| json.get(key).and_then(Value::as_str).map(str::to_owned);
                Some(Resource {
                    alias: slot.server.alias.clone(),
                    uri: text("uri")?,
                    name: text("name").unwrap_or_default(),
                    description: text("description"),
                    mime: text("mimeType"),
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let prompts = if capabilities.get("prompts").is_some() {
        service
            .peer()
            .list_all_prompts()
            .await
            .map_err(|e| format!("its prompt list cannot be read: {e}"))?
            .into_iter()
            .filter_map(|prompt| {
                let json = serde_json::to_value(&prompt).ok()?;
                let text =
                    |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
                let arguments = json
                    .get("arguments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|arg| {
                        Some((
                            text(arg, "name")?,
                            arg.get("required")
                                .and_then(Value::as_bool)
                                .unwrap_or(false),
                            text(arg, "description"),
                        ))
                    })
                    .collect();
                Some(Prompt {
                    alias: slot.server.alias.clone(),
                    name: text(&json, "name")?,
                    description: text(&json, "description"),
                    arguments,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Live {
        service,
        tools,
        resources,
        prompts,
    })
}
