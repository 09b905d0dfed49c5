//! The skill listing resident: its exact bytes under budget, and how it is fitted over budget.

use serde_json::{Value, json};

use crate::common::{Run, done};

const HEADER: &str = "Skills you can activate with the `skill` tool. When a request matches a skill's description, activate the skill before doing the work and follow the instructions it returns:";

fn write(run: &Run, name: &str, front: &str) {
    run.tree.write(
        &run.tree.ws(".noeta/skills").join(name).join("SKILL.md"),
        format!("---\nname: {name}\n{front}\n---\nBody.\n"),
    );
}

/// The listing resident of the last request (panics when there is none).
fn listing(run: &Run) -> String {
    run.last()
        .residents
        .into_iter()
        .find(|r| r.starts_with(HEADER))
        .unwrap_or_else(|| panic!("no listing in {:?}", run.last().residents))
}

fn under_budget_run() -> Run {
    let run = Run::new(Value::Null);
    write(&run, "alpha", "description: First.");
    write(
        &run,
        "beta",
        "description: |\n  Second,\n  on two lines.\npriority: 5\nargument-hint: <file>",
    );
    write(
        &run,
        "hidden",
        "description: Not for the model.\ndisable-model-invocation: true",
    );
    run.turn("t", "go", done());
    run
}

#[test]
fn under_budget_every_invocable_skill_is_listed_by_priority_then_name() {
    let run = under_budget_run();
    assert_eq!(
        listing(&run),
        format!("{HEADER}\n- beta: Second, on two lines. (arguments: <file>)\n- alpha: First.")
    );
}

#[test]
fn the_listing_bytes_are_the_same_in_another_run_and_after_a_resume() {
    let first = under_budget_run();
    let second = under_budget_run();
    assert_eq!(listing(&first), listing(&second));
    first.turn("t", "again", done());
    let requests = first.requests();
    assert_eq!(requests[0].residents, requests.last().unwrap().residents);
}

#[test]
fn without_a_listable_skill_there_is_no_listing() {
    let run = Run::new(Value::Null);
    write(
        &run,
        "hidden",
        "description: Not for the model.\ndisable-model-invocation: true",
    );
    run.turn("t", "go", done());
    assert!(
        run.last().residents.is_empty(),
        "{:?}",
        run.last().residents
    );
}

/// Three skills with 300-character descriptions, priorities 1 (`c`), 2 (`b`), 3 (`a`).
fn long_descriptions(budget_tokens: usize) -> String {
    let run = Run::new(json!({ "listing_budget_tokens": budget_tokens }));
    for (name, priority) in [("c", 1), ("b", 2), ("a", 3)] {
        let description = format!("{name}{} ", name.repeat(9)).repeat(30);
        write(
            &run,
            name,
            &format!(
                "description: {}\npriority: {priority}",
                description.trim_end()
            ),
        );
    }
    run.turn("t", "go", done());
    listing(&run)
}

fn cut_entry(name: &str) -> String {
    let description = format!("{name}{} ", name.repeat(9)).repeat(30);
    let cut: String = description.chars().take(100).collect();
    format!("- {name}: {}…", cut.trim_end())
}

fn tokens_for(text: &str) -> usize {
    text.len().div_ceil(4)
}

#[test]
fn over_budget_descriptions_are_cut_first() {
    let cut = format!(
        "{HEADER}\n{}\n{}\n{}",
        cut_entry("c"),
        cut_entry("b"),
        cut_entry("a")
    );
    assert_eq!(long_descriptions(tokens_for(&cut)), cut);
}

#[test]
fn further_over_budget_the_lowest_priority_entries_are_dropped_and_counted() {
    let two = format!(
        "{HEADER}\n{}\n{}\n(1 more skill is not listed for lack of room; `skill` activates any skill by name.)",
        cut_entry("c"),
        cut_entry("b")
    );
    assert_eq!(long_descriptions(tokens_for(&two)), two);
    let one = format!(
        "{HEADER}\n{}\n(2 more skills are not listed for lack of room; `skill` activates any skill by name.)",
        cut_entry("c")
    );
    assert_eq!(long_descriptions(tokens_for(&one)), one);
    // The same budget gives the same bytes.
    assert_eq!(long_descriptions(tokens_for(&one)), one);
}

#[test]
fn a_budget_smaller_than_the_header_lists_no_entry_but_says_how_many() {
    let text = long_descriptions(1);
    assert_eq!(
        text,
        format!(
            "{HEADER}\n(3 more skills are not listed for lack of room; `skill` activates any skill by name.)"
        )
    );
}
