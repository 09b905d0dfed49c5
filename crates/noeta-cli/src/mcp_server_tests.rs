//! The MCP server frontend (`Desk` over streamable HTTP) met by the `mcp` built-in's client: tools
//! listed with their schemas and hints, results as text and images, errors as `isError`, and a
//! desk whose owner has stopped answering with a protocol error that says so.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;

use super::{Desk, Job, Served, ServedImage, ServedTool, serve_http};
use futures::executor::block_on;
use noeta::mcp::{Mcp, Settings};
use noeta_core::extension::{Extension, View};
use noeta_core::fold::TaskState;
use noeta_core::store::TaskId;
use noeta_core::{Tool, ToolContext};
use serde_json::json;
use tokio::sync::mpsc;

/// Whether the owner saw a `Slow` call given up.
static GAVE_UP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The owner's side of a desk: `Echo` (read-only) answers its input, `Picture` an image,
/// `Slow` answers after 2.5 s unless it is given up first, anything else an error result.
async fn owner(mut jobs: mpsc::Receiver<Job>) {
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Tools(reply) => {
                let schema = json!({"type": "object", "properties": {"say": {"type": "string"}}});
                let _ = reply.send(Ok(vec![
                    ServedTool::new("Echo", "Says it back.", schema.clone()).with_hints(true, true),
                    ServedTool::new("Picture", "Draws.", schema.clone()),
                    ServedTool::new("Slow", "Takes its time.", schema),
                ]));
            }
            Job::Call {
                name,
                reply,
                cancelled,
                ..
            } if name == "Slow" => {
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_millis(2_500)) => {
                        let _ = reply.send(Ok(Served::new("slowly done", false)));
                    }
                    _ = cancelled => GAVE_UP.store(true, std::sync::atomic::Ordering::SeqCst),
                }
            }
            Job::Call {
                name, input, reply, ..
            } => {
                let served = match name.as_str() {
                    "Echo" => Served::new(format!("echo: {}", input["say"]), false),
                    "Picture" => Served::new("a dot", false)
                        .with_images(vec![ServedImage::new("image/png", vec![1, 2, 3])]),
                    other => Served::new(format!("no tool `{other}`"), true),
                };
                let _ = reply.send(Ok(served));
            }
        }
    }
}

/// A desk served on a loopback port by a runtime of its own; `answering` false drops the
/// owner, so every job finds nobody.
fn served(answering: bool) -> (tokio::runtime::Runtime, String) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (jobs, inbox) = mpsc::channel(4);
    if answering {
        rt.spawn(owner(inbox));
    } else {
        drop(inbox);
    }
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    // Served until the runtime is dropped with the test.
    rt.spawn(serve_http(
        Desk::new(jobs, "test desk"),
        listener,
        std::future::pending(),
        Some(TOKEN.to_owned()),
    ));
    (rt, url)
}

/// The token the desk's server asks for.
const TOKEN: &str = "desk-token-0123456789";

fn client(url: &str) -> Mcp {
    Mcp::new(
        Settings::parse(&json!({ "servers": { "desk": {
            "url": url,
            "headers": { "Authorization": format!("Bearer {TOKEN}") }
        } }, "startup_wait_ms": 60_000 }))
        .unwrap(),
    )
}

fn offered(mcp: &Mcp) -> Vec<Arc<dyn Tool>> {
    let task = TaskId::new("serve-test").unwrap();
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);
    mcp.tools(&view).unwrap()
}

#[test]
fn a_desk_lists_its_tools_with_schemas_and_hints_and_answers_calls() {
    let (_rt, url) = served(true);
    let mcp = client(&url);
    let tools = offered(&mcp);
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        ["mcp__desk__Echo", "mcp__desk__Picture", "mcp__desk__Slow"]
    );
    let echo = &tools[0];
    assert_eq!(echo.description(), "Says it back.");
    assert_eq!(
        echo.input_schema()["properties"]["say"]["type"],
        json!("string")
    );
    assert!(echo.flags().read_only, "readOnlyHint reaches the client");
    assert!(!tools[1].flags().read_only);

    let ctx = ToolContext::new("serve-test", "call-1");
    let out = block_on(echo.run(json!({"say": "hi"}), &ctx)).unwrap();
    assert_eq!(out.text, "echo: \"hi\"");
    let picture = block_on(tools[1].run(json!({}), &ctx)).unwrap();
    assert_eq!(picture.text, "a dot\n[image: image/png, 3 bytes, attached]");
    let images: Vec<(&str, &[u8])> = picture
        .attachments
        .iter()
        .map(|a| (a.media_type.as_str(), a.data.as_slice()))
        .collect();
    assert_eq!(
        images,
        [("image/png", &[1u8, 2, 3][..])],
        "the image arrives whole"
    );
}

#[test]
fn a_desk_whose_owner_stopped_answers_with_a_protocol_error_saying_so() {
    let (_rt, url) = served(false);
    let mcp = client(&url);
    let statuses = block_on(mcp.connect());
    let (alias, status) = &statuses[0];
    assert_eq!(alias, "desk");
    let err = status.clone().unwrap_err();
    assert!(
        err.contains("the noeta agent serving these tools has stopped"),
        "{err}"
    );
}

/// Progress notifications as heard: the progress and its message.
type ProgressHeard = Arc<std::sync::Mutex<Vec<(f64, Option<String>)>>>;

/// What a plain MCP client heard from the server besides answers.
#[derive(Clone, Default)]
struct Heard {
    progress: ProgressHeard,
    logs: Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Heard {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap()
            .push((params.progress, params.message));
    }

    #[expect(
        deprecated,
        reason = "MCP logging is still part of the protocol version served"
    )]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params.data.to_string());
    }
}

#[test]
#[expect(
    deprecated,
    reason = "MCP logging is still part of the protocol version served"
)]
fn a_long_call_reports_progress_logs_and_resources_and_prompts_list_empty() {
    use rmcp::ServiceExt as _;
    let (rt, url) = served(true);
    rt.block_on(async {
        let mut headers = std::collections::HashMap::new();
        headers.insert(
            hyper::header::HeaderName::from_static("authorization"),
            hyper::header::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap(),
        );
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.as_str(),
            )
            .custom_headers(headers);
        let heard = Heard::default();
        let client = heard
            .clone()
            .serve(rmcp::transport::StreamableHttpClientTransport::from_config(
                config,
            ))
            .await
            .unwrap();
        // Listed empty, never "method not found".
        let resources = client.list_resources(None).await.unwrap();
        assert!(resources.resources.is_empty());
        let prompts = client.list_prompts(None).await.unwrap();
        assert!(prompts.prompts.is_empty());
        client
            .set_level(rmcp::model::SetLevelRequestParams::new(
                rmcp::model::LoggingLevel::Info,
            ))
            .await
            .unwrap();
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.set_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::Number(7),
        ));
        let mut params = rmcp::model::CallToolRequestParams::new("Slow");
        params.meta = Some(meta);
        let done = client.call_tool(params).await.unwrap();
        assert_eq!(
            serde_json::to_value(&done.content).unwrap()[0]["text"],
            json!("slowly done")
        );
        let progress = heard.progress.lock().unwrap().clone();
        assert!(progress.len() >= 2, "{progress:?}");
        assert_eq!(progress[0].0, 1.0);
        assert_eq!(progress[0].1.as_deref(), Some("`Slow` is running (1 s)"));
        // Notifications are handled as they come: the last may trail the answer a moment.
        let wanted = [
            json!("calling `Slow`").to_string(),
            json!("`Slow` finished").to_string(),
        ];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let logs = heard.logs.lock().unwrap().clone();
            if wanted.iter().all(|w| logs.contains(w)) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{logs:?}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let _ = client.cancel().await;
    });
}

#[test]
fn a_call_the_client_gives_up_is_given_up_where_it_runs() {
    let (_rt, url) = served(true);
    let mcp = client(&url);
    let tools = offered(&mcp);
    let slow = tools
        .iter()
        .find(|t| t.name() == "mcp__desk__Slow")
        .unwrap()
        .clone();
    let ctx = ToolContext::new("serve-test", "call-slow");
    // The client's call future is dropped after a moment: it tells the server it cancelled.
    let call = slow.run(json!({}), &ctx);
    let answered = block_on(async {
        let timer = Box::pin(async {
            std::thread::sleep(std::time::Duration::from_millis(500));
        });
        matches!(
            futures::future::select(call, timer).await,
            futures::future::Either::Left(_)
        )
    });
    assert!(!answered, "the slow call answered before it was dropped");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !GAVE_UP.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the owner never heard the call was cancelled"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
