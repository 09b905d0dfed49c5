//! The terminal's answers to an MCP server's request for input in the middle of a call
//! (`elicitation/create`): the person is asked whether to answer, then for each field of the
//! form (the required ones first, then by name), its default taken on an empty line — read
//! from standard input as a permission ask is.

use std::sync::Arc;

use async_trait::async_trait;
use noeta::mcp::{Elicited, Elicitor};
use serde_json::{Map, Value};

use crate::interact::ask;
use crate::output::Printer;

/// Asks the person at the terminal.
pub(crate) struct TerminalElicitor {
    printer: Arc<Printer>,
}

impl TerminalElicitor {
    pub(crate) fn new(printer: Arc<Printer>) -> Self {
        Self { printer }
    }
}

/// The values a field takes, when it lists them: `enum`, or `oneOf`/`anyOf` consts (of the
/// field, or of its items for a list).
fn choices(field: &Value) -> Vec<String> {
    let of = |v: &Value| -> Vec<String> {
        if let Some(values) = v["enum"].as_array() {
            return values
                .iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect();
        }
        v["oneOf"]
            .as_array()
            .or_else(|| v["anyOf"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|c| c["const"].as_str().map(str::to_owned))
            .collect()
    };
    match field["type"].as_str() {
        Some("array") => of(&field["items"]),
        _ => of(field),
    }
}

/// `answer` as a value of `field`'s type, or why not.
fn parse(field: &Value, answer: &str) -> Result<Value, String> {
    let allowed = choices(field);
    let check = |text: &str| {
        if allowed.is_empty() || allowed.iter().any(|a| a == text) {
            Ok(())
        } else {
            Err(format!("one of: {}", allowed.join(", ")))
        }
    };
    match field["type"].as_str() {
        Some("boolean") => match answer.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("yes or no".to_owned()),
        },
        Some("integer") => answer
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "a whole number".to_owned()),
        Some("number") => answer
            .parse::<f64>()
            .ok()
            .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            .ok_or_else(|| "a number".to_owned()),
        Some("array") => {
            let items: Vec<&str> = answer
                .split(',')
                .map(str::trim)
                .filter(|i| !i.is_empty())
                .collect();
            for item in &items {
                check(item)?;
            }
            Ok(Value::from(items))
        }
        _ => {
            check(answer)?;
            Ok(Value::String(answer.to_owned()))
        }
    }
}

#[async_trait]
impl Elicitor for TerminalElicitor {
    async fn elicit(&self, server: &str, message: &str, schema: &Value) -> Elicited {
        self.printer
            .note(&format!("? MCP server `{server}` asks: {message}"));
        self.printer.pause_ticker();
        let Some(answer) = ask("  answer? [y]es / [n]o (decline) / [c]ancel the call: ").await
        else {
            return Elicited::Decline("standard input is closed".to_owned());
        };
        match answer.trim().to_lowercase().as_str() {
            "y" | "yes" => {}
            "c" | "cancel" => return Elicited::Cancel,
            _ => return Elicited::Decline("the person declined".to_owned()),
        }
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        // The required fields first, then the others, each in name order.
        let mut fields: Vec<(&String, &Value)> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .collect();
        fields.sort_by_key(|(name, _)| (!required.contains(&name.as_str()), name.as_str()));
        let mut values = Map::new();
        for (name, field) in fields {
            let title = field["title"].as_str().unwrap_or(name);
            let about = field["description"]
                .as_str()
                .map(|d| format!(" — {d}"))
                .unwrap_or_default();
            let options = choices(field);
            let hint = match (&field.get("default"), options.is_empty()) {
                (Some(default), _) => format!(" [{}]", default),
                (None, false) => format!(" ({})", options.join(", ")),
                (None, true) if required.contains(&name.as_str()) => " (required)".to_owned(),
                (None, true) => String::new(),
            };
            loop {
                let Some(answer) = ask(&format!("  {title}{about}{hint}: ")).await else {
                    return Elicited::Decline("standard input is closed".to_owned());
                };
                let answer = answer.trim();
                if answer.is_empty() {
                    if let Some(default) = field.get("default") {
                        values.insert(name.clone(), default.clone());
                        break;
                    }
                    if required.contains(&name.as_str()) {
                        self.printer.note("  an answer is required");
                        continue;
                    }
                    break;
                }
                match parse(field, answer) {
                    Ok(value) => {
                        values.insert(name.clone(), value);
                        break;
                    }
                    Err(want) => self.printer.note(&format!("  answer {want}")),
                }
            }
        }
        Elicited::Accept(values)
    }
}

#[cfg(test)]
mod tests {
    use super::{choices, parse};
    use serde_json::json;

    #[test]
    fn answers_are_read_as_their_fields_types() {
        assert_eq!(parse(&json!({"type": "integer"}), "42"), Ok(json!(42)));
        assert!(parse(&json!({"type": "integer"}), "4.2").is_err());
        assert_eq!(parse(&json!({"type": "number"}), "3.5"), Ok(json!(3.5)));
        assert_eq!(parse(&json!({"type": "boolean"}), "y"), Ok(json!(true)));
        let pick = json!({"type": "string", "oneOf": [{"const": "hero-1"}, {"const": "hero-2"}]});
        assert_eq!(choices(&pick), ["hero-1", "hero-2"]);
        assert_eq!(parse(&pick, "hero-2"), Ok(json!("hero-2")));
        assert_eq!(
            parse(&pick, "hero-9"),
            Err("one of: hero-1, hero-2".to_owned())
        );
        let many = json!({"type": "array", "items": {"enum": ["Guitar", "Piano"]}});
        assert_eq!(
            parse(&many, "Guitar, Piano"),
            Ok(json!(["Guitar", "Piano"]))
        );
        assert_eq!(parse(&json!({"type": "string"}), "Ada"), Ok(json!("Ada")));
    }
}
