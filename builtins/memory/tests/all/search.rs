//! `memory_search`: matching, ranking and the caps (10 memories, 3 lines, 200 characters).

use serde_json::json;

use crate::common::Tools;

#[test]
fn at_most_ten_memories_are_shown_with_the_total() {
    let t = Tools::new();
    for n in 1..=12 {
        t.dir.put(&format!("m{n:02}"), "about widgets\n");
    }
    let text = t.ok("memory_search", json!({ "query": "widgets" }));
    assert!(
        text.starts_with("12 memories match `widgets`; the best 10 follow"),
        "{text}"
    );
    assert!(text.contains("\n\nm10\n"), "{text}");
    assert!(!text.contains("m11"), "{text}");
    assert_eq!(text.matches("about widgets").count(), 10);
}

#[test]
fn at_most_three_lines_of_at_most_200_characters_per_memory() {
    let t = Tools::new();
    let long = format!("widget {}", "y".repeat(400));
    t.dir.put(
        "w",
        format!(
            "---\ndescription: d\n---\n\nwidget one\nnothing\nwidget two\n{long}\nwidget four\n"
        ),
    );
    let text = t.ok("memory_search", json!({ "query": "WIDGET" }));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "1 memory matches `WIDGET`:");
    assert_eq!(lines[2], "w — d");
    assert_eq!(lines[3], "  5: widget one");
    assert_eq!(lines[4], "  7: widget two");
    let shown = lines[5].strip_prefix("  8: ").unwrap();
    assert_eq!(shown.chars().count(), 200);
    assert!(shown.ends_with('…'));
    assert_eq!(lines.len(), 6, "{text}");
}

#[test]
fn ranking_is_by_score_then_name() {
    let t = Tools::new();
    // Name hit (4) + body (1) = 5; keywords (3) = 3; description (2) = 2; body only (1) twice.
    t.dir.put("zebra-deploy", "deploy it\n");
    t.dir
        .put("alpha", "---\nkeywords: deploy\n---\n\nnothing\n");
    t.dir
        .put("beta", "---\ndescription: the deploy\n---\n\nnothing\n");
    t.dir.put("dd", "we deploy\n");
    t.dir.put("cc", "we deploy\n");
    t.dir.put("none", "nothing here\n");
    let text = t.ok("memory_search", json!({ "query": "deploy" }));
    let order: Vec<&str> = text
        .split("\n\n")
        .skip(1)
        .map(|block| block.lines().next().unwrap().split(" — ").next().unwrap())
        .collect();
    assert_eq!(order, ["zebra-deploy", "alpha", "beta", "cc", "dd"]);
    assert!(
        text.starts_with("5 memories match `deploy`, best first:"),
        "{text}"
    );
}

#[test]
fn more_matching_terms_rank_higher() {
    let t = Tools::new();
    t.dir.put("a", "staging only\n");
    t.dir.put("b", "deploy to staging\n");
    let text = t.ok("memory_search", json!({ "query": "deploy staging" }));
    assert!(
        text.find("\n\nb\n").unwrap() < text.find("\n\na\n").unwrap(),
        "{text}"
    );
}

#[test]
fn no_match_is_said_and_a_query_without_words_is_refused() {
    let t = Tools::new();
    t.dir.put("a", "body\n");
    assert_eq!(
        t.ok("memory_search", json!({ "query": "absent" })),
        "No memory matches `absent`."
    );
    let err = t.err("memory_search", json!({ "query": "?!" }));
    assert_eq!(err, "memory_search: query `?!` has no words to search for");
}
