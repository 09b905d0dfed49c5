//! The `reminders` built-in plugin: compose-time reminders rendered from the folded task state.
//!
//! A reminder is a pure render at the tail of each request: never recorded,
//! so the stable prefix is untouched and a resume renders the same text. The
//! todo list and the compaction state are read through `noeta_toolkit::todos`
//! and `noeta_toolkit::compaction`, never by importing the plugins that write them.
//!
//! - `unfinished-todos` (100): unfinished items of a list untouched for ten replies.
//! - `delegation-nudge` (200): an agent with a roster that keeps reading and
//!   searching itself is pointed at `Task`, every ten such calls in a turn.
//! - `read-suggestion` (300): narrower reads while compaction is thrashing.

use std::sync::Arc;

use noeta_core::{LinkedPlugin, RefTable, Reminder, ReminderInput, Resolved};
use noeta_toolkit::compaction;
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

/// Exploring calls (reads and searches) a turn makes between delegation nudges.
const EXPLORE_CADENCE: usize = 10;
/// The tools counted as exploring.
const EXPLORING: [&str; 3] = ["Read", "Glob", "Grep"];
/// The delegation tool, whose use in a turn silences the nudge.
const DELEGATE: &str = "Task";

/// Suggests handing broad exploration to a subagent: for an agent with a roster, each time
/// its reads and searches in the current turn pass another ten without a `Task` call.
struct DelegationNudge;

impl Reminder for DelegationNudge {
    fn render(&self, input: &ReminderInput<'_>) -> Option<String> {
        if input.roster.is_empty() {
            return None;
        }
        let messages = &input.core.messages;
        let from = input.core.last_user.map_or(0, |i| i + 1);
        let turn = messages.get(from..).unwrap_or_default();
        let calls = || turn.iter().flat_map(|m| m.calls.iter());
        if calls().any(|c| c.name == DELEGATE) {
            return None;
        }
        let exploring = |c: &&noeta_core::model::ToolCall| EXPLORING.contains(&c.name.as_str());
        let total = calls().filter(exploring).count();
        // Only right after the reply that carried the count past a multiple of ten.
        let last = turn
            .iter()
            .rev()
            .find(|m| m.role == noeta_core::model::Role::Assistant)?;
        let before = total - last.calls.iter().filter(exploring).count();
        if total / EXPLORE_CADENCE == before / EXPLORE_CADENCE {
            return None;
        }
        Some(format!(
            "Reminder: you have made {total} read and search calls in this turn. When exploration is broad, hand it to a subagent with the {DELEGATE} tool (available: {}) and work from its findings: your own context stays small. Do not mention this reminder to the user.",
            input.roster.join(", ")
        ))
    }
}

/// Suggests narrower reads while compaction is thrashing (each summary buys only a few replies).
struct ReadSuggestion;

impl Reminder for ReadSuggestion {
    fn render(&self, input: &ReminderInput<'_>) -> Option<String> {
        let state = compaction::read(input.state);
        state.thrashing.then(|| {
            format!(
                "Reminder: the conversation has been compacted {} times in the last few replies, so large outputs are costing you your context. Read files in ranges (Read with offset and limit), search with Grep and narrow patterns rather than reading whole files, and do not repeat large outputs. Do not mention this reminder to the user.",
                state.run
            )
        })
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new()
            .with("noeta_builtin_reminders::unfinished_todos", |_| {
                Ok(Resolved::Reminder(Arc::new(UnfinishedTodos)))
            })
            .with("noeta_builtin_reminders::delegation_nudge", |_| {
                Ok(Resolved::Reminder(Arc::new(DelegationNudge)))
            })
            .with("noeta_builtin_reminders::read_suggestion", |_| {
                Ok(Resolved::Reminder(Arc::new(ReadSuggestion)))
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

    fn turn(calls_per_reply: &[&[&str]]) -> TaskState {
        use noeta_core::model::ToolCall;
        use noeta_core::model::{Message, Role};
        let mut state = TaskState::default();
        let mut messages = vec![Message::synthetic(1, Role::User, "explore")];
        let mut seq = 2;
        for (r, names) in calls_per_reply.iter().enumerate() {
            let mut reply = Message::synthetic(seq, Role::Assistant, "");
            reply.calls = names
                .iter()
                .enumerate()
                .map(|(i, n)| ToolCall {
                    id: format!("c{r}_{i}"),
                    name: (*n).to_owned(),
                    input: json!({}),
                })
                .collect();
            seq += 1;
            messages.push(reply);
            for _ in names.iter() {
                messages.push(Message::synthetic(seq, Role::Tool, "ok"));
                seq += 1;
            }
        }
        state.core.messages = std::sync::Arc::new(messages);
        state.core.last_user = Some(0);
        state
    }

    fn nudge(state: &TaskState, roster: &[String]) -> Option<String> {
        DelegationNudge.render(&ReminderInput::new("main", state, &state.core).with_roster(roster))
    }

    #[test]
    fn delegation_is_suggested_each_time_a_turn_passes_another_ten_reads() {
        let roster = vec!["explore".to_owned(), "general-purpose".to_owned()];
        let mut replies: Vec<&[&str]> = Vec::new();
        let mut shown = Vec::new();
        for i in 0..25 {
            replies.push(if i % 5 == 4 { &["Bash"] } else { &["Read"] });
            if nudge(&turn(&replies), &roster).is_some() {
                shown.push(i + 1);
            }
        }
        // Reads at replies 1-4, 6-9, 11-12: the tenth read is reply 12, the twentieth reply 24.
        assert_eq!(shown, [12, 24]);
        let text = nudge(&turn(&replies[..12]), &roster).unwrap();
        assert_eq!(
            text,
            "Reminder: you have made 10 read and search calls in this turn. When exploration is broad, hand it to a subagent with the Task tool (available: explore, general-purpose) and work from its findings: your own context stays small. Do not mention this reminder to the user."
        );
        // Several calls in one reply carry the count past ten at once.
        assert!(
            nudge(
                &turn(&[&["Read"; 6], &["Grep", "Glob", "Read", "Read"]]),
                &roster
            )
            .is_some()
        );
    }

    #[test]
    fn delegation_is_not_suggested_without_a_roster_or_once_the_turn_delegated() {
        let reads: Vec<&[&str]> = vec![&["Read"]; 10];
        assert_eq!(nudge(&turn(&reads), &[]), None);
        let mut delegated = reads.clone();
        delegated.insert(0, &["Task"]);
        assert_eq!(nudge(&turn(&delegated), &["explore".to_owned()]), None);
    }

    #[test]
    fn narrower_reads_are_suggested_only_while_compaction_thrashes() {
        let mut state = TaskState::default();
        let suggest = |state: &TaskState| {
            ReadSuggestion.render(&ReminderInput::new("main", state, &state.core))
        };
        assert_eq!(suggest(&state), None);
        state.ext.insert(
            compaction::EXTENSION.to_owned(),
            json!({ "current": null, "count": 4, "run": 3, "thrashing": true }),
        );
        let text = suggest(&state).unwrap();
        assert!(
            text.starts_with(
                "Reminder: the conversation has been compacted 3 times in the last few replies"
            ),
            "{text}"
        );
        state.ext.insert(
            compaction::EXTENSION.to_owned(),
            json!({ "current": null, "count": 5, "run": 1, "thrashing": false }),
        );
        assert_eq!(suggest(&state), None);
    }
}
