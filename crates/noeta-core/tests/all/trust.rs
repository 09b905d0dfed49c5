//! The trust store and workspace plugin directories: untrusted skips, malformed stores, grants, symlinks and `~`.

use std::path::{Path, PathBuf};

use noeta_core::{LoadWarning, PluginSource, SourceKind, TrustError, TrustStore, load_plugins};

use crate::support::{Manifest, assert_mentions, options};

/// A scratch area: `home/`, a trust store path under it, and a workspace with one plugin.
struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let scratch = Self {
            root: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(scratch.home()).unwrap();
        Manifest::new("local")
            .entry("prompt_fragment", "name = \"hi\"\ntext = \"Hi.\"")
            .write_into(&scratch.plugins());
        scratch
    }

    /// The real (symlink-free) scratch root, so expectations match canonical paths.
    fn base(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path()).unwrap()
    }

    fn home(&self) -> PathBuf {
        self.base().join("home")
    }

    fn store_path(&self) -> PathBuf {
        self.home().join(".noeta/trust.json")
    }

    fn workspace(&self) -> PathBuf {
        self.base().join("ws")
    }

    fn plugins(&self) -> PathBuf {
        self.workspace().join(".noeta/plugins")
    }

    fn store(&self) -> TrustStore {
        TrustStore::load(&self.store_path(), &self.home()).unwrap()
    }

    fn load_workspace(&self, trust: TrustStore) -> noeta_core::PluginSet {
        let mut options = options();
        options.trust = trust;
        load_plugins(&[PluginSource::WorkspaceDir(self.plugins())], &options).unwrap()
    }
}

#[test]
fn a_missing_store_trusts_nothing_and_the_workspace_dir_is_skipped_with_a_warning() {
    let scratch = Scratch::new();
    let store = scratch.store();
    assert_eq!(store.trusted().count(), 0);
    assert!(!store.is_trusted(&scratch.plugins()));

    let set = scratch.load_workspace(store);
    assert!(set.names().is_empty());
    assert_eq!(
        set.warnings(),
        [LoadWarning::Untrusted {
            dir: scratch.plugins(),
            store: scratch.store_path(),
            why: None,
        }]
    );
    let dir = scratch.plugins().display().to_string();
    assert_eq!(
        set.warnings()[0].to_string(),
        format!(
            "skipping untrusted workspace plugin directory `{dir}` — run `noeta trust {dir}` to load its plugins (trust store `{}`)",
            scratch.store_path().display()
        )
    );
    assert!(
        !scratch.store_path().exists(),
        "loading never writes the store"
    );
}

#[test]
fn a_malformed_store_is_an_error_naming_its_path() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.store_path().parent().unwrap()).unwrap();
    for text in [
        "not json",
        "{\"trusted\": \"/ws\"}",
        "{\"trusted\": [], \"extra\": 1}",
        "[]",
    ] {
        std::fs::write(scratch.store_path(), text).unwrap();
        let err = TrustStore::load(&scratch.store_path(), &scratch.home()).unwrap_err();
        assert!(
            matches!(err, TrustError::Malformed { .. }),
            "{text}: {err:?}"
        );
        assert_mentions(
            &err.to_string(),
            &[&format!(
                "trust store `{}` is not valid JSON of the form {{\"trusted\": [{{\"path\": …, \"pins\": {{…}}}}]}}",
                scratch.store_path().display()
            )],
        );
    }
}

#[test]
fn an_unreadable_store_is_an_error_naming_its_path() {
    let scratch = Scratch::new();
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir_all(scratch.store_path()).unwrap();
    let err = TrustStore::load(&scratch.store_path(), &scratch.home()).unwrap_err();
    assert!(matches!(err, TrustError::Read { .. }), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &[&format!(
            "cannot read trust store `{}`",
            scratch.store_path().display()
        )],
    );
}

#[test]
fn trusting_the_workspace_root_trusts_its_plugin_dir_and_loads_it() {
    let scratch = Scratch::new();
    let mut store = scratch.store();
    assert_eq!(
        store.grant(&scratch.workspace()).unwrap(),
        scratch.workspace()
    );
    assert!(store.is_trusted(&scratch.workspace()));
    assert!(store.is_trusted(&scratch.plugins()));
    assert!(!store.is_trusted(&scratch.workspace().join(".noeta")));
    assert!(!store.is_trusted(&scratch.workspace().join("other/plugins")));
    assert!(
        !store.is_trusted(&scratch.base()),
        "a parent is not trusted"
    );

    let set = scratch.load_workspace(scratch.store());
    assert_eq!(set.names(), ["local"]);
    assert_eq!(set.get("local").unwrap().source, SourceKind::Workspace);
    assert!(set.warnings().is_empty());
}

#[test]
fn trusting_the_plugin_dir_itself_does_not_trust_the_workspace_root() {
    let scratch = Scratch::new();
    let mut store = scratch.store();
    store.grant(&scratch.plugins()).unwrap();
    assert!(store.is_trusted(&scratch.plugins()));
    assert!(!store.is_trusted(&scratch.workspace()));
    assert_eq!(scratch.load_workspace(scratch.store()).names(), ["local"]);
}

#[cfg(unix)]
#[test]
fn trust_granted_through_a_symlink_matches_the_real_path_and_vice_versa() {
    let scratch = Scratch::new();
    let link = scratch.base().join("ws-link");
    std::os::unix::fs::symlink(scratch.workspace(), &link).unwrap();

    let mut through_link = scratch.store();
    assert_eq!(
        through_link.grant(&link).unwrap(),
        scratch.workspace(),
        "the real path is stored"
    );
    assert!(through_link.is_trusted(&scratch.workspace()));
    assert!(through_link.is_trusted(&scratch.plugins()));
    assert!(through_link.is_trusted(&link.join(".noeta/plugins")));

    let other = Scratch::new();
    let other_link = other.base().join("ws-link");
    std::os::unix::fs::symlink(other.workspace(), &other_link).unwrap();
    let mut real = other.store();
    real.grant(&other.workspace()).unwrap();
    assert!(real.is_trusted(&other_link));
    assert!(real.is_trusted(&other_link.join(".noeta/plugins")));

    let mut options = options();
    options.trust = other.store();
    let set = load_plugins(
        &[PluginSource::WorkspaceDir(
            other_link.join(".noeta/plugins"),
        )],
        &options,
    )
    .unwrap();
    assert_eq!(
        set.names(),
        ["local"],
        "a workspace reached through a symlink loads"
    );
}

#[test]
fn tilde_expands_to_the_given_home() {
    let scratch = Scratch::new();
    let project = scratch.home().join("project");
    std::fs::create_dir_all(&project).unwrap();

    let mut store = scratch.store();
    assert_eq!(store.grant(Path::new("~/project")).unwrap(), project);
    assert!(store.is_trusted(&project));
    assert!(store.is_trusted(Path::new("~/project")));
    let written = std::fs::read_to_string(scratch.store_path()).unwrap();
    assert!(
        written.contains(&project.display().to_string()),
        "{written}"
    );
    assert!(
        !written.contains('~'),
        "the stored path is expanded: {written}"
    );

    // A hand-written store may use `~` too.
    std::fs::write(scratch.store_path(), "{\"trusted\": [\"~/project\"]}").unwrap();
    let store = scratch.store();
    assert_eq!(store.trusted().collect::<Vec<_>>(), [project.as_path()]);
}

#[test]
fn grant_is_idempotent_and_writes_pretty_json_with_a_trailing_newline() {
    let scratch = Scratch::new();
    let mut store = scratch.store();
    let other = scratch.base().join("another");
    std::fs::create_dir(&other).unwrap();

    store.grant(&scratch.workspace()).unwrap();
    store.grant(&other).unwrap();
    let first = std::fs::read_to_string(scratch.store_path()).unwrap();
    store.grant(&scratch.workspace()).unwrap();
    let second = std::fs::read_to_string(scratch.store_path()).unwrap();
    assert_eq!(first, second);

    let manifest = std::fs::read(
        scratch
            .workspace()
            .join(".noeta/plugins/local/noeta-plugin.toml"),
    )
    .unwrap();
    // The plugin directory pins as one digest of its files.
    let tree = noeta_core::canonical::sha256_hex(
        format!(
            "noeta-plugin.toml\0{}\n",
            noeta_core::canonical::sha256_hex(&manifest)
        )
        .as_bytes(),
    );
    let expected = format!(
        "{{\n  \"trusted\": [\n    {{\n      \"path\": {},\n      \"pins\": {{}}\n    }},\n    {{\n      \"path\": {},\n      \"pins\": {{\n        \".noeta/plugins/local/\": \"{tree}\"\n      }}\n    }}\n  ]\n}}\n",
        serde_json::to_string(&other).unwrap(),
        serde_json::to_string(&scratch.workspace()).unwrap(),
    );
    assert_eq!(second, expected);
    assert_eq!(store.trusted().count(), 2);
    assert_eq!(store.path(), scratch.store_path());

    let reloaded = scratch.store();
    assert_eq!(
        reloaded.trusted().collect::<Vec<_>>(),
        [other.as_path(), scratch.workspace().as_path()]
    );
}

#[test]
fn granting_a_missing_dir_is_an_error_naming_it_and_writes_nothing() {
    let scratch = Scratch::new();
    let mut store = scratch.store();
    let missing = scratch.base().join("no-such-ws");
    let err = store.grant(&missing).unwrap_err();
    assert!(matches!(err, TrustError::NoSuchDirectory { .. }), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &[&format!("cannot trust `{}`: ", missing.display())],
    );
    assert!(!scratch.store_path().exists());
    assert_eq!(store.trusted().count(), 0);
}

#[test]
fn the_empty_store_trusts_nothing() {
    let scratch = Scratch::new();
    let store = TrustStore::empty();
    assert!(!store.is_trusted(&scratch.workspace()));
    assert!(!store.is_trusted(&scratch.plugins()));
}

#[test]
fn trusting_a_regular_file_is_refused_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("plain.txt");
    std::fs::write(&file, "x").unwrap();
    let mut store =
        noeta_core::TrustStore::load(&root.path().join("trust.json"), root.path()).unwrap();
    let err = store.grant(&file).unwrap_err();
    assert!(err.to_string().contains("plain.txt"), "{err}");
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn trust_is_pinned_to_what_the_workspace_held_and_lapses_when_it_changes() {
    use noeta_core::WorkspaceTrust;
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    std::fs::create_dir_all(ws.join(".noeta")).unwrap();
    std::fs::write(ws.join(".noeta/config.toml"), "[plugins.fs]\n").unwrap();
    let mut store = scratch.store();
    assert_eq!(store.workspace(&ws), WorkspaceTrust::Untrusted);
    store.grant(&ws).unwrap();
    let store = scratch.store();
    assert_eq!(store.workspace(&ws), WorkspaceTrust::Trusted);
    assert!(store.is_trusted(&scratch.plugins()));
    // Settings rewritten, an `.mcp.json`, an agent file and a command added: each is named.
    std::fs::write(
        ws.join(".noeta/config.toml"),
        "[plugins.sandbox]\nprovider = \"local\"\n",
    )
    .unwrap();
    std::fs::write(ws.join(".mcp.json"), "{}").unwrap();
    std::fs::create_dir_all(ws.join(".claude/agents/deep")).unwrap();
    std::fs::write(
        ws.join(".claude/agents/deep/evil.md"),
        "---\nname: evil\n---\nx",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join(".claude/commands")).unwrap();
    std::fs::write(ws.join(".claude/commands/x.md"), "!`id`").unwrap();
    let changed = store.workspace(&ws);
    assert_eq!(
        changed,
        WorkspaceTrust::Changed(vec![
            ".claude/agents/".to_owned(),
            ".claude/commands/".to_owned(),
            ".mcp.json".to_owned(),
            ".noeta/config.toml".to_owned(),
        ])
    );
    assert!(!store.is_trusted(&ws));
    assert!(
        !store.is_trusted(&scratch.plugins()),
        "its plugins are untrusted with it"
    );
    assert!(
        changed
            .why_not()
            .unwrap()
            .contains("was trusted, but .claude/agents/, .claude/commands/, .mcp.json, .noeta/config.toml changed since")
    );
    // A plugin's manifest changing lapses trust too; a file removed does as well.
    let mut store = scratch.store();
    store.grant(&ws).unwrap();
    std::fs::write(
        ws.join(".noeta/plugins/local/noeta-plugin.toml"),
        "name = \"local\"\n# changed\n",
    )
    .unwrap();
    std::fs::remove_file(ws.join(".mcp.json")).unwrap();
    assert_eq!(
        store.workspace(&ws),
        WorkspaceTrust::Changed(vec![
            ".mcp.json".to_owned(),
            ".noeta/plugins/local/".to_owned()
        ])
    );
    // A plugin that brings only agents or commands, arriving with a pull, lapses it as well.
    store.grant(&ws).unwrap();
    std::fs::create_dir_all(ws.join(".noeta/plugins/pulled/commands")).unwrap();
    std::fs::write(ws.join(".noeta/plugins/pulled/commands/x.md"), "!`id`").unwrap();
    assert_eq!(
        store.workspace(&ws),
        WorkspaceTrust::Changed(vec![".noeta/plugins/pulled/".to_owned()])
    );
    // Trusted again: as it is now.
    store.grant(&ws).unwrap();
    assert_eq!(scratch.store().workspace(&ws), WorkspaceTrust::Trusted);
}

#[test]
fn an_entry_from_before_pins_is_trusted_no_more_until_trusted_again() {
    use noeta_core::WorkspaceTrust;
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.store_path().parent().unwrap()).unwrap();
    std::fs::write(
        scratch.store_path(),
        format!(
            "{{\"trusted\": [{}]}}",
            serde_json::to_string(&scratch.workspace()).unwrap()
        ),
    )
    .unwrap();
    let mut store = scratch.store();
    assert_eq!(
        store.workspace(&scratch.workspace()),
        WorkspaceTrust::Unpinned
    );
    assert!(!store.is_trusted(&scratch.workspace()));
    assert!(
        WorkspaceTrust::Unpinned
            .why_not()
            .unwrap()
            .contains("before trust was pinned")
    );
    store.grant(&scratch.workspace()).unwrap();
    assert!(scratch.store().is_trusted(&scratch.workspace()));
}

#[test]
fn a_named_pipe_as_the_store_is_an_error_not_a_hang() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.store_path().parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(scratch.store_path())
            .status()
            .unwrap()
            .success()
    );
    let err = TrustStore::load(&scratch.store_path(), &scratch.home()).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("a named pipe, not a regular file"),
        "{err}"
    );
}

#[test]
fn a_tree_too_large_to_pin_can_never_be_trusted() {
    use noeta_core::WorkspaceTrust;
    let scratch = Scratch::new();
    let ws = scratch.workspace();
    let big = ws.join(".noeta/plugins/big");
    std::fs::create_dir_all(&big).unwrap();
    // 65 MiB, sparse: over what one tree may hold.
    std::fs::File::create(big.join("blob"))
        .unwrap()
        .set_len(65 * 1024 * 1024)
        .unwrap();
    let mut store = scratch.store();
    store.grant(&ws).unwrap();
    assert_eq!(
        store.workspace(&ws),
        WorkspaceTrust::Changed(vec![".noeta/plugins/big/".to_owned()])
    );
}
