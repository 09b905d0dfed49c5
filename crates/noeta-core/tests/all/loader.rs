//! Loading: sources, shadowing, duplicate names, broken manifests, the allow-list, disabled built-ins and explicit paths.

use std::collections::BTreeMap;

use noeta_core::{
    CompileError, LoadError, LoadWarning, Origin, PluginSet, PluginSource, ProblemError,
    SourceKind, load_plugins,
};

use crate::support::{
    Fixtures, Manifest, Panicking, agent, assert_mentions, compile, linked, load, names, options,
    write_plugin,
};

fn file(path: &std::path::Path) -> Origin {
    Origin::File(path.to_path_buf())
}

#[test]
fn the_user_dir_is_always_loaded() {
    let user = tempfile::tempdir().unwrap();
    Manifest::new("mine")
        .entry("prompt_fragment", "name = \"hi\"\ntext = \"Hi.\"")
        .write_into(user.path());
    std::fs::create_dir(user.path().join("not-a-plugin")).unwrap();
    let set = load(&[PluginSource::UserDir(user.path().to_path_buf())]);
    assert_eq!(set.names(), ["mine"]);
    let mine = set.get("mine").unwrap();
    assert_eq!(mine.source, SourceKind::User);
    assert_eq!(
        mine.origin,
        file(&user.path().join("mine/noeta-plugin.toml"))
    );
    assert!(!mine.has_resolver());
    assert!(set.warnings().is_empty() && set.problems().is_empty());
}

#[test]
fn a_missing_user_or_workspace_dir_loads_nothing_quietly() {
    let root = tempfile::tempdir().unwrap();
    let set = load(&[
        PluginSource::UserDir(root.path().join("nowhere")),
        PluginSource::WorkspaceDir(root.path().join("ws/.noeta/plugins")),
    ]);
    assert!(set.names().is_empty());
    assert!(set.warnings().is_empty() && set.problems().is_empty());
}

#[test]
fn a_linked_crate_shadows_an_on_disk_plugin_of_the_same_name() {
    let user = tempfile::tempdir().unwrap();
    let shared =
        Manifest::new("shared").entry("prompt_fragment", "name = \"disk\"\ntext = \"From disk.\"");
    shared.write_into(user.path());
    let crate_side = Manifest::new("shared").with("tool", "read", "");
    let set = load(&[
        PluginSource::UserDir(user.path().to_path_buf()),
        PluginSource::Linked(crate_side.linked("noeta-shared", Fixtures)),
    ]);
    let winner = set.get("shared").unwrap();
    assert_eq!(winner.source, SourceKind::Crate);
    assert!(winner.has_resolver());
    assert_eq!(winner.manifest.contributions[0].surface, "tool");

    let on_disk = user.path().join("shared/noeta-plugin.toml");
    assert_eq!(
        set.warnings(),
        [LoadWarning::Shadowed {
            plugin: "shared".to_owned(),
            linked: Origin::Crate("noeta-shared".to_owned()),
            on_disk: file(&on_disk),
        }]
    );
    assert_eq!(
        set.warnings()[0].to_string(),
        format!(
            "plugin `shared` from crate `noeta-shared` shadows the on-disk plugin of the same name at file `{}`, which is ignored",
            on_disk.display()
        )
    );
}

#[test]
fn a_linked_crate_also_shadows_a_broken_on_disk_manifest_under_its_name() {
    let user = tempfile::tempdir().unwrap();
    let broken = write_plugin(user.path(), "shared", "name = ");
    let set = load(&[
        PluginSource::Linked(Manifest::new("shared").linked("noeta-shared", Fixtures)),
        PluginSource::UserDir(user.path().to_path_buf()),
    ]);
    assert!(set.problems().is_empty());
    assert_eq!(set.get("shared").unwrap().source, SourceKind::Crate);
    assert_mentions(
        &set.warnings()[0].to_string(),
        &[
            "plugin `shared` from crate `noeta-shared`",
            &broken.join("noeta-plugin.toml").display().to_string(),
        ],
    );
}

#[test]
fn two_on_disk_plugins_with_one_name_are_an_error_naming_both_files() {
    let user = tempfile::tempdir().unwrap();
    write_plugin(user.path(), "two", &Manifest::new("same").text());
    write_plugin(user.path(), "one", &Manifest::new("same").text());
    let err = load_plugins(
        &[PluginSource::UserDir(user.path().to_path_buf())],
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::DuplicateName { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "duplicate plugin name `same`: found in both file `{}` and file `{}`",
            user.path().join("one/noeta-plugin.toml").display(),
            user.path().join("two/noeta-plugin.toml").display()
        )
    );
}

#[test]
fn two_linked_crates_with_one_name_are_an_error_naming_both_crates() {
    let twin = Manifest::new("twin");
    let err = load_plugins(
        &[
            PluginSource::Linked(twin.linked("noeta-twin-b", Fixtures)),
            PluginSource::Linked(twin.linked("noeta-twin-a", Fixtures).as_builtin()),
        ],
        &options(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "duplicate plugin name `twin`: found in both crate `noeta-twin-a` and crate `noeta-twin-b`"
    );
}

#[test]
fn a_broken_on_disk_manifest_is_a_problem_that_fails_only_the_agents_activating_it() {
    let user = tempfile::tempdir().unwrap();
    write_plugin(
        user.path(),
        "broken",
        "name = \"broken\"\nversion = \"one\"\n",
    );
    Manifest::new("good")
        .entry("prompt_fragment", "name = \"hi\"\ntext = \"Hi.\"")
        .write_into(user.path());
    let set = load(&[PluginSource::UserDir(user.path().to_path_buf())]);
    assert_eq!(set.names(), ["good"]);

    let path = user.path().join("broken/noeta-plugin.toml");
    let [problem] = set.problems() else {
        panic!("expected one problem, got {:?}", set.problems());
    };
    assert_eq!(problem.plugin.as_deref(), Some("broken"));
    assert_eq!(problem.origin, file(&path));
    assert_eq!(problem.source, SourceKind::User);
    assert!(matches!(problem.error, ProblemError::Manifest(_)));
    let reason = problem.to_string();
    assert_mentions(
        &reason,
        &[
            &format!("manifest file `{}` (plugin `broken`)", path.display()),
            "field `version`",
        ],
    );

    let err = compile(&set, &agent("main", &["good", "broken"])).unwrap_err();
    assert_eq!(
        err,
        CompileError::BrokenPlugin {
            name: "broken".to_owned(),
            agent: "agent `main`".to_owned(),
            problem: reason.clone(),
        }
    );
    assert_mentions(
        &err.to_string(),
        &[
            "plugin `broken` activated on agent `main` could not be loaded",
            &path.display().to_string(),
        ],
    );
    let fine = compile(&set, &agent("other", &["good"])).unwrap();
    assert_eq!(fine.spec.instructions, "Hi.");
}

#[test]
fn a_broken_manifest_is_named_after_its_directory_even_when_its_name_is_unreadable() {
    let user = tempfile::tempdir().unwrap();
    write_plugin(user.path(), "garbled", "this is = = not toml");
    let set = load(&[PluginSource::UserDir(user.path().to_path_buf())]);
    let problem = set.problem_for("garbled").unwrap();
    assert_mentions(
        &problem.to_string(),
        &["is not valid TOML", "garbled/noeta-plugin.toml"],
    );
}

#[test]
fn the_enabled_allow_list_drops_unlisted_third_party_plugins_before_anything_resolves() {
    let user = tempfile::tempdir().unwrap();
    // An unlisted guard would be resolved for every agent — and its resolver panics — if it were loaded.
    let unwanted = Manifest::new("unwanted").with("guard", "trap", "");
    let stray = Manifest::new("stray").entry("guard", "name = \"trap\"\nref = \"stray::Trap\"");
    stray.write_into(user.path());
    write_plugin(user.path(), "stray-broken", "not toml at all = =");
    let mut options = options();
    options.enabled = Some(names(&["wanted"]));
    let set = load_plugins(
        &[
            PluginSource::Linked(
                unwanted.linked("noeta-unwanted", Panicking("unwanted was resolved")),
            ),
            linked(&Manifest::new("wanted").with("tool", "read", "")),
            PluginSource::Linked(
                Manifest::new("core-ish")
                    .with("prompt_fragment", "base", "body = \"Base.\"")
                    .linked("noeta-core-ish", Fixtures)
                    .as_builtin(),
            ),
            PluginSource::UserDir(user.path().to_path_buf()),
        ],
        &options,
    )
    .unwrap();
    assert_eq!(
        set.names(),
        ["core-ish", "wanted"],
        "built-ins are not governed by `enabled`"
    );
    assert!(
        set.problems().is_empty(),
        "an unlisted broken plugin is dropped too"
    );

    let compiled = compile(&set, &agent("main", &["wanted", "core-ish"])).unwrap();
    assert_eq!(compiled.tools.keys().collect::<Vec<_>>(), ["read"]);
    assert_eq!(compiled.spec.instructions, "Base.");
    let err = compile(&set, &agent("main", &["unwanted"])).unwrap_err();
    assert!(
        matches!(err, CompileError::UnknownActivation { .. }),
        "{err:?}"
    );
}

#[test]
fn the_disabled_deny_list_drops_third_party_plugins_in_the_same_load_and_beats_enabled() {
    let user = tempfile::tempdir().unwrap();
    // Switched off, a broken on-disk plugin is not even read.
    write_plugin(user.path(), "off-broken", "not toml at all = =");
    let off = Manifest::new("off").with("guard", "trap", "");
    let mut options = options();
    options.enabled = Some(names(&["on", "off"]));
    options.disabled = names(&["off", "off-broken", "core-ish"]);
    let set = load_plugins(
        &[
            PluginSource::Linked(
                off.linked("noeta-off", Panicking("a disabled plugin was resolved")),
            ),
            linked(&Manifest::new("on").with("tool", "read", "")),
            PluginSource::Linked(
                Manifest::new("core-ish")
                    .with("prompt_fragment", "base", "body = \"Base.\"")
                    .linked("noeta-core-ish", Fixtures)
                    .as_builtin(),
            ),
            PluginSource::UserDir(user.path().to_path_buf()),
        ],
        &options,
    )
    .unwrap();
    assert_eq!(
        set.names(),
        ["core-ish", "on"],
        "built-ins are governed by `disabled_builtins`, not `disabled`"
    );
    assert!(set.problems().is_empty(), "{:?}", set.problems());
    compile(&set, &agent("main", &["on"])).unwrap();
}

/// `other` beside a built-in `extras` that the host switched off (resolving it would panic).
fn with_extras_disabled(other: &Manifest) -> PluginSet {
    let extras = Manifest::new("extras").with("guard", "trap", "");
    let mut options = options();
    options.disabled_builtins = names(&["extras"]);
    load_plugins(
        &[
            PluginSource::Linked(
                extras
                    .linked(
                        "noeta-extras",
                        Panicking("a disabled built-in was resolved"),
                    )
                    .as_builtin(),
            ),
            linked(other),
        ],
        &options,
    )
    .unwrap()
}

#[test]
fn a_disabled_builtin_is_dropped_remembered_and_refused_on_activation() {
    let set = with_extras_disabled(&Manifest::new("other"));
    assert_eq!(set.names(), ["other"]);
    assert_eq!(set.disabled_builtins(), &names(&["extras"]));
    compile(&set, &agent("main", &["other"])).unwrap();

    let err = compile(&set, &agent("main", &["extras"])).unwrap_err();
    assert_eq!(
        err,
        CompileError::Disabled {
            name: "extras".to_owned(),
            agent: "agent `main`".to_owned(),
        }
    );
    assert_eq!(
        err.to_string(),
        "plugin `extras` activated on agent `main` is disabled (disabled_builtins)"
    );
}

#[test]
fn a_roster_child_naming_a_disabled_builtin_does_not_keep_its_parent_from_compiling() {
    let crew = Manifest::new("crew").with("agent", "helper", "agent_plugins = [\"extras\"]");
    let set = with_extras_disabled(&crew);
    let mut main = agent("main", &[]);
    main.agents = vec!["helper".to_owned()];
    let compiled = compile(&set, &main).unwrap();
    assert_eq!(compiled.spec.spawnable, ["helper"]);
    // The child itself still cannot activate it.
    let err = compile(&set, &agent("helper", &["extras"])).unwrap_err();
    assert!(matches!(err, CompileError::Disabled { .. }), "{err:?}");
}

#[test]
fn disabled_builtins_only_touch_builtins() {
    let mut options = options();
    options.disabled_builtins = names(&["thirdparty"]);
    let set = load_plugins(&[linked(&Manifest::new("thirdparty"))], &options).unwrap();
    assert_eq!(set.names(), ["thirdparty"]);
}

#[test]
fn a_non_removable_builtin_cannot_be_disabled() {
    let mut options = options();
    options.disabled_builtins = names(&["react"]);
    options.non_removable =
        BTreeMap::from([("react".to_owned(), "it is the default policy".to_owned())]);
    let err = load_plugins(
        &[PluginSource::Linked(
            Manifest::new("react")
                .linked("noeta-react", Fixtures)
                .as_builtin(),
        )],
        &options,
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::NonRemovable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "built-in `react` cannot be disabled: it is the default policy"
    );
}

#[test]
fn an_invalid_linked_manifest_stops_loading_naming_the_crate() {
    let err = load_plugins(
        &[PluginSource::Linked(
            Manifest::new("bad")
                .top("version = \"x\"")
                .linked("noeta-bad", Fixtures),
        )],
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::LinkedManifest(_)), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &[
            "linked plugin manifest is invalid: manifest crate `noeta-bad` (plugin `bad`): field `version`",
        ],
    );
}

#[test]
fn an_explicit_path_may_name_a_manifest_file_of_any_name() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("custom.toml");
    std::fs::write(&path, Manifest::new("custom").text()).unwrap();
    let set = load(&[PluginSource::Path(path.clone())]);
    let custom = set.get("custom").unwrap();
    assert_eq!(custom.source, SourceKind::Path);
    assert_eq!(custom.origin, file(&path));
}

#[test]
fn an_explicit_path_may_name_a_plugin_dir() {
    let root = tempfile::tempdir().unwrap();
    let dir = Manifest::new("dirred").write_into(root.path());
    let set = load(&[PluginSource::Path(dir.clone())]);
    assert_eq!(
        set.get("dirred").unwrap().origin,
        file(&dir.join("noeta-plugin.toml"))
    );
}

#[test]
fn an_explicit_path_may_name_a_crate_dir_with_package_metadata() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("noeta-cargoish");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"noeta-cargoish\"\nversion = \"0.7.1\"\n\n[package.metadata.noeta]\nname = \"cargoish\"\n\n[[package.metadata.noeta.contributions]]\nsurface = \"prompt_fragment\"\nname = \"hello\"\ntext = \"Hello from Cargo.\"\n",
    )
    .unwrap();
    let set = load(&[PluginSource::Path(dir.clone())]);
    let plugin = set.get("cargoish").unwrap();
    assert_eq!(plugin.manifest.version.as_deref(), Some("0.7.1"));
    assert_eq!(plugin.origin, file(&dir.join("Cargo.toml")));
    let compiled = compile(&set, &agent("main", &["cargoish"])).unwrap();
    assert_eq!(compiled.spec.instructions, "Hello from Cargo.");
}

#[test]
fn an_explicit_path_may_name_a_directory_of_plugin_dirs() {
    let root = tempfile::tempdir().unwrap();
    for name in ["gamma", "alpha", "beta"] {
        Manifest::new(name).write_into(root.path());
    }
    let set = load(&[PluginSource::Path(root.path().to_path_buf())]);
    assert_eq!(set.names(), ["alpha", "beta", "gamma"]);
    assert!(set.plugins().all(|p| p.source == SourceKind::Path));
}

#[test]
fn a_missing_explicit_path_is_a_problem_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("ghost/noeta-plugin.toml");
    let set = load(&[PluginSource::Path(path.clone())]);
    assert!(set.names().is_empty());
    let problem = set.problem_for("ghost").unwrap();
    assert_eq!(problem.origin, file(&path));
    assert_eq!(problem.source, SourceKind::Path);
    assert_mentions(
        &problem.to_string(),
        &[&format!("cannot read manifest file `{}`", path.display())],
    );
}

#[test]
fn the_loaded_set_is_keyed_and_listed_by_plugin_name() {
    let set = load(&[
        linked(&Manifest::new("zeta")),
        PluginSource::Linked(
            Manifest::new("alpha")
                .linked("noeta-alpha", Fixtures)
                .as_builtin(),
        ),
        linked(&Manifest::new("mid")),
    ]);
    assert_eq!(set.names(), ["alpha", "mid", "zeta"]);
    let kinds: Vec<&str> = set.plugins().map(|p| p.source.as_str()).collect();
    assert_eq!(kinds, ["builtin", "crate", "crate"]);
    assert!(set.plugins().all(|p| p.source.is_linked()));
    assert!(set.contains("mid") && !set.contains("missing"));
    assert_eq!(set.registry().names().len(), 16);
}

#[test]
fn one_manifest_reached_through_two_sources_is_read_once() {
    let root = tempfile::tempdir().unwrap();
    let user = root.path().join("user");
    let dir = Manifest::new("twice").write_into(&user);
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let set = load(&[
        PluginSource::UserDir(user.clone()),
        PluginSource::Path(dir.join("noeta-plugin.toml")),
        PluginSource::Path(link),
    ]);
    assert_eq!(set.names(), ["twice"]);
    assert!(set.problems().is_empty() && set.warnings().is_empty());
}

#[test]
fn a_missing_explicit_path_without_a_manifest_name_is_named_after_itself() {
    let root = tempfile::tempdir().unwrap();
    let set = load(&[PluginSource::Path(root.path().join("foo"))]);
    assert!(set.problem_for("foo").is_some());
    let err = compile(&set, &agent("main", &["foo"])).unwrap_err();
    assert!(matches!(err, CompileError::BrokenPlugin { .. }), "{err}");
}

#[test]
fn an_always_on_plugin_that_failed_to_load_fails_every_agent_loudly() {
    let root = tempfile::tempdir().unwrap();
    write_plugin(
        root.path(),
        "guardian",
        "name = \"guardian\"\n[[contributions]]\nref = \"x\"\n",
    );
    let set = load(&[PluginSource::UserDir(root.path().to_path_buf())]);
    let merged = set.merged().unwrap();
    let rules = noeta_core::ActivationRules {
        always_on: names(&["guardian", "absent"]),
        ..noeta_core::ActivationRules::default()
    };
    let err = noeta_core::compile_agent(&set, &merged, &agent("main", &[]), &rules).unwrap_err();
    assert!(matches!(err, CompileError::BrokenPlugin { .. }), "{err}");
    assert_mentions(
        &err.to_string(),
        &["plugin `guardian`", "agent `main`", "contribution #1"],
    );
}

#[test]
fn a_broken_manifest_that_names_itself_is_filed_under_that_name() {
    let root = tempfile::tempdir().unwrap();
    write_plugin(
        root.path(),
        "dir-name",
        "name = \"real-name\"\nversion = \"one\"\n",
    );
    let set = load(&[PluginSource::UserDir(root.path().to_path_buf())]);
    assert!(set.problem_for("real-name").is_some());
    let err = compile(&set, &agent("main", &["real-name"])).unwrap_err();
    assert!(matches!(err, CompileError::BrokenPlugin { .. }), "{err}");
    assert_mentions(
        &err.to_string(),
        &["`version`", "`one` is not a semver version"],
    );
}
