//! The `reminders` built-in plugin: compose-time reminders rendered from the folded task state.
//!
//! A reminder is a pure render at the tail of each request: never recorded,
//! so the stable prefix is untouched and a resume renders the same text. The
//! todo list is read through `noeta_toolkit::todos`, never by importing the
//! `todo_write` plugin.

use std::sync::Arc;

use noeta_core::{LinkedPlugin, RefTable, Reminder, ReminderInput, Resolved};
use noeta_toolkit::todos::{self, TodoStatus};

/// Replies between reminders (and before the first one) about a list left untouched.
const CADENCE: u64 = 10;

/// Reminds the model of unfinished todos when the list was last written 10, 20, 30…
/// replies ago: at most once per ten replies, and only while something is unfinished.
struct UnfinishedTodos;

impl Reminder for UnfinishedTodos {
    fn render(&self, input: &ReminderInput<'_>) -> Option<String> {
        let list = todos::read(input.state);
        let unfinished: Vec<&todos::TodoItem> = list.unfinished().collect();
        if unfinished.is_empty() {
            return None;
        }
        let since = input.core.model_calls.saturating_sub(list.written_at);
        if since < CADENCE || !since.is_multiple_of(CADENCE) {
            return None;
        }
        let items: Vec<String> = unfinished
            .iter()
            .map(|t| {
                let status = match t.status {
                    TodoStatus::InProgress => "in progress",
                    _ => "pending",
                };
                format!("- {} ({status})", t.content)
            })
            .collect();
        Some(format!(
            "Reminder: your todo list has not changed in the last {since} replies and still has {} unfinished item(s):\n{}\nIf it no longer matches your work, update it with TodoWrite; otherwise carry on. Do not mention this reminder to the user.",
            unfinished.len(),
            items.join("\n")
        ))
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_reminders::unfinished_todos", |_| {
            Ok(Resolved::Reminder(Arc::new(UnfinishedTodos)))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use noeta_core::fold::TaskState;
    use serde_json::json;

    fn state(model_calls: u64, written_at: u64, statuses: &[&str]) -> TaskState {
        let mut state = TaskState::default();
        state.core.model_calls = model_calls;
        let items: Vec<_> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| json!({"content": format!("step {i}"), "status": s, "activeForm": format!("doing step {i}")}))
            .collect();
        state.ext.insert(
            todos::EXTENSION.to_owned(),
            json!({"todos": items, "written_at": written_at}),
        );
        state
    }

    fn render(state: &TaskState) -> Option<String> {
        UnfinishedTodos.render(&ReminderInput::new("main", state, &state.core))
    }

    #[test]
    fn it_speaks_every_ten_replies_after_the_last_write_while_work_is_unfinished() {
        let shown: Vec<u64> = (0..=35)
            .filter(|n| {
                render(&state(3 + n, 3, &["completed", "in_progress", "pending"])).is_some()
            })
            .collect();
        assert_eq!(shown, [10, 20, 30]);
        let text = render(&state(13, 3, &["completed", "in_progress", "pending"])).unwrap();
        assert_eq!(
            text,
            "Reminder: your todo list has not changed in the last 10 replies and still has 2 unfinished item(s):\n- step 1 (in progress)\n- step 2 (pending)\nIf it no longer matches your work, update it with TodoWrite; otherwise carry on. Do not mention this reminder to the user."
        );
    }

    #[test]
    fn it_is_silent_when_everything_is_done_or_there_is_no_list() {
        assert_eq!(render(&state(20, 0, &["completed", "completed"])), None);
        assert_eq!(render(&state(20, 0, &[])), None);
        let mut none = TaskState::default();
        none.core.model_calls = 20;
        assert_eq!(render(&none), None);
    }
}
