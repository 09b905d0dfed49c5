//! The seven tiers: precedence, opt-in home tiers, the `skills_dir` override, trust-store
//! gating, missing directories, plugin-contributed paths.

use std::path::PathBuf;

use noeta_core::PluginSource;
use serde_json::{Value, json};

use crate::common::{Run, Tree, names, skip_reason};

/// The tiers a test can put a skill in (built-in ships none), lowest first.
#[derive(Clone, Copy, Debug)]
enum At {
    Plugin,
    Extra,
    GlobalAgents,
    GlobalClaude,
    Global,
    WorkspaceAgents,
    WorkspaceClaude,
    Workspace,
}

impl At {
    fn dir(self, tree: &Tree) -> PathBuf {
        match self {
            At::Plugin => tree.path("plugin/skills"),
            At::Extra => tree.path("borrowed/skills"),
            At::GlobalAgents => tree.in_home(".agents/skills"),
            At::GlobalClaude => tree.in_home(".claude/skills"),
            At::Global => tree.in_home(".noeta/skills"),
            At::WorkspaceAgents => tree.ws(".agents/skills"),
            At::WorkspaceClaude => tree.ws(".claude/skills"),
            At::Workspace => tree.ws(".noeta/skills"),
        }
    }

    fn tier(self) -> &'static str {
        match self {
            At::Plugin => "plugin",
            At::Extra => "extra",
            At::GlobalAgents => "global-agents",
            At::GlobalClaude => "global-claude",
            At::Global => "global",
            At::WorkspaceAgents => "workspace-agents",
            At::WorkspaceClaude => "workspace-claude",
            At::Workspace => "workspace",
        }
    }
}

/// Every tier opted in.
fn all_on(tree: &Tree) -> Value {
    json!({
        "extra_skill_dirs": [At::Extra.dir(tree)],
        "global_agents_skills_dir": true,
        "global_claude_skills_dir": true,
        "global_skills_dir": true,
    })
}

fn plugin_dirs(tree: &Tree) -> Vec<(String, PathBuf)> {
    vec![("house".to_owned(), At::Plugin.dir(tree))]
}

/// `lower` and `higher` both hold `shared`: the higher tier's is indexed, the lower one's is
/// skipped as shadowed, naming the tier and file that shadow it.
fn shadows(lower: At, higher: At) {
    let tree = Tree::new();
    let low = tree.skill(
        &lower.dir(&tree),
        "shared",
        &format!("from {}", lower.tier()),
    );
    let high = tree.skill(
        &higher.dir(&tree),
        "shared",
        &format!("from {}", higher.tier()),
    );
    let listing = tree.list_with(all_on(&tree), &plugin_dirs(&tree)).unwrap();
    assert_eq!(
        names(&listing),
        vec![("shared".to_owned(), higher.tier().to_owned())],
        "{lower:?} < {higher:?}"
    );
    assert_eq!(listing.skills[0].path, high);
    assert_eq!(
        listing.skills[0].description,
        format!("from {}", higher.tier())
    );
    let reason = skip_reason(&listing, &low);
    assert_eq!(
        reason,
        format!(
            "shadowed by the {} tier's `shared` at `{}`",
            higher.tier(),
            high.display()
        )
    );
}

#[test]
fn extra_dirs_shadow_plugin_contributed_skills() {
    shadows(At::Plugin, At::Extra);
}

#[test]
fn global_agents_skills_shadow_extra_dirs() {
    shadows(At::Extra, At::GlobalAgents);
}

#[test]
fn claude_code_home_skills_shadow_global_agents_skills() {
    shadows(At::GlobalAgents, At::GlobalClaude);
}

#[test]
fn global_skills_shadow_claude_code_home_skills() {
    shadows(At::GlobalClaude, At::Global);
}

#[test]
fn workspace_agents_skills_shadow_global_skills() {
    shadows(At::Global, At::WorkspaceAgents);
}

#[test]
fn claude_code_workspace_skills_shadow_workspace_agents_skills() {
    shadows(At::WorkspaceAgents, At::WorkspaceClaude);
}

#[test]
fn workspace_skills_shadow_claude_code_workspace_skills() {
    shadows(At::WorkspaceClaude, At::Workspace);
}

#[test]
fn every_tier_at_once_the_workspace_wins_and_the_others_are_listed_as_shadowed() {
    let tree = Tree::new();
    let all = [
        At::Plugin,
        At::Extra,
        At::GlobalAgents,
        At::GlobalClaude,
        At::Global,
        At::WorkspaceAgents,
        At::WorkspaceClaude,
        At::Workspace,
    ];
    for at in all {
        tree.skill(&at.dir(&tree), "shared", at.tier());
        tree.skill(&at.dir(&tree), &format!("only-{}", at.tier()), "own");
    }
    let listing = tree.list_with(all_on(&tree), &plugin_dirs(&tree)).unwrap();
    let tiers: Vec<&str> = listing.tiers.iter().map(|t| t.tier.as_str()).collect();
    assert_eq!(
        tiers,
        [
            "plugin",
            "extra",
            "global-agents",
            "global-claude",
            "global",
            "workspace-agents",
            "workspace-claude",
            "workspace"
        ]
    );
    assert!(listing.tiers.iter().all(|t| t.state == "mounted"));
    let shared = listing.skills.iter().find(|s| s.name == "shared").unwrap();
    assert_eq!(shared.tier, "workspace");
    for at in all {
        let own = format!("only-{}", at.tier());
        assert!(
            names(&listing).contains(&(own.clone(), at.tier().to_owned())),
            "{own}"
        );
    }
    assert_eq!(listing.skipped.len(), 7, "{:?}", listing.skipped);
}

#[test]
fn among_plugin_directories_a_later_one_shadows_an_earlier_one() {
    let tree = Tree::new();
    let a = tree.path("a/skills");
    let b = tree.path("b/skills");
    tree.skill(&a, "shared", "from a");
    tree.skill(&b, "shared", "from b");
    let dirs = vec![("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())];
    let listing = tree.list_with(Value::Null, &dirs).unwrap();
    assert_eq!(listing.skills[0].description, "from b");
    assert!(
        skip_reason(&listing, &a.join("shared/SKILL.md"))
            .starts_with("shadowed by the plugin tier's")
    );
    assert_eq!(listing.tiers[0].origin, "a");
    assert_eq!(listing.tiers[1].origin, "b");
}

#[test]
fn home_tiers_are_off_by_default() {
    let tree = Tree::new();
    tree.skill(&At::GlobalAgents.dir(&tree), "agents-home", "x");
    tree.skill(&At::Global.dir(&tree), "noeta-home", "x");
    tree.skill(&At::Workspace.dir(&tree), "local", "x");
    let listing = tree.list(Value::Null);
    assert_eq!(
        names(&listing),
        vec![("local".to_owned(), "workspace".to_owned())]
    );
    let tiers: Vec<&str> = listing.tiers.iter().map(|t| t.tier.as_str()).collect();
    assert_eq!(tiers, ["workspace-agents", "workspace-claude", "workspace"]);
}

#[test]
fn home_tiers_mount_when_opted_in() {
    let tree = Tree::new();
    tree.skill(&At::GlobalAgents.dir(&tree), "agents-home", "x");
    tree.skill(&At::Global.dir(&tree), "noeta-home", "x");
    let listing = tree.list(json!({
        "global_agents_skills_dir": true,
        "global_skills_dir": true,
    }));
    assert_eq!(
        names(&listing),
        vec![
            ("agents-home".to_owned(), "global-agents".to_owned()),
            ("noeta-home".to_owned(), "global".to_owned()),
        ]
    );
}

#[test]
fn a_home_tier_may_name_its_directory() {
    let tree = Tree::new();
    tree.skill(&tree.in_home("mine/skills"), "tilde", "x");
    tree.skill(&tree.path("srv/skills"), "absolute", "x");
    let listing = tree.list(json!({
        "global_agents_skills_dir": "~/mine/skills",
        "global_skills_dir": tree.path("srv/skills"),
    }));
    assert_eq!(
        names(&listing),
        vec![
            ("absolute".to_owned(), "global".to_owned()),
            ("tilde".to_owned(), "global-agents".to_owned()),
        ]
    );
}

#[test]
fn without_a_home_directory_an_opted_in_home_tier_is_empty_and_says_why() {
    let tree = Tree::new();
    let listing = noeta_builtin_skills::listing::index_for_listing(
        &json!({ "global_skills_dir": true }),
        Some(&tree.workspace),
        None,
        &[],
    )
    .unwrap();
    let global = listing.tiers.iter().find(|t| t.tier == "global").unwrap();
    assert_eq!(global.state, "the home directory is unknown");
    assert!(listing.skills.is_empty());
}

#[test]
fn the_skills_dir_override_pins_the_workspace_set_and_hides_dot_agents() {
    let tree = Tree::new();
    tree.skill(&At::WorkspaceAgents.dir(&tree), "agents-local", "x");
    tree.skill(&At::Workspace.dir(&tree), "noeta-local", "x");
    let pinned = tree.ws("team/skills");
    tree.skill(&pinned, "team", "x");
    let listing = tree.list(json!({ "skills_dir": "team/skills" }));
    assert_eq!(
        names(&listing),
        vec![("team".to_owned(), "workspace".to_owned())]
    );
    let tiers: Vec<(&str, PathBuf)> = listing
        .tiers
        .iter()
        .map(|t| (t.tier.as_str(), t.path.clone()))
        .collect();
    assert_eq!(tiers, vec![("workspace", pinned)]);
}

#[test]
fn an_absolute_skills_dir_override_works_outside_the_workspace() {
    let tree = Tree::new();
    let pinned = tree.path("ops/skills");
    tree.skill(&pinned, "ops", "x");
    tree.skill(&At::Workspace.dir(&tree), "local", "x");
    let listing = tree.list(json!({ "skills_dir": pinned }));
    assert_eq!(
        names(&listing),
        vec![("ops".to_owned(), "workspace".to_owned())]
    );
}

#[test]
fn trust_store_gating_off_mounts_the_workspace_tiers() {
    let tree = Tree::new();
    tree.skill(&At::Workspace.dir(&tree), "local", "x");
    tree.skill(&At::WorkspaceAgents.dir(&tree), "agents-local", "x");
    let listing = tree.list(json!({ "workspace_skills_trust": "open" }));
    assert_eq!(listing.skills.len(), 2);
}

#[test]
fn trust_store_gating_on_skips_an_untrusted_workspace_and_mounts_a_trusted_one() {
    let tree = Tree::new();
    tree.skill(&At::Workspace.dir(&tree), "local", "x");
    tree.skill(&At::WorkspaceAgents.dir(&tree), "agents-local", "x");
    tree.skill(&tree.path("borrowed/skills"), "borrowed", "x");
    let settings = json!({
        "workspace_skills_trust": "trust-store",
        "extra_skill_dirs": [tree.path("borrowed/skills")],
    });
    let listing = tree.list(settings.clone());
    // The other tiers are not gated.
    assert_eq!(
        names(&listing),
        vec![("borrowed".to_owned(), "extra".to_owned())]
    );
    for tier in ["workspace-agents", "workspace"] {
        let state = &listing.tiers.iter().find(|t| t.tier == tier).unwrap().state;
        assert!(state.starts_with("untrusted:"), "{state}");
        assert!(state.contains("the workspace is not trusted"), "{state}");
        assert!(
            state.contains(&tree.workspace.display().to_string()),
            "{state}"
        );
    }
    tree.trust_workspace();
    let listing = tree.list(settings);
    assert_eq!(listing.skills.len(), 3, "{listing:?}");
}

#[test]
fn trust_store_gating_with_a_malformed_store_fails_closed_naming_the_store() {
    let tree = Tree::new();
    tree.skill(&At::Workspace.dir(&tree), "local", "x");
    tree.write(&tree.in_home(".noeta/trust.json"), "not json");
    let listing = tree.list(json!({ "workspace_skills_trust": "trust-store" }));
    assert!(listing.skills.is_empty());
    let state = &listing.tiers.last().unwrap().state;
    assert!(state.contains("trust.json"), "{state}");
}

#[test]
fn a_missing_directory_is_an_empty_tier_not_an_error() {
    let tree = Tree::new();
    let listing = tree
        .list_with(
            json!({ "extra_skill_dirs": [tree.path("nowhere")] }),
            &[("house".to_owned(), tree.path("plugin/gone"))],
        )
        .unwrap();
    assert!(listing.skills.is_empty());
    assert!(listing.skipped.is_empty());
    assert_eq!(listing.tiers.len(), 5);
    for tier in &listing.tiers {
        assert_eq!(tier.state, "missing (an empty tier)", "{tier:?}");
    }
}

#[test]
fn a_tier_path_that_is_a_file_contributes_nothing_and_says_so() {
    let tree = Tree::new();
    let file = tree.path("file");
    tree.write(&file, "x");
    let listing = tree.list(json!({ "extra_skill_dirs": [file] }));
    assert_eq!(listing.tiers[0].state, "not a directory");
}

#[test]
fn a_relative_plugin_contributed_path_is_refused_naming_the_plugin() {
    let tree = Tree::new();
    let err = tree
        .list_with(
            Value::Null,
            &[("house".to_owned(), PathBuf::from("rel/skills"))],
        )
        .unwrap_err();
    assert_eq!(
        err,
        "plugin `house`: the skills path `rel/skills` is relative — a skills path must be absolute"
    );
}

#[test]
fn a_relative_skills_path_in_a_manifest_is_refused_naming_the_plugin() {
    let tree = Tree::new();
    let manifest = tree.path("house/noeta-plugin.toml");
    tree.write(
        &manifest,
        "name = \"house\"\n[[contributions]]\nsurface = \"skills\"\nname = \"mine\"\npath = \"skills\"\n",
    );
    let set = noeta_core::load_plugins(
        &[PluginSource::Path(manifest)],
        &noeta_core::LoadOptions::new(noeta_core::standard_registry()),
    )
    .unwrap();
    assert!(set.get("house").is_none());
    let problems: Vec<String> = set.problems().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("house"), "{problems:?}");
    assert!(
        problems[0].contains("the skills path `skills` is relative"),
        "{problems:?}"
    );
}

#[test]
fn a_plugin_contributed_directory_reaches_the_session() {
    let tree = Tree::new();
    let skills = tree.path("house/skills");
    tree.skill(&skills, "house-style", "Write in the house style.");
    tree.skill(&skills, "shadowed", "from the plugin");
    tree.skill(&tree.ws(".noeta/skills"), "shadowed", "from the workspace");
    let manifest = tree.path("house/noeta-plugin.toml");
    tree.write(
        &manifest,
        format!(
            "name = \"house\"\n[[contributions]]\nsurface = \"skills\"\nname = \"mine\"\npath = \"{}\"\n",
            skills.display()
        ),
    );
    let run = Run::with_tree(tree, Value::Null, vec![PluginSource::Path(manifest)]);
    run.turn("t", "go", crate::common::done());
    let residents = run.last().residents;
    let listing = residents
        .iter()
        .find(|r| r.starts_with("Skills you can activate"))
        .unwrap();
    assert!(
        listing.contains("- house-style: Write in the house style."),
        "{listing}"
    );
    assert!(
        listing.contains("- shadowed: from the workspace"),
        "{listing}"
    );
}

#[test]
fn within_a_tier_the_first_directory_in_byte_order_wins_a_duplicate_name() {
    let tree = Tree::new();
    let dir = At::Workspace.dir(&tree);
    let first = tree.skill_file(&dir, "a-first", &crate::common::skill_md("dup", "first"));
    let second = tree.skill_file(&dir, "b-second", &crate::common::skill_md("dup", "second"));
    let listing = tree.list(Value::Null);
    assert_eq!(listing.skills.len(), 1);
    assert_eq!(listing.skills[0].path, first);
    assert_eq!(
        skip_reason(&listing, &second),
        format!(
            "duplicate name `dup`: `{}` in the same tier comes first",
            first.display()
        )
    );
}

#[test]
fn a_relative_skills_dir_without_a_workspace_mounts_nothing_and_says_why() {
    let listing = noeta_builtin_skills::listing::index_for_listing(
        &json!({ "skills_dir": "team" }),
        None,
        None,
        &[],
    )
    .unwrap();
    assert_eq!(listing.tiers.len(), 1);
    assert_eq!(
        listing.tiers[0].state,
        "relative to the workspace, and there is none"
    );
}

#[test]
fn claude_code_plugins_skills_are_named_after_their_plugin_and_never_collide() {
    let tree = Tree::new();
    let a = tree.path("plugins/a/skills");
    let b = tree.path("plugins/b/skills");
    tree.skill(&a, "lint", "from a");
    tree.skill(&b, "lint", "from b");
    tree.skill(&At::Workspace.dir(&tree), "lint", "from the workspace");
    let listing = tree.list(json!({
        "plugin_skill_dirs": [
            { "plugin": "a", "dir": a },
            { "plugin": "b", "dir": b },
        ]
    }));
    assert_eq!(
        names(&listing),
        vec![
            ("a:lint".to_owned(), "plugin".to_owned()),
            ("b:lint".to_owned(), "plugin".to_owned()),
            ("lint".to_owned(), "workspace".to_owned()),
        ]
    );
    assert!(listing.skipped.is_empty(), "{:?}", listing.skipped);
}
