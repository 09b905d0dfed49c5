//! The `requires-noeta` matrix: satisfied, unsatisfied, unsatisfied under strict, and unparseable ranges.

use noeta_core::{
    CompileError, LoadOptions, LoadWarning, Origin, PluginSet, PluginSource, ProblemError,
    load_plugins,
};
use semver::Version;

use crate::support::{Manifest, agent, assert_mentions, compile, options};

/// Writes one on-disk plugin `name` requiring `range` into a fresh user dir and loads it against kernel 1.4.2.
fn load_one(name: &str, range: &str, strict: bool) -> (PluginSet, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    Manifest::new(name)
        .requires(range)
        .entry("prompt_fragment", "name = \"hello\"\ntext = \"Hello.\"")
        .write_into(dir.path());
    let mut options: LoadOptions = options();
    options.kernel_version = Version::new(1, 4, 2);
    options.strict = strict;
    let set = load_plugins(&[PluginSource::UserDir(dir.path().to_path_buf())], &options).unwrap();
    (set, dir)
}

fn manifest_path(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
    dir.path().join(name).join("noeta-plugin.toml")
}

#[test]
fn a_satisfied_range_loads_without_a_warning() {
    for strict in [false, true] {
        let (set, _dir) = load_one("fits", ">=1.0, <2", strict);
        assert_eq!(set.names(), ["fits"]);
        assert!(set.warnings().is_empty(), "{:?}", set.warnings());
        assert!(set.problems().is_empty());
    }
}

#[test]
fn an_unsatisfied_range_warns_quoting_the_range_and_the_kernel_but_still_loads() {
    let (set, dir) = load_one("future", ">=2", false);
    assert_eq!(set.names(), ["future"]);
    let path = manifest_path(&dir, "future");
    assert_eq!(
        set.warnings(),
        [LoadWarning::Unsatisfied {
            plugin: "future".to_owned(),
            origin: Origin::File(path.clone()),
            range: ">=2".to_owned(),
            kernel: Version::new(1, 4, 2),
        }]
    );
    assert_eq!(
        set.warnings()[0].to_string(),
        format!(
            "plugin `future` (file `{}`) requires noeta >=2, but the kernel is 1.4.2 — loading it anyway",
            path.display()
        )
    );
    let compiled = compile(&set, &agent("main", &["future"])).unwrap();
    assert_eq!(compiled.spec.instructions, "Hello.");
}

#[test]
fn an_unsatisfied_range_under_strict_refuses_the_plugin() {
    let (set, dir) = load_one("future", "^2.1", true);
    assert!(set.names().is_empty(), "a refused plugin is not loaded");
    assert!(set.warnings().is_empty());
    let path = manifest_path(&dir, "future");
    let problem = set.problem_for("future").unwrap();
    assert_eq!(problem.origin, Origin::File(path.clone()));
    assert!(
        matches!(&problem.error, ProblemError::Refused { plugin, range, kernel, .. }
            if plugin == "future" && range == "^2.1" && *kernel == Version::new(1, 4, 2)),
        "{:?}",
        problem.error
    );
    let refused = format!(
        "plugin `future` (file `{}`) requires noeta ^2.1, but the kernel is 1.4.2 — refused (strict)",
        path.display()
    );
    assert_eq!(problem.to_string(), refused);

    let err = compile(&set, &agent("main", &["future"])).unwrap_err();
    assert_eq!(
        err,
        CompileError::BrokenPlugin {
            name: "future".to_owned(),
            agent: "agent `main`".to_owned(),
            problem: refused.clone(),
        }
    );
    assert_eq!(
        err.to_string(),
        format!("plugin `future` activated on agent `main` could not be loaded: {refused}")
    );
    compile(&set, &agent("other", &[])).unwrap();
}

#[test]
fn an_unparseable_range_warns_and_is_never_enforced_even_under_strict() {
    for strict in [false, true] {
        let (set, dir) = load_one("vague", "newest please", strict);
        assert_eq!(set.names(), ["vague"], "strict = {strict}");
        assert!(set.problems().is_empty());
        let [LoadWarning::Unparseable { plugin, range, .. }] = set.warnings() else {
            panic!("expected one Unparseable warning, got {:?}", set.warnings());
        };
        assert_eq!(
            (plugin.as_str(), range.as_str()),
            ("vague", "newest please")
        );
        assert_mentions(
            &set.warnings()[0].to_string(),
            &[
                &format!(
                    "plugin `vague` (file `{}`) declares requires-noeta `newest please`, which is not a semver range (",
                    manifest_path(&dir, "vague").display()
                ),
                ") — not enforced",
            ],
        );
    }
}

#[test]
fn a_linked_crate_is_range_checked_like_an_on_disk_plugin() {
    let linked = Manifest::new("old")
        .requires("<1")
        .linked("noeta-old", crate::support::Fixtures);
    let mut options = options();
    options.kernel_version = Version::new(1, 4, 2);
    options.strict = true;
    let set = load_plugins(&[PluginSource::Linked(linked)], &options).unwrap();
    assert!(!set.contains("old"));
    assert_eq!(
        set.problem_for("old").unwrap().to_string(),
        "plugin `old` (crate `noeta-old`) requires noeta <1, but the kernel is 1.4.2 — refused (strict)"
    );
}
