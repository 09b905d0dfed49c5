//! Compaction (the `compaction` extension): when a request nears the model's context window,
//! the older part of the conversation is summarised, and from then on the summary stands in
//! for it whenever a request is composed. The messages stay in the log; `RecallHistory` reads
//! them back.
//!
//! - **When.** Before every model call the request (with any summary already in
//!   force) is estimated at four bytes a token. At or over the usable window
//!   — the provider's context window less a reserve for the reply
//!   (`compaction_reserve_tokens`, by default 33,000 tokens or a quarter of the
//!   window, whichever is less, or the provider's output limit up to half the
//!   window when that is more) — it compacts. A provider that refuses a
//!   request as too long gets a forced compaction with a tighter tail.
//! - **What.** The newest messages that fit in a third of the usable window
//!   are kept; the cut never falls on a tool result, so a call and its result
//!   stay together. Everything before it, with the previous summary, goes to
//!   the model as a transcript (an auxiliary request), with the instructions
//!   the other extensions give through `before_compact`; any of them may refuse.
//!   `lead_resident` texts are put before the summary and `resident` texts after
//!   it, as they were when it ran. The newest user message is never summarised
//!   away: when the cut passes it, it follows the summary verbatim.
//! - **Guards.** A cut that covers nothing new is no progress: the request is
//!   sent as it is when it still fits the window, and the turn fails
//!   (`compaction_no_progress`) when it does not. Three compactions each within
//!   three replies of the last latch `thrashing` (read by the reminders).
//! - **Records.** One `compacted` record per compaction, payload
//!   `noeta_toolkit::compaction::Compacted`, folded by
//!   `CompactionState::apply`. A failed or empty summary fails the turn
//!   (`compaction_summary_failed`) and records nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use noeta_core::canonical::Digest;
use noeta_core::extension::{
    CommandReply, CommandSpec, CompactAdvice, Extension, HookError, StepSignal, View,
};
use noeta_core::model::ModelRequest;
use noeta_core::model::{Message, Role};
use noeta_core::records::ERASED_KIND;
use noeta_core::{SessionBuildContext, StateView};
use noeta_toolkit::compaction::{self, Compacted, CompactionState, EXTENSION, KIND, Trigger};
use serde_json::Value;

/// Tokens kept back for the reply and slack, at most.
const RESERVE_TOKENS: u64 = 33_000;
/// Bytes a token, for estimates.
const BYTES_PER_TOKEN: u64 = 4;
/// A tool result or context note enters the transcript clipped to this many characters.
const TRANSCRIPT_BLOCK_CHARS: usize = 2_000;
/// A user or assistant message enters the transcript clipped to this many characters.
const TRANSCRIPT_TEXT_CHARS: usize = 8_000;
/// A summary is kept to this many characters.
const MAX_SUMMARY_CHARS: usize = 64_000;

const SUMMARY_SYSTEM: &str = "You summarise the earlier part of a conversation between a user and an AI agent that works with tools, so that the agent can carry on from the summary alone. Write it for the agent, in these sections: Goal (what the user asked for, with every explicit requirement and constraint, quoted where wording matters); Progress (what was done, with file paths, commands and their outcomes); Findings (facts learned that later work depends on); Open items (what remains, and anything the agent promised). Keep identifiers, paths, numbers and error messages exact. Leave out pleasantries and anything superseded. Reply with the summary only.";

/// The extension's settings, from `[plugins.react]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    enabled: bool,
    reserve_tokens: Option<u64>,
}

impl Settings {
    /// Reads `compaction` (bool) and `compaction_reserve_tokens` (a positive integer).
    pub(crate) fn from_context(ctx: &SessionBuildContext) -> Result<Self, String> {
        let config = ctx.config("react");
        let enabled = match config.get("compaction") {
            None => true,
            Some(Value::Bool(on)) => *on,
            Some(other) => {
                return Err(format!(
                    "settings [plugins.react] compaction: expected true or false, got `{other}`"
                ));
            }
        };
        let reserve_tokens = match config.get("compaction_reserve_tokens") {
            None => None,
            Some(value) => match value.as_u64() {
                Some(n) if n > 0 => Some(n),
                _ => {
                    return Err(format!(
                        "settings [plugins.react] compaction_reserve_tokens: expected a positive integer, got `{value}`"
                    ));
                }
            },
        };
        Ok(Self {
            enabled,
            reserve_tokens,
        })
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The tokens a request may use in a window of `window` whose replies may take
    /// `max_output` tokens: the reserve is at least the reply's room (up to half the window).
    fn usable(&self, window: u64, max_output: Option<u64>) -> u64 {
        let reserve = self.reserve_tokens.unwrap_or_else(|| {
            RESERVE_TOKENS
                .min(window / 4)
                .max(max_output.unwrap_or(0).min(window / 2))
        });
        window.saturating_sub(reserve).max(1)
    }
}

/// What one image is counted as, in tokens (a large screenshot, as providers count them).
const IMAGE_TOKENS: u64 = 1_600;

/// The estimated tokens of one message.
fn message_tokens(message: &Message) -> u64 {
    let calls: usize = message
        .calls
        .iter()
        .map(|c| c.name.len() + c.input.to_string().len())
        .sum();
    (message.text.len() + calls) as u64 / BYTES_PER_TOKEN
        + 4
        + message.attachments.len() as u64 * IMAGE_TOKENS
}

/// The estimated tokens of a request's parts other than its tools and conversation.
fn fixed_tokens(request: &ModelRequest) -> u64 {
    let bytes = request.system.len()
        + request
            .entries
            .iter()
            .map(|t| t.to_string().len())
            .sum::<usize>()
        + request.residents.iter().map(String::len).sum::<usize>()
        + request.tail.iter().map(String::len).sum::<usize>();
    bytes as u64 / BYTES_PER_TOKEN
}

/// The estimated tokens of a whole request, all of it measured.
pub(crate) fn request_tokens(request: &ModelRequest) -> u64 {
    let tools: usize = request.tools.iter().map(|t| t.to_string().len()).sum();
    tools as u64 / BYTES_PER_TOKEN
        + fixed_tokens(request)
        + request.messages.iter().map(message_tokens).sum::<u64>()
}

/// The text that stands in for the covered messages.
fn summary_text(compacted: &Compacted) -> String {
    let mut parts: Vec<String> = compacted
        .lead
        .iter()
        .map(|(_, text)| text.clone())
        .collect();
    parts.push(format!(
        "Summary of the earlier conversation ({} message(s), collapsed; RecallHistory reads them back verbatim):\n\n{}",
        compacted.covered, compacted.summary
    ));
    parts.extend(compacted.residents.iter().map(|(_, text)| text.clone()));
    parts.join("\n\n")
}

/// `messages` as a request sees them under `state`: the summary, then the newest user message
/// when the summary covers it, then every message from the cut on.
pub(crate) fn overlay(
    messages: &[Message],
    last_user: Option<usize>,
    state: &CompactionState,
) -> Option<Vec<Message>> {
    let compacted = state.current.as_ref()?;
    let keep = compacted.keep_from_seq;
    let first_kept = messages.partition_point(|m| m.seq < keep);
    let mut out = Vec::with_capacity(messages.len() - first_kept + 2);
    out.push(Message::synthetic(
        keep.saturating_sub(1),
        Role::Context,
        summary_text(compacted),
    ));
    if let Some(user) = last_user.and_then(|i| messages.get(i))
        && user.seq < keep
    {
        out.push(user.clone());
    }
    out.extend_from_slice(&messages[first_kept..]);
    Some(out)
}

/// The indices where the conversation may be cut: no call made before one is answered at or
/// after it (a result never loses its call, whatever stands between them).
fn cuttable(messages: &[Message]) -> Vec<bool> {
    let mut issued: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        for call in message.calls.iter() {
            issued.insert(call.id.as_str(), i);
        }
    }
    // The earliest call still answered at or after each index.
    let mut ok = vec![true; messages.len()];
    let mut earliest_answered_later = usize::MAX;
    for i in (0..messages.len()).rev() {
        if let Some(at) = messages[i].call_id.as_deref().and_then(|id| issued.get(id)) {
            earliest_answered_later = earliest_answered_later.min(*at);
        }
        ok[i] = messages[i].role != Role::Tool && earliest_answered_later >= i;
    }
    ok
}

/// Where the next cut goes: the first message kept. It is past the current cut, splits no
/// call from its result, and keeps what fits in `tail_budget` tokens (at least the newest
/// exchange).
fn plan_cut(messages: &[Message], state: &CompactionState, tail_budget: u64) -> Option<usize> {
    let start = messages.partition_point(|m| m.seq < state.keep_from_seq());
    let ok = cuttable(messages);
    let last_open = (0..messages.len()).rev().find(|&i| ok[i])?;
    if last_open <= start {
        return None;
    }
    let mut tail = 0u64;
    let mut cut = last_open;
    for i in (start + 1..messages.len()).rev() {
        tail += message_tokens(&messages[i]);
        if tail > tail_budget {
            break;
        }
        if ok[i] && i <= last_open {
            cut = i;
        }
    }
    Some(cut)
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept} … [clipped]")
}

/// One covered message in the transcript, its texts clipped to `text_chars` (user and
/// assistant) and `block_chars` (calls, results, notes).
fn transcript_block(m: &Message, text_chars: usize, block_chars: usize) -> String {
    match m.role {
        Role::User => format!("[user]\n{}", clip(&m.text, text_chars)),
        Role::Assistant => {
            let mut block = format!("[assistant]\n{}", clip(&m.text, text_chars));
            for call in m.calls.iter() {
                block.push_str(&format!(
                    "\n[tool call {} {}]",
                    call.name,
                    clip(&call.input.to_string(), block_chars)
                ));
            }
            block
        }
        Role::Tool => {
            let mut block = format!(
                "[tool result{}]\n{}",
                if m.is_error { ", error" } else { "" },
                clip(&m.text, block_chars)
            );
            for image in &m.attachments {
                block.push_str(&format!("\n[an image was attached ({})]", image.media_type));
            }
            block
        }
        Role::Context => format!("[context]\n{}", clip(&m.text, block_chars)),
    }
}

/// The covered messages as a transcript of about `max_bytes` bytes, after the previous summary.
/// When they do not fit, every message is clipped harder first; then the oldest after the
/// first are left out, so the opening request and the latest work stay.
fn transcript(previous: Option<&str>, covered: &[Message], max_bytes: usize) -> String {
    let render = |text: usize, block: usize| -> Vec<String> {
        covered
            .iter()
            .map(|m| transcript_block(m, text, block))
            .collect()
    };
    let size = |blocks: &[String]| blocks.iter().map(|b| b.len() + 2).sum::<usize>();
    let head = previous.map(|s| format!("[summary of what came before]\n{s}"));
    let budget = max_bytes.saturating_sub(head.as_ref().map_or(0, String::len));
    let mut blocks = render(TRANSCRIPT_TEXT_CHARS, TRANSCRIPT_BLOCK_CHARS);
    if size(&blocks) > budget {
        let share = budget / covered.len().max(1);
        blocks = render(share.max(400), (share / 2).max(200));
    }
    let mut omitted = 0;
    while size(&blocks) > budget && blocks.len() > 2 {
        blocks.remove(1);
        omitted += 1;
    }
    let mut parts: Vec<String> = head.into_iter().collect();
    let mut blocks = blocks.into_iter();
    parts.extend(blocks.next());
    if omitted > 0 {
        parts.push(format!("[… {omitted} message(s) omitted to fit …]"));
    }
    parts.extend(blocks);
    parts.join("\n\n")
}

/// What the extension remembers of one task between its steps, so that a step costs what is
/// new, not the whole history. Never recorded: each part is checked against the conversation
/// (by its messages' chain hashes) and rebuilt when it no longer matches.
#[derive(Default)]
struct Memo {
    /// Each conversation message's chain hash, and the estimated tokens through it.
    sums: Vec<(Digest, u64)>,
    /// The tool schemas last measured (by identity) and their estimated tokens.
    tools: Option<(Arc<Vec<Value>>, u64)>,
    /// The last overlaid conversation.
    overlay: Option<Overlaid>,
}

/// One overlaid conversation, as the memo keeps it.
struct Overlaid {
    /// Which compaction it shows: its cut and the compaction count.
    shown: (u64, u64),
    /// The newest user message's index when it was built.
    last_user: Option<usize>,
    /// The chain hash of the last conversation message in it.
    through: Digest,
    /// The messages, extended in place while the memo is their only holder, so the kept
    /// messages are not copied again each step.
    messages: Arc<Vec<Message>>,
}

impl Memo {
    /// The running token sums over `messages`, extended by the new ones.
    fn sums(&mut self, messages: &[Message]) -> &[(Digest, u64)] {
        // A chain hash covers everything before it: the entries still valid are a prefix.
        while let Some(&(hash, _)) = self.sums.last() {
            if messages
                .get(self.sums.len() - 1)
                .is_some_and(|m| m.hash == hash)
            {
                break;
            }
            self.sums.pop();
        }
        for message in &messages[self.sums.len()..] {
            let before = self.sums.last().map_or(0, |&(_, sum)| sum);
            self.sums
                .push((message.hash, before + message_tokens(message)));
        }
        &self.sums
    }

    /// The estimated tokens of `tools`, measured once per tool list.
    fn tools(&mut self, tools: &Arc<Vec<Value>>) -> u64 {
        match &self.tools {
            Some((known, tokens)) if Arc::ptr_eq(known, tools) => *tokens,
            _ => {
                let bytes: usize = tools.iter().map(|t| t.to_string().len()).sum();
                let tokens = bytes as u64 / BYTES_PER_TOKEN;
                self.tools = Some((Arc::clone(tools), tokens));
                tokens
            }
        }
    }
}

/// Memos kept at most (one per task this process runs); past it they start over.
const MAX_MEMOS: usize = 64;

/// The `compaction` extension.
pub(crate) struct Compaction {
    settings: Settings,
    memos: Mutex<HashMap<String, Memo>>,
}

impl Compaction {
    pub(crate) fn new(settings: Settings) -> Self {
        Self {
            settings,
            memos: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `work` on the task's memo.
    fn with_memo<T>(&self, view: &View<'_>, work: impl FnOnce(&mut Memo) -> T) -> T {
        let mut memos = self.memos.lock().unwrap_or_else(PoisonError::into_inner);
        if memos.len() >= MAX_MEMOS && !memos.contains_key(view.task_id().as_str()) {
            memos.clear();
        }
        work(memos.entry(view.task_id().as_str().to_owned()).or_default())
    }

    /// The estimated tokens of `request`: with `head` known (the request ends with the task's
    /// conversation from some point on, after `head` messages of its own), what is new since
    /// the last step is measured and the rest remembered; else all of it is measured.
    fn estimate(&self, view: &View<'_>, request: &ModelRequest, head: Option<usize>) -> u64 {
        let Some(head) = head else {
            return request_tokens(request);
        };
        let messages = view.messages();
        let kept = request.messages.len() - head;
        let head_tokens: u64 = request.messages[..head].iter().map(message_tokens).sum();
        self.with_memo(view, |memo| {
            let sums = memo.sums(messages);
            let total = sums.last().map_or(0, |&(_, sum)| sum);
            let before = match messages.len() - kept {
                0 => 0,
                n => sums[n - 1].1,
            };
            let conversation = total - before;
            memo.tools(&request.tools) + fixed_tokens(request) + head_tokens + conversation
        })
    }

    /// Compacts for a request of `estimate` tokens; `None` when nothing can be (or may be) cut.
    pub(crate) async fn compact(
        &self,
        view: &View<'_>,
        state: &CompactionState,
        trigger: Trigger,
        estimate: u64,
        tail_budget: u64,
    ) -> Result<Option<CompactionState>, StepSignal> {
        let Some(model) = view.model() else {
            return Ok(None);
        };
        let usable = self
            .settings
            .usable(model.context_window(), model.max_output_tokens());
        let messages = view.messages();
        let Some(cut) = plan_cut(messages, state, tail_budget) else {
            return Ok(None);
        };
        let advice = view.ask_before_compact(EXTENSION);
        if let Some((name, refusal)) = advice
            .iter()
            .find_map(|(name, a)| a.refuse.as_ref().map(|r| (name, r)))
        {
            tracing::info!(extension = %name, "compaction refused: {refusal}");
            return Ok(None);
        }
        let start = messages.partition_point(|m| m.seq < state.keep_from_seq());
        let previous = state.current.as_ref().map(|c| c.summary.as_str());
        // The transcript gets half the usable window; the summary has the rest.
        let max_bytes = usize::try_from(usable / 2 * BYTES_PER_TOKEN).unwrap_or(usize::MAX);
        let mut prompt = transcript(previous, &messages[start..cut], max_bytes);
        let instructions: Vec<String> = advice
            .iter()
            .filter_map(|(name, CompactAdvice { instructions, .. })| {
                instructions.as_ref().map(|i| format!("- ({name}) {i}"))
            })
            .collect();
        prompt.push_str("\n\nSummarise the conversation above.");
        if !instructions.is_empty() {
            prompt.push_str("\nAlso:\n");
            prompt.push_str(&instructions.join("\n"));
        }
        let mut request = ModelRequest::auxiliary(
            EXTENSION,
            SUMMARY_SYSTEM,
            vec![Message::synthetic(0, Role::User, prompt)],
        );
        request.agent = view.agent().to_owned();
        let failed = |why: String| StepSignal::TurnFailed {
            reason: format!("compaction_summary_failed: {why}"),
        };
        let reply = model
            .complete(&request)
            .await
            .map_err(|err| failed(err.to_string()))?;
        let summary = reply.text.trim();
        if summary.is_empty() {
            return Err(failed("the model returned an empty summary".to_owned()));
        }
        let record = Compacted {
            keep_from_seq: messages[cut].seq,
            covered: cut as u64,
            summary: clip(summary, MAX_SUMMARY_CHARS),
            lead: view.ask_lead_residents(EXTENSION),
            residents: view.ask_residents(EXTENSION),
            trigger,
            estimated_tokens: estimate,
            at_reply: messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count() as u64,
        };
        let data = serde_json::to_value(&record)
            .map_err(|err| StepSignal::Error(HookError::new(err.to_string())))?;
        view.record(EXTENSION, KIND, data);
        let mut next = state.clone();
        next.apply(record);
        Ok(Some(next))
    }

    /// The request with the summary in force, when it still holds the task's conversation,
    /// and how many messages of its own precede the conversation's kept part (`None` when an
    /// earlier extension replaced the conversation: then it is left as it is).
    fn with_overlay(
        &self,
        view: &View<'_>,
        state: &CompactionState,
        mut request: ModelRequest,
    ) -> (ModelRequest, Option<usize>) {
        if !Arc::ptr_eq(&request.messages, &view.core().messages) {
            return (request, None);
        }
        let Some(compacted) = state.current.as_ref() else {
            return (request, Some(0));
        };
        let messages = view.messages();
        let last_user = view.core().last_user;
        let keep = compacted.keep_from_seq;
        let shown = (keep, state.count);
        let last_hash = messages.last().map(|m| m.hash).unwrap_or_default();
        let overlaid = self.with_memo(view, |memo| {
            // The last overlay, extended by the messages since, while it is of the same cut
            // and the same newest user message.
            if let Some(last) = memo.overlay.as_mut()
                && last.shown == shown
                && last.last_user == last_user
                && let Some(at) = messages.iter().rposition(|m| m.hash == last.through)
            {
                Arc::make_mut(&mut last.messages).extend_from_slice(&messages[at + 1..]);
                last.through = last_hash;
                return Arc::clone(&last.messages);
            }
            let built = Arc::new(overlay(messages, last_user, state).unwrap_or_default());
            memo.overlay = Some(Overlaid {
                shown,
                last_user,
                through: last_hash,
                messages: Arc::clone(&built),
            });
            built
        });
        let first_kept = messages.partition_point(|m| m.seq < keep);
        let head = overlaid.len() - (messages.len() - first_kept);
        request.messages = overlaid;
        (request, Some(head))
    }
}

#[async_trait]
impl Extension for Compaction {
    fn name(&self) -> &str {
        EXTENSION
    }

    async fn before_model(
        &self,
        view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        let state = compaction::read(view as &dyn StateView);
        // The overlay replaces the messages alone: keeping the original ones is enough to undo
        // it, without a copy of the whole request on every step.
        let original = Arc::clone(&request.messages);
        let (overlaid, head) = self.with_overlay(view, &state, request);
        let Some(model) = view.model().filter(|_| self.settings.enabled) else {
            return Ok(overlaid);
        };
        let window = model.context_window();
        let usable = self.settings.usable(window, model.max_output_tokens());
        let estimate = self.estimate(view, &overlaid, head);
        if estimate < usable {
            return Ok(overlaid);
        }
        let mut request = overlaid;
        request.messages = original;
        let Some(next) = self
            .compact(view, &state, Trigger::Threshold, estimate, usable / 3)
            .await?
        else {
            if estimate >= window {
                return Err(StepSignal::TurnFailed {
                    reason: format!(
                        "compaction_no_progress: the request is about {estimate} tokens, over the {window}-token context window, and nothing more can be summarised"
                    ),
                });
            }
            return Ok(self.with_overlay(view, &state, request).0);
        };
        let (compacted, head) = self.with_overlay(view, &next, request);
        let after = self.estimate(view, &compacted, head);
        if after >= window {
            return Err(StepSignal::TurnFailed {
                reason: format!(
                    "compaction_no_progress: the request is still about {after} tokens after compacting, over the {window}-token context window"
                ),
            });
        }
        Ok(compacted)
    }

    async fn on_context_overflow(
        &self,
        view: &View<'_>,
        request: &ModelRequest,
    ) -> Result<bool, StepSignal> {
        let Some(model) = view.model().filter(|_| self.settings.enabled) else {
            return Ok(false);
        };
        let state = compaction::read(view as &dyn StateView);
        let usable = self
            .settings
            .usable(model.context_window(), model.max_output_tokens());
        let made = self
            .compact(
                view,
                &state,
                Trigger::Overflow,
                request_tokens(request),
                usable / 9,
            )
            .await?;
        Ok(made.is_some())
    }

    fn commands(&self, _view: &View<'_>) -> Result<Vec<CommandSpec>, HookError> {
        Ok(vec![crate::compact_now::spec()])
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        _args: &str,
    ) -> Result<CommandReply, HookError> {
        crate::compact_now::run(self, view, name).await
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        match kind {
            KIND => {
                let record: Compacted = serde_json::from_value(data.clone())
                    .map_err(|err| format!("a `{KIND}` record is malformed: {err}"))?;
                let mut folded: CompactionState = if state.is_null() {
                    CompactionState::default()
                } else {
                    serde_json::from_value(state.clone())
                        .map_err(|err| format!("the folded compaction state is malformed: {err}"))?
                };
                folded.apply(record);
                *state = serde_json::to_value(&folded).map_err(|err| err.to_string())?;
                Ok(())
            }
            // A summary that covers an erased message would keep what was erased: it is dropped,
            // and the next request over the threshold summarises afresh.
            ERASED_KIND => {
                let erased = data.get("seq").and_then(Value::as_u64);
                let covers = state
                    .pointer("/current/keep_from_seq")
                    .and_then(Value::as_u64)
                    .zip(erased)
                    .is_some_and(|(keep, seq)| seq < keep);
                if covers && let Some(map) = state.as_object_mut() {
                    map.insert("current".to_owned(), Value::Null);
                }
                Ok(())
            }
            other => Err(format!("unknown record kind `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use noeta_core::model::ToolCall;
    use serde_json::json;

    fn message(seq: u64, role: Role, text: &str) -> Message {
        Message::synthetic(seq, role, text)
    }

    fn conversation() -> Vec<Message> {
        let mut call = message(2, Role::Assistant, "");
        call.calls = vec![ToolCall {
            id: "c1".into(),
            name: "Big".into(),
            input: json!({}),
        }]
        .into();
        let mut first = message(3, Role::Tool, &"r".repeat(400));
        first.call_id = Some("c1".into());
        let mut looked = message(4, Role::Assistant, "looked");
        looked.calls = vec![ToolCall {
            id: "c2".into(),
            name: "Big".into(),
            input: json!({}),
        }]
        .into();
        let mut second = message(5, Role::Tool, &"s".repeat(400));
        second.call_id = Some("c2".into());
        vec![message(1, Role::User, "goal"), call, first, looked, second]
    }

    #[test]
    fn the_usable_window_keeps_a_reserve_for_the_reply() {
        let default = Settings {
            enabled: true,
            reserve_tokens: None,
        };
        assert_eq!(default.usable(200_000, None), 167_000);
        assert_eq!(default.usable(8_000, None), 6_000);
        // A provider that reserves more room for the reply gets it, up to half the window.
        assert_eq!(default.usable(200_000, Some(64_000)), 136_000);
        assert_eq!(default.usable(200_000, Some(128_000)), 100_000);
        let set = Settings {
            enabled: true,
            reserve_tokens: Some(1_000),
        };
        assert_eq!(set.usable(200_000, Some(64_000)), 199_000);
        assert_eq!(set.usable(500, None), 1);
    }

    #[test]
    fn the_cut_never_falls_on_a_tool_result_and_must_cover_something_new() {
        let messages = conversation();
        let none = CompactionState::default();
        // A tail of one token keeps only the newest exchange that is not a result.
        assert_eq!(plan_cut(&messages, &none, 1), Some(3));
        // A generous tail still cuts past the first message.
        assert_eq!(plan_cut(&messages, &none, 10_000), Some(1));
        let mut at = CompactionState::default();
        at.apply(Compacted {
            keep_from_seq: 4,
            covered: 3,
            summary: "s".into(),
            lead: Vec::new(),
            residents: Vec::new(),
            trigger: Trigger::Threshold,
            estimated_tokens: 0,
            at_reply: 1,
        });
        assert_eq!(plan_cut(&messages, &at, 1), None, "nothing new to cover");
    }

    #[test]
    fn a_transcript_too_big_is_clipped_then_thinned_keeping_the_opening_request() {
        let mut messages = vec![message(1, Role::User, "the goal")];
        for seq in 2..40 {
            messages.push(message(seq, Role::Tool, &"t".repeat(5_000)));
        }
        let text = transcript(Some("before"), &messages, 6_000);
        assert!(
            text.starts_with("[summary of what came before]\nbefore\n\n[user]\nthe goal\n\n[… "),
            "{}",
            &text[..200]
        );
        assert!(text.len() < 6_500, "{}", text.len());
        assert!(text.ends_with(" … [clipped]"));
    }

    #[test]
    fn erasing_a_covered_message_drops_the_summary() {
        let ext = Compaction::new(Settings {
            enabled: true,
            reserve_tokens: None,
        });
        let mut state = Value::Null;
        let record = json!({
            "keep_from_seq": 10, "covered": 5, "summary": "s", "trigger": "threshold",
            "estimated_tokens": 1, "at_reply": 2
        });
        ext.reduce(&mut state, KIND, &record).unwrap();
        ext.reduce(&mut state, ERASED_KIND, &json!({ "seq": 12 }))
            .unwrap();
        assert_eq!(
            state["current"]["keep_from_seq"], 10,
            "a later message leaves it"
        );
        ext.reduce(&mut state, ERASED_KIND, &json!({ "seq": 3 }))
            .unwrap();
        assert_eq!(state["current"], Value::Null);
        assert_eq!(state["count"], 1);
        let err = ext
            .reduce(&mut state, KIND, &json!({ "summary": 1 }))
            .unwrap_err();
        assert!(
            err.starts_with("a `compacted` record is malformed: "),
            "{err}"
        );
        let err = ext
            .reduce(&mut state, "summarised", &json!({}))
            .unwrap_err();
        assert_eq!(err, "unknown record kind `summarised`");
    }

    #[test]
    fn a_note_between_a_call_and_its_result_is_no_place_to_cut() {
        let mut messages = conversation();
        // A context note lands between the first call (seq 2) and its result (seq 3).
        messages.insert(2, message(2, Role::Context, "a note"));
        let ok = cuttable(&messages);
        assert!(!ok[2], "cutting at the note would orphan the result");
        assert!(ok[1] && ok[4]);
        assert_eq!(plan_cut(&messages, &CompactionState::default(), 1), Some(4));
    }

    /// A folded conversation of `replies` rounds (a user message, then reply and result pairs).
    fn folded(replies: usize) -> noeta_core::fold::TaskState {
        use noeta_core::records::{CallOutcome, CoreRecord};
        use noeta_core::store::Event;
        let mut records = vec![CoreRecord::UserMessage {
            text: "goal".into(),
        }];
        for n in 0..replies {
            records.push(CoreRecord::AssistantReply {
                text: format!("step {n}").into(),
                calls: vec![ToolCall {
                    id: format!("c{n}"),
                    name: "Big".into(),
                    input: json!({ "n": n }),
                }]
                .into(),
                stop: noeta_core::model::StopReason::ToolUse,
                usage: Default::default(),
                reasoning: Vec::new(),
            });
            records.push(CoreRecord::CallFinished {
                call_id: format!("c{n}").into(),
                tool: "Big".into(),
                text: "r".repeat(100 + n).into(),
                outcome: CallOutcome::Ok,
                full: None,
                attachments: Vec::new(),
            });
        }
        let events: Vec<Event> = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| Event::new(i as u64 + 1, r.to_record()))
            .collect();
        noeta_core::fold::Folder::new(&[], "test")
            .fold(&events)
            .unwrap()
    }

    #[test]
    fn the_remembered_estimate_and_overlay_match_measuring_everything() {
        let ext = Compaction::new(Settings {
            enabled: true,
            reserve_tokens: None,
        });
        let task = noeta_core::store::TaskId::new("t").unwrap();
        let request = |state: &noeta_core::fold::TaskState| ModelRequest {
            tools: Arc::new(vec![
                json!({ "name": "Big", "description": "x".repeat(300) }),
            ]),
            residents: vec!["resident".into()],
            messages: Arc::clone(&state.core.messages),
            ..ModelRequest::auxiliary("test", "system", Vec::new())
        };
        for (replies, compacted) in [(3, false), (5, false), (5, true), (9, true), (12, true)] {
            let mut state = folded(replies);
            if compacted {
                let mut folded = CompactionState::default();
                folded.apply(Compacted {
                    keep_from_seq: 4,
                    covered: 3,
                    summary: "what came before".into(),
                    lead: Vec::new(),
                    residents: vec![("todo".into(), "PLAN".into())],
                    trigger: Trigger::Threshold,
                    estimated_tokens: 0,
                    at_reply: 1,
                });
                state
                    .ext
                    .insert(EXTENSION.to_owned(), serde_json::to_value(&folded).unwrap());
            }
            let view = View::new(&task, "main", &state, &[], &[]);
            let read = compaction::read(&view as &dyn StateView);
            let (overlaid, head) = ext.with_overlay(&view, &read, request(&state));
            let direct = overlay(view.messages(), state.core.last_user, &read)
                .unwrap_or_else(|| state.core.messages.as_ref().clone());
            assert_eq!(*overlaid.messages, direct, "{replies} replies");
            assert_eq!(
                ext.estimate(&view, &overlaid, head),
                request_tokens(&overlaid),
                "{replies} replies"
            );
        }
    }
}
