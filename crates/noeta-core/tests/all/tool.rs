//! The `Tool` trait as a plugin implements it: running a fixture tool, its context, flags, outputs and schema hash.

use futures::executor::block_on;
use noeta_core::tool::tool_schema_hash;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::json;

use crate::support::{EchoTool, Manifest, agent, compile, linked, load};

#[test]
fn a_tool_runs_with_its_context_and_the_idempotency_key_joins_task_and_call() {
    let ctx = ToolContext::new("t1", "c1");
    assert_eq!(ctx.task_id(), "t1");
    assert_eq!(ctx.call_id(), "c1");
    assert_eq!(ctx.idempotency_key(), "t1:c1");

    let tool = EchoTool::new("echo");
    let output = block_on(tool.run(json!({"text": "hello"}), &ctx)).unwrap();
    assert_eq!(output, ToolOutput::text("hello (key t1:c1)"));
    assert!(!output.is_error);
}

#[test]
fn a_tool_error_for_the_model_carries_its_message() {
    let tool = EchoTool::new("echo");
    let err = block_on(tool.run(json!({}), &ToolContext::new("t1", "c2"))).unwrap_err();
    assert_eq!(
        err,
        ToolError::RespondToModel("echo: `text` is required".to_owned())
    );
    assert_eq!(err.to_string(), "echo: `text` is required");
    assert_eq!(
        ToolError::Fatal("disk gone".to_owned()).to_string(),
        "fatal tool error: disk gone"
    );
}

#[test]
fn outputs_and_flags_have_their_documented_defaults() {
    let error = ToolOutput::error("bad input");
    assert!(error.is_error && error.data.is_none());
    assert_eq!(error.text, "bad input");

    let flags = ToolFlags::read_only().with_risk(Risk::High);
    assert!(flags.read_only && flags.safe_while_planning);
    assert!(!flags.deferred && !flags.retry_safe);
    assert_eq!(flags.risk, Risk::High);
    assert_eq!(ToolFlags::default().risk, Risk::Low);
    assert_eq!(EchoTool::new("echo").flags(), ToolFlags::read_only());
}

#[test]
fn the_schema_hash_covers_name_description_and_schema() {
    let a = EchoTool::new("echo");
    assert_eq!(
        tool_schema_hash(&a),
        tool_schema_hash(&EchoTool::new("echo"))
    );
    assert_ne!(
        tool_schema_hash(&a),
        tool_schema_hash(&EchoTool::new("other"))
    );
    assert_ne!(
        tool_schema_hash(&a),
        tool_schema_hash(&EchoTool::new("echo").described("Says it twice."))
    );
}

#[test]
fn a_compiled_agent_runs_its_tools_including_mcp_tools_under_their_prefixed_name() {
    let set = load(&[
        linked(&Manifest::new("files").with("tool", "read", "")),
        linked(&Manifest::new("docs").with("mcp_server", "docs", "mcp_tool = \"search\"")),
    ]);
    let compiled = compile(&set, &agent("main", &["files"])).unwrap();
    assert_eq!(
        compiled.tools.keys().collect::<Vec<_>>(),
        ["mcp__docs__search", "read"]
    );

    let ctx = ToolContext::new("task-9", "call-3");
    let read = &compiled.tools["read"];
    let output = block_on(read.run(json!({"text": "file body"}), &ctx)).unwrap();
    assert_eq!(output.text, "file body (key task-9:call-3)");

    let search = &compiled.tools["mcp__docs__search"];
    assert_eq!(search.name(), "mcp__docs__search");
    assert_eq!(search.description(), "Echoes its input (search).");
    assert_eq!(
        search.input_schema(),
        EchoTool::new("search").input_schema()
    );
    assert!(search.flags().read_only);
    let output = block_on(search.run(json!({"text": "query"}), &ctx)).unwrap();
    assert_eq!(output.text, "query (key task-9:call-3)");
}
