//! The session pack: what it mounts, schemas and flags, `read_only`, the manifest.

use noeta_core::Risk;
use serde_json::json;

use crate::common::{Dir, T0, extension, plugin_set, session, tools};

const MOUNTED: [&str; 4] = [
    "memory_write",
    "memory_read",
    "memory_search",
    "memory_archive",
];

#[test]
fn the_pack_mounts_the_four_tools_and_the_memory_extension() {
    let dir = Dir::new();
    let s = session(dir.settings()).unwrap();
    let names: Vec<String> = tools(&s).iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, MOUNTED);
    assert_eq!(extension(&s, "memory").name(), "memory");
    let kinds: Vec<(&str, i64)> = s.kinds.iter().map(|k| (k.kind.as_str(), k.band)).collect();
    assert_eq!(
        kinds,
        [("memory", 200)],
        "the index is a resident of kind `memory`"
    );
    assert_eq!(
        extension(&s, "memory/memory-recall").name(),
        "memory/memory-recall"
    );
}

#[test]
fn read_only_mounts_only_read_and_search() {
    let dir = Dir::new();
    let mut settings = dir.settings();
    settings["read_only"] = json!(true);
    let s = session(settings).unwrap();
    let names: Vec<String> = tools(&s).iter().map(|t| t.name().to_owned()).collect();
    assert_eq!(names, ["memory_read", "memory_search"]);
    assert_eq!(extension(&s, "memory").name(), "memory");
}

#[test]
fn every_schema_is_a_closed_object_with_its_required_fields() {
    let dir = Dir::new();
    let s = session(dir.settings()).unwrap();
    let expected: [(&str, &[&str], &[&str]); 4] = [
        (
            "memory_write",
            &["name", "text"],
            &["description", "keywords", "name", "related", "text", "type"],
        ),
        ("memory_read", &["name"], &["name"]),
        ("memory_search", &["query"], &["query"]),
        ("memory_archive", &["name"], &["name"]),
    ];
    for (tool, (name, required, properties)) in tools(&s).iter().zip(expected) {
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
}

#[test]
fn readers_are_read_only_and_low_risk_writers_are_not() {
    let dir = Dir::new();
    let s = session(dir.settings()).unwrap();
    for tool in tools(&s) {
        let flags = tool.flags();
        match tool.name() {
            "memory_read" | "memory_search" => {
                assert!(
                    flags.read_only && flags.safe_while_planning,
                    "{}",
                    tool.name()
                );
                assert_eq!(flags.risk, Risk::Low);
            }
            _ => {
                assert!(
                    !flags.read_only && !flags.safe_while_planning,
                    "{}",
                    tool.name()
                );
                assert_eq!(flags.risk, Risk::Medium);
            }
        }
    }
}

#[test]
fn the_manifest_declares_the_fragment_the_pack_at_300_and_recall_at_turn_intake() {
    let set = plugin_set(&noeta_core::store::ManualClock::at(T0));
    let memory = set.get("memory").unwrap();
    let found: Vec<(&str, &str)> = memory
        .manifest
        .contributions
        .iter()
        .map(|c| (c.surface.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("prompt_fragment", "memory-policy"),
            ("session_pack", "memory"),
            ("reminder_provider", "memory-recall"),
            ("tool", "memory_write"),
            ("tool", "memory_read"),
            ("tool", "memory_search"),
            ("tool", "memory_archive"),
        ]
    );
    let pack = &memory.manifest.contributions[1];
    assert_eq!(pack.priority(), 300);
    let declared: Vec<&str> = memory.manifest.contributions[3..]
        .iter()
        .filter(|c| c.mounted_by() == Some("memory"))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(declared, MOUNTED);
    let recall = &memory.manifest.contributions[2];
    assert_eq!(recall.seams(), [noeta_core::Seam::TurnIntake]);
}
