//! The `mcp_server` surface for real: a plugin's in-process rmcp server, served over an
//! in-memory transport through the same client as a command or a URL, its tools mounted for
//! every agent as `mcp__<alias>__<tool>` and called by the runtime.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use futures::executor::block_on;
use noeta_core::model::Role;
use noeta_core::store::TaskId;
use noeta_core::{
    ActivationRules, AgentOptions, LinkedPlugin, LoadOptions, PluginSource, RefTable, Resolved,
    compile_agent, load_plugins, standard_registry,
};
use noeta_testkit::harness::{Harness, session_of};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

const LONG: &str = "a_tool_whose_name_is_far_longer_than_any_model_provider_would_ever_accept";

/// A ticket desk: `open` (read-only, counts), `photo` (an image), `broken` (an error result),
/// and a tool with a very long name.
#[derive(Clone, Default)]
struct Tickets {
    opened: Arc<AtomicUsize>,
    /// `tools/list` fails, as a server that is not ready.
    locked: bool,
}

fn listed(name: &str, read_only: bool) -> rmcp::model::Tool {
    let schema = json!({
        "type": "object",
        "properties": { "title": { "type": "string" } },
    });
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    rmcp::model::Tool::new(
        name.to_owned(),
        format!("The {name} tool."),
        Arc::new(schema),
    )
    .with_annotations(ToolAnnotations::new().read_only(read_only))
}

impl ServerHandler for Tickets {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ticket-desk", "2.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if self.locked {
            return Err(ErrorData::internal_error(
                "the ticket index is locked",
                None,
            ));
        }
        Ok(ListToolsResult::with_all_items(vec![
            listed("open", true),
            listed("photo", false),
            listed("broken", false),
            listed(LONG, false),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let title = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("title"))
            .and_then(Value::as_str)
            .unwrap_or("untitled")
            .to_owned();
        let result = match &*request.name {
            "open" => {
                let n = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
                CallToolResult::success(vec![ContentBlock::text(format!(
                    "opened ticket {n}: {title}"
                ))])
            }
            "photo" => CallToolResult::success(vec![
                ContentBlock::text("the desk"),
                ContentBlock::image(
                    base64::engine::general_purpose::STANDARD.encode(b"\x89PNG"),
                    "image/png",
                ),
            ]),
            "broken" => CallToolResult::error(vec![ContentBlock::text("the printer is on fire")]),
            _ => CallToolResult::success(vec![ContentBlock::text("long")]),
        };
        Ok(result.into())
    }
}

/// A plugin contributing `desk` as the in-process server `tickets`.
fn plugin(desk: Tickets) -> LinkedPlugin {
    let manifest = "name = \"tickets-plugin\"\nversion = \"1.0.0\"\n\n[[contributions]]\n\
                    surface = \"mcp_server\"\nname = \"tickets\"\nref = \"tickets::desk\"\n";
    noeta_testkit::fixtures::linked(
        "tickets-plugin",
        manifest,
        RefTable::new().with("tickets::desk", move |request| {
            let spec = noeta_builtin_mcp::in_process_server(request.name, desk.clone())?;
            Ok(Resolved::McpServer(Arc::new(spec)))
        }),
    )
}

#[test]
fn an_in_process_server_is_called_through_the_mcp_client_like_a_remote_one() {
    let desk = Tickets::default();
    // No activation: loading the plugin is what puts the server in every agent.
    let session = session_of(vec![plugin(desk.clone())], &[], &Default::default());
    let long = noeta_builtin_mcp::tool_name("tickets", LONG);
    assert!(long.len() <= noeta_builtin_mcp::MAX_NAME_LEN, "{long}");
    let names: Vec<String> = session
        .spec
        .tools
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    let mut expected = vec![
        "mcp__tickets__broken".to_owned(),
        "mcp__tickets__open".to_owned(),
        "mcp__tickets__photo".to_owned(),
        long.clone(),
    ];
    expected.sort();
    assert_eq!(names, expected);

    let harness = Harness::new();
    let rt = harness.runtime(json!([
        { "calls": [
            { "id": "c1", "name": "mcp__tickets__open", "input": { "title": "fix the lease" } },
            { "id": "c2", "name": "mcp__tickets__photo", "input": {} },
            { "id": "c3", "name": "mcp__tickets__broken", "input": {} },
            { "id": "c4", "name": long, "input": {} }
        ] },
        { "text": "done" }
    ]));
    let task = TaskId::new("desk").unwrap();
    block_on(rt.create(&session, &task, "file a ticket")).unwrap();
    block_on(rt.run(&session, &task)).unwrap();
    let state = block_on(rt.load(&session, &task)).unwrap();
    let results: Vec<(String, bool, usize)> = state
        .core
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.text.to_string(), m.is_error, m.attachments.len()))
        .collect();
    assert_eq!(
        results,
        [
            ("opened ticket 1: fix the lease".to_owned(), false, 0),
            (
                "the desk\n[image: image/png, 4 bytes, attached]".to_owned(),
                false,
                1
            ),
            ("the printer is on fire".to_owned(), true, 0),
            ("long".to_owned(), false, 0),
        ]
    );
    assert_eq!(
        desk.opened.load(Ordering::SeqCst),
        1,
        "the server saw one call"
    );
    // The server's own name and version describe the contribution.
    let spec = noeta_builtin_mcp::in_process_server("tickets", Tickets::default()).unwrap();
    assert_eq!(
        (spec.name.as_str(), spec.version.as_str()),
        ("ticket-desk", "2.1.0")
    );
}

#[test]
fn an_in_process_server_that_cannot_list_its_tools_fails_the_build_naming_plugin_and_alias() {
    let locked = Tickets {
        locked: true,
        ..Tickets::default()
    };
    let sources = vec![PluginSource::Linked(plugin(locked))];
    let set = load_plugins(&sources, &LoadOptions::new(standard_registry())).unwrap();
    let merged = set.merged().unwrap();
    let mut options = AgentOptions::named("main");
    options.plugins = Vec::new();
    let err = compile_agent(&set, &merged, &options, &ActivationRules::default())
        .unwrap_err()
        .to_string();
    for part in [
        "tickets-plugin",
        "mcp server `tickets`",
        "the ticket index is locked",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
}
