//! The skill listing the model sees: a resident fitted to a token budget.
//!
//! Entries are the skills the model may activate (`disable-model-invocation`
//! ones are left out), by `priority` (lower first), then name. Over the
//! budget, descriptions are cut first; if that is not enough, entries are
//! dropped from the end (the highest `priority` numbers) and a last line says
//! how many were left out.

use crate::frontmatter::one_line;
use crate::index::IndexedSkill;

/// Bytes per token, for the budget.
const BYTES_PER_TOKEN: usize = 4;

/// The characters a description is cut to when the full listing is over budget.
pub(crate) const CUT_DESCRIPTION_CHARS: usize = 100;

const HEADER: &str = "Skills you can activate with the `skill` tool. When a request matches a skill's description, activate the skill before doing the work and follow the instructions it returns:";

fn entry(skill: &IndexedSkill, cut: Option<usize>) -> String {
    let mut description = one_line(&skill.description);
    if let Some(max) = cut
        && description.chars().count() > max
    {
        description = description.chars().take(max).collect::<String>();
        description = format!("{}…", description.trim_end());
    }
    let hint = skill
        .argument_hint
        .as_deref()
        .map(|h| format!(" (arguments: {})", one_line(h)))
        .unwrap_or_default();
    format!("- {}: {description}{hint}", skill.name)
}

fn footer(left_out: usize) -> String {
    format!(
        "({left_out} more skill{} not listed for lack of room; `skill` activates any skill by name.)",
        if left_out == 1 { " is" } else { "s are" }
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
        text.push_str(&footer(left_out));
    }
    text
}

/// The listing of `skills` within `budget_tokens`, or `None` when no skill may be listed.
pub(crate) fn listing<'a>(
    skills: impl IntoIterator<Item = &'a IndexedSkill>,
    budget_tokens: usize,
) -> Option<String> {
    let mut listed: Vec<&IndexedSkill> = skills
        .into_iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if listed.is_empty() {
        return None;
    }
    listed.sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
    let budget = budget_tokens.saturating_mul(BYTES_PER_TOKEN);
    let full: Vec<String> = listed.iter().map(|s| entry(s, None)).collect();
    let text = render(&full, 0);
    if text.len() <= budget {
        return Some(text);
    }
    let mut cut: Vec<String> = listed
        .iter()
        .map(|s| entry(s, Some(CUT_DESCRIPTION_CHARS)))
        .collect();
    let mut left_out = 0;
    while !cut.is_empty() && render(&cut, left_out).len() > budget {
        cut.pop();
        left_out += 1;
    }
    Some(render(&cut, left_out))
}
