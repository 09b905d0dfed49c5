//! Resolution: panics contained, memoisation, scope of `resolve_for`, plugins without resolvers, and validation.

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use noeta_core::{CompileError, PluginSource, ResolveError, Resolved};

use crate::support::{
    Counting, Fixtures, Manifest, Panicking, ResolveWith, agent, assert_mentions, compile, linked,
    load, names,
};

#[test]
fn a_panicking_resolver_is_loaded_listed_and_merged_without_firing() {
    let boom = Manifest::new("boom").entry("tool", "ref = \"boom::tools::Blast\"");
    let set = load(&[PluginSource::Linked(
        boom.linked("noeta-boom", Panicking("kaboom")),
    )]);

    let listed: Vec<&str> = set.plugins().map(|p| p.name()).collect();
    assert_eq!(listed, ["boom"]);
    let contribution = &set.get("boom").unwrap().manifest.contributions[0];
    assert_eq!(
        (contribution.surface.as_str(), contribution.name.as_str()),
        ("tool", "Blast")
    );
    let merged = set.merged().unwrap();
    assert_eq!(merged.for_surface("tool").len(), 1);

    let err = set
        .resolve_contribution("boom", "tool", "Blast")
        .unwrap_err();
    assert_eq!(
        err,
        ResolveError::Panicked {
            plugin: "boom".to_owned(),
            surface: "tool".to_owned(),
            name: "Blast".to_owned(),
            reference: "boom::tools::Blast".to_owned(),
            message: "kaboom".to_owned(),
        }
    );
    assert_eq!(
        err.to_string(),
        "plugin `boom`: resolving ref `boom::tools::Blast` of tool `Blast` panicked: kaboom"
    );

    let err = compile(&set, &agent("main", &["boom"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "agent `main` cannot be built: plugin `boom`: resolving ref `boom::tools::Blast` of tool `Blast` panicked: kaboom"
    );
    compile(&set, &agent("bystander", &[])).unwrap();
}

#[test]
fn each_contribution_is_resolved_at_most_once_including_failures() {
    let counting = Counting::new(ResolveWith(|request: &noeta_core::ResolveRequest<'_>| {
        if request.name == "missing" {
            Err("no such thing".to_owned())
        } else {
            crate::support::fixture_value(request)
        }
    }));
    let manifest = Manifest::new("memo")
        .with("tool", "read", "")
        .with("prompt_fragment", "style", "body = \"Be brief.\"")
        .with("guard", "check", "")
        .with("reminder", "missing", "");
    let set = load(&[PluginSource::Linked(
        manifest.linked("noeta-memo", counting.clone()),
    )]);
    let merged = set.merged().unwrap();

    for _ in 0..3 {
        set.resolve_contribution("memo", "tool", "read").unwrap();
        set.resolve_for(&merged, &names(&["memo"])).unwrap_err();
        set.resolve_for(&merged, &names(&[])).unwrap();
        compile(&set, &agent("main", &[])).unwrap();
        compile(&set, &agent("main", &["memo"])).unwrap_err();
    }
    let first = set
        .resolve_contribution("memo", "reminder", "missing")
        .unwrap_err();
    let again = set
        .resolve_contribution("memo", "reminder", "missing")
        .unwrap_err();
    assert_eq!(first, again);
    assert_eq!(
        first.to_string(),
        "plugin `memo`: ref `memo::missing` of reminder `missing` failed to resolve: no such thing"
    );

    for reference in ["memo::read", "memo::style", "memo::check", "memo::missing"] {
        assert_eq!(counting.calls(reference), 1, "{reference}");
    }
    assert_eq!(counting.total(), 4);
}

#[test]
fn concurrent_first_resolutions_still_call_the_resolver_once() {
    let counting = Counting::new(ResolveWith(|request: &noeta_core::ResolveRequest<'_>| {
        std::thread::sleep(Duration::from_millis(200));
        crate::support::fixture_value(request)
    }));
    let manifest = Manifest::new("slow").with("tool", "read", "");
    let set = Arc::new(load(&[PluginSource::Linked(
        manifest.linked("noeta-slow", counting.clone()),
    )]));
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (set, start) = (Arc::clone(&set), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                set.resolve_contribution("slow", "tool", "read")
                    .map(|_| ())
                    .map_err(|err| err.to_string())
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap().unwrap();
    }
    assert_eq!(counting.calls("slow::read"), 1);
}

#[test]
fn resolve_for_touches_per_agent_surfaces_of_activated_plugins_only() {
    let idle = Counting::new(Fixtures);
    let active = Counting::new(Fixtures);
    let set = load(&[
        PluginSource::Linked(
            Manifest::new("idle")
                .with("tool", "hammer", "")
                .with("reminder", "nag", "")
                .with("guard", "gate", "")
                .with("observer", "eye", "")
                .with("mcp_server", "docs", "")
                .entry(
                    "skills",
                    "name = \"pack\"\nref = \"idle::pack\"\npath = \"/srv/skills/pack\"",
                )
                .with("provider", "model", "")
                .with("sandbox_provider", "box", "")
                .linked("noeta-idle", idle.clone()),
        ),
        PluginSource::Linked(
            Manifest::new("active")
                .with("tool", "read", "")
                .with("session_pack", "pack", "")
                .linked("noeta-active", active.clone()),
        ),
    ]);
    let merged = set.merged().unwrap();
    let resolution = set.resolve_for(&merged, &names(&["active"])).unwrap();

    assert_eq!(active.calls("active::read"), 1);
    assert_eq!(active.calls("active::pack"), 1);
    for untouched in ["idle::hammer", "idle::nag", "idle::model", "idle::box"] {
        assert_eq!(idle.calls(untouched), 0, "{untouched} must not be resolved");
    }
    // A skills contribution is its path: the resolver is never asked, even with a ref.
    assert_eq!(idle.calls("idle::pack"), 0);
    for process_or_auto in ["idle::gate", "idle::eye", "idle::docs"] {
        assert_eq!(
            idle.calls(process_or_auto),
            1,
            "{process_or_auto} must be resolved"
        );
    }
    let surfaces: Vec<&str> = resolution.surfaces().collect();
    assert_eq!(
        surfaces,
        [
            "guard",
            "mcp_server",
            "observer",
            "session_pack",
            "skills",
            "tool"
        ]
    );
    assert_eq!(resolution.for_surface("guard")[0].plugin, "idle");
    assert!(resolution.for_surface("provider").is_empty());
    assert!(resolution.for_surface("sandbox_provider").is_empty());

    // The host asks for a provider explicitly.
    let provider = set
        .resolve_contribution("idle", "provider", "model")
        .unwrap();
    assert!(matches!(provider, Resolved::Provider(_)));
    assert_eq!(idle.calls("idle::model"), 1);
}

#[test]
fn a_non_activated_plugin_with_a_panicking_resolver_is_never_resolved_for_per_agent_surfaces() {
    let set = load(&[
        PluginSource::Linked(
            Manifest::new("dormant")
                .with("tool", "hammer", "")
                .with("prompt_fragment", "loud", "")
                .with("policy", "odd", "")
                .linked("noeta-dormant", Panicking("dormant was resolved")),
        ),
        linked(&Manifest::new("awake").with("tool", "read", "")),
    ]);
    let compiled = compile(&set, &agent("main", &["awake"])).unwrap();
    assert_eq!(compiled.tools.keys().collect::<Vec<_>>(), ["read"]);
}

fn on_disk(manifest: &Manifest) -> (tempfile::TempDir, PluginSource, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = manifest.write_into(root.path());
    let file = dir.join("noeta-plugin.toml");
    (root, PluginSource::Path(dir), file)
}

#[test]
fn an_on_disk_ref_has_no_resolver_and_fails_only_agents_activating_it() {
    let (_root, source, file) =
        on_disk(&Manifest::new("ondisk").entry("tool", "ref = \"ondisk::tools::Read\""));
    let set = load(&[
        source,
        linked(&Manifest::new("other").with("tool", "grep", "")),
    ]);

    let err = set
        .resolve_contribution("ondisk", "tool", "Read")
        .unwrap_err();
    let expected = format!(
        "plugin `ondisk` (file `{}`): ref `ondisk::tools::Read` of tool `Read` cannot be resolved — no compiled resolver knows it (the plugin is not linked into this host)",
        file.display()
    );
    assert!(matches!(err, ResolveError::NoResolver { .. }), "{err:?}");
    assert_eq!(err.to_string(), expected);

    let err = compile(&set, &agent("main", &["ondisk"])).unwrap_err();
    assert!(
        matches!(&err, CompileError::Resolve { agent, errors } if agent == "agent `main`" && errors.len() == 1),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("agent `main` cannot be built: {expected}")
    );
    compile(&set, &agent("other-agent", &["other"])).unwrap();
}

#[test]
fn an_unresolvable_guard_or_observer_fails_every_agent() {
    for surface in ["guard", "observer"] {
        let (_root, source, _file) = on_disk(&Manifest::new("watcher").entry(
            surface,
            &format!("name = \"w\"\nref = \"watcher::{surface}\""),
        ));
        let set = load(&[source, linked(&Manifest::new("other"))]);
        for options in [
            agent("main", &[]),
            agent("main", &["other"]),
            agent("child", &["watcher"]),
        ] {
            let err = compile(&set, &options).unwrap_err();
            assert_mentions(
                &err.to_string(),
                &[
                    &format!("agent `{}` cannot be built", options.name),
                    "plugin `watcher`",
                    &format!("ref `watcher::{surface}` of {surface} `w` cannot be resolved"),
                ],
            );
        }
    }
}

#[test]
fn literal_prompt_text_and_skills_paths_resolve_without_a_resolver() {
    let (_root, source, _file) = on_disk(
        &Manifest::new("docs")
            .entry(
                "prompt_fragment",
                "name = \"house-style\"\ntext = \"Write plainly.\"",
            )
            .entry("skills", "path = \"/srv/skills/docs\""),
    );
    let set = load(&[source]);
    assert!(!set.get("docs").unwrap().has_resolver());
    let compiled = compile(&set, &agent("main", &["docs"])).unwrap();
    assert_eq!(compiled.spec.instructions, "Write plainly.");
    let skills = compiled.resolution.for_surface("skills");
    assert!(
        matches!(&skills[0].value, Resolved::SkillsPath(p) if p == &PathBuf::from("/srv/skills/docs")),
        "{skills:?}"
    );
    // Skills are host-wired and auto-consumed: an agent that does not activate `docs` gets them too.
    let bystander = compile(&set, &agent("bystander", &[])).unwrap();
    assert_eq!(bystander.resolution.for_surface("skills").len(), 1);
    assert_eq!(bystander.spec.instructions, "");
}

#[test]
fn a_contribution_with_nothing_to_resolve_is_named() {
    let (_root, source, _file) = on_disk(&Manifest::new("bare").entry("tool", "name = \"idle\""));
    let set = load(&[source]);
    let err = set
        .resolve_contribution("bare", "tool", "idle")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "plugin `bare`: tool `idle` has neither a ref, a path, nor a literal `text` to resolve"
    );
}

#[test]
fn a_value_of_the_wrong_kind_fails_validation_naming_plugin_surface_and_contribution() {
    let wrong = ResolveWith(
        |request: &noeta_core::ResolveRequest<'_>| match request.name {
            "hammer" => Ok(Resolved::PromptFragment("not a tool".to_owned())),
            "blank" => Ok(Resolved::PromptFragment("  \n".to_owned())),
            _ => Ok(Resolved::SkillsPath(PathBuf::from("relative/skills"))),
        },
    );
    let set = load(&[PluginSource::Linked(
        Manifest::new("wrong")
            .with("tool", "hammer", "")
            .with("prompt_fragment", "blank", "")
            .with("agent", "rel", "")
            .linked("noeta-wrong", wrong),
    )]);
    let cases = [
        (
            "tool",
            "hammer",
            "plugin `wrong`: contribution `hammer` to surface `tool` failed validation: illegal contribution value (must be a tool); got a prompt fragment",
        ),
        (
            "prompt_fragment",
            "blank",
            "plugin `wrong`: contribution `blank` to surface `prompt_fragment` failed validation: illegal contribution value (the prompt text is empty)",
        ),
        (
            "agent",
            "rel",
            "plugin `wrong`: contribution `rel` to surface `agent` failed validation: illegal contribution value (must be an agent definition); got a skills path",
        ),
    ];
    for (surface, name, message) in cases {
        let err = set
            .resolve_contribution("wrong", surface, name)
            .unwrap_err();
        assert!(matches!(err, ResolveError::Invalid { .. }), "{err:?}");
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn an_empty_literal_fragment_fails_validation_too() {
    let (_root, source, _file) = on_disk(
        &Manifest::new("hollow").entry("prompt_fragment", "name = \"nothing\"\ntext = \" \""),
    );
    let set = load(&[source]);
    let err = compile(&set, &agent("main", &["hollow"])).unwrap_err();
    assert_mentions(
        &err.to_string(),
        &[
            "agent `main`",
            "plugin `hollow`",
            "contribution `nothing`",
            "surface `prompt_fragment`",
            "the prompt text is empty",
        ],
    );
}

#[test]
fn unknown_plugins_and_contributions_are_named() {
    let set = load(&[linked(&Manifest::new("known").with("tool", "read", ""))]);
    assert_eq!(
        set.resolve_contribution("unknown", "tool", "read")
            .unwrap_err()
            .to_string(),
        "no loaded plugin named `unknown`"
    );
    assert_eq!(
        set.resolve_contribution("known", "tool", "write")
            .unwrap_err()
            .to_string(),
        "plugin `known` declares no tool `write`"
    );
}

#[test]
fn resolve_everything_reports_every_unresolvable_ref() {
    let (_root, source, _file) = on_disk(
        &Manifest::new("disk")
            .entry("tool", "ref = \"disk::A\"")
            .entry("provider", "ref = \"disk::B\"")
            .entry("prompt_fragment", "name = \"ok\"\ntext = \"Fine.\""),
    );
    let set = load(&[
        source,
        PluginSource::Linked(
            Manifest::new("boom")
                .with("sandbox_provider", "box", "")
                .linked("noeta-boom", Panicking("no sandbox")),
        ),
        linked(
            &Manifest::new("fine")
                .with("tool", "read", "")
                .with("mcp_server", "docs", ""),
        ),
    ]);
    let merged = set.merged().unwrap();
    let errors = set.resolve_everything(&merged);
    let mut messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    messages.sort();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_mentions(
        &messages[0],
        &[
            "plugin `boom`",
            "ref `boom::box` of sandbox_provider `box` panicked: no sandbox",
        ],
    );
    assert_mentions(
        &messages[1],
        &[
            "plugin `disk`",
            "ref `disk::A` of tool `A` cannot be resolved",
        ],
    );
    assert_mentions(
        &messages[2],
        &[
            "plugin `disk`",
            "ref `disk::B` of provider `B` cannot be resolved",
        ],
    );
}
