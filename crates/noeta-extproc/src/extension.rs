//! An export's hooks, served by its plugin program: every hook of the `Extension` trait maps
//! to a `hook/<name>` call, made only when the handshake listed it. A call that fails — the
//! program crashed, hung past the deadline, answered garbage or an error — is the hook
//! failing, and the kernel's hook-failure table decides what that means.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::Verdict;
use noeta_core::extension::{
    AskAnswer, CommandReply, CommandSpec, CompactAdvice, ContextPart, Extension, HookError,
    HookResult, OfferedTool, SpawnRequest, StepSignal, ToolChanges, View,
};
use noeta_core::model::ToolCall;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::store::Event;
use noeta_core::{Tool, ToolOutput};
use serde_json::{Value, json};

use crate::connection::CallError;
use crate::protocol::{self, Export};
use crate::supervisor::Supervisor;

/// One export's extension.
pub(crate) struct ProcessExtension {
    supervisor: Arc<Supervisor>,
    name: String,
    export: Export,
    /// The export's tools, for the `tools` and `tool_changes` hooks to offer by name.
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ProcessExtension {
    pub(crate) fn new(
        supervisor: Arc<Supervisor>,
        name: String,
        export: Export,
        tools: BTreeMap<String, Arc<dyn Tool>>,
    ) -> Self {
        Self {
            supervisor,
            name,
            export,
            tools,
        }
    }

    fn implements(&self, hook: &str) -> bool {
        self.export.hooks.contains(hook)
    }

    fn error(&self, hook: &str, problem: impl std::fmt::Display) -> HookError {
        HookError::new(format!(
            "plugin `{}` (export `{}`): hook `{hook}` failed: {problem}",
            self.supervisor.plugin(),
            self.name
        ))
    }

    fn params(&self, view: Option<&View<'_>>, args: Value) -> Value {
        let mut params = json!({"export": self.name});
        if let Some(view) = view {
            params["view"] = protocol::view_json(view, &self.name);
        }
        if let (Some(object), Value::Object(args)) = (params.as_object_mut(), args) {
            object.extend(args);
        }
        params
    }

    /// Stages the answer's records on the view; a malformed list fails the hook.
    fn stage(&self, hook: &str, view: &View<'_>, answer: &Value) -> HookResult<()> {
        for (kind, data, message) in
            protocol::records(answer).map_err(|problem| self.error(hook, problem))?
        {
            match message {
                Some(message) => view.record_with_message(&self.name, &kind, data, &message),
                None => view.record(&self.name, &kind, data),
            }
        }
        Ok(())
    }

    /// A synchronous hook: blocks until the answer or the hook deadline.
    fn sync_hook(&self, hook: &str, view: &View<'_>, args: Value) -> HookResult<Value> {
        let params = self.params(Some(view), args);
        let serve = |method: &str, params: &Value| protocol::serve_view(view, method, params);
        let answer = self
            .supervisor
            .call_blocking(&format!("hook/{hook}"), &params, &serve)
            .map_err(|err| self.error(hook, err))?;
        self.stage(hook, view, &answer)?;
        Ok(answer)
    }

    /// An async hook, with the hook deadline.
    async fn async_hook(&self, hook: &str, view: &View<'_>, args: Value) -> HookResult<Value> {
        let params = self.params(Some(view), args);
        let serve = |method: &str, params: &Value| protocol::serve_view(view, method, params);
        let answer = self
            .supervisor
            .call(
                &format!("hook/{hook}"),
                &params,
                Some(self.supervisor.hook_timeout()),
                &serve,
                &|_, _| {},
            )
            .await
            .map_err(|err| self.error(hook, err))?;
        self.stage(hook, view, &answer)?;
        Ok(answer)
    }

    /// A hook answering a step signal or a value.
    async fn step_hook(
        &self,
        hook: &str,
        view: &View<'_>,
        args: Value,
    ) -> Result<Value, StepSignal> {
        let answer = self.async_hook(hook, view, args).await?;
        match protocol::signal(&answer) {
            Ok(Some(signal)) => Err(signal),
            Ok(None) => Ok(answer),
            Err(problem) => Err(StepSignal::Error(self.error(hook, problem))),
        }
    }

    fn named_tools(&self, hook: &str, names: Option<&Value>) -> HookResult<Vec<Arc<dyn Tool>>> {
        let names: Vec<String> = match names {
            None | Some(Value::Null) => Vec::new(),
            Some(list) => serde_json::from_value(list.clone())
                .map_err(|_| self.error(hook, "the tool list must be a list of names"))?,
        };
        names
            .iter()
            .map(|name| {
                self.tools.get(name).cloned().ok_or_else(|| {
                    self.error(
                        hook,
                        format!(
                            "`{name}` is not a tool of this export (its handshake lists: {})",
                            {
                                let known: Vec<&str> =
                                    self.tools.keys().map(String::as_str).collect();
                                if known.is_empty() {
                                    "none".to_owned()
                                } else {
                                    known.join(", ")
                                }
                            }
                        ),
                    )
                })
            })
            .collect()
    }

    fn text_hook(&self, hook: &str, view: &View<'_>) -> HookResult<Option<String>> {
        if !self.implements(hook) {
            return Ok(None);
        }
        let answer = self.sync_hook(hook, view, json!({}))?;
        protocol::opt_string(&answer, "text").map_err(|problem| self.error(hook, problem))
    }
}

fn call_json(call: &ToolCall) -> Value {
    json!({"id": call.id, "name": call.name, "input": call.input})
}

/// The request without its conversation (the program asks for messages by `view/messages`).
fn request_json(request: &ModelRequest) -> Value {
    let mut value = serde_json::to_value(request).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("messages");
        object.insert("message_count".to_owned(), request.messages.len().into());
    }
    value
}

#[async_trait]
impl Extension for ProcessExtension {
    fn name(&self) -> &str {
        &self.name
    }

    fn folds(&self) -> Vec<String> {
        self.export.folds.clone()
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        if self.implements("on_start") {
            self.async_hook("on_start", view, json!({})).await?;
        }
        Ok(())
    }

    async fn turn_intake(&self, view: &View<'_>, message: &str) -> HookResult<()> {
        if self.implements("turn_intake") {
            self.async_hook("turn_intake", view, json!({"message": message}))
                .await?;
        }
        Ok(())
    }

    fn tools(&self, view: &View<'_>) -> HookResult<Vec<Arc<dyn Tool>>> {
        if !self.implements("tools") {
            return Ok(Vec::new());
        }
        let answer = self.sync_hook("tools", view, json!({}))?;
        self.named_tools("tools", answer.get("tools"))
    }

    fn tool_changes(&self, view: &View<'_>, offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        if !self.implements("tool_changes") {
            return Ok(ToolChanges::none());
        }
        let offered: Vec<Value> = offered
            .iter()
            .map(|t| json!({"extension": t.extension, "name": t.tool.name(), "deferred": t.deferred}))
            .collect();
        let answer = self.sync_hook("tool_changes", view, json!({"offered": offered}))?;
        let mut changes = ToolChanges::none();
        changes.add = self.named_tools("tool_changes", answer.get("add"))?;
        if let Some(list) = answer.get("withhold").and_then(Value::as_array) {
            for item in list {
                let (Some(name), Some(error)) = (
                    item.get("name").and_then(Value::as_str),
                    item.get("error").and_then(Value::as_str),
                ) else {
                    return Err(
                        self.error("tool_changes", "`withhold` entries need `name` and `error`")
                    );
                };
                changes.withhold.push((name.to_owned(), error.to_owned()));
            }
        }
        if let Some(entries) = answer.get("entries").and_then(Value::as_array) {
            changes.entries = entries.clone();
        }
        Ok(changes)
    }

    fn context(&self, view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        if !self.implements("context") {
            return Ok(Vec::new());
        }
        let answer = self.sync_hook("context", view, json!({}))?;
        match answer.get("parts") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(parts) => serde_json::from_value(parts.clone()).map_err(|err| {
                self.error(
                    "context",
                    format!("`parts` must be a list of {{segment, text, kind}}: {err}"),
                )
            }),
        }
    }

    async fn reminders(&self, view: &View<'_>) -> Result<Vec<String>, StepSignal> {
        if !self.implements("reminders") {
            return Ok(Vec::new());
        }
        let answer = self.step_hook("reminders", view, json!({})).await?;
        match answer.get("reminders") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(list) => serde_json::from_value(list.clone()).map_err(|_| {
                StepSignal::Error(self.error("reminders", "`reminders` must be a list of strings"))
            }),
        }
    }

    fn tail(&self, view: &View<'_>) -> Option<String> {
        // A render has no failure path of its own: a broken one renders nothing, logged.
        self.text_hook("tail", view).unwrap_or_else(|err| {
            tracing::warn!("{err}");
            None
        })
    }

    async fn before_model(
        &self,
        view: &View<'_>,
        mut request: ModelRequest,
    ) -> Result<ModelRequest, StepSignal> {
        if !self.implements("before_model") {
            return Ok(request);
        }
        let answer = self
            .step_hook(
                "before_model",
                view,
                json!({"request": request_json(&request)}),
            )
            .await?;
        let Some(changed) = answer.get("request").filter(|r| !r.is_null()) else {
            return Ok(request);
        };
        let bad = |what: &str| {
            StepSignal::Error(self.error(
                "before_model",
                format!("`request.{what}` has the wrong type"),
            ))
        };
        if let Some(system) = changed.get("system") {
            request.system = system.as_str().ok_or_else(|| bad("system"))?.to_owned();
        }
        if let Some(tools) = changed.get("tools") {
            request.tools =
                Arc::new(serde_json::from_value(tools.clone()).map_err(|_| bad("tools"))?);
        }
        if let Some(entries) = changed.get("entries") {
            request.entries =
                serde_json::from_value(entries.clone()).map_err(|_| bad("entries"))?;
        }
        if let Some(residents) = changed.get("residents") {
            request.residents =
                serde_json::from_value(residents.clone()).map_err(|_| bad("residents"))?;
        }
        if let Some(tail) = changed.get("tail") {
            request.tail = serde_json::from_value(tail.clone()).map_err(|_| bad("tail"))?;
        }
        Ok(request)
    }

    async fn on_context_overflow(
        &self,
        view: &View<'_>,
        request: &ModelRequest,
    ) -> Result<bool, StepSignal> {
        if !self.implements("on_context_overflow") {
            return Ok(false);
        }
        let answer = self
            .step_hook(
                "on_context_overflow",
                view,
                json!({"request": request_json(request)}),
            )
            .await?;
        Ok(answer
            .get("retry")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    async fn on_empty_reply(
        &self,
        view: &View<'_>,
        reply: &ModelReply,
    ) -> HookResult<Option<String>> {
        if !self.implements("on_empty_reply") {
            return Ok(None);
        }
        let answer = self
            .async_hook("on_empty_reply", view, json!({"reply": reply}))
            .await?;
        protocol::opt_string(&answer, "message").map_err(|p| self.error("on_empty_reply", p))
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        if !self.implements("before_tool") {
            return Ok(None);
        }
        let answer = self
            .async_hook("before_tool", view, json!({"tool_call": call_json(call)}))
            .await?;
        protocol::verdict(answer.get("verdict")).map_err(|p| self.error("before_tool", p))
    }

    async fn resolve_ask(
        &self,
        view: &View<'_>,
        call: &ToolCall,
        asks: &[String],
    ) -> HookResult<Option<AskAnswer>> {
        if !self.implements("resolve_ask") {
            return Ok(None);
        }
        let answer = self
            .async_hook(
                "resolve_ask",
                view,
                json!({"tool_call": call_json(call), "asks": asks}),
            )
            .await?;
        let reason = match answer.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(reason)) => Some(reason.clone()),
            Some(_) => return Err(self.error("resolve_ask", "`reason` must be a string")),
        };
        match answer.get("allow") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(true)) => Ok(Some(AskAnswer::Allow)),
            Some(Value::Bool(false)) => Ok(Some(AskAnswer::Deny(reason))),
            Some(_) => Err(self.error("resolve_ask", "`allow` must be true, false or null")),
        }
    }

    async fn after_tool(
        &self,
        view: &View<'_>,
        call: &ToolCall,
        output: ToolOutput,
    ) -> HookResult<ToolOutput> {
        if !self.implements("after_tool") {
            return Ok(output);
        }
        let args = json!({"tool_call": call_json(call), "output": protocol::output_json(&output)});
        let answer = self.async_hook("after_tool", view, args).await?;
        let Some(changed) = answer.get("output").filter(|o| !o.is_null()) else {
            return Ok(output);
        };
        let mut changed = protocol::output(changed).map_err(|p| self.error("after_tool", p))?;
        // What the wire cannot carry stays as the tool made it.
        changed.attachments = output.attachments;
        if changed.park.is_none() {
            changed.park = output.park;
        }
        Ok(changed)
    }

    fn on_event(&self, view: &View<'_>, event: &Event) -> HookResult<()> {
        if self.implements("on_event") {
            self.sync_hook("on_event", view, json!({"event": event}))?;
        }
        Ok(())
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        if !self.implements("reduce") {
            return Ok(());
        }
        let params = json!({"export": self.name, "state": state, "kind": kind, "data": data});
        let no_view =
            |method: &str, _: &Value| Err(format!("`{method}` is not available in `reduce`"));
        let answer = self
            .supervisor
            .call_blocking("hook/reduce", &params, &no_view)
            .map_err(|err| self.error("reduce", err).0)?;
        *state = answer.get("state").cloned().unwrap_or(Value::Null);
        Ok(())
    }

    fn continue_state(&self, state: &Value) -> Value {
        if !self.implements("continue_state") {
            return state.clone();
        }
        let params = json!({"export": self.name, "state": state});
        let no_view = |method: &str, _: &Value| Err(format!("`{method}` is not available here"));
        match self
            .supervisor
            .call_blocking("hook/continue_state", &params, &no_view)
        {
            Ok(answer) => answer.get("state").cloned().unwrap_or(Value::Null),
            Err(err) => {
                // No failure path: a fork starts from the state as it is, logged.
                tracing::warn!("{}", self.error("continue_state", err));
                state.clone()
            }
        }
    }

    fn inherit(&self, view: &View<'_>) -> HookResult<Option<Value>> {
        if !self.implements("inherit") {
            return Ok(None);
        }
        let answer = self.sync_hook("inherit", view, json!({}))?;
        Ok(answer.get("value").cloned().filter(|v| !v.is_null()))
    }

    fn before_compact(&self, view: &View<'_>) -> HookResult<CompactAdvice> {
        if !self.implements("before_compact") {
            return Ok(CompactAdvice::default());
        }
        let answer = self.sync_hook("before_compact", view, json!({}))?;
        let mut advice = CompactAdvice::default();
        advice.refuse =
            protocol::opt_string(&answer, "refuse").map_err(|p| self.error("before_compact", p))?;
        advice.instructions = protocol::opt_string(&answer, "instructions")
            .map_err(|p| self.error("before_compact", p))?;
        Ok(advice)
    }

    fn resident(&self, view: &View<'_>) -> HookResult<Option<String>> {
        self.text_hook("resident", view)
    }

    fn lead_resident(&self, view: &View<'_>) -> HookResult<Option<String>> {
        self.text_hook("lead_resident", view)
    }

    fn before_spawn(&self, view: &View<'_>, spawn: &SpawnRequest) -> HookResult<Option<Verdict>> {
        if !self.implements("before_spawn") {
            return Ok(None);
        }
        let args = json!({"spawn": {
            "agent": spawn.agent, "depth": spawn.depth, "earlier_in_call": spawn.earlier_in_call,
        }});
        let answer = self.sync_hook("before_spawn", view, args)?;
        protocol::verdict(answer.get("verdict")).map_err(|p| self.error("before_spawn", p))
    }

    async fn before_finish(&self, view: &View<'_>) -> HookResult<Option<String>> {
        if !self.implements("before_finish") {
            return Ok(None);
        }
        let answer = self.async_hook("before_finish", view, json!({})).await?;
        protocol::opt_string(&answer, "message").map_err(|p| self.error("before_finish", p))
    }

    fn commands(&self, view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        if !self.implements("commands") {
            return Ok(Vec::new());
        }
        let answer = self.sync_hook("commands", view, json!({}))?;
        protocol::commands(&answer).map_err(|p| self.error("commands", p))
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        if !self.implements("run_command") {
            return Err(HookError::new(format!("unknown command `/{name}`")));
        }
        let answer = self
            .async_hook("run_command", view, json!({"name": name, "args": args}))
            .await?;
        protocol::command_reply(&answer).map_err(|p| self.error("run_command", p))
    }
}

/// Turns a call failure into a tool error: an error answer is the model's to see; a broken
/// program is fatal for the call.
pub(crate) fn tool_error(plugin: &str, tool: &str, err: CallError) -> noeta_core::ToolError {
    match err {
        CallError::Refused(message) => noeta_core::ToolError::RespondToModel(message),
        CallError::Broken(reason) => noeta_core::ToolError::Fatal(format!(
            "plugin `{plugin}`: tool `{tool}` got no answer from the plugin's program: {reason}"
        )),
    }
}
