//! The agent listing in `Task`'s description: every agent of the roster with what it is for
//! and its tools, fitted to a token budget.
//!
//! The listing is part of the tool's description, so it sits in the stable prefix and changes
//! only when the roster's agents change. Over the budget, descriptions are cut (to
//! [`CUT_DESCRIPTION_CHARS`], then [`SHORT_DESCRIPTION_CHARS`]) and long tool lists shortened;
//! if that is not enough, agents are dropped from the end (the roster is in name order) and a
//! last line says how many were left out and where their names are.

use noeta_core::AgentDefinition;

/// Bytes per token, for the budget.
const BYTES_PER_TOKEN: usize = 4;

/// The default budget of the listing, in tokens.
pub const LISTING_BUDGET_TOKENS: usize = 3_000;

/// The characters a description is cut to when the full listing is over budget.
pub const CUT_DESCRIPTION_CHARS: usize = 250;

/// The characters a description is cut to when the cut listing is still over budget.
pub const SHORT_DESCRIPTION_CHARS: usize = 100;

/// The tool names shown for one agent when the full listing is over budget.
const SHORT_TOOLS: usize = 6;

const HEADER: &str = "Agents you can hand work to (the `subagent_type` values), what each is for, and the tools it has:";

/// Text on one line: runs of whitespace become one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cut(text: String, max: Option<usize>) -> String {
    match max {
        Some(max) if text.chars().count() > max => {
            let kept: String = text.chars().take(max).collect();
            format!("{}…", kept.trim_end())
        }
        _ => text,
    }
}

fn tools(agent: &AgentDefinition, short: bool) -> String {
    match &agent.tools {
        None => "every tool".to_owned(),
        Some(names) if names.is_empty() => "none".to_owned(),
        Some(names) if short && names.len() > SHORT_TOOLS => format!(
            "{}, and {} more",
            names[..SHORT_TOOLS].join(", "),
            names.len() - SHORT_TOOLS
        ),
        Some(names) => names.join(", "),
    }
}

fn entry(agent: &AgentDefinition, description_chars: Option<usize>) -> String {
    let description = cut(one_line(&agent.description), description_chars);
    let description = if description.is_empty() {
        "(no description)".to_owned()
    } else {
        description
    };
    format!(
        "- {}: {description} (tools: {})",
        agent.name,
        tools(agent, description_chars.is_some())
    )
}

fn render(entries: &[String], left_out: usize) -> String {
    let mut text = String::from(HEADER);
    for e in entries {
        text.push('\n');
        text.push_str(e);
    }
    if left_out > 0 {
        text.push('\n');
        text.push_str(&format!(
            "({left_out} more agent{} not described here for lack of room: every agent's name \
             is among `subagent_type`'s values.)",
            if left_out == 1 { " is" } else { "s are" }
        ));
    }
    text
}

/// The listing of `agents` (in roster order) within `budget_tokens`, or `None` for none.
pub fn listing(agents: &[&AgentDefinition], budget_tokens: usize) -> Option<String> {
    if agents.is_empty() {
        return None;
    }
    let budget = budget_tokens.saturating_mul(BYTES_PER_TOKEN);
    for chars in [None, Some(CUT_DESCRIPTION_CHARS)] {
        let entries: Vec<String> = agents.iter().map(|a| entry(a, chars)).collect();
        let text = render(&entries, 0);
        if text.len() <= budget {
            return Some(text);
        }
    }
    let mut entries: Vec<String> = agents
        .iter()
        .map(|a| entry(a, Some(SHORT_DESCRIPTION_CHARS)))
        .collect();
    let mut left_out = 0;
    while !entries.is_empty() && render(&entries, left_out).len() > budget {
        entries.pop();
        left_out += 1;
    }
    Some(render(&entries, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, description: &str, tools: Option<&[&str]>) -> AgentDefinition {
        AgentDefinition {
            name: name.to_owned(),
            description: description.to_owned(),
            instructions: String::new(),
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            plugins: Vec::new(),
            agents: Vec::new(),
            model: None,
        }
    }

    #[test]
    fn each_agent_is_listed_with_its_description_and_tools() {
        let explore = agent("explore", "Finds\n  things fast.", Some(&["Read", "Grep"]));
        let general = agent("general-purpose", "Anything.", None);
        let text = listing(&[&explore, &general], LISTING_BUDGET_TOKENS).unwrap();
        assert_eq!(
            text,
            format!(
                "{HEADER}\n- explore: Finds things fast. (tools: Read, Grep)\n- general-purpose: Anything. (tools: every tool)"
            )
        );
        assert_eq!(listing(&[], LISTING_BUDGET_TOKENS), None);
    }

    #[test]
    fn over_budget_descriptions_are_cut_then_agents_left_out_and_counted() {
        let long = "word ".repeat(200);
        let many: Vec<AgentDefinition> = (0..50)
            .map(|i| {
                agent(
                    &format!("agent-{i:02}"),
                    &long,
                    Some(&["A", "B", "C", "D", "E", "F", "G", "H"]),
                )
            })
            .collect();
        let refs: Vec<&AgentDefinition> = many.iter().collect();
        let text = listing(&refs, 500).unwrap();
        assert!(text.len() <= 500 * BYTES_PER_TOKEN, "{}", text.len());
        assert!(text.contains("- agent-00: word"), "{text}");
        assert!(text.contains("…"), "{text}");
        assert!(
            text.contains("(tools: A, B, C, D, E, F, and 2 more)"),
            "{text}"
        );
        let listed = text.lines().filter(|l| l.starts_with("- ")).count();
        assert!(
            text.ends_with(&format!(
                "({} more agents are not described here for lack of room: every agent's name is among `subagent_type`'s values.)",
                50 - listed
            )),
            "{text}"
        );
        // Within budget, nothing is cut.
        let two: Vec<&AgentDefinition> = many.iter().take(2).collect();
        let full = listing(&two, LISTING_BUDGET_TOKENS).unwrap();
        assert!(full.contains(&one_line(&long)), "{full}");
    }
}
