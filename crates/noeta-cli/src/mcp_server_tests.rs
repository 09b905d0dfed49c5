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

/// The owner's side of a desk: `Echo` (read-only) answers its input, `Picture` an image,
/// anything else an error result.
async fn owner(mut jobs: mpsc::Receiver<Job>) {
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Tools(reply) => {
                let schema = json!({"type": "object", "properties": {"say": {"type": "string"}}});
                let _ = reply.send(Ok(vec![
                    ServedTool::new("Echo", "Says it back.", schema.clone()).with_hints(true, true),
                    ServedTool::new("Picture", "Draws.", schema),
                ]));
            }
            Job::Call { name, input, reply } => {
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
        } } }))
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
    assert_eq!(names, ["mcp__desk__Echo", "mcp__desk__Picture"]);
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
