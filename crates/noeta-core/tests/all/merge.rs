//! The merge: a collision for every collision key, model-visible tool names, both orderings, and order independence.

use noeta_core::canonical;
use noeta_core::{Collision, CollisionKey, PluginSource};
use serde_json::json;

use crate::support::{Manifest, linked, load, permutations};

/// The merge error of two linked plugins `a` and `b` carrying these manifests.
fn collision_of(a: Manifest, b: Manifest) -> (Vec<Collision>, String) {
    let set = load(&[linked(&b), linked(&a)]);
    let err = set.merged().unwrap_err();
    let message = err.to_string();
    (err.collisions, message)
}

#[test]
fn name_keyed_surfaces_collide_on_the_contribution_name() {
    let (collisions, message) = collision_of(
        Manifest::new("a").with("prompt_fragment", "frag", "body = \"A.\""),
        Manifest::new("b").with("prompt_fragment", "frag", "body = \"B.\""),
    );
    assert_eq!(
        message,
        "prompt_fragment `frag` is contributed by both plugin `a` and plugin `b` — no override"
    );
    assert_eq!(
        collisions,
        [Collision {
            surface: "prompt_fragment".to_owned(),
            key: CollisionKey::Name,
            value: "frag".to_owned(),
            first: "a".to_owned(),
            second: "b".to_owned(),
        }]
    );
}

#[test]
fn every_name_keyed_standard_surface_collides() {
    for surface in [
        "agent",
        "reminder_provider",
        "reminder",
        "tool_result_transform",
        "sandbox_provider",
        "session_pack",
    ] {
        let (_, message) = collision_of(
            Manifest::new("a").with(surface, "same", ""),
            Manifest::new("b").with(surface, "same", ""),
        );
        assert_eq!(
            message,
            format!(
                "{surface} `same` is contributed by both plugin `a` and plugin `b` — no override"
            )
        );
    }
}

#[test]
fn content_kinds_collide_on_the_kind() {
    let (collisions, message) = collision_of(
        Manifest::new("a").with("content_kind", "notes", "band = 1"),
        Manifest::new("b").with("content_kind", "notes", "band = 2"),
    );
    assert_eq!(collisions[0].key, CollisionKey::Kind);
    assert_eq!(
        message,
        "content kind `notes` on surface `content_kind` is contributed by both plugin `a` and plugin `b` — no override"
    );
}

#[test]
fn mcp_servers_collide_on_the_alias() {
    let (collisions, message) = collision_of(
        Manifest::new("a").with("mcp_server", "docs", ""),
        Manifest::new("b").with("mcp_server", "docs", ""),
    );
    assert_eq!(collisions[0].key, CollisionKey::Alias);
    assert_eq!(
        message,
        "mcp alias `docs` on surface `mcp_server` is contributed by both plugin `a` and plugin `b` — no override"
    );
}

#[test]
fn single_valued_surfaces_collide_whatever_the_names() {
    for surface in ["policy", "provider"] {
        let (collisions, message) = collision_of(
            Manifest::new("a").with(surface, "first", ""),
            Manifest::new("b").with(surface, "second", ""),
        );
        assert_eq!(collisions[0].key, CollisionKey::SingleValued);
        assert_eq!(collisions[0].value, "");
        assert_eq!(
            message,
            format!(
                "surface `{surface}` is single-valued but contributed by both plugin `a` and plugin `b` — no override"
            )
        );
    }
}

#[test]
fn surfaces_keyed_none_never_collide() {
    let set = load(&[
        linked(
            &Manifest::new("a")
                .with("guard", "check", "")
                .with("observer", "watch", "")
                .entry("skills", "path = \"/srv/skills/pack\""),
        ),
        linked(
            &Manifest::new("b")
                .with("guard", "check", "")
                .with("observer", "watch", "")
                .entry("skills", "path = \"/opt/other/pack\""),
        ),
    ]);
    let merged = set.merged().unwrap();
    for surface in ["guard", "observer", "skills"] {
        let plugins: Vec<&str> = merged
            .for_surface(surface)
            .iter()
            .map(|e| e.plugin.as_str())
            .collect();
        assert_eq!(plugins, ["a", "b"], "{surface}");
    }
}

#[test]
fn model_visible_tool_names_collide_across_tool_and_control_tool_contributions() {
    let (collisions, message) = collision_of(
        Manifest::new("a").with("tool", "reader", "tools = [\"read\", \"grep\"]"),
        Manifest::new("b").with("control_tool", "search", "tools = [\"grep\"]"),
    );
    assert_eq!(
        message,
        "model-visible tool `grep` is mounted by both plugin `a` and plugin `b` — no override"
    );
    assert_eq!(collisions[0].surface, "tool-name");

    // A tool's own name counts when it declares no `tools`.
    let (_, message) = collision_of(
        Manifest::new("a").with("control_tool", "ask", "tools = \"read\""),
        Manifest::new("b").with("tool", "read", ""),
    );
    assert_eq!(
        message,
        "model-visible tool `read` is mounted by both plugin `a` and plugin `b` — no override"
    );
}

#[test]
fn every_collision_is_reported_in_one_error() {
    let (collisions, message) = collision_of(
        Manifest::new("a")
            .with("prompt_fragment", "frag", "")
            .with("policy", "mine", ""),
        Manifest::new("b")
            .with("prompt_fragment", "frag", "")
            .with("policy", "yours", ""),
    );
    assert_eq!(collisions.len(), 2);
    assert_eq!(
        message,
        "prompt_fragment `frag` is contributed by both plugin `a` and plugin `b` — no override; surface `policy` is single-valued but contributed by both plugin `a` and plugin `b` — no override"
    );
}

#[test]
fn sorted_surfaces_order_by_plugin_then_name() {
    let set = load(&[
        linked(
            &Manifest::new("zed")
                .with("tool", "alpha", "")
                .with("tool", "beta", ""),
        ),
        linked(
            &Manifest::new("abe")
                .with("tool", "zulu", "")
                .with("tool", "mike", ""),
        ),
        linked(&Manifest::new("mia").with("tool", "echo", "")),
    ]);
    let merged = set.merged().unwrap();
    let order: Vec<(&str, &str)> = merged
        .for_surface("tool")
        .iter()
        .map(|e| (e.plugin.as_str(), e.contribution.name.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("abe", "mike"),
            ("abe", "zulu"),
            ("mia", "echo"),
            ("zed", "alpha"),
            ("zed", "beta")
        ]
    );
}

#[test]
fn priority_surfaces_order_by_priority_then_plugin_then_name_with_absent_as_zero() {
    let set = load(&[
        linked(
            &Manifest::new("bob")
                .with("reminder", "late", "priority = 10")
                .with("reminder", "zero", "")
                .with("reminder", "first", "priority = -20"),
        ),
        linked(
            &Manifest::new("amy")
                .with("reminder", "tie", "priority = 10")
                .with("reminder", "explicit-zero", "priority = 0")
                .with("reminder", "b-default", ""),
        ),
        linked(&Manifest::new("cat").with("reminder", "neg", "priority = -1")),
    ]);
    let merged = set.merged().unwrap();
    let order: Vec<(&str, &str, i64)> = merged
        .for_surface("reminder")
        .iter()
        .map(|e| {
            (
                e.plugin.as_str(),
                e.contribution.name.as_str(),
                e.contribution.priority(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("bob", "first", -20),
            ("cat", "neg", -1),
            ("amy", "b-default", 0),
            ("amy", "explicit-zero", 0),
            ("bob", "zero", 0),
            ("amy", "tie", 10),
            ("bob", "late", 10),
        ]
    );
}

#[test]
fn the_merged_listing_shows_names_refs_paths_params_and_mounted_tool_names() {
    let set = load(&[linked(
        &Manifest::new("demo")
            .with(
                "tool",
                "search",
                "tools = [\"grep\", \"glob\"]\nreadonly = true",
            )
            .with("tool", "read", "")
            .entry("skills", "path = \"/srv/skills/pack\""),
    )]);
    let listing = set.merged().unwrap().to_json();
    assert_eq!(
        listing,
        json!({
            "skills": [{"name": "pack", "path": "/srv/skills/pack", "plugin": "demo"}],
            "tool": [
                {"name": "read", "ref": "demo::read", "tools": ["read"], "plugin": "demo"},
                {"name": "search", "ref": "demo::search", "tools": ["grep", "glob"], "readonly": true, "plugin": "demo"},
            ],
        })
    );
    let merged = set.merged().unwrap();
    assert_eq!(merged.surfaces().collect::<Vec<_>>(), ["skills", "tool"]);
    assert_eq!(merged.entries().count(), 3);
}

/// Linked crates and on-disk dirs (each its own `PluginSource::Path`) making one mixed set.
fn mixed_sources(root: &std::path::Path, colliding: bool) -> Vec<PluginSource> {
    let disk = |manifest: Manifest| PluginSource::Path(manifest.write_into(root));
    let shared_fragment = if colliding { "shared" } else { "ondisk-only" };
    vec![
        linked(
            &Manifest::new("kilo")
                .with("tool", "read", "")
                .with("reminder", "aa", "priority = 2")
                .with("prompt_fragment", "shared", "body = \"Kilo.\""),
        ),
        linked(
            &Manifest::new("alpha")
                .with("control_tool", "plan", "priority = 2")
                .with("reminder", "zz", "priority = 2")
                .with("guard", "g", ""),
        ),
        disk(
            Manifest::new("zulu")
                .entry(
                    "prompt_fragment",
                    &format!("name = \"{shared_fragment}\"\ntext = \"Zulu.\""),
                )
                .entry("guard", "name = \"g\"\nref = \"zulu::G\""),
        ),
        disk(
            Manifest::new("echo")
                .entry("skills", "path = \"/srv/skills/echo\"")
                .entry(
                    "reminder",
                    "name = \"mm\"\nref = \"echo::Mm\"\npriority = 2",
                ),
        ),
        disk(
            Manifest::new("bravo")
                .entry("prompt_fragment", "name = \"b\"\ntext = \"Bravo.\"")
                .entry("content_kind", "name = \"notes\"\nref = \"bravo::Notes\""),
        ),
    ]
}

#[test]
fn the_merge_does_not_depend_on_the_order_of_the_sources() {
    let root = tempfile::tempdir().unwrap();
    let sources = mixed_sources(root.path(), false);
    let reference = canonical::to_bytes(&load(&sources).merged().unwrap().to_json());
    let all = permutations(&sources);
    assert_eq!(all.len(), 120);
    for order in all {
        let set = load(&order);
        assert_eq!(set.names(), ["alpha", "bravo", "echo", "kilo", "zulu"]);
        let bytes = canonical::to_bytes(&set.merged().unwrap().to_json());
        assert_eq!(bytes, reference);
    }
    let reminders: Vec<String> = load(&sources)
        .merged()
        .unwrap()
        .for_surface("reminder")
        .iter()
        .map(|e| e.plugin.clone())
        .collect();
    assert_eq!(
        reminders,
        ["alpha", "echo", "kilo"],
        "equal priorities tie by plugin before name"
    );
}

#[test]
fn collision_messages_do_not_depend_on_the_order_of_the_sources() {
    let root = tempfile::tempdir().unwrap();
    let sources = mixed_sources(root.path(), true);
    let expected = "prompt_fragment `shared` is contributed by both plugin `kilo` and plugin `zulu` — no override";
    for order in permutations(&sources) {
        assert_eq!(load(&order).merged().unwrap_err().to_string(), expected);
    }
}
