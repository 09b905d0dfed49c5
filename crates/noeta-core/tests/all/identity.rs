//! Agent compilation and identity: activation, roster, policy, tools, fragments, control tools and hash determinism.

use std::fmt::Write as _;
use std::sync::Arc;

use noeta_core::identity::ContentKindIdentity;
use noeta_core::{
    ActivationRules, CompileError, ComponentRef, ControlToolFactory, ControlToolMount, PluginSet,
    PluginSource, Resolved, SessionBuildContext, load_plugins,
};
use sha2::{Digest, Sha256};

use crate::support::{
    EchoTool, Manifest, ResolveWith, agent, assert_mentions, compile, compile_with, linked, load,
    names, options, permutations,
};

/// The fixture plugins: tools, fragments, a content kind, control tools, child agents and a policy.
fn fixture_sources(root: &std::path::Path) -> Vec<PluginSource> {
    vec![
        linked(
            &Manifest::new("files")
                .with("tool", "read", "")
                .with("tool", "grep", "")
                .with(
                    "prompt_fragment",
                    "usage",
                    "body = \"Read before you edit.\"",
                )
                .with("content_kind", "notes", "band = 10"),
        ),
        linked(
            &Manifest::new("style")
                .with("prompt_fragment", "tone", "body = \"Be brief.\"")
                .with("prompt_fragment", "format", "body = \"Use lists.\""),
        ),
        linked(
            &Manifest::new("plan")
                .with(
                    "control_tool",
                    "todo",
                    "priority = 5\ntools = \"todo_write\"\nskip_agents = [\"reviewer\"]",
                )
                .with("control_tool", "ask", "priority = -1\ntools = \"ask_user\"")
                .with(
                    "control_tool",
                    "exit",
                    "priority = 5\ntools = \"exit_plan\"",
                ),
        ),
        linked(
            &Manifest::new("crew")
                .with("agent", "helper", "agent_plugins = [\"files\"]")
                .with("agent", "lost", "agent_plugins = [\"ghost-plugin\"]")
                .with("agent", "parent", "agent_agents = [\"nobody\"]"),
        ),
        linked(&Manifest::new("react-policy").with("policy", "react", "policy_version = \"2\"")),
        PluginSource::Path(
            Manifest::new("local")
                .entry(
                    "prompt_fragment",
                    "name = \"house\"\ntext = \"Local rule.\"",
                )
                .write_into(root),
        ),
    ]
}

fn fixtures() -> (PluginSet, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let set = load(&fixture_sources(root.path()));
    (set, root)
}

fn main_agent() -> noeta_core::AgentOptions {
    let mut options = agent("main", &["style", "files", "plan"]);
    options.instructions = "You are main.".to_owned();
    options.agents = vec!["helper".to_owned()];
    options
}

#[test]
fn an_agent_compiles_its_tools_fragments_kinds_control_tools_and_roster() {
    let (set, _root) = fixtures();
    let compiled = compile(&set, &main_agent()).unwrap();
    let spec = &compiled.spec;

    assert_eq!(spec.name, "main");
    assert_eq!(spec.plugins, ["files", "plan", "style"]);
    assert_eq!(
        spec.instructions,
        "You are main.\n\nRead before you edit.\n\nUse lists.\n\nBe brief."
    );
    let fragments: Vec<(&str, &str)> = spec
        .prompt_fragments
        .iter()
        .map(|f| (f.plugin.as_str(), f.name.as_str()))
        .collect();
    assert_eq!(
        fragments,
        [("files", "usage"), ("style", "format"), ("style", "tone")]
    );

    let tools: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["grep", "read"]);
    assert!(spec.tools.iter().all(|t| t.plugin.contains("files")));
    assert!(spec.tools.iter().all(|t| t.schema_sha256.len() == 64));
    assert_eq!(compiled.tools.keys().collect::<Vec<_>>(), ["grep", "read"]);

    assert_eq!(
        spec.content_kinds,
        [ContentKindIdentity {
            kind: "notes".to_owned(),
            band: 10,
            plugin: "files".to_owned(),
        }]
    );

    let control: Vec<(&str, i64, &str)> = spec
        .control_tools
        .iter()
        .map(|c| (c.name.as_str(), c.priority, c.plugin.as_str()))
        .collect();
    assert_eq!(
        control,
        [
            ("ask_user", -1, "plan"),
            ("exit_plan", 5, "plan"),
            ("todo_write", 5, "plan")
        ]
    );

    assert_eq!(spec.spawnable, ["helper"]);
    assert_eq!(compiled.roster["helper"].plugins, ["files"]);
    assert_eq!(spec.policy, ComponentRef::new("core", "1"));
}

#[test]
fn a_control_tool_factory_gates_itself_per_agent() {
    let (set, _root) = fixtures();
    let mut reviewer = main_agent();
    reviewer.name = "reviewer".to_owned();
    let compiled = compile(&set, &reviewer).unwrap();
    let control: Vec<&str> = compiled
        .spec
        .control_tools
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(control, ["ask_user", "exit_plan"]);
}

#[test]
fn a_panicking_control_tool_factory_fails_the_agent_naming_plugin_and_contribution() {
    struct Explodes;
    impl ControlToolFactory for Explodes {
        fn build(&self, _ctx: &SessionBuildContext) -> Result<Option<ControlToolMount>, String> {
            panic!("factory exploded")
        }
    }
    let resolver = ResolveWith(|_: &noeta_core::ResolveRequest<'_>| {
        Ok(Resolved::ControlTool(Arc::new(Explodes)))
    });
    let set = load(&[PluginSource::Linked(
        Manifest::new("fragile")
            .with("control_tool", "bang", "")
            .linked("noeta-fragile", resolver),
    )]);
    let err = compile(&set, &agent("main", &["fragile"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `fragile`: control tool factory `bang` panicked while building agent `main`: factory exploded"
    );
}

#[test]
fn always_on_plugins_join_every_agent_when_loaded_and_absent_ones_are_ignored() {
    let (set, _root) = fixtures();
    let rules = ActivationRules {
        always_on: names(&["style", "ghost"]),
        ..ActivationRules::default()
    };
    let compiled = compile_with(&set, &agent("bare", &[]), &rules).unwrap();
    assert_eq!(compiled.spec.plugins, ["style"]);
    assert_eq!(compiled.spec.instructions, "Use lists.\n\nBe brief.");
}

#[test]
fn an_unknown_activation_is_named_with_its_agent_and_the_loaded_set() {
    let (set, _root) = fixtures();
    let err = compile(&set, &agent("main", &["files", "nope"])).unwrap_err();
    assert!(
        matches!(err, CompileError::UnknownActivation { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "unknown plugin activation `nope` on agent `main` — not in the loaded plugin set (loaded: crew, files, local, plan, react-policy, style); load it before activating, or fix the name"
    );
}

#[test]
fn an_unknown_activation_in_a_child_agent_names_the_child_and_its_parent() {
    let (set, _root) = fixtures();
    let mut options = agent("main", &[]);
    options.agents = vec!["lost".to_owned()];
    let err = compile(&set, &options).unwrap_err();
    assert!(
        matches!(&err, CompileError::UnknownActivation { name, agent, .. }
            if name == "ghost-plugin" && agent == "agent `lost` (child of `main`)"),
        "{err:?}"
    );
    assert_mentions(
        &err.to_string(),
        &["unknown plugin activation `ghost-plugin` on agent `lost` (child of `main`)"],
    );
}

#[test]
fn an_unknown_roster_agent_is_named_with_the_known_ones() {
    let (set, _root) = fixtures();
    let mut options = agent("main", &[]);
    options.agents = vec!["nobody".to_owned()];
    let err = compile(&set, &options).unwrap_err();
    assert!(matches!(err, CompileError::UnknownAgent { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "unknown child agent `nobody` on agent `main` (known agents: helper, lost, parent)"
    );

    options.agents = vec!["parent".to_owned()];
    assert_eq!(
        compile(&set, &options).unwrap_err().to_string(),
        "unknown child agent `nobody` on agent `parent` (child of `main`) (known agents: helper, lost, parent)"
    );
}

#[test]
fn agents_contributed_by_an_activated_plugin_join_the_roster_and_internal_ones_stay_hidden() {
    let set = load(&[
        linked(
            &Manifest::new("team")
                .with("agent", "scout", "")
                .with("agent", "__summariser", ""),
        ),
        linked(&Manifest::new("files").with("tool", "read", "")),
    ]);
    let compiled = compile(&set, &agent("main", &["team"])).unwrap();
    assert_eq!(compiled.spec.spawnable, ["scout"]);
    assert_eq!(
        compiled.roster.keys().collect::<Vec<_>>(),
        ["__summariser", "scout"]
    );
    let lone = compile(&set, &agent("lone", &["files"])).unwrap();
    assert!(lone.spec.spawnable.is_empty());
}

#[test]
fn a_single_policy_plugin_sets_the_policy() {
    let (set, _root) = fixtures();
    let compiled = compile(&set, &agent("main", &["react-policy"])).unwrap();
    assert_eq!(compiled.spec.policy, ComponentRef::new("react", "2"));
}

#[test]
fn a_policy_in_the_options_and_an_activated_policy_plugin_conflict() {
    let (set, _root) = fixtures();
    let mut options = agent("main", &["react-policy"]);
    options.policy = Some(ComponentRef::new("custom", "1"));
    let err = compile(&set, &options).unwrap_err();
    assert!(
        matches!(err, CompileError::PolicyConflict { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "policy is single-valued on agent `main` but supplied by the agent's options and active plugin `react-policy` — no override"
    );

    options.plugins.clear();
    assert_eq!(
        compile(&set, &options).unwrap().spec.policy,
        ComponentRef::new("custom", "1")
    );
}

#[test]
fn without_any_policy_the_rules_default_is_pinned() {
    let (set, _root) = fixtures();
    let rules = ActivationRules {
        default_policy: ComponentRef::new("loop", "7"),
        ..ActivationRules::default()
    };
    let compiled = compile_with(&set, &agent("main", &["files"]), &rules).unwrap();
    assert_eq!(compiled.spec.policy, ComponentRef::new("loop", "7"));
}

#[test]
fn a_tool_whose_own_name_differs_from_its_declaration_is_refused() {
    let liar = ResolveWith(|request: &noeta_core::ResolveRequest<'_>| {
        Ok(Resolved::Tool(Arc::new(EchoTool::new(&format!(
            "{}er",
            request.name
        )))))
    });
    let set = load(&[PluginSource::Linked(
        Manifest::new("liar")
            .with("tool", "read", "")
            .linked("noeta-liar", liar),
    )]);
    let err = compile(&set, &agent("main", &["liar"])).unwrap_err();
    assert!(matches!(err, CompileError::NameMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "plugin `liar`: tool `read` declares the name(s) `read` but its value is named `reader`"
    );

    let set = load(&[PluginSource::Linked(
        Manifest::new("liar")
            .with("tool", "search", "tools = [\"grep\", \"glob\"]")
            .linked(
                "noeta-liar",
                ResolveWith(|_: &noeta_core::ResolveRequest<'_>| {
                    Ok(Resolved::Tool(Arc::new(EchoTool::new("find"))))
                }),
            ),
    )]);
    assert_eq!(
        compile(&set, &agent("main", &["liar"]))
            .unwrap_err()
            .to_string(),
        "plugin `liar`: tool `search` declares the name(s) `grep`, `glob` but its value is named `find`"
    );
}

#[test]
fn the_tools_allow_list_keeps_only_the_named_tools() {
    let (set, _root) = fixtures();
    let mut options = main_agent();
    options.tools = Some(vec!["read".to_owned(), "not-offered".to_owned()]);
    let compiled = compile(&set, &options).unwrap();
    assert_eq!(compiled.tools.keys().collect::<Vec<_>>(), ["read"]);
    assert_eq!(compiled.spec.tools.len(), 1);
}

#[test]
fn a_tool_clashing_with_an_mcp_tool_is_refused_naming_both_offerers() {
    let set = load(&[
        linked(&Manifest::new("docs-server").with("mcp_server", "docs", "mcp_tool = \"search\"")),
        linked(&Manifest::new("impostor").with("tool", "mcp__docs__search", "")),
    ]);
    let err = compile(&set, &agent("main", &["impostor"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `mcp__docs__search` on agent `main` is offered by both plugin `impostor` and mcp server `docs` of plugin `docs-server` — no override"
    );
    let fine = compile(&set, &agent("other", &[])).unwrap();
    assert_eq!(fine.tools.keys().collect::<Vec<_>>(), ["mcp__docs__search"]);
}

// --- identity determinism -------------------------------------------------------

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[test]
fn the_identity_hash_is_the_sha256_of_the_canonical_bytes() {
    let (set, _root) = fixtures();
    let spec = compile(&set, &main_agent()).unwrap().spec;
    let hash = spec.identity_hash();
    assert_eq!(hash.len(), 64);
    assert!(
        hash.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)),
        "{hash}"
    );
    assert_eq!(hash, sha256_hex(&spec.canonical_bytes()));
    let parsed: serde_json::Value = serde_json::from_slice(&spec.canonical_bytes()).unwrap();
    assert_eq!(parsed, serde_json::to_value(&spec).unwrap());
}

#[test]
fn identity_is_stable_across_repeated_compiles() {
    let (set, _root) = fixtures();
    let first = compile(&set, &main_agent()).unwrap().spec;
    for _ in 0..3 {
        let again = compile(&set, &main_agent()).unwrap().spec;
        assert_eq!(again.canonical_bytes(), first.canonical_bytes());
        assert_eq!(again.identity_hash(), first.identity_hash());
    }
    let (reloaded, _root2) = fixtures();
    assert_eq!(
        compile(&reloaded, &main_agent())
            .unwrap()
            .spec
            .canonical_bytes(),
        first.canonical_bytes()
    );
}

#[test]
fn identity_does_not_depend_on_the_order_of_the_sources() {
    let root = tempfile::tempdir().unwrap();
    let sources = fixture_sources(root.path());
    let mut options = main_agent();
    options.plugins.push("local".to_owned());
    let reference = compile(&load(&sources), &options).unwrap().spec;
    assert!(reference.instructions.contains("Local rule."));
    for order in permutations(&sources) {
        let spec = compile(&load(&order), &options).unwrap().spec;
        assert_eq!(spec.canonical_bytes(), reference.canonical_bytes());
    }
}

#[test]
fn changing_a_fragment_text_changes_the_identity_hash() {
    let build = |body: &str| {
        let set = load(&[linked(&Manifest::new("style").with(
            "prompt_fragment",
            "tone",
            &format!("body = \"{body}\""),
        ))]);
        compile(&set, &agent("main", &["style"])).unwrap().spec
    };
    let brief = build("Be brief.");
    let verbose = build("Be thorough.");
    assert_eq!(brief.prompt_fragments, verbose.prompt_fragments);
    assert_ne!(brief.identity_hash(), verbose.identity_hash());
    assert_eq!(brief.identity_hash(), build("Be brief.").identity_hash());
}

#[test]
fn an_agent_compiles_with_zero_plugins_loaded() {
    let set = load_plugins(&[], &options()).unwrap();
    assert!(set.names().is_empty());
    let merged = set.merged().unwrap();
    assert_eq!(merged.entries().count(), 0);
    let rules = ActivationRules {
        always_on: names(&["style", "files"]),
        ..ActivationRules::default()
    };
    let mut options = agent("solo", &[]);
    options.instructions = "Alone.".to_owned();
    let compiled = compile_with(&set, &options, &rules).unwrap();
    let spec = &compiled.spec;
    assert_eq!(spec.instructions, "Alone.");
    assert!(spec.plugins.is_empty() && spec.tools.is_empty() && spec.control_tools.is_empty());
    assert_eq!(spec.policy, ComponentRef::new("core", "1"));
    assert_eq!(spec.identity_hash().len(), 64);
}

#[test]
fn an_activated_agent_or_content_kind_must_carry_its_contribution_name() {
    for (surface, label) in [
        ("agent", "agent `crew`"),
        ("content_kind", "content_kind `crew`"),
    ] {
        let set = load(&[linked(&Manifest::new("shop").with(
            surface,
            "crew",
            "value_name = \"other\"",
        ))]);
        let err = compile(&set, &agent("main", &["shop"])).unwrap_err();
        assert!(matches!(err, CompileError::NameMismatch { .. }), "{err}");
        assert_mentions(&err.to_string(), &["plugin `shop`", label, "named `other`"]);
    }
}

#[test]
fn a_skills_path_wins_over_a_ref_on_the_skills_surface() {
    let set = load(&[linked(&Manifest::new("packs").entry(
        "skills",
        "name = \"house\"\npath = \"/opt/house/skills\"\nref = \"packs::house\"",
    ))]);
    let value = set
        .resolve_contribution("packs", "skills", "house")
        .unwrap();
    assert!(
        matches!(value, Resolved::SkillsPath(p) if p == std::path::Path::new("/opt/house/skills"))
    );
}

#[test]
fn a_tool_flagged_past_agent_lists_stays_for_an_agent_whose_list_omits_it() {
    struct Sticky;
    #[async_trait::async_trait]
    impl noeta_core::Tool for Sticky {
        fn name(&self) -> &str {
            "Sticky"
        }
        fn description(&self) -> &str {
            "Always offered."
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn flags(&self) -> noeta_core::ToolFlags {
            let mut flags = noeta_core::ToolFlags::default();
            flags.past_agent_lists = true;
            flags
        }
        async fn run(
            &self,
            _input: serde_json::Value,
            _ctx: &noeta_core::ToolContext,
        ) -> Result<noeta_core::ToolOutput, noeta_core::ToolError> {
            Ok(noeta_core::ToolOutput::text("here"))
        }
    }
    let resolver = ResolveWith(
        |request: &noeta_core::ResolveRequest<'_>| match request.name {
            "Sticky" => Ok(Resolved::Tool(Arc::new(Sticky))),
            _ => crate::support::fixture_value(request),
        },
    );
    let set = load(&[PluginSource::Linked(
        Manifest::new("kit")
            .with("tool", "Sticky", "")
            .with("tool", "Plain", "")
            .linked("noeta-kit", resolver),
    )]);
    let mut options = agent("main", &["kit"]);
    options.tools = Some(vec!["Other".to_owned()]);
    let compiled = compile(&set, &options).unwrap();
    let names: Vec<&str> = compiled
        .spec
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["Sticky"],
        "Plain is filtered out by the list, Sticky is not"
    );
}
