//! End to end: a scripted task reads, searches and edits a file in a real workspace.

use serde_json::json;

use crate::common::{Ws, apply, call};

#[test]
fn a_task_reads_greps_and_edits_a_file_on_disk() {
    let ws = Ws::new();
    ws.put(".gitignore", "target/\n");
    ws.put("target/stale.rs", "const GREETING: &str = \"hello\";\n");
    ws.put(
        "src/lib.rs",
        "//! A greeting.\n\npub const GREETING: &str = \"hello\";\n",
    );
    let r = apply(
        &ws,
        &[
            call("Read", json!({ "file_path": "src/lib.rs" })),
            call(
                "Grep",
                json!({ "pattern": "GREETING", "output_mode": "content" }),
            ),
            call(
                "Edit",
                json!({
                    "file_path": "src/lib.rs",
                    "old_string": "\"hello\"",
                    "new_string": "\"hello, world\""
                }),
            ),
        ],
    );
    let results = r.results();
    assert!(results.iter().all(|(_, e)| !e), "{results:?}");
    assert_eq!(
        results[1].0,
        "src/lib.rs:3:pub const GREETING: &str = \"hello\";"
    );
    assert_eq!(
        ws.get("src/lib.rs"),
        "//! A greeting.\n\npub const GREETING: &str = \"hello, world\";\n"
    );
    assert_eq!(
        ws.get("target/stale.rs"),
        "const GREETING: &str = \"hello\";\n"
    );
    let edits = r.records("edit");
    assert_eq!(edits.len(), 1);
    assert!(
        r.diff(&edits[0])
            .contains("+pub const GREETING: &str = \"hello, world\";")
    );
}
