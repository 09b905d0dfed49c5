//! The servers' resources as two tools, offered only while some server lists resources:
//! `ListMcpResources` (what there is, by server) and `ReadMcpResource` (one by URI).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

use crate::hub::Hub;

/// The listing tool's name.
pub const LIST_RESOURCES: &str = "ListMcpResources";
/// The reading tool's name.
pub const READ_RESOURCE: &str = "ReadMcpResource";

/// Read-only, low risk, safe to run again: both tools only read.
fn flags() -> ToolFlags {
    ToolFlags::read_only().retry_safe()
}

/// `ListMcpResources`.
pub(crate) struct ListResources(pub(crate) Arc<Hub>);

#[async_trait]
impl Tool for ListResources {
    fn name(&self) -> &str {
        LIST_RESOURCES
    }

    fn description(&self) -> &str {
        "Lists the resources the connected MCP servers offer (documents, files, records), each \
         with its server and URI; read one with ReadMcpResource. Give `server` to list one \
         server's only."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string", "description": "Only this server's resources (its alias)." }
            },
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        flags()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let only = input.get("server").and_then(Value::as_str);
        let mut lines = Vec::new();
        for resource in self.0.resources() {
            if only.is_some_and(|only| only != resource.alias) {
                continue;
            }
            let mut line = format!("{}: {}", resource.alias, resource.uri);
            if !resource.name.is_empty() {
                line.push_str(&format!(" — {}", resource.name));
            }
            if let Some(mime) = &resource.mime {
                line.push_str(&format!(" ({mime})"));
            }
            if let Some(description) = &resource.description {
                line.push_str(&format!(": {description}"));
            }
            lines.push(line);
        }
        Ok(ToolOutput::text(if lines.is_empty() {
            match only {
                Some(server) => format!("Server `{server}` lists no resources."),
                None => "No server lists resources.".to_owned(),
            }
        } else {
            lines.join("\n")
        }))
    }
}

/// `ReadMcpResource`.
pub(crate) struct ReadResource(pub(crate) Arc<Hub>);

#[async_trait]
impl Tool for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE
    }

    fn description(&self) -> &str {
        "Reads one resource of a connected MCP server by its URI (ListMcpResources lists them): \
         its text, or its image attached."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": { "type": "string", "description": "The server's alias." },
                "uri": { "type": "string", "description": "The resource's URI." }
            },
            "required": ["server", "uri"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        flags()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let field = |key: &str| {
            input.get(key).and_then(Value::as_str).ok_or_else(|| {
                ToolError::RespondToModel(format!("{READ_RESOURCE}: `{key}` is required"))
            })
        };
        let (server, uri) = (field("server")?, field("uri")?);
        let result = self
            .0
            .read_resource(server, uri)
            .await
            .map_err(ToolError::RespondToModel)?;
        Ok(contents(&result))
    }
}

/// A `resources/read` result: each content's text under its URI, images attached, other
/// binary content named with its size.
fn contents(result: &Value) -> ToolOutput {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    for item in result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let get = |key: &str| item.get(key).and_then(Value::as_str);
        let uri = get("uri").unwrap_or("(no uri)");
        let mime = get("mimeType");
        let shown = mime.map(|m| format!(" ({m})")).unwrap_or_default();
        match (get("text"), get("blob")) {
            (Some(text), _) => parts.push(format!("{uri}{shown}:\n{text}")),
            (None, Some(blob)) => match base64::engine::general_purpose::STANDARD.decode(blob) {
                Ok(bytes) if mime.is_some_and(|m| m.starts_with("image/")) => {
                    parts.push(format!(
                        "{uri}{shown}: an image of {} bytes, attached",
                        bytes.len()
                    ));
                    images.push((mime.unwrap_or_default().to_owned(), bytes));
                }
                Ok(bytes) => parts.push(format!(
                    "{uri}{shown}: {} bytes of binary content",
                    bytes.len()
                )),
                Err(_) => parts.push(format!(
                    "{uri}{shown}: binary content that is not valid base64"
                )),
            },
            (None, None) => parts.push(format!("{uri}{shown}: no content")),
        }
    }
    let mut out = ToolOutput::text(if parts.is_empty() {
        "(the resource has no content)".to_owned()
    } else {
        parts.join("\n\n")
    });
    for (mime, bytes) in images {
        out = out.with_attachment(mime, bytes);
    }
    out
}
