//! A server's prompts as slash commands: `/mcp__<alias>__<prompt> ARGS…` gets the prompt
//! with the words of ARGS as its arguments, in the order the server lists them (quote a
//! value holding spaces; the last argument takes any words left over), and sends its
//! messages' text as the person's message.

use noeta_core::extension::CommandSpec;
use serde_json::Value;

use crate::hub::{Hub, Prompt};
use crate::tool::tool_name;

/// The command naming `prompt`.
fn command_name(prompt: &Prompt) -> String {
    tool_name(&prompt.alias, &prompt.name)
}

/// `<city> [state]`: the arguments as a usage line.
fn usage(prompt: &Prompt) -> String {
    prompt
        .arguments
        .iter()
        .map(|(name, required, _)| {
            if *required {
                format!("<{name}>")
            } else {
                format!("[{name}]")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One command per prompt of every server that is up.
pub(crate) fn commands(hub: &Hub) -> Vec<CommandSpec> {
    hub.prompts()
        .iter()
        .map(|prompt| {
            let mut description = prompt
                .description
                .clone()
                .unwrap_or_else(|| format!("The `{}` prompt.", prompt.name));
            let usage = usage(prompt);
            description.push_str(&format!(" (MCP prompt of `{}`", prompt.alias));
            if !usage.is_empty() {
                description.push_str(&format!("; arguments: {usage}"));
            }
            description.push(')');
            CommandSpec {
                name: command_name(prompt),
                description,
            }
        })
        .collect()
}

/// The prompt named by command `name`, if any.
pub(crate) fn find(hub: &Hub, name: &str) -> Option<Prompt> {
    hub.prompts().into_iter().find(|p| command_name(p) == name)
}

/// The words of `args` as the prompt's arguments, or why they do not fit.
pub(crate) fn arguments(
    prompt: &Prompt,
    args: &str,
) -> Result<serde_json::Map<String, Value>, String> {
    let command = command_name(prompt);
    let mut words = shlex::split(args)
        .ok_or_else(|| format!("/{command}: the arguments have an unclosed quote: {args}"))?;
    let mut map = serde_json::Map::new();
    let count = prompt.arguments.len();
    if count == 0 && !words.is_empty() {
        return Err(format!("/{command} takes no arguments"));
    }
    if count > 0 && words.len() > count {
        // The last argument takes what is left over.
        let rest = words.split_off(count - 1).join(" ");
        words.push(rest);
    }
    for (index, (name, required, _)) in prompt.arguments.iter().enumerate() {
        match words.get(index) {
            Some(word) => {
                map.insert(name.clone(), Value::from(word.clone()));
            }
            None if *required => {
                return Err(format!(
                    "/{command} needs `{name}`: /{command} {}",
                    usage(prompt)
                ));
            }
            None => {}
        }
    }
    Ok(map)
}

/// The text of a `prompts/get` result's messages, in order, as one message.
pub(crate) fn message_text(result: &Value) -> String {
    let mut parts = Vec::new();
    for message in result["messages"].as_array().into_iter().flatten() {
        let content = &message["content"];
        let items: Vec<&Value> = match content {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for item in items {
            match item["type"].as_str() {
                Some("text") => parts.push(item["text"].as_str().unwrap_or_default().to_owned()),
                Some("resource") => {
                    let resource = &item["resource"];
                    let uri = resource["uri"].as_str().unwrap_or_default();
                    match resource["text"].as_str() {
                        Some(text) => parts.push(format!("{uri}:\n{text}")),
                        None => {
                            parts.push(format!("[resource {uri}: binary content not included]"))
                        }
                    }
                }
                Some("resource_link") => parts.push(format!(
                    "[resource {}]",
                    item["uri"].as_str().unwrap_or_default()
                )),
                Some(kind) => parts.push(format!("[{kind} content not included]")),
                None => {}
            }
        }
    }
    parts.join("\n\n")
}
