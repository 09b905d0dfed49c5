//! The `mcp_server` surface's in-memory transport: an MCP server living in this process (an
//! rmcp [`ServerHandler`]) spoken to through the same client as a command or a URL.
//!
//! [`in_process_server`] makes the value a plugin's `mcp_server` contribution resolves to: it
//! connects to the server over an in-memory duplex (`tokio::io::duplex`), lists its tools, and
//! returns them as tools whose every call goes through that connection — the same hub, result
//! conversion, deadlines and restart as a remote server's. The kernel mounts them for every
//! agent as `mcp__<alias>__<tool>`.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use noeta_core::{McpServerSpec, Tool};
use rmcp::{ServerHandler, ServiceExt};
use tokio::io::DuplexStream;

use crate::hub::Hub;
use crate::settings::{CALL_TIMEOUT_MS, STARTUP_TIMEOUT_MS, Server, Transport};
use crate::tool::McpTool;

/// Bytes buffered each way on an in-memory connection.
const DUPLEX_BUFFER: usize = 1 << 16;

type Serve = dyn Fn(DuplexStream) -> BoxFuture<'static, ()> + Send + Sync;

/// A server in this process: what serves one connection, given the server's end of it.
#[derive(Clone)]
pub struct InProcess {
    name: String,
    serve: Arc<Serve>,
}

impl InProcess {
    /// `handler` served afresh on every connection (a connection that fails is replaced by a
    /// new one, as a remote server is restarted).
    pub fn new<H>(handler: H) -> Self
    where
        H: ServerHandler + Clone,
    {
        let name = handler.get_info().server_info.name;
        let serve = Arc::new(move |far: DuplexStream| -> BoxFuture<'static, ()> {
            let handler = handler.clone();
            Box::pin(async move {
                match handler.serve(far).await {
                    Ok(running) => {
                        let _ = running.waiting().await;
                    }
                    Err(err) => tracing::warn!("in-process mcp server: {err}"),
                }
            })
        });
        Self { name, serve }
    }

    /// The server's own name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new connection: the client's end, with the server serving the other end on the
    /// current tokio runtime until the client goes.
    pub(crate) fn connect(&self) -> DuplexStream {
        let (near, far) = tokio::io::duplex(DUPLEX_BUFFER);
        tokio::spawn((self.serve)(far));
        near
    }
}

impl PartialEq for InProcess {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.serve, &other.serve)
    }
}

impl Eq for InProcess {}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The value of an `mcp_server` contribution named `alias` whose server is `handler`:
/// connects to it over an in-memory transport (within 30 s), lists its tools and returns them
/// as calls through that connection, each under the name the server gives it. Every call has
/// the default deadline of a configured server (`call_timeout_ms`, 600 s). The error names the
/// alias and why the server could not be listed.
///
/// ```ignore
/// RefTable::new().with("my_plugin::tickets", |request| {
///     let spec = noeta_builtin_mcp::in_process_server(request.name, Tickets::default())?;
///     Ok(Resolved::McpServer(Arc::new(spec)))
/// })
/// ```
pub fn in_process_server<H>(alias: &str, handler: H) -> Result<McpServerSpec, String>
where
    H: ServerHandler + Clone,
{
    let info = handler.get_info().server_info;
    let server = Server {
        alias: alias.to_owned(),
        transport: Transport::InProcess(InProcess::new(handler)),
        startup_timeout: Duration::from_millis(STARTUP_TIMEOUT_MS),
        call_timeout: Duration::from_millis(CALL_TIMEOUT_MS),
        // Mounted by the kernel as declared tools: never deferred here.
        deferred: Some(false),
    };
    let hub = Arc::new(Hub::new(vec![server], usize::MAX, None, None, None));
    hub.start_blocking();
    let listed = match hub.status().into_iter().next() {
        Some((_, Some(Ok(tools)))) => tools,
        Some((_, Some(Err(error)))) => return Err(error),
        _ => return Err(format!("mcp server `{alias}`: not started")),
    };
    let tools = listed
        .into_iter()
        .map(|listed| Arc::new(McpTool::as_served(hub.clone(), listed)) as Arc<dyn Tool>)
        .collect();
    Ok(McpServerSpec {
        name: info.name,
        version: info.version,
        tools,
    })
}
