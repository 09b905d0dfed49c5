//! The one hook dispatcher: every call of plugin code while a task runs goes through here.
//!
//! Each hook has one method on [`Hooks`] (an agent's ordered extension list) that owns both its
//! combination rule — first offer wins, any deny wins, a fold over the request, the first
//! answer wins — and its row of the failure table, so no other file decides what a failing or
//! panicking hook means. A panic is caught here and treated exactly like the hook's error. The
//! table (also in `docs/hooks.md`):
//!
//! | row | hooks | a failure or panic… |
//! |---|---|---|
//! | deny | `before_tool`, `resolve_ask`, `before_spawn`, `inherit` | denies the call (`permission check failed: …`) or refuses the spawn |
//! | skip and log | `after_tool`, `on_event`, `on_empty_reply`, `on_context_overflow`, `commands`, `tail`, `continue_state`, `before_compact`, `resident`, `lead_resident`, `Tool::recover` | is logged; that extension's answer is left out |
//! | fail the turn | `on_start`, `turn_intake`, `tools`, `tool_changes`, `reminders`, `context`, `before_model`, `before_finish`, `Policy::decide` | fails the turn with `internal_error: …` (two in a row fail the task) |
//! | fail the fold | `reduce` | is a fold error; a log that cannot be folded on three claims in a row fails the task |
//! | to the model | `Tool::run`, `Tool::resume` | becomes an error result the model sees; the records it staged are dropped |
//! | to the caller | `run_command` | is the command's error |
//! | to the caller | `Tool::check_answer` | refuses the answer; the question stays open |
//!
//! Plugin code that runs outside a task — a resolver, a control-tool or session-pack factory —
//! is guarded where it is called (`resolve.rs`, `identity.rs`; session packs through
//! [`guarded`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Value, json};

use crate::contrib::Verdict;
use crate::extension::{
    AskAnswer, CommandReply, CommandSpec, CompactAdvice, ContextPart, Extension, HookError,
    HookResult, OfferedTool, SpawnRequest, StepSignal, View,
};
use crate::fold::{Folder, Reducer, TaskState};
use crate::model::ToolCall;
use crate::model::{ModelReply, ModelRequest};
use crate::panics::panic_message;
use crate::policy::{Decision, Policy};
use crate::store::Event;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Runs plugin code that is not a hook (a contribution's own trait method inside an
/// adapter); a panic becomes `panicked: …`.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| format!("panicked: {}", panic_message(payload.as_ref())))
}

/// Runs a synchronous hook of `extension`; a panic becomes a hook error naming both.
fn call<T>(extension: &str, hook: &str, f: impl FnOnce() -> HookResult<T>) -> HookResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(HookError::new(panicked(extension, hook, payload.as_ref()))))
}

/// Awaits an async hook of `extension`; a panic becomes a hook error naming both.
async fn call_async<T>(
    extension: &str,
    hook: &str,
    fut: impl Future<Output = HookResult<T>>,
) -> HookResult<T> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .unwrap_or_else(|payload| Err(HookError::new(panicked(extension, hook, payload.as_ref()))))
}

/// A failed hook's error, or its panic (already named), as one text.
enum Failed {
    Error(String),
    Panic(String),
}

/// What a hook call came to: the value, or how it failed.
fn outcome<T>(
    extension: &str,
    hook: &str,
    result: std::thread::Result<HookResult<T>>,
) -> Result<T, Failed> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(Failed::Error(err.to_string())),
        Err(payload) => Err(Failed::Panic(panicked(extension, hook, payload.as_ref()))),
    }
}

fn panicked(extension: &str, hook: &str, payload: &(dyn std::any::Any + Send)) -> String {
    format!("`{extension}` {hook} panicked: {}", panic_message(payload))
}

/// The fail-the-turn row's reason.
fn turn_failure(extension: &str, hook: &str, failed: Failed) -> String {
    match failed {
        Failed::Error(err) => format!("internal_error: `{extension}` {hook} failed: {err}"),
        Failed::Panic(text) => format!("internal_error: {text}"),
    }
}

/// The deny row's reason (`permission check failed: …`).
fn check_failure(failed: Failed) -> String {
    match failed {
        Failed::Error(err) | Failed::Panic(err) => format!("permission check failed: {err}"),
    }
}

/// The skip-and-log row.
fn skip(extension: &str, hook: &str, failed: Failed) {
    match failed {
        Failed::Error(err) => {
            tracing::warn!(extension, "{hook} failed and was skipped: {err}");
        }
        Failed::Panic(text) => tracing::warn!(extension, "{text}; skipped"),
    }
}

/// A step signal from `extension`'s `hook`, an error made a named turn failure.
fn name_signal(extension: &str, hook: &str, signal: StepSignal) -> StepSignal {
    match signal {
        StepSignal::Error(err) => StepSignal::TurnFailed {
            reason: format!("internal_error: `{extension}` {hook} failed: {err}"),
        },
        other => other,
    }
}

async fn signalling<T>(
    extension: &str,
    hook: &str,
    fut: impl Future<Output = Result<T, StepSignal>>,
) -> Result<T, StepSignal> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(signal)) => Err(name_signal(extension, hook, signal)),
        Err(payload) => Err(StepSignal::TurnFailed {
            reason: format!(
                "internal_error: {}",
                panicked(extension, hook, payload.as_ref())
            ),
        }),
    }
}

/// The tools a step offers after every `tools` and `tool_changes`.
pub(crate) struct ToolOffer {
    /// Offered, in order (first offer of a name wins; listed-last tools last).
    pub(crate) tools: Vec<OfferedTool>,
    /// Withheld names, each with the error a call to it returns (the first extension's wins).
    pub(crate) withheld: BTreeMap<String, String>,
    /// Request entries that are not tools.
    pub(crate) entries: Vec<Value>,
    /// Deferred tools an extension loaded this step (sent with their loaded description).
    pub(crate) loaded: Vec<String>,
}

impl ToolOffer {
    /// An offered tool by model-visible name.
    pub(crate) fn find(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|t| t.tool.name() == name)
            .map(|t| &t.tool)
    }
}

/// One pass of the gate over a call: what every `before_tool` said, combined.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallVerdict {
    /// Some extension denied it (or a check failed).
    Deny(String),
    /// The first rewrite: the call's new input, to be gated again.
    Rewrite(Value),
    /// A person must be asked, for these reasons.
    Ask(Vec<String>),
    /// Nothing stands in its way.
    Allow,
}

/// What the `before_finish` checks said.
pub(crate) enum FinishCheck {
    /// The turn may end.
    Go,
    /// An extension refused, with a message the model sees.
    Refused(String),
    /// A check failed: the turn fails with this reason.
    Failed(String),
}

/// An agent's ordered extension list, as the runner calls it.
#[derive(Clone, Copy)]
pub(crate) struct Hooks<'a>(pub(crate) &'a [Arc<dyn Extension>]);

impl<'a> Hooks<'a> {
    /// `on_start`, in order; the first failure stops the rest and fails the turn.
    pub(crate) async fn on_start(self, view: &View<'_>) -> Option<String> {
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.on_start(view)).catch_unwind().await;
            if let Err(failed) = outcome(ext.name(), "on_start", result) {
                return Some(turn_failure(ext.name(), "on_start", failed));
            }
        }
        None
    }

    /// `turn_intake`, in order; the first failure stops the rest and fails the turn.
    pub(crate) async fn turn_intake(self, view: &View<'_>, text: &str) -> Option<String> {
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.turn_intake(view, text))
                .catch_unwind()
                .await;
            if let Err(failed) = outcome(ext.name(), "turn_intake", result) {
                return Some(turn_failure(ext.name(), "turn_intake", failed));
            }
        }
        None
    }

    /// `tools` then `tool_changes`: the first offer of a name wins; adding a held-back tool
    /// loads it after those already offered; the first extension to withhold a name sets its
    /// error. A tool `admits` refuses (the agent's allow-list) is never offered, held back or
    /// added. A failure fails the turn.
    pub(crate) fn offer(
        self,
        view: &View<'_>,
        admits: &dyn Fn(&dyn Tool) -> bool,
    ) -> Result<ToolOffer, String> {
        let mut tools: Vec<OfferedTool> = Vec::new();
        for ext in self.0 {
            let offered = catch_unwind(AssertUnwindSafe(|| ext.tools(view)));
            let offered = outcome(ext.name(), "tools", offered)
                .map_err(|f| turn_failure(ext.name(), "tools", f))?;
            for tool in offered {
                if admits(tool.as_ref()) && !tools.iter().any(|t| t.tool.name() == tool.name()) {
                    tools.push(OfferedTool {
                        extension: ext.name().to_owned(),
                        deferred: tool.flags().deferred,
                        tool,
                    });
                }
            }
        }
        let mut withheld = BTreeMap::new();
        let mut entries = Vec::new();
        let mut loaded: Vec<String> = Vec::new();
        for ext in self.0 {
            let changes = catch_unwind(AssertUnwindSafe(|| ext.tool_changes(view, &tools)));
            let changes = outcome(ext.name(), "tool_changes", changes)
                .map_err(|f| turn_failure(ext.name(), "tool_changes", f))?;
            for tool in changes.add.into_iter().filter(|t| admits(t.as_ref())) {
                match tools.iter().position(|t| t.tool.name() == tool.name()) {
                    // Adding a held-back tool loads it, after the tools already offered, so
                    // loading never reorders what the stable prefix already holds.
                    Some(i) if tools[i].deferred => {
                        let mut held = tools.remove(i);
                        held.deferred = false;
                        loaded.push(held.tool.name().to_owned());
                        tools.push(held);
                    }
                    Some(_) => {}
                    None => tools.push(OfferedTool {
                        extension: ext.name().to_owned(),
                        deferred: false,
                        tool,
                    }),
                }
            }
            for (name, error) in changes.withhold {
                withheld.entry(name).or_insert(error);
            }
            entries.extend(changes.entries);
        }
        tools.retain(|t| !t.deferred && !withheld.contains_key(t.tool.name()));
        // Tools marked listed-last go after the others, each group in offer order.
        tools.sort_by_key(|t| t.tool.flags().listed_last);
        Ok(ToolOffer {
            tools,
            withheld,
            entries,
            loaded,
        })
    }

    /// `reminders`: each text is staged as a `reminder` record of its extension; a signal
    /// (or a failure, as a turn failure) stops the rest.
    pub(crate) async fn reminders(self, view: &View<'_>) -> Option<StepSignal> {
        for ext in self.0 {
            match signalling(ext.name(), "reminders", ext.reminders(view)).await {
                Ok(texts) => {
                    for text in texts {
                        view.record_with_message(ext.name(), "reminder", json!({}), &text);
                    }
                }
                Err(signal) => return Some(signal),
            }
        }
        None
    }

    /// `context`: every extension's parts with its name, in order; a failure fails the turn.
    pub(crate) fn context(self, view: &View<'_>) -> Result<Vec<(&'a str, ContextPart)>, String> {
        let mut parts = Vec::new();
        for ext in self.0 {
            let given = catch_unwind(AssertUnwindSafe(|| ext.context(view)));
            let given = outcome(ext.name(), "context", given)
                .map_err(|f| turn_failure(ext.name(), "context", f))?;
            parts.extend(given.into_iter().map(|part| (ext.name(), part)));
        }
        Ok(parts)
    }

    /// `tail`: every extension's render, in order; a panic renders nothing (logged).
    pub(crate) fn tail(self, view: &View<'_>) -> Vec<String> {
        self.0
            .iter()
            .filter_map(
                |ext| match catch_unwind(AssertUnwindSafe(|| ext.tail(view))) {
                    Ok(text) => text,
                    Err(payload) => {
                        skip(
                            ext.name(),
                            "tail",
                            Failed::Panic(panicked(ext.name(), "tail", payload.as_ref())),
                        );
                        None
                    }
                },
            )
            .collect()
    }

    /// `before_model`, a fold over the request; a signal (or a failure) stops the rest.
    pub(crate) async fn before_model(
        self,
        view: &View<'_>,
        request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        let mut request = request;
        for ext in self.0 {
            // Each hook owns the request it is handed: a signal or a panic ends the step, so
            // nothing needs it afterwards.
            request =
                signalling(ext.name(), "before_model", ext.before_model(view, request)).await?;
        }
        Ok(request)
    }

    /// `on_context_overflow`: true once one made room; a failure stops asking (logged).
    pub(crate) async fn on_context_overflow(self, view: &View<'_>, request: &ModelRequest) -> bool {
        for ext in self.0 {
            match AssertUnwindSafe(ext.on_context_overflow(view, request))
                .catch_unwind()
                .await
            {
                Ok(Ok(true)) => return true,
                Ok(Ok(false)) => {}
                Ok(Err(signal)) => {
                    tracing::warn!(
                        extension = ext.name(),
                        "on_context_overflow gave up: {signal:?}"
                    );
                    return false;
                }
                Err(payload) => {
                    tracing::warn!(
                        "{}",
                        panicked(ext.name(), "on_context_overflow", payload.as_ref())
                    );
                    return false;
                }
            }
        }
        false
    }

    /// `on_empty_reply`: the first nudge wins; failures are skipped.
    pub(crate) async fn on_empty_reply(
        self,
        view: &View<'_>,
        reply: &ModelReply,
    ) -> Option<String> {
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.on_empty_reply(view, reply))
                .catch_unwind()
                .await;
            match outcome(ext.name(), "on_empty_reply", result) {
                Ok(Some(message)) => return Some(message),
                Ok(None) => {}
                Err(failed) => skip(ext.name(), "on_empty_reply", failed),
            }
        }
        None
    }

    /// `before_finish`: the first refusal wins; a failure fails the turn (refusing forever
    /// would loop).
    pub(crate) async fn before_finish(self, view: &View<'_>) -> FinishCheck {
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.before_finish(view))
                .catch_unwind()
                .await;
            match outcome(ext.name(), "before_finish", result) {
                Ok(Some(message)) => return FinishCheck::Refused(message),
                Ok(None) => {}
                Err(failed) => {
                    return FinishCheck::Failed(turn_failure(ext.name(), "before_finish", failed));
                }
            }
        }
        FinishCheck::Go
    }

    /// `before_tool`: any deny wins, else the first rewrite, else an ask unless an approving
    /// allow satisfies every non-firm ask. A failing check denies.
    pub(crate) async fn before_tool(self, view: &View<'_>, call: &ToolCall) -> CallVerdict {
        let mut asks: Vec<String> = Vec::new();
        let mut firm = false;
        let mut approved = false;
        let mut rewrite = None;
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.before_tool(view, call))
                .catch_unwind()
                .await;
            let verdict = match outcome(ext.name(), "before_tool", result) {
                Ok(verdict) => verdict,
                Err(failed) => return CallVerdict::Deny(check_failure(failed)),
            };
            match verdict {
                Some(Verdict::Deny { reason }) => return CallVerdict::Deny(reason),
                Some(Verdict::Rewrite { input, .. }) if rewrite.is_none() => rewrite = Some(input),
                Some(Verdict::Ask { reason, firm: f }) => {
                    asks.push(reason);
                    firm |= f;
                }
                Some(Verdict::Allow { approve: true }) => approved = true,
                _ => {}
            }
        }
        if let Some(input) = rewrite {
            return CallVerdict::Rewrite(input);
        }
        if !asks.is_empty() && (firm || !approved) {
            return CallVerdict::Ask(asks);
        }
        CallVerdict::Allow
    }

    /// `resolve_ask`: the first answer wins; a failing check denies.
    pub(crate) async fn resolve_ask(
        self,
        view: &View<'_>,
        call: &ToolCall,
        asks: &[String],
    ) -> Result<Option<AskAnswer>, String> {
        for ext in self.0 {
            let result = AssertUnwindSafe(ext.resolve_ask(view, call, asks))
                .catch_unwind()
                .await;
            if let Some(answer) =
                outcome(ext.name(), "resolve_ask", result).map_err(check_failure)?
            {
                return Ok(Some(answer));
            }
        }
        Ok(None)
    }

    /// `after_tool`, a fold over the result; a failure keeps the result as it was (logged).
    pub(crate) async fn after_tool(
        self,
        view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> ToolOutput {
        let mut output = output;
        for ext in self.0 {
            let received = output.clone();
            match AssertUnwindSafe(ext.after_tool(view, call, received))
                .catch_unwind()
                .await
            {
                Ok(Ok(next)) => output = next,
                Ok(Err(err)) => tracing::warn!(
                    extension = ext.name(),
                    "after_tool failed; the result is kept as it was: {err}"
                ),
                Err(payload) => {
                    tracing::warn!("{}", panicked(ext.name(), "after_tool", payload.as_ref()));
                }
            }
        }
        output
    }

    /// `on_event` for each event, every extension; failures are skipped.
    pub(crate) fn on_event(self, view: &View<'_>, events: &[Event]) {
        for event in events {
            for ext in self.0 {
                let seen = catch_unwind(AssertUnwindSafe(|| ext.on_event(view, event)));
                match seen {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::warn!(
                        extension = ext.name(),
                        seq = event.seq,
                        "on_event failed and was skipped: {err}"
                    ),
                    Err(payload) => tracing::warn!(
                        extension = ext.name(),
                        seq = event.seq,
                        "on_event panicked and was skipped: {}",
                        panic_message(payload.as_ref())
                    ),
                }
            }
        }
    }

    /// The spawn checkpoint: any deny (or ask: a spawn cannot wait) refuses it, and so does a
    /// failing check.
    pub(crate) fn before_spawn(
        self,
        view: &View<'_>,
        request: &SpawnRequest,
    ) -> Result<(), String> {
        for ext in self.0 {
            let verdict = catch_unwind(AssertUnwindSafe(|| ext.before_spawn(view, request)));
            match outcome(ext.name(), "before_spawn", verdict) {
                Ok(Some(Verdict::Deny { reason })) => return Err(reason),
                Ok(Some(Verdict::Ask { reason, .. })) => {
                    return Err(format!(
                        "spawning `{}` needs approval ({reason}), and a spawn cannot wait for one",
                        request.agent
                    ));
                }
                Ok(_) => {}
                Err(Failed::Error(err) | Failed::Panic(err)) => {
                    return Err(format!("spawn check failed: {err}"));
                }
            }
        }
        Ok(())
    }

    /// `inherit`: what each extension hands a child, by extension; a failure refuses the spawn.
    pub(crate) fn inherit(self, view: &View<'_>) -> Result<BTreeMap<String, Value>, String> {
        let mut inherited = BTreeMap::new();
        for ext in self.0 {
            let given = catch_unwind(AssertUnwindSafe(|| ext.inherit(view)));
            match outcome(ext.name(), "inherit", given) {
                Ok(Some(value)) => {
                    inherited.insert(ext.name().to_owned(), value);
                }
                Ok(None) => {}
                Err(Failed::Error(err)) => {
                    return Err(format!("`{}` inherit failed: {err}", ext.name()));
                }
                Err(Failed::Panic(text)) => return Err(text),
            }
        }
        Ok(inherited)
    }

    /// `continue_state`: what of each extension's state a forked task takes along; a panic
    /// carries nothing of that extension (logged).
    pub(crate) fn continue_state(self, source: &TaskState) -> BTreeMap<String, Value> {
        let mut states = BTreeMap::new();
        for ext in self.0 {
            let Some(state) = source.ext_state(ext.name()) else {
                continue;
            };
            match catch_unwind(AssertUnwindSafe(|| ext.continue_state(state))) {
                Ok(Value::Null) => {}
                Ok(value) => {
                    states.insert(ext.name().to_owned(), value);
                }
                Err(payload) => tracing::warn!(
                    "{}",
                    panicked(ext.name(), "continue_state", payload.as_ref())
                ),
            }
        }
        states
    }

    /// `commands`: every extension's slash commands with the extension offering each;
    /// failures are skipped.
    pub(crate) fn commands(self, view: &View<'_>) -> Vec<(String, CommandSpec)> {
        let mut commands = Vec::new();
        for ext in self.0 {
            let listed = catch_unwind(AssertUnwindSafe(|| ext.commands(view)));
            match outcome(ext.name(), "commands", listed) {
                Ok(list) => commands.extend(list.into_iter().map(|c| (ext.name().to_owned(), c))),
                Err(failed) => skip(ext.name(), "commands", failed),
            }
        }
        commands
    }

    /// `run_command` of the extension named `owner`; its failure is the command's error.
    pub(crate) async fn run_command(
        self,
        owner: &str,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        match self.0.iter().find(|e| e.name() == owner) {
            Some(ext) => call_async(owner, "run_command", ext.run_command(view, name, args)).await,
            None => Err(HookError::new("the extension is gone")),
        }
    }

    /// Every other extension's `before_compact` advice; failures are skipped (logged).
    pub(crate) fn before_compact(
        self,
        view: &View<'_>,
        asking: &str,
    ) -> Vec<(String, CompactAdvice)> {
        self.peers(asking)
            .filter_map(|p| {
                let advice = asked(p.as_ref(), "before_compact", || p.before_compact(view))?;
                (advice != CompactAdvice::default()).then(|| (p.name().to_owned(), advice))
            })
            .collect()
    }

    /// Every other extension's `resident` text; failures are skipped (logged).
    pub(crate) fn residents(self, view: &View<'_>, asking: &str) -> Vec<(String, String)> {
        self.peers(asking)
            .filter_map(|p| {
                let text = asked(p.as_ref(), "resident", || p.resident(view))??;
                Some((p.name().to_owned(), text))
            })
            .collect()
    }

    /// Every other extension's `lead_resident` text; failures are skipped (logged).
    pub(crate) fn lead_residents(self, view: &View<'_>, asking: &str) -> Vec<(String, String)> {
        self.peers(asking)
            .filter_map(|p| {
                let text = asked(p.as_ref(), "lead_resident", || p.lead_resident(view))??;
                Some((p.name().to_owned(), text))
            })
            .collect()
    }

    fn peers(self, asking: &str) -> impl Iterator<Item = &'a Arc<dyn Extension>> {
        self.0.iter().filter(move |p| p.name() != asking)
    }
}

/// One extension asked on another's behalf (the `View::ask_*` hooks): its answer, or `None`
/// when it failed (logged).
fn asked<T>(ext: &dyn Extension, hook: &str, f: impl FnOnce() -> HookResult<T>) -> Option<T> {
    match call(ext.name(), hook, f) {
        Ok(value) => Some(value),
        Err(err) => {
            tracing::warn!(
                extension = ext.name(),
                "{hook} failed and was skipped: {err}"
            );
            None
        }
    }
}

/// The agent's policy decides on a reply; a panic fails the turn.
pub(crate) fn decide(
    policy: &dyn Policy,
    view: &View<'_>,
    reply: &ModelReply,
) -> Result<Decision, String> {
    catch_unwind(AssertUnwindSafe(|| policy.decide(view, reply))).map_err(|payload| {
        format!(
            "internal_error: the policy panicked: {}",
            panic_message(payload.as_ref())
        )
    })
}

/// An extension as the fold sees it: its reducer, a panic in it a fold error (`panicked: …`).
struct Guarded(Arc<dyn Extension>);

impl Reducer for Guarded {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn folds(&self) -> Vec<String> {
        self.0.folds()
    }

    fn reduce(&self, slot: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        catch_unwind(AssertUnwindSafe(|| self.0.reduce(slot, kind, data)))
            .unwrap_or_else(|payload| Err(format!("panicked: {}", panic_message(payload.as_ref()))))
    }
}

fn reducers(extensions: &[Arc<dyn Extension>]) -> Vec<Arc<dyn Reducer>> {
    extensions
        .iter()
        .map(|ext| Arc::new(Guarded(Arc::clone(ext))) as Arc<dyn Reducer>)
        .collect()
}

/// Folders over extension lists: each extension's reducer called through this dispatcher.
impl Folder {
    /// A folder for `extensions`; `plugin_set` identifies the plugin set for snapshots.
    pub fn new(extensions: &[Arc<dyn Extension>], plugin_set: impl Into<String>) -> Self {
        Self::of_reducers(reducers(extensions), plugin_set)
    }

    /// A folder over `extensions` with this folder's plugin-set tag.
    pub fn rebuilt(&self, extensions: &[Arc<dyn Extension>]) -> Self {
        self.with_reducers(reducers(extensions))
    }
}

/// A tool's `run` or `resume`: its output, or the error text the model sees instead (a
/// `RespondToModel` message as it is, any other error or a panic named by the tool).
pub(crate) async fn run_tool(
    tool: &str,
    running: impl Future<Output = Result<ToolOutput, ToolError>>,
) -> Result<ToolOutput, String> {
    match AssertUnwindSafe(running).catch_unwind().await {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(ToolError::RespondToModel(message))) => Err(message),
        Ok(Err(err)) => Err(format!("{tool}: {err}")),
        Err(payload) => Err(format!(
            "{tool}: the tool panicked: {}",
            panic_message(payload.as_ref())
        )),
    }
}

/// A tool's `check_answer` for an answer to its parked call; a panic refuses the answer.
pub(crate) fn check_answer(tool: &dyn Tool, input: &Value, answer: &Value) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| tool.check_answer(input, answer))).unwrap_or_else(|payload| {
        Err(format!(
            "{}: checking the answer panicked: {}",
            tool.name(),
            panic_message(payload.as_ref())
        ))
    })
}

/// A tool's `recover` after a crash: the result it found, or `None` (nothing found, or it
/// failed: logged).
pub(crate) async fn recover_tool(
    tool: &Arc<dyn Tool>,
    name: &str,
    ctx: &ToolContext,
) -> Option<ToolOutput> {
    match AssertUnwindSafe(tool.recover(ctx)).catch_unwind().await {
        Ok(Ok(found)) => found,
        Ok(Err(err)) => {
            tracing::warn!(tool = %name, "recover failed: {err}");
            None
        }
        Err(payload) => {
            tracing::warn!("{}", panicked(name, "recover", payload.as_ref()));
            None
        }
    }
}

/// The asks a hook makes of the other extensions through its view: each goes through this
/// dispatcher, with the failure rule of the hook asked.
impl View<'_> {
    /// Asks every other extension's `before_compact`; those with something to say answer
    /// (a failing or panicking one is skipped and logged).
    pub fn ask_before_compact(&self, asking: &str) -> Vec<(String, CompactAdvice)> {
        Hooks(self.peers).before_compact(self, asking)
    }

    /// Collects every other extension's `resident` text; a failing or panicking one is skipped
    /// and logged.
    pub fn ask_residents(&self, asking: &str) -> Vec<(String, String)> {
        Hooks(self.peers).residents(self, asking)
    }

    /// Collects every other extension's `lead_resident` text; a failing or panicking one is
    /// skipped and logged.
    pub fn ask_lead_residents(&self, asking: &str) -> Vec<(String, String)> {
        Hooks(self.peers).lead_residents(self, asking)
    }

    /// Passes `call` through the gate — every extension's `before_tool`, combined as for a
    /// model's call — without running it: for a frontend or a command that runs something on
    /// the task's behalf outside a model turn (a markdown command's `` !`…` ``). A failing
    /// check is a deny.
    pub async fn ask_gate(&self, call: &ToolCall) -> CallVerdict {
        Hooks(self.peers).before_tool(self, call).await
    }
}
