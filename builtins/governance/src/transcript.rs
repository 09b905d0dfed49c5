//! The task's conversation as a Claude Code-shaped JSONL transcript, for hooks to read
//! (`transcript_path` in every hook's input).
//!
//! One file per task, `<workspace>/.noeta/transcripts/<task>.jsonl`, brought up to date before
//! each hook runs: one JSON object per line, compact, each with `type` (`user` or `assistant`),
//! `sessionId` (the task), `uuid`/`parentUuid` (from the message's log sequence number), `cwd`
//! and `message` — `{role, content}` as Claude Code writes them: a person's text as a string,
//! an assistant's text and calls as `text` and `tool_use` blocks, a tool result as a `user`
//! line holding a `tool_result` block. Text the runtime brought into the conversation
//! (instructions, reminders) is a `user` line marked `isMeta`. The file is appended to as the
//! conversation grows, and written afresh when it changed behind it (a compaction, another
//! process).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use noeta_core::canonical::Digest;
use noeta_core::model::{Message, Role};
use serde_json::{Value, json};

/// How far a task's file is written: the messages it holds, and the last one's hash.
#[derive(Debug, Clone)]
struct Written {
    count: usize,
    last: Digest,
}

/// The transcripts of the tasks whose hooks run in this process.
#[derive(Debug)]
pub(crate) struct Transcripts {
    dir: PathBuf,
    cwd: String,
    written: Mutex<BTreeMap<String, Written>>,
}

impl Transcripts {
    /// Transcripts under `<workspace>/.noeta/transcripts`.
    pub(crate) fn new(workspace: &Path) -> Self {
        Self {
            dir: workspace.join(".noeta").join("transcripts"),
            cwd: workspace.display().to_string(),
            written: Mutex::new(BTreeMap::new()),
        }
    }

    /// The transcript of `task` (a task id holds no `/`, so the name stays in the directory).
    pub(crate) fn path(&self, task: &str) -> PathBuf {
        self.dir.join(format!("{task}.jsonl"))
    }

    /// Brings `task`'s transcript up to `messages`; the path, or why it could not be written.
    pub(crate) fn update(&self, task: &str, messages: &[Message]) -> Result<PathBuf, String> {
        let path = self.path(task);
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        let known = written.get(task).cloned();
        // Appending is right only while the file holds a prefix of this conversation.
        let from = match &known {
            Some(w)
                if w.count <= messages.len()
                    && (w.count == 0 || messages[w.count - 1].hash == w.last)
                    && path.exists() =>
            {
                w.count
            }
            _ => 0,
        };
        if known.is_some() && from == messages.len() {
            return Ok(path);
        }
        let mut lines = String::new();
        for (i, message) in messages.iter().enumerate().skip(from) {
            let parent = i.checked_sub(1).map(|p| messages[p].seq);
            lines.push_str(&self.line(task, message, parent).to_string());
            lines.push('\n');
        }
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            if from == 0 {
                // Whole: written beside the file and moved over it, so a reader never sees half.
                let fresh = self.dir.join(format!(".{task}.jsonl.new"));
                std::fs::write(&fresh, lines.as_bytes())?;
                std::fs::rename(&fresh, &path)
            } else {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)?
                    .write_all(lines.as_bytes())
            }
        };
        write().map_err(|err| format!("cannot write the transcript {}: {err}", path.display()))?;
        written.insert(
            task.to_owned(),
            Written {
                count: messages.len(),
                last: messages.last().map(|m| m.hash).unwrap_or_default(),
            },
        );
        Ok(path)
    }

    /// One message as a transcript line.
    fn line(&self, task: &str, message: &Message, parent: Option<u64>) -> Value {
        let uuid = |seq: u64| format!("{task}-{seq}");
        let (kind, content, meta) = match message.role {
            Role::User => ("user", json!(message.text), false),
            Role::Context => ("user", json!(message.text), true),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !message.text.is_empty() {
                    blocks.push(json!({ "type": "text", "text": message.text }));
                }
                for call in message.calls.iter() {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": call.input,
                    }));
                }
                ("assistant", Value::Array(blocks), false)
            }
            Role::Tool => (
                "user",
                json!([{
                    "type": "tool_result",
                    "tool_use_id": message.call_id,
                    "content": message.text,
                    "is_error": message.is_error,
                }]),
                false,
            ),
        };
        let role = if kind == "assistant" {
            "assistant"
        } else {
            "user"
        };
        let mut line = json!({
            "type": kind,
            "sessionId": task,
            "uuid": uuid(message.seq),
            "parentUuid": parent.map(uuid),
            "cwd": self.cwd,
            "message": { "role": role, "content": content },
        });
        if meta {
            line["isMeta"] = json!(true);
        }
        line
    }
}
