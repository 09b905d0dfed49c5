//! The `memory-recall` reminder provider: hits, no hit, at most five, and through a task.

use crate::common::{Dir, Run, recall};

#[test]
fn a_matching_message_lists_the_memories_with_their_first_lines() {
    let dir = Dir::new();
    dir.put(
        "deploy-notes",
        "---\ndescription: How to deploy staging\n---\n\n\nRun make deploy.\n\nThen check the dashboard.\nThird line.\n",
    );
    dir.put(
        "kitchen",
        "---\ndescription: Where the mugs are\n---\n\nTop shelf.\n",
    );
    let reminders = recall(&dir, "Please deploy the new build");
    assert_eq!(
        reminders,
        [
            "Saved memories that may bear on this message (read one with memory_read before relying on it):\n- deploy-notes — How to deploy staging\n  > Run make deploy.\n  > Then check the dashboard."
        ]
    );
}

#[test]
fn no_hit_gives_no_reminder() {
    let dir = Dir::new();
    dir.put(
        "kitchen",
        "---\ndescription: Where the mugs are\n---\n\nTop shelf.\n",
    );
    assert!(recall(&dir, "deploy the build").is_empty());
    // Stopwords alone match nothing, even though they are in the body.
    dir.put("words", "the and of it is\n");
    assert!(recall(&dir, "the and of").is_empty());
    // One word found only in a body is too weak to recall.
    dir.put("body-only", "we talked about penguins once\n");
    assert!(recall(&dir, "penguins").is_empty());
    // An empty directory, or none at all, recalls nothing.
    let empty = Dir::new();
    assert!(recall(&empty, "deploy").is_empty());
}

#[test]
fn at_most_five_memories_are_recalled_best_first() {
    let dir = Dir::new();
    for n in 1..=7 {
        dir.put(
            &format!("widget-{n}"),
            "---\ndescription: widgets\n---\n\nx\n",
        );
    }
    dir.put(
        "a-widget-guide",
        "---\ndescription: widgets\nkeywords: widget\n---\n\nwidget\n",
    );
    let reminders = recall(&dir, "how is a widget made");
    assert_eq!(reminders.len(), 1);
    let names: Vec<&str> = reminders[0]
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(|l| l.split(" — ").next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "a-widget-guide",
            "widget-1",
            "widget-2",
            "widget-3",
            "widget-4"
        ]
    );
}

#[test]
fn through_a_task_the_reminder_is_recorded_at_intake() {
    let dir = Dir::new();
    dir.put(
        "deploy-notes",
        "---\ndescription: How to deploy staging\n---\n\nRun make deploy.\n",
    );
    let run = Run::start(&dir, "t", "time to deploy");
    let reminders = run.records("memory/memory-recall", "reminder");
    assert_eq!(reminders.len(), 1);
    assert_eq!(reminders[0].0["seam"], "turn_intake");
    let message = reminders[0].1.as_deref().unwrap();
    assert!(
        message.contains("- deploy-notes — How to deploy staging"),
        "{message}"
    );
    // A second message without a hit records the seam done and no reminder.
    run.send("thanks, that is all");
    assert_eq!(run.records("memory/memory-recall", "reminder").len(), 1);
    assert_eq!(run.records("memory/memory-recall", "provided").len(), 2);
}
