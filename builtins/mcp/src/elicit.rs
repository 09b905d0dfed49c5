//! Elicitation: a server asking the person for input in the middle of a call
//! (`elicitation/create`), and how noeta introduces itself.
//!
//! A form elicitation goes to the host's [`Elicitor`] (the terminal asks the person, field by
//! field, as it asks permission); a host with nobody to ask (a worker, a server) has none, and
//! the request is declined with the reason logged. A URL elicitation is declined: noeta opens
//! no browser for a server.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Map, Value};

/// The host value holding the host's [`Elicitor`] (set it with [`elicitor_value`]).
pub const ELICITOR: &str = "noeta_builtin_mcp::elicitor";

/// What the person made of an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// The values given, one per field answered.
    Accept(Map<String, Value>),
    /// Declined, with why (logged; the protocol carries no reason).
    Decline(String),
    /// The call is to be given up.
    Cancel,
}

/// Who answers a server's request for input.
#[async_trait]
pub trait Elicitor: Send + Sync {
    /// Asks for the fields of `schema` (an object schema of primitive fields), on behalf of
    /// server `server`, saying `message`.
    async fn elicit(&self, server: &str, message: &str, schema: &Value) -> Elicited;
}

/// `elicitor` as the host value the plugin reads (set it under [`ELICITOR`]).
pub fn elicitor_value(elicitor: Arc<dyn Elicitor>) -> noeta_core::HostValue {
    noeta_core::HostValue::new(elicitor)
}

/// The elicitor a session's host handed over, if any.
pub(crate) fn from_host(values: &noeta_core::HostValues) -> Option<Arc<dyn Elicitor>> {
    values.get::<Arc<dyn Elicitor>>(ELICITOR).cloned()
}

/// The values `schema`'s fields default to (`default` of each property that has one).
pub fn defaults(schema: &Value) -> Map<String, Value> {
    schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(name, field)| field.get("default").map(|d| (name.clone(), d.clone())))
        .collect()
}

/// noeta as an MCP client of one server: it introduces itself by name and version, asks for
/// the newest protocol version with an `initialize` handshake, says it can take form
/// elicitations, and hands them to the host's elicitor.
#[derive(Clone)]
pub(crate) struct Client {
    alias: String,
    elicitor: Option<Arc<dyn Elicitor>>,
}

impl Client {
    pub(crate) fn new(alias: &str, elicitor: Option<Arc<dyn Elicitor>>) -> Self {
        Self {
            alias: alias.to_owned(),
            elicitor,
        }
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::new());
        capabilities.elicitation = Some(elicitation);
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("noeta", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let alias = &self.alias;
        let (message, schema) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (
                message,
                serde_json::to_value(requested_schema).unwrap_or(Value::Null),
            ),
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                tracing::warn!(
                    "mcp server `{alias}` asked the person to open {url} ({message}): declined, \
                     noeta opens no browser for a server"
                );
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            }
            _ => {
                tracing::warn!(
                    "mcp server `{alias}` asked for input of a kind noeta does not know: declined"
                );
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            }
        };
        let Some(elicitor) = &self.elicitor else {
            tracing::warn!(
                "mcp server `{alias}` asked for input ({message}): declined, nobody can answer \
                 here"
            );
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        Ok(match elicitor.elicit(alias, &message, &schema).await {
            Elicited::Accept(values) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(values))
            }
            Elicited::Decline(why) => {
                tracing::warn!("mcp server `{alias}` asked for input ({message}): declined, {why}");
                ElicitResult::new(ElicitationAction::Decline)
            }
            Elicited::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::defaults;
    use serde_json::json;

    #[test]
    fn the_defaults_of_a_form_are_its_fields_defaults() {
        let schema = json!({ "type": "object", "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "email": { "type": "string" }
        } });
        assert_eq!(
            serde_json::Value::Object(defaults(&schema)),
            json!({ "name": "John Doe", "age": 30 })
        );
        assert!(defaults(&json!({})).is_empty());
    }
}
