//! The `todo_write` plugin's public records: their schema, and a typed reader of its folded state.
//!
//! Other plugins (the reminders, a frontend) read the todo list through these
//! types instead of importing `todo_write`.

use noeta_core::StateView;
use serde::{Deserialize, Serialize};

/// The extension the todo records live under.
pub const EXTENSION: &str = "todo_write";

/// The record kind holding the whole list (each record replaces the last).
pub const KIND: &str = "todos";

/// At most this many items.
pub const MAX_ITEMS: usize = 50;

/// At most this many characters in `content` and in `active_form`.
pub const MAX_TEXT_CHARS: usize = 500;

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One item of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What to do, in the imperative ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// The same, as shown while in progress ("Running the tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// The payload of a `todos` record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoList {
    /// The items, in order.
    pub todos: Vec<TodoItem>,
    /// How many model calls the task had made when the list was written (for reminder cadence).
    #[serde(default)]
    pub written_at: u64,
}

impl TodoList {
    /// The items not completed yet.
    pub fn unfinished(&self) -> impl Iterator<Item = &TodoItem> {
        self.todos
            .iter()
            .filter(|t| t.status != TodoStatus::Completed)
    }
}

/// The current todo list of a task, from its folded state (empty when none was written).
pub fn read(state: &dyn StateView) -> TodoList {
    state
        .ext_state(EXTENSION)
        // Read in place: this runs at every compose, and the state is not copied for it.
        .and_then(|value| Deserialize::deserialize(value).ok())
        .unwrap_or_default()
}
