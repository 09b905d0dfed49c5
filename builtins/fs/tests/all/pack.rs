//! The session pack: what it mounts, the tools' schemas and flags, its settings, the fold.

use noeta_core::{LoadOptions, PluginSource, Risk, load_plugins, standard_registry};
use serde_json::{Value, json};

use crate::common::{extension, session, tools};

/// What the pack mounts with default settings, in order; the manifest names the same.
const MOUNTED: [&str; 9] = [
    "Read",
    "Glob",
    "Grep",
    "Edit",
    "Write",
    "Bash",
    "BashOutput",
    "KillShell",
    "Monitor",
];

#[test]
fn the_pack_mounts_the_file_tools_the_shell_and_the_fs_extension() {
    let s = session(Value::Null).unwrap();
    let names: Vec<String> = tools(&s).iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, MOUNTED);
    assert_eq!(extension(&s, "fs").name(), "fs");
}

#[test]
fn every_schema_is_a_closed_object_with_its_required_fields() {
    let s = session(Value::Null).unwrap();
    let expected: [(&str, &[&str], &[&str]); 9] = [
        (
            "Read",
            &["file_path"],
            &["file_path", "limit", "offset", "pages"],
        ),
        ("Glob", &["pattern"], &["path", "pattern"]),
        (
            "Grep",
            &["pattern"],
            &[
                "-A",
                "-B",
                "-C",
                "-i",
                "-n",
                "-o",
                "-u",
                "context",
                "glob",
                "head_limit",
                "multiline",
                "offset",
                "output_mode",
                "path",
                "pattern",
                "type",
            ],
        ),
        (
            "Edit",
            &["file_path", "old_string", "new_string"],
            &["file_path", "new_string", "old_string", "replace_all"],
        ),
        (
            "Write",
            &["file_path", "content"],
            &["content", "file_path"],
        ),
        (
            "Bash",
            &["command"],
            &["command", "description", "run_in_background", "timeout"],
        ),
        (
            "BashOutput",
            &["bash_id"],
            &["bash_id", "block", "filter", "timeout"],
        ),
        ("KillShell", &["shell_id"], &["shell_id"]),
        (
            "Monitor",
            &["command", "description"],
            &["command", "description", "timeout_ms"],
        ),
    ];
    let tools = tools(&s);
    assert_eq!(tools.len(), expected.len());
    for (tool, (name, required, properties)) in tools.iter().zip(expected) {
        assert_eq!(tool.name(), name);
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        assert_eq!(schema["required"], json!(required), "{name}");
        let mut keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, properties, "{name}");
        assert!(!tool.description().is_empty());
    }
    let grep = &tools[2].input_schema();
    assert_eq!(
        grep["properties"]["output_mode"]["enum"],
        json!(["files_with_matches", "content", "count"])
    );
    assert!(
        grep["properties"]["-o"]["description"]
            .as_str()
            .unwrap()
            .contains("context flags are ignored")
    );
    let read = &tools[0].input_schema();
    assert_eq!(read["properties"]["offset"]["minimum"], 1);
    assert_eq!(read["properties"]["limit"]["minimum"], 1);
}

#[test]
fn reading_tools_are_low_risk_read_only_and_safe_while_planning_writers_are_high_risk() {
    let s = session(Value::Null).unwrap();
    for tool in tools(&s) {
        let flags = tool.flags();
        assert!(flags.clearable, "{}", tool.name());
        match tool.name() {
            "Read" | "Glob" | "Grep" => {
                assert!(
                    flags.read_only && flags.safe_while_planning,
                    "{}",
                    tool.name()
                );
                assert_eq!(flags.risk, Risk::Low);
            }
            "BashOutput" => {
                assert!(!flags.read_only && !flags.safe_while_planning);
                assert_eq!(flags.risk, Risk::Low);
            }
            _ => {
                assert!(
                    !flags.read_only && !flags.safe_while_planning,
                    "{}",
                    tool.name()
                );
                assert_eq!(flags.risk, Risk::High);
            }
        }
    }
}

#[test]
fn settings_are_checked_naming_the_field_and_value() {
    let cases = [
        (
            json!({ "shel_mode": "off" }),
            "settings [plugins.fs]: unknown key `shel_mode` (known: write_mode, write_path_globs, ",
        ),
        (
            json!({ "write_mode": "yolo" }),
            "write_mode: expected `dry_run` or `apply`, got `\"yolo\"`",
        ),
        (
            json!({ "write_mode": 3 }),
            "write_mode: expected `dry_run` or `apply`, got `3`",
        ),
        (
            json!({ "write_path_globs": "src/**" }),
            "write_path_globs: expected a list of globs, got `\"src/**\"`",
        ),
        (
            json!({ "write_path_globs": [1] }),
            "write_path_globs: expected a glob, got `1`",
        ),
        (
            json!({ "write_path_globs": ["src/[a"] }),
            "write_path_globs: `src/[a` is not a valid glob",
        ),
        (
            json!({ "background_ends_with_turn": "yes" }),
            "background_ends_with_turn: expected true or false, got `\"yes\"`",
        ),
        (
            json!({ "write_roots": ["relative/dir"] }),
            "write_roots: `relative/dir` is not an absolute path",
        ),
        (
            json!("apply"),
            "settings [plugins.fs]: expected a table, got `\"apply\"`",
        ),
    ];
    for (settings, wanted) in cases {
        let err = session(settings).unwrap_err().to_string();
        assert!(err.contains("settings [plugins.fs]"), "{err}");
        assert!(err.contains(wanted), "{err}");
    }
    session(json!({ "write_mode": "apply", "write_path_globs": ["src/**"] })).unwrap();
    session(json!({ "write_mode": "dry_run" })).unwrap();
    session(json!({ "background_ends_with_turn": true })).unwrap();
}

#[test]
fn the_fold_keeps_the_last_digest_per_file_and_refuses_unknown_kinds() {
    let s = session(Value::Null).unwrap();
    let fs = extension(&s, "fs");
    let mut state = Value::Null;
    fs.reduce(
        &mut state,
        "read",
        &json!({ "path": "a.txt", "digest": "d1" }),
    )
    .unwrap();
    fs.reduce(
        &mut state,
        "edit",
        &json!({ "path": "a.txt", "before": "d1", "after": "d2", "applied": false }),
    )
    .unwrap();
    assert_eq!(state, json!({ "files": { "a.txt": "d1" } }));
    fs.reduce(
        &mut state,
        "write",
        &json!({ "path": "a.txt", "before": "d1", "after": "d3", "applied": true }),
    )
    .unwrap();
    assert_eq!(state, json!({ "files": { "a.txt": "d3" } }));
    let err = fs.reduce(&mut state, "delete", &json!({})).unwrap_err();
    assert_eq!(err, "unknown record kind `delete`");
    let err = fs
        .reduce(&mut state, "read", &json!({ "path": "a.txt" }))
        .unwrap_err();
    assert!(err.contains("no string `digest`"), "{err}");
}

#[test]
fn the_manifest_declares_the_pack_at_100_naming_its_tools() {
    let set = load_plugins(
        &[PluginSource::Linked(noeta_builtin_fs::plugin())],
        &LoadOptions::new(standard_registry()),
    )
    .unwrap();
    let fs = set.get("fs").unwrap();
    let contributions = &fs.manifest.contributions;
    let pack = &contributions[0];
    assert_eq!(
        (pack.surface.as_str(), pack.name.as_str(), pack.priority()),
        ("session_pack", "fs", 100)
    );
    // Every tool the pack mounts is declared on the `tool` surface as mounted by it.
    let declared: Vec<&str> = contributions[1..]
        .iter()
        .map(|c| {
            assert_eq!((c.surface.as_str(), c.mounted_by()), ("tool", Some("fs")));
            c.name.as_str()
        })
        .collect();
    assert_eq!(declared, MOUNTED);
}
