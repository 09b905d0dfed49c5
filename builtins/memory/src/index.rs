//! The `memory` extension: records the memory index once per task and keeps it resident.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::extension::{ContextPart, Extension, HookError, HookResult, View};
use noeta_core::records::ERASED_KIND;
use serde_json::{Value, json};

use crate::frontmatter::{Document, clip};
use crate::store::{Memory, Store};

/// The extension's name: its records and state live under it.
pub(crate) const EXTENSION: &str = "memory";
/// The content kind of the index resident, and its layout band.
pub(crate) const MEMORY_KIND: (&str, i64) = ("memory", 200);
/// The record kind holding the index and the memory directory.
pub(crate) const INDEX_KIND: &str = "index";
/// The most memories the index lists.
pub(crate) const MAX_INDEX_ENTRIES: usize = 200;
/// The most bytes of the index.
pub(crate) const MAX_INDEX_BYTES: usize = 8 * 1024;
/// The most characters of one description in the index.
const MAX_DESCRIPTION_CHARS: usize = 160;
/// Room kept for the closing "and N more" line.
const MORE_LINE_RESERVE: usize = 80;

/// The index text for `memories` (sorted by name): a heading, one line per memory, and a last
/// line counting those left out; at most [`MAX_INDEX_ENTRIES`] lines and
/// [`MAX_INDEX_BYTES`] bytes.
pub(crate) fn render_index(memories: &[Memory]) -> String {
    let mut out = String::from("# Memory index\n\n");
    if memories.is_empty() {
        out.push_str("No memories are saved yet.");
        return out;
    }
    out.push_str(
        "Memories saved in earlier tasks, as `name — description` (memory_read gives one whole, memory_search finds them by content):",
    );
    let mut shown = 0;
    for memory in memories {
        let description = memory
            .doc
            .as_ref()
            .map(Document::description)
            .unwrap_or_default();
        let line = if description.is_empty() {
            format!("\n- {}", memory.name)
        } else {
            format!(
                "\n- {} — {}",
                memory.name,
                clip(&description, MAX_DESCRIPTION_CHARS)
            )
        };
        let left_after = memories.len() - shown - 1;
        let reserve = if left_after > 0 { MORE_LINE_RESERVE } else { 0 };
        if shown == MAX_INDEX_ENTRIES || out.len() + line.len() + reserve > MAX_INDEX_BYTES {
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    let more = memories.len() - shown;
    if more > 0 {
        out.push_str(&format!("\n- … and {more} more (memory_search finds them)"));
    }
    out
}

/// Records the index at the task's first run and renders it from the folded state after.
pub(crate) struct MemoryIndex {
    store: Arc<Store>,
}

impl MemoryIndex {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Extension for MemoryIndex {
    fn name(&self) -> &str {
        EXTENSION
    }

    /// Once per task: lists the directory and records the index, so a resumed task shows the
    /// same bytes whatever changed on disk since.
    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        if view
            .ext_state(EXTENSION)
            .and_then(|s| s.get(INDEX_KIND))
            .is_some()
        {
            return Ok(());
        }
        let memories = self.store.list().map_err(|err| {
            HookError::new(format!(
                "the memory directory {} could not be listed: {err}",
                self.store.dir().display()
            ))
        })?;
        let mut data = json!({ INDEX_KIND: render_index(&memories) });
        if let Some(dir) = self.store.dir().to_str() {
            data["dir"] = json!(dir);
        }
        view.record(EXTENSION, INDEX_KIND, data);
        Ok(())
    }

    fn context(&self, view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        Ok(view
            .ext_state(EXTENSION)
            .and_then(|s| s.get(INDEX_KIND))
            .and_then(Value::as_str)
            .map(|text| vec![ContextPart::resident_of(MEMORY_KIND.0, text)])
            .unwrap_or_default())
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            INDEX_KIND => {
                let Some(index) = data.get(INDEX_KIND).and_then(Value::as_str) else {
                    return Err("an `index` record has no string `index`".to_owned());
                };
                let mut folded = json!({ INDEX_KIND: index });
                if let Some(dir) = data.get("dir").and_then(Value::as_str) {
                    folded["dir"] = json!(dir);
                }
                *state = folded;
                Ok(())
            }
            ERASED_KIND => Ok(()),
            other => Err(format!("unknown record kind `{other}`")),
        }
    }
}
