//! The `delegation` built-in plugin: the `Task` control tool.
//!
//! `Task` hands a piece of work to an agent of the caller's roster as a child task: the call
//! spawns the child (through the runtime's spawn checkpoint, so guards and budgets see it)
//! and parks until it has finished, then returns the child's final reply — or, when the
//! child failed, why, in that one result. Several `Task` calls in one reply park together and
//! their children run at once (the runtime's `run_tree` runs them on a bounded pool). With
//! `background: true` the call returns at once; the child runs once the caller's turn has
//! stopped, and its report reaches the caller as a message that starts another turn.
//!
//! The tool's description lists the roster's agents with what each is for and its tools
//! ([`listing`]), within `[plugins.delegation] listing_budget_tokens`.

pub mod listing;

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::records::{ChildResult, Wake};
use noeta_core::{
    AgentDefinition, ControlToolFactory, ControlToolMount, LinkedPlugin, RefTable, Resolved,
    SessionBuildContext, Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
};
use noeta_toolkit::SettingsTable;
use serde_json::{Value, json};

/// The tool's model-visible name.
pub const TOOL: &str = "Task";

/// The longest `description` accepted, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;

/// The longest `prompt` accepted, in bytes.
pub const MAX_PROMPT_BYTES: usize = 100_000;

const DESCRIPTION: &str = "\
Hand a self-contained piece of work to a subagent, which works on it on its own and reports back.

Use it for work that needs many searches or reads whose details you do not need to keep (finding \
where something is done, surveying a part of the code), or for independent pieces of a larger \
task. Give `prompt` everything the subagent needs: it sees nothing of this conversation. Say \
exactly what to return. Several Task calls in one reply run at the same time. The subagent's \
final report comes back as this call's result; it is not shown to the user, so pass on what \
matters. With `background: true` the call returns at once and the report arrives later as a \
message; use it only for work you do not need before you can go on.";

/// The keys `[plugins.delegation]` knows.
const KNOWN: &[&str] = &["listing_budget_tokens"];

/// The `Task` tool over one agent's roster.
struct Task {
    roster: Vec<String>,
    description: String,
    schema: Value,
}

impl Task {
    fn new(roster: Vec<String>, agents: &[&AgentDefinition], budget_tokens: usize) -> Self {
        let description = match listing::listing(agents, budget_tokens) {
            Some(listing) => format!("{DESCRIPTION}\n\n{listing}"),
            None => DESCRIPTION.to_owned(),
        };
        let schema = json!({
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short (3-5 word) description of the work",
                    "maxLength": MAX_DESCRIPTION_CHARS
                },
                "prompt": {
                    "type": "string",
                    "description": "The work, with everything the subagent needs to do it"
                },
                "subagent_type": {
                    "type": "string",
                    "description": "Which agent does the work",
                    "enum": roster
                },
                "background": {
                    "type": "boolean",
                    "description": "Run the subagent in the background: this call returns at once and its report arrives as a message once it finished"
                }
            },
            "required": ["description", "prompt", "subagent_type"],
            "additionalProperties": false
        });
        Self {
            roster,
            description,
            schema,
        }
    }
}

/// The text of a required string field, or an error naming it.
fn field<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::RespondToModel(format!("{TOOL}: `{name}` must be a string")))
}

/// One child's result as the parent's model reads it.
fn report(result: &ChildResult) -> ToolOutput {
    if result.ok {
        ToolOutput::text(format!(
            "Subagent `{}` (task {}) reports:\n\n{}",
            result.agent, result.task, result.text
        ))
    } else {
        ToolOutput::error(format!(
            "{TOOL}: subagent `{}` (task {}) did not finish: {}",
            result.agent, result.task, result.text
        ))
    }
}

#[async_trait]
impl Tool for Task {
    fn name(&self) -> &str {
        TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn flags(&self) -> ToolFlags {
        // A call only starts a child (whose own calls are gated in its task), so adjacent Task
        // calls run together: they all park, and their children run at once.
        ToolFlags::default()
            .marked_read_only()
            // Its children are created only once its park is recorded: running it again after a
            // crash starts nothing twice.
            .retry_safe()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let description = field(&input, "description")?;
        let prompt = field(&input, "prompt")?;
        let agent = field(&input, "subagent_type")?;
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(ToolError::RespondToModel(format!(
                "{TOOL}: `description` has {} characters; keep it to {MAX_DESCRIPTION_CHARS}",
                description.chars().count()
            )));
        }
        if prompt.trim().is_empty() {
            return Err(ToolError::RespondToModel(format!(
                "{TOOL}: `prompt` is empty; say what the subagent should do"
            )));
        }
        if prompt.len() > MAX_PROMPT_BYTES {
            return Err(ToolError::RespondToModel(format!(
                "{TOOL}: `prompt` has {} bytes; keep it under {MAX_PROMPT_BYTES}",
                prompt.len()
            )));
        }
        if !self.roster.iter().any(|a| a == agent) {
            return Err(ToolError::RespondToModel(format!(
                "{TOOL}: there is no subagent `{agent}` (available: {})",
                self.roster.join(", ")
            )));
        }
        // The schema admits only a boolean here.
        let background = input
            .get("background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if background {
            let child = ctx.spawn_background(agent, prompt)?;
            return Ok(ToolOutput::text(format!(
                "Started subagent `{agent}` in the background as task {child}; its report \
                 arrives as a message when it finishes."
            )));
        }
        ctx.spawn(agent, prompt)?;
        Ok(ToolOutput::wait_for_children())
    }

    async fn resume(
        &self,
        _input: Value,
        wake: Wake,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match wake {
            Wake::Children { results } => match results.as_slice() {
                [one] => Ok(report(one)),
                other => Err(ToolError::Fatal(format!(
                    "{TOOL}: woken with {} child results instead of one",
                    other.len()
                ))),
            },
            other => Err(ToolError::Fatal(format!(
                "{TOOL}: woken by {other:?} instead of its child"
            ))),
        }
    }
}

/// Mounts `Task` on agents with a roster.
struct Factory;

impl ControlToolFactory for Factory {
    fn build(&self, ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        let table = SettingsTable::new("delegation", ctx.config("delegation"), KNOWN)
            .map_err(|err| err.to_string())?;
        let budget = table
            .positive("listing_budget_tokens")
            .map_err(|err| err.to_string())?
            .unwrap_or(listing::LISTING_BUDGET_TOKENS);
        if ctx.roster.is_empty() {
            return Ok(None);
        }
        let agents: Vec<&AgentDefinition> = ctx.roster_agents.iter().map(Arc::as_ref).collect();
        Ok(Some(ControlToolMount::new(Arc::new(Task::new(
            ctx.roster.clone(),
            &agents,
            budget,
        )))))
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_delegation::spawn_subagent", |_| {
            Ok(Resolved::ControlTool(Arc::new(Factory)))
        }),
    )
}
