//! A server's tool as the model sees it: `mcp__<alias>__<tool>`, the server's own schema and
//! description, and its result turned into text and attachments.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::Value;

use crate::hub::{Hub, Listed};

pub use noeta_core::{MCP_TOOL_NAME_MAX as MAX_NAME_LEN, mcp_tool_name as tool_name};

/// One server tool, mounted.
pub(crate) struct McpTool {
    hub: Arc<Hub>,
    listed: Listed,
    name: String,
}

impl McpTool {
    /// The tool under its model-visible name, `mcp__<alias>__<tool>`.
    pub(crate) fn new(hub: Arc<Hub>, listed: Listed) -> Self {
        let name = tool_name(&listed.alias, &listed.remote);
        Self { hub, listed, name }
    }

    /// The tool under the name its server gives it (an in-process server's tools, which the
    /// kernel names when it mounts them).
    pub(crate) fn as_served(hub: Arc<Hub>, listed: Listed) -> Self {
        let name = listed.remote.clone();
        Self { hub, listed, name }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.listed.description
    }

    fn input_schema(&self) -> Value {
        self.listed.schema.clone()
    }

    /// The server checks its own input. Annotations are the server's word: a read-only tool is
    /// low risk and may run again after a crash, an idempotent one may run again; every other
    /// tool is high risk (asked for in the default permission mode) and, cut off by a crash,
    /// ends as "outcome unknown".
    fn flags(&self) -> ToolFlags {
        let mut flags = if self.listed.read_only {
            ToolFlags::default().marked_read_only().with_risk(Risk::Low)
        } else {
            ToolFlags::default().with_risk(Risk::High)
        }
        .unchecked_input();
        if self.listed.read_only || self.listed.idempotent {
            flags = flags.retry_safe();
        }
        if self.listed.deferred {
            // Found by ToolSearch under its server's alias too.
            flags = flags
                .deferred()
                .with_search_hint(format!("mcp {} server", self.listed.alias));
        }
        flags
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match input {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::RespondToModel(format!(
                    "{}: the input must be a JSON object, got `{other}`",
                    self.name
                )));
            }
        };
        let result = self
            .hub
            .call(&self.listed.alias, &self.listed.remote, arguments)
            .await
            .map_err(ToolError::RespondToModel)?;
        Ok(output(&result))
    }
}

/// A `tools/call` result as the model sees it: text content in order, images attached (and
/// named), embedded resources shown with their URI, links listed, other kinds named; the
/// structured content when there is nothing else; `isError` an error result.
pub(crate) fn output(result: &Value) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut attachments: Vec<(String, Vec<u8>)> = Vec::new();
    for item in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => parts.push(field("text").to_owned()),
            "image" => {
                let mime = field("mimeType");
                match base64::engine::general_purpose::STANDARD.decode(field("data")) {
                    Ok(bytes) => {
                        parts.push(format!("[image: {mime}, {} bytes, attached]", bytes.len()));
                        attachments.push((mime.to_owned(), bytes));
                    }
                    Err(_) => parts.push(format!("[image: {mime}, not valid base64]")),
                }
            }
            "audio" => parts.push(format!(
                "[audio: {}, not shown]",
                item.get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("audio")
            )),
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or_default();
                let get = |key: &str| resource.get(key).and_then(Value::as_str);
                let uri = get("uri").unwrap_or("(no uri)");
                let mime = get("mimeType")
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default();
                match (get("text"), get("blob")) {
                    (Some(text), _) => parts.push(format!("Resource {uri}{mime}:\n{text}")),
                    (None, Some(blob)) => parts.push(format!(
                        "[resource {uri}{mime}: {} bytes of binary content]",
                        blob.len() / 4 * 3
                    )),
                    (None, None) => parts.push(format!("[resource {uri}{mime}]")),
                }
            }
            "resource_link" => {
                let name = field("name");
                let uri = field("uri");
                let mut line = format!("Resource link: {name} <{uri}>");
                if let Some(mime) = item.get("mimeType").and_then(Value::as_str) {
                    line.push_str(&format!(" ({mime})"));
                }
                if let Some(description) = item.get("description").and_then(Value::as_str) {
                    line.push_str(&format!(" — {description}"));
                }
                parts.push(line);
            }
            other => parts.push(format!("[content of type `{other}`, not shown]")),
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    let text = if parts.is_empty() {
        "(the tool returned no content)".to_owned()
    } else {
        parts.join("\n")
    };
    let mut out = if result.get("isError").and_then(Value::as_bool) == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    };
    for (mime, bytes) in attachments {
        out = out.with_attachment(mime, bytes);
    }
    // Structured content is kept for frontends and records.
    out.data = result.get("structuredContent").cloned();
    out
}
