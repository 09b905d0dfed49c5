//! The request side of the tiny HTTP/1.1 servers tests start on the loopback interface.

use std::collections::BTreeMap;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// One request as a test server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target as sent (`/path?query`).
    pub path: String,
    /// The headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The body (`Content-Length` bytes), as text.
    pub body: String,
}

/// Reads one request (head, then `Content-Length` bytes of body) from `socket`; `None` when
/// the client closed the connection or sent something that is not a request line.
pub async fn read_request(socket: &mut TcpStream) -> Option<Request> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// An OpenAI-compatible server on the loopback interface for CLI tests: answers each of
/// `replies` requests, one connection each, with a streamed chat completion whose text is
/// `text`, then stops. Its base URL (`http://…/v1`, for `OPENAI_BASE_URL`) and a handle whose
/// join gives each request's JSON body in order.
///
/// # Panics
///
/// In the server thread, when a client sends something that is not a request with a JSON
/// body (a test helper: the joined handle then fails the test).
#[expect(
    clippy::expect_used,
    reason = "a test helper: failing loudly is the point"
)]
pub fn openai_text_server(
    replies: usize,
    text: &str,
) -> (String, std::thread::JoinHandle<Vec<serde_json::Value>>) {
    use serde_json::{Value, json};
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let base = format!(
        "http://{}/v1",
        listener.local_addr().expect("a bound address")
    );
    let text = text.to_owned();
    let handle = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for _ in 0..replies {
            let (mut stream, _) = listener.accept().expect("a client");
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 8192];
            let body = loop {
                let n = stream.read(&mut chunk).expect("a request");
                buffer.extend_from_slice(&chunk[..n]);
                let seen = String::from_utf8_lossy(&buffer).into_owned();
                if let Some((head, body)) = seen.split_once("\r\n\r\n") {
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .and_then(|v| v.trim().parse().ok())
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break body.to_owned();
                    }
                }
                assert!(n > 0, "the client hung up mid-request");
            };
            bodies.push(serde_json::from_str::<Value>(&body).expect("a JSON body"));
            let event = |delta: Value, finish: Value| {
                json!({ "id": "c", "object": "chat.completion.chunk", "model": "m",
                        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
            };
            let mut reply = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
            );
            for event in [
                event(json!({ "role": "assistant", "content": "" }), Value::Null),
                event(json!({ "content": text }), Value::Null),
                event(json!({}), json!("stop")),
            ] {
                reply.push_str(&format!("data: {event}\n\n"));
            }
            reply.push_str("data: [DONE]\n\n");
            stream
                .write_all(reply.as_bytes())
                .expect("the reply is written");
        }
        bodies
    });
    (base, handle)
}
