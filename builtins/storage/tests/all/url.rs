//! Choosing a store by URL: the schemes, relative paths, the default file, and errors naming the bad value.

use std::path::Path;

use futures::executor::block_on;
use noeta_builtin_storage::{KNOWN_SCHEMES, OpenError, StoreUrl, open_store};
use noeta_core::store::{ManualClock, contract};

use crate::common::{Dir, claimed, id, rec, seqs};

fn parse(url: &str) -> Result<StoreUrl, OpenError> {
    StoreUrl::parse(url, Path::new("/ws"))
}

#[test]
fn urls_name_the_store_and_resolve_relative_paths_against_the_workspace() {
    assert_eq!(parse("memory:").unwrap(), StoreUrl::Memory);
    assert_eq!(parse("MEMORY:").unwrap(), StoreUrl::Memory);
    assert_eq!(parse("sqlite::memory:").unwrap(), StoreUrl::SqliteMemory);
    assert_eq!(
        parse("sqlite:state/noeta.db").unwrap(),
        StoreUrl::Sqlite("/ws/state/noeta.db".into())
    );
    assert_eq!(
        parse("sqlite:/var/lib/noeta.db").unwrap(),
        StoreUrl::Sqlite("/var/lib/noeta.db".into())
    );
    assert_eq!(
        parse("sqlite://rel.db").unwrap(),
        StoreUrl::Sqlite("/ws/rel.db".into())
    );
    assert_eq!(
        parse("sqlite:///abs/x.db").unwrap(),
        StoreUrl::Sqlite("/abs/x.db".into())
    );
    assert_eq!(
        StoreUrl::default_for(Path::new("/ws")),
        StoreUrl::Sqlite("/ws/.noeta/noeta.db".into())
    );
    assert_eq!(parse("sqlite:a.db").unwrap().to_string(), "sqlite:/ws/a.db");
    assert_eq!(StoreUrl::Memory.to_string(), "memory:");
    assert_eq!(StoreUrl::SqliteMemory.to_string(), "sqlite::memory:");
}

#[test]
fn an_unknown_scheme_names_the_url_and_lists_the_known_ones() {
    let err = parse("mysql://db.example/noeta").unwrap_err();
    assert!(
        matches!(&err, OpenError::UnknownScheme { scheme, .. } if scheme == "mysql"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "store URL `mysql://db.example/noeta` has unknown scheme `mysql` — known schemes: `memory:`, `sqlite:PATH`, `postgres://…` (or `postgresql://…`)"
    );
    assert_eq!(
        parse("postgresql://u:p@db.example/noeta").unwrap(),
        StoreUrl::Postgres("postgresql://u:p@db.example/noeta".to_owned())
    );
    assert_eq!(
        parse("postgres://u:p@db.example/noeta")
            .unwrap()
            .to_string(),
        "postgres://u:***@db.example/noeta"
    );
    assert!(err.to_string().ends_with(KNOWN_SCHEMES));
}

#[test]
fn malformed_urls_name_the_bad_value() {
    for (url, reason) in [
        (
            "noeta.db",
            "it has no scheme — known schemes: `memory:`, `sqlite:PATH`",
        ),
        ("", "it has no scheme"),
        ("sqlite:", "it names no database file — use `sqlite:PATH`"),
        ("sqlite://", "it names no database file"),
        ("memory:extra", "`memory:` takes nothing after the colon"),
    ] {
        let err = parse(url).unwrap_err();
        assert!(matches!(err, OpenError::BadUrl { .. }), "{url}: {err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("store URL `{url}` is not valid: {reason}")),
            "{url}: {message}"
        );
    }
}

#[test]
fn no_url_opens_the_workspace_default_file() {
    let dir = Dir::new();
    let workspace = dir.dir.path();
    let clock = ManualClock::at(0);
    let stores = open_store(None, workspace, clock.clone()).unwrap();
    let db = workspace.join(".noeta").join("noeta.db");
    assert_eq!(stores.url, StoreUrl::Sqlite(db.clone()));
    assert!(db.is_file());
    let lease = claimed(stores.log.as_ref(), "t", "w");
    block_on(stores.log.append(&lease, &[rec(1)])).unwrap();
    let body = block_on(stores.content.put("text/plain", b"b")).unwrap();
    drop(stores);
    let stores = open_store(Some("sqlite:.noeta/noeta.db"), workspace, clock).unwrap();
    assert_eq!(seqs(stores.log.as_ref(), &id("t")), [1]);
    assert_eq!(block_on(stores.content.get(&body)).unwrap(), b"b");
}

#[test]
fn every_scheme_opens_a_store_that_honours_the_contract() {
    let dir = Dir::new();
    for url in ["memory:", "sqlite::memory:", "sqlite:sub/dir/x.db"] {
        let clock = ManualClock::at(1_000);
        let stores = open_store(Some(url), dir.dir.path(), clock.clone()).unwrap();
        let failures = block_on(contract::run(
            stores.log.as_ref(),
            stores.content.as_ref(),
            &clock,
            "u",
        ));
        assert!(failures.is_empty(), "{url}: {failures:#?}");
    }
    assert!(dir.dir.path().join("sub/dir/x.db").is_file());
}

#[test]
fn a_url_naming_a_file_that_is_not_a_store_fails_naming_the_file() {
    let dir = Dir::new();
    std::fs::write(dir.dir.path().join("notes.txt"), "x".repeat(4096)).unwrap();
    let err = open_store(Some("sqlite:notes.txt"), dir.dir.path(), ManualClock::at(0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "`{}` is not a noeta store: it is not an SQLite database",
            dir.dir.path().join("notes.txt").display()
        )
    );
}

// A store URL of any text is a store or an error naming the URL; it never panics. Inputs
// that once broke the parser are kept in `proptest-regressions/`.
proptest::proptest! {
    #![proptest_config(noeta_testkit::fuzz::config())]

    #[test]
    fn a_url_of_any_text_names_a_store_or_is_refused_naming_it(
        url in proptest::prop_oneof![
            noeta_testkit::fuzz::any_text(),
            "(?i)(sqlite|memory|postgres|postgresql|file|)(:|://|:///)?[a-zA-Z0-9_./:@?=%~ -]{0,30}",
        ],
    ) {
        match parse(&url) {
            Ok(_) => {}
            Err(OpenError::BadUrl { url: named, reason }) => {
                proptest::prop_assert_eq!(&named, &url);
                proptest::prop_assert!(!reason.is_empty());
            }
            Err(other) => proptest::prop_assert!(!other.to_string().is_empty()),
        }
    }
}
