//! The `todo_write` built-in plugin: the agent's plan as a recorded todo list.
//!
//! It mounts the `TodoWrite` control tool. Each call replaces the whole list
//! and records it under `todo_write` (schema in `noeta_toolkit::todos`); the
//! plugin's own `reduce` folds those records, so the list survives crashes and
//! moves between workers with the task.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{CommandReply, Extension, HookResult, View};
use noeta_core::records::ERASED_KIND;
use noeta_core::{
    ControlToolFactory, ControlToolMount, LinkedPlugin, RefTable, Resolved, SessionBuildContext,
    Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
};
use noeta_toolkit::todos::{self, TodoList, TodoStatus};
use serde_json::{Value, json};

const DESCRIPTION: &str = "\
Keep a structured todo list for the current task, so you and the user can follow your progress.

Use it for work with three or more distinct steps, or when the user gives you several things to do. \
Write the whole list each time: it replaces the previous one. Give every item a `content` in the \
imperative (\"Run the tests\"), an `activeForm` for while it is underway (\"Running the tests\"), \
and a `status`. Keep exactly one item in_progress while you work, mark items completed as soon \
as they are done, and do not mark an item completed while its tests fail or its work is partial. \
Skip the list for a single trivial step or a purely conversational request.";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The whole updated todo list",
                "maxItems": todos::MAX_ITEMS,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "maxLength": todos::MAX_TEXT_CHARS},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "activeForm": {"type": "string", "minLength": 1, "maxLength": todos::MAX_TEXT_CHARS}
                    },
                    "required": ["content", "status", "activeForm"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["todos"],
        "additionalProperties": false
    })
}

/// The `TodoWrite` tool.
struct TodoWrite;

#[async_trait]
impl Tool for TodoWrite {
    fn name(&self) -> &str {
        "TodoWrite"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        schema()
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .safe_while_planning()
            // Pure: its record commits with its result, so running it again after a crash is safe.
            .retry_safe()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut list: TodoList = serde_json::from_value(input).map_err(|err| {
            ToolError::RespondToModel(format!("TodoWrite: invalid todo list: {err}"))
        })?;
        if let Some(blank) = list
            .todos
            .iter()
            .position(|t| t.content.trim().is_empty() || t.active_form.trim().is_empty())
        {
            return Err(ToolError::RespondToModel(format!(
                "TodoWrite: item {} has blank text; give every item a content and an activeForm",
                blank + 1
            )));
        }
        let count = |status: TodoStatus| list.todos.iter().filter(|t| t.status == status).count();
        let summary = format!(
            "Todo list updated: {} item(s) — {} completed, {} in progress, {} pending. Keep it current as you work.",
            list.todos.len(),
            count(TodoStatus::Completed),
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending),
        );
        list.written_at = ctx.core().model_calls;
        let data = serde_json::to_value(&list).map_err(|err| ToolError::Fatal(err.to_string()))?;
        ctx.record(todos::EXTENSION, todos::KIND, data);
        Ok(ToolOutput::text(summary))
    }
}

/// Folds the todo records: each `todos` record replaces the list.
struct TodoState;

#[async_trait]
impl Extension for TodoState {
    fn name(&self) -> &str {
        todos::EXTENSION
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            todos::KIND => {
                let list: TodoList = serde_json::from_value(data.clone())
                    .map_err(|err| format!("a `todos` record is not a todo list: {err}"))?;
                *state = serde_json::to_value(list).map_err(|err| err.to_string())?;
                Ok(())
            }
            ERASED_KIND => Ok(()),
            other => Err(format!("unknown record kind `{other}`")),
        }
    }

    /// A fork keeps the list, counted from its own first reply.
    fn continue_state(&self, state: &Value) -> Value {
        let mut kept = state.clone();
        if let Some(map) = kept.as_object_mut() {
            map.insert("written_at".to_owned(), json!(0));
        }
        kept
    }

    fn commands(&self, view: &View<'_>) -> HookResult<Vec<noeta_core::extension::CommandSpec>> {
        let _ = view;
        Ok(vec![noeta_core::extension::CommandSpec {
            name: "todos".to_owned(),
            description: "Show the current todo list.".to_owned(),
        }])
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        _args: &str,
    ) -> HookResult<CommandReply> {
        if name != "todos" {
            return Err(noeta_core::extension::HookError::new(format!(
                "unknown command `/{name}`"
            )));
        }
        let list = view
            .ext_state(todos::EXTENSION)
            .and_then(|v| serde_json::from_value::<TodoList>(v.clone()).ok())
            .unwrap_or_default();
        if list.todos.is_empty() {
            return Ok(CommandReply::Show("No todo list yet.".to_owned()));
        }
        Ok(CommandReply::Show(
            list.todos
                .iter()
                .map(|t| {
                    let mark = match t.status {
                        TodoStatus::Completed => "[x]",
                        TodoStatus::InProgress => "[~]",
                        TodoStatus::Pending => "[ ]",
                    };
                    format!("{mark} {}", t.content)
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ))
    }
}

/// Mounts `TodoWrite` with the extension that folds its records.
struct Factory;

impl ControlToolFactory for Factory {
    fn build(&self, _ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        Ok(Some(
            ControlToolMount::new(Arc::new(TodoWrite)).with_extension(Arc::new(TodoState)),
        ))
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_todo_write::todo_write", |_| {
            Ok(Resolved::ControlTool(Arc::new(Factory)))
        }),
    )
}
