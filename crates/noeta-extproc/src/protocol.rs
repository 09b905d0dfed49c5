//! The wire: the handshake's answer, and the JSON shapes hooks and tools exchange with a
//! plugin program (documented in `docs/plugin-protocol.md`).

use std::collections::{BTreeMap, BTreeSet};

use noeta_core::extension::{CommandReply, CommandSpec, StepSignal, View};
use noeta_core::tool::Park;
use noeta_core::{Risk, ToolFlags, ToolOutput, Verdict};
use serde_json::{Value, json};

/// The protocol version this host speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Every hook a program may list in an export's `hooks`.
pub const HOOKS: [&str; 24] = [
    "on_start",
    "turn_intake",
    "tools",
    "tool_changes",
    "context",
    "reminders",
    "tail",
    "before_model",
    "on_context_overflow",
    "on_empty_reply",
    "before_tool",
    "resolve_ask",
    "after_tool",
    "on_event",
    "reduce",
    "continue_state",
    "inherit",
    "before_compact",
    "resident",
    "lead_resident",
    "before_spawn",
    "before_finish",
    "commands",
    "run_command",
];

/// A tool a program serves.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The model-visible name.
    pub name: String,
    /// What the model reads.
    pub description: String,
    /// The input's JSON Schema.
    pub input_schema: Value,
    /// Its flags.
    pub flags: ToolFlags,
    /// Whether it implements `tool/resume` (it may park).
    pub resumes: bool,
    /// Whether it implements `tool/recover`.
    pub recovers: bool,
}

/// One export: an extension (the hooks it implements) and the tools it serves.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Export {
    /// The hooks the program implements for it; the host calls no other.
    pub hooks: BTreeSet<String>,
    /// Other names whose records its `reduce` also folds.
    pub folds: Vec<String>,
    /// Its tools, in the program's order.
    pub tools: Vec<ToolSpec>,
}

/// What the program said in its handshake.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Handshake {
    /// Its exports, by name (what `command:<export>` refs name).
    pub exports: BTreeMap<String, Export>,
}

fn strings(value: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("`{what}` must be a list of strings")),
        Some(_) => Err(format!("`{what}` must be a list of strings")),
    }
}

fn flag(spec: &Value, key: &str) -> bool {
    spec.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl ToolSpec {
    fn parse(spec: &Value, at: &str) -> Result<Self, String> {
        let name = spec
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| format!("`{at}.name` must be a non-empty string"))?;
        let at = format!("{at} (`{name}`)");
        let description = spec
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let input_schema = match spec.get("input_schema") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => return Err(format!("{at}: `input_schema` must be an object")),
        };
        let risk = match spec.get("risk").and_then(Value::as_str) {
            None | Some("low") => Risk::Low,
            Some("medium") => Risk::Medium,
            Some("high") => Risk::High,
            Some(other) => {
                return Err(format!(
                    "{at}: `risk` `{other}` is not one of low, medium, high"
                ));
            }
        };
        let mut flags = if flag(spec, "read_only") {
            ToolFlags::read_only()
        } else {
            ToolFlags::default()
        };
        flags = flags.with_risk(risk);
        if flag(spec, "retry_safe") {
            flags = flags.retry_safe();
        }
        if flag(spec, "clearable") {
            flags = flags.clearable();
        }
        if let Some(chars) = spec.get("max_result_chars").and_then(Value::as_u64) {
            flags = flags.with_max_result_chars(usize::try_from(chars).unwrap_or(usize::MAX));
        }
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            flags,
            resumes: flag(spec, "resumes"),
            recovers: flag(spec, "recovers"),
        })
    }
}

impl Handshake {
    /// Reads the `initialize` answer.
    pub fn parse(answer: &Value) -> Result<Self, String> {
        let version = answer.get("protocol").and_then(Value::as_u64);
        if version != Some(PROTOCOL_VERSION) {
            return Err(format!(
                "it speaks protocol version {}, this host speaks {PROTOCOL_VERSION}",
                answer
                    .get("protocol")
                    .map_or_else(|| "(none given)".to_owned(), Value::to_string)
            ));
        }
        let Some(exports) = answer.get("exports").and_then(Value::as_object) else {
            return Err("`exports` must be an object of export names".to_owned());
        };
        let mut parsed = BTreeMap::new();
        for (name, export) in exports {
            let at = format!("exports.{name}");
            let hooks: BTreeSet<String> = strings(export.get("hooks"), &format!("{at}.hooks"))?
                .into_iter()
                .collect();
            if let Some(unknown) = hooks.iter().find(|h| !HOOKS.contains(&h.as_str())) {
                return Err(format!(
                    "`{at}.hooks` lists unknown hook `{unknown}` (known: {})",
                    HOOKS.join(", ")
                ));
            }
            let folds = strings(export.get("folds"), &format!("{at}.folds"))?;
            let tools = match export.get("tools") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, spec)| ToolSpec::parse(spec, &format!("{at}.tools[{i}]")))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("`{at}.tools` must be a list")),
            };
            parsed.insert(
                name.clone(),
                Export {
                    hooks,
                    folds,
                    tools,
                },
            );
        }
        Ok(Self { exports: parsed })
    }

    /// The export names, for messages.
    pub fn export_names(&self) -> String {
        if self.exports.is_empty() {
            "none".to_owned()
        } else {
            self.exports.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}

/// The view a hook gets: what `View` offers that is small; the conversation and other
/// extensions' states by request (`view/messages`, `view/state`).
pub(crate) fn view_json(view: &View<'_>, extension: &str) -> Value {
    json!({
        "task": view.task_id().as_str(),
        "agent": view.agent(),
        "agents": view.agents(),
        "seq": view.seq(),
        "workspace": view.workspace().map(|w| w.display().to_string()),
        "state": view.ext_state(extension).cloned().unwrap_or(Value::Null),
        "message_count": view.messages().len(),
    })
}

/// Answers a program's `view/…` request from `view`.
pub(crate) fn serve_view(view: &View<'_>, method: &str, params: &Value) -> Result<Value, String> {
    serve(view.messages(), view, method, params)
}

/// Answers a program's `view/…` request from a conversation and the folded states (a hook's
/// view, or a tool call's context).
pub(crate) fn serve(
    messages: &[noeta_core::model::Message],
    states: &dyn noeta_core::StateView,
    method: &str,
    params: &Value,
) -> Result<Value, String> {
    match method {
        "view/messages" => {
            let from = params.get("from").and_then(Value::as_u64).unwrap_or(0);
            let from = usize::try_from(from)
                .unwrap_or(usize::MAX)
                .min(messages.len());
            let limit = params
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(messages.len(), |l| usize::try_from(l).unwrap_or(usize::MAX));
            let slice: Vec<&noeta_core::model::Message> =
                messages.iter().skip(from).take(limit).collect();
            Ok(json!({"messages": slice, "total": messages.len()}))
        }
        "view/state" => {
            let Some(name) = params.get("extension").and_then(Value::as_str) else {
                return Err("`view/state` needs `extension`".to_owned());
            };
            Ok(states.ext_state(name).cloned().unwrap_or(Value::Null))
        }
        other => Err(format!("unknown method `{other}`")),
    }
}

/// Stages the records a hook's or tool's answer carries; `Err` names what is malformed.
pub(crate) fn records(answer: &Value) -> Result<Vec<(String, Value, Option<String>)>, String> {
    let Some(items) = answer.get("records") else {
        return Ok(Vec::new());
    };
    let Some(items) = items.as_array() else {
        return Err("`records` must be a list".to_owned());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let kind = item
                .get("kind")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .ok_or_else(|| format!("`records[{i}].kind` must be a non-empty string"))?;
            let message = match item.get("message") {
                None | Some(Value::Null) => None,
                Some(Value::String(m)) => Some(m.clone()),
                Some(_) => return Err(format!("`records[{i}].message` must be a string")),
            };
            Ok((
                kind.to_owned(),
                item.get("data").cloned().unwrap_or(Value::Null),
                message,
            ))
        })
        .collect()
}

/// A verdict on the wire: `null`, or `{"decision": "allow"|"deny"|"ask"|"rewrite", …}`.
pub(crate) fn verdict(value: Option<&Value>) -> Result<Option<Verdict>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let reason = || {
        value
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match value.get("decision").and_then(Value::as_str) {
        Some("allow") => Ok(Some(Verdict::Allow {
            approve: flag(value, "approve"),
        })),
        Some("deny") => Ok(Some(Verdict::Deny { reason: reason() })),
        Some("ask") => Ok(Some(Verdict::Ask {
            reason: reason(),
            firm: flag(value, "firm"),
        })),
        Some("rewrite") => match value.get("input") {
            Some(input @ Value::Object(_)) => Ok(Some(Verdict::Rewrite {
                input: input.clone(),
                reason: reason(),
            })),
            _ => Err("a `rewrite` verdict needs an object `input`".to_owned()),
        },
        Some(other) => Err(format!(
            "`decision` `{other}` is not one of allow, deny, ask, rewrite"
        )),
        None => Err("a verdict needs a `decision`".to_owned()),
    }
}

/// A step signal on the wire (`{"signal": {"type": …}}`), if the answer carries one.
pub(crate) fn signal(answer: &Value) -> Result<Option<StepSignal>, String> {
    let Some(signal) = answer.get("signal").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let reason = signal
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match signal.get("type").and_then(Value::as_str) {
        Some("turn_done") => Ok(Some(StepSignal::TurnDone { reason })),
        Some("request_stale") => Ok(Some(StepSignal::RequestStale)),
        Some("turn_failed") => Ok(Some(StepSignal::TurnFailed { reason })),
        other => Err(format!(
            "`signal.type` {} is not one of turn_done, request_stale, turn_failed",
            other.map_or_else(|| "(none)".to_owned(), |t| format!("`{t}`"))
        )),
    }
}

/// A tool result on the wire.
pub(crate) fn output_json(output: &ToolOutput) -> Value {
    json!({
        "text": output.text,
        "is_error": output.is_error,
        "data": output.data,
    })
}

/// Reads a tool result (`{"text", "is_error", "data", "park"}`).
pub(crate) fn output(value: &Value) -> Result<ToolOutput, String> {
    let Some(object) = value.as_object() else {
        return Err("a tool result must be an object".to_owned());
    };
    let text = match object.get("text") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(_) => return Err("`text` must be a string".to_owned()),
    };
    let park = match object.get("park") {
        None | Some(Value::Null) => None,
        Some(park) => Some(
            serde_json::from_value::<Park>(park.clone())
                .map_err(|err| format!("`park` is not a park: {err}"))?,
        ),
    };
    let mut out = if object
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    };
    out.data = object.get("data").cloned().filter(|d| !d.is_null());
    out.park = park;
    Ok(out)
}

/// Reads a slash command's reply (`{"show": text}` or `{"send": text}`).
pub(crate) fn command_reply(answer: &Value) -> Result<CommandReply, String> {
    if let Some(text) = answer.get("send").and_then(Value::as_str) {
        return Ok(CommandReply::Send(text.to_owned()));
    }
    match answer.get("show").and_then(Value::as_str) {
        Some(text) => Ok(CommandReply::Show(text.to_owned())),
        None => Err("a command's answer needs a string `show` or `send`".to_owned()),
    }
}

/// Reads the commands list.
pub(crate) fn commands(answer: &Value) -> Result<Vec<CommandSpec>, String> {
    match answer.get("commands") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(list) => serde_json::from_value(list.clone())
            .map_err(|err| format!("`commands` must be a list of {{name, description}}: {err}")),
    }
}

/// An optional string field.
pub(crate) fn opt_string(answer: &Value, key: &str) -> Result<Option<String>, String> {
    match answer.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`{key}` must be a string or null")),
    }
}
