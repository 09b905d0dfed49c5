//! The `ask_user_question` built-in plugin: structured multiple-choice questions to the user.
//!
//! It mounts the `AskUserQuestion` control tool. A call parks the turn on the
//! questions (the task holds no worker while it waits); the answer, given
//! through the runtime's `reply`, wakes the call once and becomes its result.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::records::Wake;
use noeta_core::{
    ControlToolFactory, ControlToolMount, LinkedPlugin, RefTable, Resolved, SessionBuildContext,
    Tool, ToolContext, ToolError, ToolFlags, ToolOutput,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// At most this many questions in one call.
const MAX_QUESTIONS: usize = 4;
/// Options per question.
const MIN_OPTIONS: usize = 2;
const MAX_OPTIONS: usize = 4;
/// Character caps.
const MAX_QUESTION: usize = 500;
const MAX_HEADER: usize = 12;
const MAX_LABEL: usize = 80;
const MAX_OPTION_DESCRIPTION: usize = 300;
const MAX_ANSWER: usize = 4000;

const DESCRIPTION: &str = "\
Ask the user one to four multiple-choice questions when a decision is genuinely theirs: a \
preference, a trade-off, requirements you cannot find out yourself. Each question has a short \
`header` (at most 12 characters) shown as its label, two to four options with a `label` and a \
`description` of what choosing it means, and `multiSelect` when several options may be chosen \
together. The user may also answer in their own words. Do not ask what you can find out by \
reading the code or running a command. The task waits until the user answers.";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_QUESTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
                        "header": {"type": "string", "minLength": 1, "maxLength": MAX_HEADER},
                        "options": {
                            "type": "array",
                            "minItems": MIN_OPTIONS,
                            "maxItems": MAX_OPTIONS,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL},
                                    "description": {"type": "string", "maxLength": MAX_OPTION_DESCRIPTION}
                                },
                                "required": ["label", "description"],
                                "additionalProperties": false
                            }
                        },
                        "multiSelect": {"type": "boolean"}
                    },
                    "required": ["question", "header", "options", "multiSelect"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["questions"],
        "additionalProperties": false
    })
}

#[derive(Debug, Deserialize)]
struct Choice {
    label: String,
    #[allow(
        dead_code,
        reason = "shown to the user by frontends, which read the call's input"
    )]
    description: String,
}

#[derive(Debug, Deserialize)]
struct Question {
    question: String,
    header: String,
    options: Vec<Choice>,
    #[serde(rename = "multiSelect")]
    multi_select: bool,
}

#[derive(Debug, Deserialize)]
struct Questions {
    questions: Vec<Question>,
}

fn respond(message: String) -> ToolError {
    ToolError::RespondToModel(message)
}

fn parse(input: Value) -> Result<Questions, ToolError> {
    let parsed: Questions = serde_json::from_value(input)
        .map_err(|err| respond(format!("AskUserQuestion: invalid questions: {err}")))?;
    let mut seen = Vec::new();
    for (i, q) in parsed.questions.iter().enumerate() {
        if q.question.trim().is_empty() || q.header.trim().is_empty() {
            return Err(respond(format!(
                "AskUserQuestion: question {} has a blank question or header",
                i + 1
            )));
        }
        if seen.contains(&q.question.trim()) {
            return Err(respond(format!(
                "AskUserQuestion: question {} repeats an earlier question",
                i + 1
            )));
        }
        seen.push(q.question.trim());
        let mut labels: Vec<&str> = Vec::new();
        for option in &q.options {
            if option.label.trim().is_empty() {
                return Err(respond(format!(
                    "AskUserQuestion: question {} has a blank option label",
                    i + 1
                )));
            }
            if labels.contains(&option.label.trim()) {
                return Err(respond(format!(
                    "AskUserQuestion: question {} offers the option `{}` twice",
                    i + 1,
                    option.label
                )));
            }
            labels.push(option.label.trim());
        }
    }
    Ok(parsed)
}

/// One answer: a chosen label, several (for multiSelect), or the user's own words.
fn answer_text(question: &Question, answer: &Value) -> Result<String, String> {
    let texts: Vec<&str> = match answer {
        Value::String(text) => vec![text.as_str()],
        Value::Array(items) if question.multi_select => items
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| "a multi-select answer must be a list of strings".to_owned())
            })
            .collect::<Result<_, _>>()?,
        Value::Array(_) => {
            return Err(format!(
                "`{}` allows one choice, but several were given",
                question.header
            ));
        }
        _ => return Err(format!("the answer to `{}` must be text", question.header)),
    };
    if texts.is_empty() || texts.iter().any(|t| t.trim().is_empty()) {
        return Err(format!("the answer to `{}` is empty", question.header));
    }
    if let Some(long) = texts.iter().find(|t| t.chars().count() > MAX_ANSWER) {
        return Err(format!(
            "the answer to `{}` has {} characters; at most {MAX_ANSWER} are allowed",
            question.header,
            long.chars().count()
        ));
    }
    Ok(texts.join(", "))
}

/// One line per question, `- header (question): answer`, from an answer of the documented
/// shape `{"answers": {"<question>": "<label or own words>" | ["<label>", …]}}`; `Err` says
/// what does not fit.
fn answered(parsed: &Questions, answer: &Value) -> Result<Vec<String>, String> {
    let answers: BTreeMap<String, Value> = answer
        .get("answers")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .ok_or_else(|| {
            format!(
                "the reply has no `answers` object keyed by question (expected {{\"answers\": {{\"<question>\": \"<answer>\"}}}}, got `{}`)",
                short(answer)
            )
        })?;
    if let Some(unknown) = answers
        .keys()
        .find(|k| !parsed.questions.iter().any(|q| q.question == **k))
    {
        let asked: Vec<&str> = parsed
            .questions
            .iter()
            .map(|q| q.question.as_str())
            .collect();
        return Err(format!(
            "the reply answers a question that was not asked: `{unknown}` (asked: {})",
            asked.join("; ")
        ));
    }
    let mut lines = Vec::new();
    for q in &parsed.questions {
        let text = match answers.get(&q.question) {
            Some(answer) => answer_text(q, answer)?,
            None => "(no answer)".to_owned(),
        };
        lines.push(format!("- {} ({}): {text}", q.header, q.question));
    }
    Ok(lines)
}

/// A value as short text for an error message.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    format!("{}…", text.chars().take(80).collect::<String>())
}

/// The `AskUserQuestion` tool.
struct AskUserQuestion;

#[async_trait]
impl Tool for AskUserQuestion {
    fn name(&self) -> &str {
        "AskUserQuestion"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        schema()
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .safe_while_planning()
            // Pure: asking and reading the recorded answer again after a crash is safe.
            .retry_safe()
    }

    async fn run(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let parsed = parse(input)?;
        let asked = parsed
            .questions
            .iter()
            .map(|q| format!("{}: {}", q.header, q.question))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolOutput::ask(asked))
    }

    fn check_answer(&self, input: &Value, answer: &Value) -> Result<(), String> {
        let parsed = parse(input.clone()).map_err(|err| err.to_string())?;
        answered(&parsed, answer).map(|_| ())
    }

    async fn resume(
        &self,
        input: Value,
        wake: Wake,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let parsed = parse(input)?;
        let Wake::Answer { answer } = wake else {
            return Err(respond(
                "AskUserQuestion: woken without an answer".to_owned(),
            ));
        };
        let lines =
            answered(&parsed, &answer).map_err(|why| respond(format!("AskUserQuestion: {why}")))?;
        Ok(ToolOutput::text(format!(
            "The user answered:\n{}\nContinue with these answers in mind.",
            lines.join("\n")
        )))
    }
}

/// Mounts `AskUserQuestion`.
struct Factory;

impl ControlToolFactory for Factory {
    fn build(&self, _ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
        Ok(Some(ControlToolMount::new(Arc::new(AskUserQuestion))))
    }
}

/// The plugin: its embedded manifest and its resolver.
pub fn plugin() -> LinkedPlugin {
    LinkedPlugin::new(
        env!("CARGO_PKG_NAME"),
        include_str!("../noeta-plugin.toml"),
        RefTable::new().with("noeta_builtin_ask_user_question::ask_user_question", |_| {
            Ok(Resolved::ControlTool(Arc::new(Factory)))
        }),
    )
}
