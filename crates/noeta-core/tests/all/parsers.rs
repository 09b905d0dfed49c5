//! Property tests: a plugin manifest of any text — arbitrary, TOML shaped like a manifest, or a
//! valid manifest with a piece changed — parses or is refused naming its file; it never panics.
//! Inputs that once broke the parser are kept in `proptest-regressions/`.

use std::path::PathBuf;

use noeta_core::manifest::parse_manifest;
use noeta_core::{Origin, standard_registry};
use noeta_testkit::fuzz;
use proptest::prelude::*;

const KEYS: &[&str] = &[
    "name",
    "version",
    "requires-noeta",
    "requires_noeta",
    "description",
    "path",
    "ref",
    "text",
    "surface",
    "pack",
    "priority",
    "tool",
    "tools",
    "seams",
    "metadata",
    "config-schema",
    "config_schema",
    "package",
    "noeta",
    "contributions",
    "params",
    "turn_intake",
];
const TABLES: &[&str] = &[
    "package",
    "package.metadata.noeta",
    "noeta",
    "contributions",
    "plugin",
    "metadata",
    "contributions.params",
    "tool.noeta",
];

const VALID: &str = r#"name = "demo"
version = "1.2.3"
requires-noeta = ">=0.1"

[[contributions]]
surface = "tool"
name = "read"
priority = 10
params = { mode = "fast", depth = 2 }

[[contributions]]
surface = "prompt_fragment"
name = "style"
text = "Be brief."
"#;

fn check(text: &str) -> Result<(), TestCaseError> {
    let origin = Origin::File(PathBuf::from("/plugins/fuzz/noeta-plugin.toml"));
    if let Err(err) = parse_manifest(text, &origin, &standard_registry()) {
        prop_assert_eq!(err.origin(), &origin);
        prop_assert!(!err.to_string().is_empty());
    }
    Ok(())
}

#[test]
fn the_valid_manifest_the_changes_start_from_is_valid() {
    let origin = Origin::File(PathBuf::from("/plugins/fuzz/noeta-plugin.toml"));
    let manifest = parse_manifest(VALID, &origin, &standard_registry()).unwrap();
    assert_eq!(manifest.contributions.len(), 2);
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn any_text_is_parsed_or_refused(text in fuzz::any_text()) {
        check(&text)?;
    }

    #[test]
    fn manifest_shaped_toml_is_parsed_or_refused(text in fuzz::toml_doc(KEYS, TABLES)) {
        check(&text)?;
    }

    #[test]
    fn a_valid_manifest_changed_is_parsed_or_refused(text in fuzz::mutated(VALID.to_owned())) {
        check(&text)?;
    }

    #[test]
    fn a_seam_of_any_spelling_is_known_or_not(text in fuzz::any_text()) {
        let _ = noeta_core::Seam::parse(&text);
    }
}
