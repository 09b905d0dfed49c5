//! The `memory-recall` reminder provider: at turn intake, points the model at the memories the
//! user's message matches.

use std::path::PathBuf;

use async_trait::async_trait;
use noeta_core::{ProvidedReminder, ProviderInput, ReminderProvider, Seam};
use serde_json::Value;

use crate::frontmatter::clip;
use crate::index::EXTENSION;
use crate::matcher::{rank, recall_terms};
use crate::store::Store;

/// The most memories one reminder names.
pub(crate) const MAX_RECALL_HITS: usize = 5;
/// A memory is recalled from this score up: a word in its name, keywords or description, or
/// two words in its body.
const MIN_RECALL_SCORE: u32 = 2;
/// The most body lines shown per recalled memory.
const PREVIEW_LINES: usize = 2;
/// The most characters of a description or a body line shown.
const PREVIEW_CHARS: usize = 200;

/// Matches the user's message against the memories.
pub(crate) struct Recall {
    /// The directory used when the task's state does not name one (the default directory).
    fallback: Option<PathBuf>,
}

impl Recall {
    pub(crate) fn new(fallback: Option<PathBuf>) -> Self {
        Self { fallback }
    }
}

#[async_trait]
impl ReminderProvider for Recall {
    async fn provide(&self, input: ProviderInput<'_>) -> Result<Vec<ProvidedReminder>, String> {
        if input.seam != Seam::TurnIntake {
            return Ok(Vec::new());
        }
        let Some(message) = input.user_message else {
            return Ok(Vec::new());
        };
        // The pack records its directory with the index when the task starts (before any
        // intake); a provider cannot read `[plugins.memory]` itself.
        let dir = input
            .state
            .ext_state(EXTENSION)
            .and_then(|s| s.get("dir"))
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .or_else(|| self.fallback.clone());
        let Some(dir) = dir else {
            return Ok(Vec::new());
        };
        let terms = recall_terms(message);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let store = Store::new(dir);
        let memories = store.list().map_err(|err| {
            format!(
                "memory-recall: the memory directory {} could not be listed: {err}",
                store.dir().display()
            )
        })?;
        let hits: Vec<_> = rank(&memories, &terms)
            .into_iter()
            .filter(|hit| hit.score >= MIN_RECALL_SCORE)
            .take(MAX_RECALL_HITS)
            .collect();
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        let mut text = String::from(
            "Saved memories that may bear on this message (read one with memory_read before relying on it):",
        );
        for hit in &hits {
            text.push_str("\n- ");
            text.push_str(&hit.name);
            if !hit.description.is_empty() {
                text.push_str(" — ");
                text.push_str(&clip(&hit.description, PREVIEW_CHARS));
            }
            let preview = memories
                .iter()
                .find(|m| m.name == hit.name)
                .and_then(|m| m.doc.as_ref())
                .map(|doc| {
                    doc.body
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .take(PREVIEW_LINES)
                        .map(|l| clip(l, PREVIEW_CHARS))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            for line in preview {
                text.push_str("\n  > ");
                text.push_str(&line);
            }
        }
        Ok(vec![ProvidedReminder { text }])
    }
}
