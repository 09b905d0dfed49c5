//! The index resident: its bytes, its bounds, and that a task keeps the index it recorded.

use noeta_core::extension::View;
use noeta_core::store::TaskId;
use serde_json::json;

use crate::common::{Dir, Run, extension, session};

#[test]
fn the_index_lists_memories_sorted_with_their_descriptions() {
    let dir = Dir::new();
    dir.put(
        "zeta",
        "---\ndescription: |\n  Last one,\n  on two lines\n---\n\nz\n",
    );
    dir.put(
        "alpha",
        "---\ndescription: First one\ntype: user\n---\n\na\n",
    );
    dir.put("mid", "no frontmatter\n");
    dir.put("_ignored", "not a memory name\n");
    std::fs::write(dir.path("notes.txt"), "not markdown").unwrap();
    let run = Run::start(&dir, "t", "hello");
    let residents = run.provider.residents();
    assert_eq!(
        residents[0],
        [
            "# Memory index\n\nMemories saved in earlier tasks, as `name — description` (memory_read gives one whole, memory_search finds them by content):\n- alpha — First one\n- mid\n- zeta — Last one, on two lines"
        ]
    );
}

#[test]
fn an_empty_directory_says_so() {
    let dir = Dir::new();
    let run = Run::start(&dir, "t", "hello");
    assert_eq!(
        run.provider.residents()[0],
        ["# Memory index\n\nNo memories are saved yet."]
    );
}

#[test]
fn the_index_keeps_to_200_entries() {
    let dir = Dir::new();
    for n in 0..250 {
        dir.put(&format!("m{n:03}"), "body\n");
    }
    let run = Run::start(&dir, "t", "hello");
    let text = &run.provider.residents()[0][0];
    assert_eq!(text.lines().filter(|l| l.starts_with("- m")).count(), 200);
    assert!(
        text.ends_with("\n- m199\n- … and 50 more (memory_search finds them)"),
        "{text}"
    );
}

#[test]
fn the_index_keeps_to_8_kilobytes() {
    let dir = Dir::new();
    for n in 0..100 {
        dir.put(
            &format!("m{n:03}"),
            format!("---\ndescription: {}\n---\n\nbody\n", "word ".repeat(30)),
        );
    }
    let run = Run::start(&dir, "t", "hello");
    let text = &run.provider.residents()[0][0];
    assert!(text.len() <= 8 * 1024, "{}", text.len());
    let shown = text.lines().filter(|l| l.starts_with("- m")).count();
    assert!(shown > 40 && shown < 100, "{shown}");
    assert!(
        text.ends_with(&format!(
            "- … and {} more (memory_search finds them)",
            100 - shown
        )),
        "{text}"
    );
}

#[test]
fn a_task_keeps_the_index_it_recorded_when_files_change() {
    let dir = Dir::new();
    dir.put("alpha", "---\ndescription: First\n---\n\na\n");
    let run = Run::start(&dir, "t", "hello");
    let first = run.provider.residents()[0].clone();
    dir.put("alpha", "---\ndescription: Changed\n---\n\na\n");
    dir.put("beta", "---\ndescription: New\n---\n\nb\n");
    run.send("go on");
    let residents = run.provider.residents();
    assert_eq!(residents.len(), 2);
    assert_eq!(residents[1], first);
    assert!(first[0].ends_with("\n- alpha — First"), "{first:?}");
    // Recorded once, with the directory, and folded.
    let records = run.records("memory", "index");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0["dir"], dir.root().to_str().unwrap());
    let state = run.state();
    assert_eq!(
        state.ext_state("memory").unwrap()["index"],
        first[0].as_str()
    );
    // The folded state renders the same bytes however often it is asked.
    let s = &run.session;
    let task = TaskId::new("t").unwrap();
    let view = View::new(&task, "main", &state, &[], &s.extensions);
    let parts = extension(s, "memory").context(&view).unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].text, first[0]);
    // A new task sees the directory as it is now.
    let fresh = Run::start(&dir, "u", "hello");
    assert!(
        fresh.provider.residents()[0][0].ends_with("\n- alpha — Changed\n- beta — New"),
        "{:?}",
        fresh.provider.residents()
    );
}

#[test]
fn the_fold_takes_index_records_and_refuses_unknown_kinds() {
    let dir = Dir::new();
    let s = session(dir.settings()).unwrap();
    let memory = extension(&s, "memory");
    let mut state = serde_json::Value::Null;
    memory
        .reduce(
            &mut state,
            "index",
            &json!({ "index": "# Memory index", "dir": "/m" }),
        )
        .unwrap();
    assert_eq!(state, json!({ "index": "# Memory index", "dir": "/m" }));
    let err = memory.reduce(&mut state, "other", &json!({})).unwrap_err();
    assert_eq!(err, "unknown record kind `other`");
    let err = memory.reduce(&mut state, "index", &json!({})).unwrap_err();
    assert_eq!(err, "an `index` record has no string `index`");
    // Without a recorded index there is no resident.
    let task = TaskId::new("x").unwrap();
    let empty = noeta_core::fold::TaskState::default();
    let view = View::new(&task, "main", &empty, &[], &s.extensions);
    assert!(memory.context(&view).unwrap().is_empty());
}
