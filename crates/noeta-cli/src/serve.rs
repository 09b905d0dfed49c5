//! `noeta mcp serve`: an agent's tools served to MCP clients, over stdio or streamable HTTP.
//!
//! The MCP side is `mcp_server.rs`'s `Desk`; this side owns the agent. One task is
//! created for the server's life; each `tools/call` is a direct call of that task
//! (`Runtime::call_direct`): the same gate, permission mode, run and log as `noeta run`, with
//! what would ask a person refused. Calls run one at a time, in the order they arrive.

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use crate::mcp_server::{Desk, Job, Served, ServedImage, ServedTool};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use noeta::{Host, HostPaths};
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::provider::{Provider, ProviderError};
use noeta_core::runner::Runtime;
use noeta_core::session::Session;
use noeta_core::store::TaskId;
use tokio::sync::{mpsc, watch};

use crate::agent::{self, AgentArgs};
use crate::stdio::eoutln;

/// What `--tools` is when neither it nor `--agent` is given: `main`'s file tools.
pub(crate) const FILE_TOOLS: [&str; 5] = ["Read", "Write", "Edit", "Glob", "Grep"];

/// `noeta mcp serve`'s choices.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServeArgs {
    /// The agent, its settings and permission mode (`--agent`, `--permission-mode`, `--store`).
    pub(crate) agent: AgentArgs,
    /// `--tools`: the tools to serve (default: `FILE_TOOLS` for `main`, every tool of a named agent).
    pub(crate) tools: Vec<String>,
    /// `--http ADDR`: streamable HTTP on this address instead of stdio.
    pub(crate) http: Option<String>,
}

/// The agent behind the desk.
struct Agent {
    runtime: Runtime,
    session: Arc<Session>,
    task: TaskId,
    /// The served tools' names; `None` serves every tool the agent is offered.
    chosen: Option<BTreeSet<String>>,
}

/// The model of a server started without one: every call fails with why.
struct NoModel(String);

#[async_trait]
impl Provider for NoModel {
    fn name(&self) -> &str {
        "none"
    }
    fn model(&self) -> &str {
        "none"
    }
    fn context_window(&self) -> u64 {
        200_000
    }
    async fn complete(&self, _request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        Err(ProviderError::Fatal {
            message: self.0.clone(),
        })
    }
}

/// The text a call that would ask a person is refused with.
fn refusal(asks: &[String]) -> String {
    format!(
        "refused: {} — `noeta mcp serve` has nobody to ask. Start it with `--permission-mode \
         acceptEdits` to allow file edits, or `--permission-mode bypassPermissions` to allow \
         every call, or allow the tool in the settings' permissions.",
        asks.join("; ")
    )
}

impl Agent {
    async fn tools(&self) -> Result<Vec<ServedTool>, String> {
        let offered = self
            .runtime
            .direct_tools(&self.session, &self.task)
            .await
            .map_err(|e| e.to_string())?;
        Ok(offered
            .into_iter()
            .filter(|t| self.chosen.as_ref().is_none_or(|c| c.contains(t.name())))
            .map(|t| {
                let flags = t.flags();
                let description = flags
                    .loaded_description
                    .clone()
                    .unwrap_or_else(|| t.description().to_owned());
                ServedTool::new(t.name(), description, t.input_schema())
                    .with_hints(flags.read_only, flags.read_only || flags.retry_safe)
            })
            .collect())
    }

    async fn call(&self, name: &str, input: serde_json::Value) -> Result<Served, String> {
        if let Some(chosen) = &self.chosen
            && !chosen.contains(name)
        {
            let served: Vec<&str> = chosen.iter().map(String::as_str).collect();
            return Ok(Served::new(
                format!(
                    "no tool named `{name}` is served here; the served tools are: {}",
                    served.join(", ")
                ),
                true,
            ));
        }
        let result = self
            .runtime
            .call_direct(&self.session, &self.task, name, input, &refusal)
            .await
            .map_err(|e| e.to_string())?;
        let mut images = Vec::new();
        for attachment in &result.attachments {
            if !attachment.media_type.starts_with("image/") {
                continue;
            }
            let data = self
                .runtime
                .content()
                .get(attachment)
                .await
                .map_err(|e| format!("cannot read an image of the result: {e}"))?;
            images.push(ServedImage::new(attachment.media_type.clone(), data));
        }
        Ok(Served::new(result.text, result.is_error).with_images(images))
    }

    /// Answers jobs until every desk is gone or the server has stopped; a call in flight
    /// finishes first.
    async fn work(&self, mut jobs: mpsc::Receiver<Job>, mut stopped: watch::Receiver<bool>) {
        loop {
            let job = tokio::select! {
                job = jobs.recv() => job,
                _ = stopped.wait_for(|stopped| *stopped) => None,
            };
            let Some(job) = job else { break };
            match job {
                Job::Tools(reply) => {
                    let _ = reply.send(self.tools().await);
                }
                Job::Call {
                    name,
                    input,
                    reply,
                    cancelled,
                } => {
                    // A call nobody wants any more is given up (its future dropped): what it
                    // recorded stays, as after Ctrl-C.
                    tokio::select! {
                        served = self.call(&name, input) => {
                            let _ = reply.send(served);
                        }
                        _ = cancelled => {}
                    }
                }
            }
        }
    }
}

/// Opens the agent: the host without the terminal's printer (stdout may be the MCP
/// connection) or approver (nobody answers), its session, store and a new task.
async fn open(paths: &HostPaths, args: &ServeArgs) -> Result<(Agent, Arc<Host>)> {
    let host = Host::open(agent::config(paths, &args.agent)?)?
        .with_warnings(Arc::new(|text: &str| eoutln!("warning: {text}")));
    for warning in host.plugins().warnings() {
        eoutln!("warning: {warning}");
    }
    let name = args.agent.agent.as_deref().unwrap_or("main");
    let session = host.session(name)?;
    agent::skipped_warnings(&host, &session);
    let stores = host.open_store(args.agent.store.as_deref())?;
    // Direct calls need no model; a tool that makes an auxiliary model call gets the reason
    // there is none.
    let model = host
        .open_model(args.agent.provider.as_deref(), args.agent.model.as_deref())
        .unwrap_or_else(|e| Arc::new(NoModel(e.to_string())));
    let runtime = host.runtime(&stores, model);
    let task = noeta::new_task_id()?;
    // What a new task of the agent is offered (the task need not exist yet).
    let offered: BTreeSet<String> = runtime
        .direct_tools(&session, &task)
        .await?
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    let chosen: Option<BTreeSet<String>> = if !args.tools.is_empty() {
        let unknown: Vec<&str> = args
            .tools
            .iter()
            .filter(|t| !offered.contains(*t))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            bail!(
                "--tools names {} that agent `{name}` does not have; its tools are: {}",
                unknown
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                offered.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        Some(args.tools.iter().cloned().collect())
    } else if args.agent.agent.is_none() {
        Some(
            FILE_TOOLS
                .iter()
                .filter(|t| offered.contains(**t))
                .map(|t| (*t).to_owned())
                .collect(),
        )
    } else {
        None
    };
    // The task is made once the choices are known good: a bad `--tools` leaves no task behind.
    runtime
        .create(
            &session,
            &task,
            "Tool calls from an MCP client, through `noeta mcp serve`.",
        )
        .await?;
    let served: Vec<String> = match &chosen {
        Some(chosen) => chosen.iter().cloned().collect(),
        None => offered.into_iter().collect(),
    };
    eoutln!(
        "noeta mcp serve: agent `{name}`, tools {}; calls are recorded in task {task} (`noeta log {task}`)",
        served.join(", ")
    );
    Ok((
        Agent {
            runtime,
            session,
            task,
            chosen,
        },
        Arc::new(host),
    ))
}

/// `noeta mcp serve`: serves until the client leaves (stdio) or Ctrl-C (both).
pub(crate) fn serve(paths: &HostPaths, args: &ServeArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (agent, host) = open(paths, args).await?;
        let instructions = format!(
            "noeta agent `{}`: its tools under the names its model sees, gated by its \
             permission mode; a call that would need a person's approval is refused.",
            agent.session.spec.name
        );
        let (jobs, inbox) = mpsc::channel(16);
        let desk = Desk::new(jobs, instructions);
        let (stop_tx, stopped) = watch::channel(false);
        let listener = match &args.http {
            Some(addr) => {
                // Another user of this machine can reach a loopback port too: a token, always.
                let (token, note) = crate::api::server_token(paths, &args.agent)?;
                let listener = tokio::net::TcpListener::bind(addr.as_str())
                    .await
                    .with_context(|| format!("--http {addr}: cannot listen there"))?;
                let bound = listener.local_addr()?;
                eoutln!(
                    "noeta mcp serve: streamable HTTP on http://{bound}/mcp; every request needs \
                     `Authorization: Bearer <token>` ({note})"
                );
                Some((listener, token))
            }
            None => None,
        };
        let server = tokio::spawn(async move {
            let ended = match listener {
                Some((listener, token)) => {
                    let stop = async {
                        let _ = tokio::signal::ctrl_c().await;
                    };
                    crate::mcp_server::serve_http(desk, listener, stop, Some(token)).await
                }
                None => tokio::select! {
                    served = crate::mcp_server::serve_stdio(desk) => served,
                    _ = tokio::signal::ctrl_c() => Ok(()),
                },
            };
            let _ = stop_tx.send(true);
            ended
        });
        agent.work(inbox, stopped).await;
        let ended = server.await.context("the MCP server stopped")?;
        agent
            .runtime
            .end_direct(&agent.session, &agent.task, "the MCP client left")
            .await?;
        host.exec_env().stop(agent::kill_grace(), true);
        ended.map_err(anyhow::Error::msg)?;
        Ok(ExitCode::SUCCESS)
    })
}
