//! Manifest parsing: the four accepted shapes, spellings, derived names, verbatim params, and every refusal's message.

use std::path::PathBuf;

use noeta_core::manifest::{name_from_ref, parse_manifest, read_manifest};
use noeta_core::{ManifestError, Origin, PluginManifest, Seam, standard_registry};
use serde_json::json;

use crate::support::assert_mentions;

const FILE: &str = "/plugins/demo/noeta-plugin.toml";

fn origin() -> Origin {
    Origin::File(PathBuf::from(FILE))
}

fn parse(text: &str) -> PluginManifest {
    parse_manifest(text, &origin(), &standard_registry()).unwrap()
}

/// The message of a manifest that must fail to parse.
fn refusal(text: &str) -> String {
    let err = parse_manifest(text, &origin(), &standard_registry()).unwrap_err();
    assert_eq!(err.origin(), &origin());
    err.to_string()
}

// --- shapes --------------------------------------------------------------------

#[test]
fn bare_top_level_keys_are_a_manifest() {
    let manifest = parse(
        r#"
name = "demo"
version = "1.2.3"
requires-noeta = ">=0.1"

[[contributions]]
surface = "tool"
name = "read"
ref = "demo::Read"
"#,
    );
    assert_eq!(manifest.name, "demo");
    assert_eq!(manifest.version.as_deref(), Some("1.2.3"));
    assert_eq!(manifest.requires_noeta.as_deref(), Some(">=0.1"));
    assert_eq!(manifest.config_schema, None);
    assert_eq!(manifest.contributions.len(), 1);
    let read = &manifest.contributions[0];
    assert_eq!(
        (read.surface.as_str(), read.name.as_str()),
        ("tool", "read")
    );
    assert_eq!(read.reference.as_deref(), Some("demo::Read"));
    assert_eq!(read.index, 1);
}

#[test]
fn a_noeta_table_is_a_manifest() {
    let manifest = parse(
        r#"
[noeta]
name = "demo"

[[noeta.contributions]]
surface = "prompt_fragment"
name = "style"
text = "Be brief."
"#,
    );
    assert_eq!(manifest.name, "demo");
    assert_eq!(manifest.version, None);
    assert_eq!(manifest.contributions[0].text(), Some("Be brief."));
}

#[test]
fn a_tool_noeta_table_is_a_manifest_and_never_borrows_a_version() {
    let manifest = parse(
        r#"
[project]
name = "demo-py"
version = "9.9.9"

[tool.noeta]
name = "demo"

[[tool.noeta.contributions]]
surface = "guard"
ref = "demo.guards:Deny"
"#,
    );
    assert_eq!(manifest.name, "demo");
    assert_eq!(manifest.version, None);
    assert_eq!(manifest.contributions[0].name, "Deny");
}

#[test]
fn package_metadata_noeta_defaults_its_version_to_the_package_version() {
    let manifest = parse(
        r#"
[package]
name = "noeta-demo"
version = "0.4.2"

[package.metadata.noeta]
name = "demo"
requires-noeta = "^0.1"

[[package.metadata.noeta.contributions]]
surface = "tool"
ref = "noeta_demo::tools::Read"
"#,
    );
    assert_eq!(manifest.name, "demo");
    assert_eq!(manifest.version.as_deref(), Some("0.4.2"));
    assert_eq!(manifest.requires_noeta.as_deref(), Some("^0.1"));
    assert_eq!(manifest.contributions[0].name, "Read");
}

#[test]
fn package_metadata_noeta_may_declare_its_own_version() {
    let manifest = parse(
        r#"
[package]
name = "noeta-demo"
version = "0.4.2"

[package.metadata.noeta]
name = "demo"
version = "2.0.0"
"#,
    );
    assert_eq!(manifest.version.as_deref(), Some("2.0.0"));
    assert!(manifest.contributions.is_empty());
}

#[test]
fn requires_noeta_and_config_schema_accept_kebab_and_snake_spellings() {
    let kebab = parse(
        "name = \"demo\"\nrequires-noeta = \">=0.1\"\nconfig-schema = { type = \"object\" }\n",
    );
    let snake =
        parse("name = \"demo\"\nrequires_noeta = \">=0.1\"\n[config_schema]\ntype = \"object\"\n");
    assert_eq!(kebab, snake);
    assert_eq!(kebab.requires_noeta.as_deref(), Some(">=0.1"));
    assert_eq!(kebab.config_schema, Some(json!({"type": "object"})));
}

// --- contributions -----------------------------------------------------------

#[test]
fn every_key_besides_surface_name_ref_and_path_is_kept_verbatim_as_params() {
    let manifest = parse(
        r#"
name = "demo"

[[contributions]]
surface = "tool"
name = "search"
ref = "demo::Search"
tools = ["grep", "glob"]
priority = -3
ratio = 0.5
enabled = true
released = 1979-05-27
nested = { depth = 2, tags = ["a", "b"] }
"#,
    );
    let search = &manifest.contributions[0];
    let keys: Vec<&str> = search.params.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "enabled", "nested", "priority", "ratio", "released", "tools"
        ]
    );
    assert_eq!(search.params["tools"], json!(["grep", "glob"]));
    assert_eq!(search.params["priority"], json!(-3));
    assert_eq!(search.params["ratio"], json!(0.5));
    assert_eq!(search.params["enabled"], json!(true));
    assert_eq!(search.params["released"], json!("1979-05-27"));
    assert_eq!(
        search.params["nested"],
        json!({"depth": 2, "tags": ["a", "b"]})
    );
    assert_eq!(search.priority(), -3);
    assert_eq!(search.tool_names(), ["grep", "glob"]);
    assert_eq!(search.path, None);
}

#[test]
fn a_name_is_derived_from_the_last_segment_of_the_ref_else_the_basename_of_the_path() {
    assert_eq!(
        name_from_ref("crate::module::Item").as_deref(),
        Some("Item")
    );
    assert_eq!(name_from_ref("pkg.mod:Attr").as_deref(), Some("Attr"));
    assert_eq!(name_from_ref("pkg.mod.attr").as_deref(), Some("attr"));
    assert_eq!(name_from_ref("plain").as_deref(), Some("plain"));
    assert_eq!(name_from_ref("crate::"), None);

    let manifest = parse(
        r#"
name = "demo"

[[contributions]]
surface = "tool"
ref = "crate::module::Item"

[[contributions]]
surface = "guard"
ref = "pkg.mod:Attr"

[[contributions]]
surface = "skills"
path = "/srv/skills/pack/"

[[contributions]]
surface = "observer"
name = "explicit"
ref = "pkg.mod:Ignored"

[[contributions]]
surface = "reminder"
name = "  "
ref = "demo::Blank"
"#,
    );
    let derived: Vec<&str> = manifest
        .contributions
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(derived, ["Item", "Attr", "pack", "explicit", "Blank"]);
    let indices: Vec<usize> = manifest.contributions.iter().map(|c| c.index).collect();
    assert_eq!(indices, [1, 2, 3, 4, 5]);
}

#[test]
fn tool_names_default_to_the_contribution_name_and_accept_a_single_string() {
    let manifest = parse(
        r#"
name = "demo"

[[contributions]]
surface = "tool"
name = "read"
ref = "demo::Read"

[[contributions]]
surface = "control_tool"
name = "plan"
ref = "demo::Plan"
tools = "enter_plan_mode"
"#,
    );
    assert_eq!(manifest.contributions[0].tool_names(), ["read"]);
    assert_eq!(manifest.contributions[1].tool_names(), ["enter_plan_mode"]);
}

#[test]
fn an_absent_priority_is_zero() {
    let manifest = parse(
        "name = \"demo\"\n[[contributions]]\nsurface = \"reminder\"\nref = \"demo::Nudge\"\n",
    );
    assert!(!manifest.contributions[0].params.contains_key("priority"));
    assert_eq!(manifest.contributions[0].priority(), 0);
}

#[test]
fn reminder_provider_seams_default_to_turn_intake_and_parse_both_spellings() {
    let manifest = parse(
        r#"
name = "demo"

[[contributions]]
surface = "reminder_provider"
ref = "demo::Default"

[[contributions]]
surface = "reminder_provider"
ref = "demo::Both"
seams = ["task_seed", "turn_intake"]

[[contributions]]
surface = "reminder_provider"
ref = "demo::Seed"
seams = "task_seed"
"#,
    );
    let seams: Vec<Vec<Seam>> = manifest.contributions.iter().map(|c| c.seams()).collect();
    assert_eq!(
        seams,
        [
            vec![Seam::TurnIntake],
            vec![Seam::TaskSeed, Seam::TurnIntake],
            vec![Seam::TaskSeed],
        ]
    );
}

// --- refusals ------------------------------------------------------------------

#[test]
fn a_duplicate_surface_and_name_names_both_entries() {
    let message = refusal(
        r#"
name = "demo"

[[contributions]]
surface = "tool"
ref = "demo::a::Read"

[[contributions]]
surface = "guard"
ref = "demo::Read"

[[contributions]]
surface = "tool"
name = "Read"
ref = "demo::b::Reader"
"#,
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #3 duplicates #1 — surface `tool` already declares `Read`; (surface, name) must be unique within a manifest"
        )
    );
}

#[test]
fn an_unknown_surface_lists_the_known_ones() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nref = \"a\"\n[[contributions]]\nsurface = \"tools\"\nref = \"b\"\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #2 names unknown surface `tools` (known: {})",
            standard_registry().names().join(", ")
        )
    );
}

#[test]
fn a_contribution_without_a_surface_is_named_by_its_one_based_index() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nref = \"a\"\n[[contributions]]\nname = \"lost\"\nref = \"b\"\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #2: is missing a string `surface`"
        )
    );
}

#[test]
fn a_contribution_that_is_not_a_table_is_refused() {
    let message = refusal("name = \"demo\"\ncontributions = [\"tool\"]\n");
    assert_eq!(
        message,
        format!("manifest file `{FILE}` (plugin `demo`): contribution #1: must be a table")
    );
}

#[test]
fn a_contribution_without_a_name_ref_or_path_is_refused() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"prompt_fragment\"\ntext = \"hi\"\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `prompt_fragment`): needs a `name` (or a `ref` or `path` to derive one from)"
        )
    );
}

#[test]
fn a_non_string_ref_or_path_is_refused() {
    let message = refusal("name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nref = 7\n");
    assert_mentions(
        &message,
        &[
            FILE,
            "(plugin `demo`)",
            "contribution #1 (surface `tool`)",
            "`ref` must be a string",
        ],
    );
    let message =
        refusal("name = \"demo\"\n[[contributions]]\nsurface = \"skills\"\npath = [\"/a\"]\n");
    assert_mentions(
        &message,
        &[
            "contribution #1 (surface `skills`)",
            "`path` must be a string",
        ],
    );
}

#[test]
fn a_present_priority_must_be_an_integer() {
    let cases = [
        ("\"high\"", "string `\"high\"`"),
        ("1.5", "float `1.5`"),
        ("true", "boolean `true`"),
    ];
    for (value, described) in cases {
        let message = refusal(&format!(
            "name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nref = \"demo::Ok\"\n[[contributions]]\nsurface = \"reminder\"\nname = \"nudge\"\nref = \"demo::Nudge\"\npriority = {value}\n"
        ));
        assert_eq!(
            message,
            format!(
                "manifest file `{FILE}` (plugin `demo`): contribution #2 (surface `reminder`, name `nudge`): `priority` must be an integer, got {described}"
            )
        );
    }
}

#[test]
fn a_relative_skills_path_is_refused_naming_the_path() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"skills\"\npath = \"skills/pack\"\n",
    );
    assert_mentions(
        &message,
        &[
            &format!(
                "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `skills`, name `pack`)"
            ),
            "the skills path `skills/pack` is relative",
            "must be absolute",
        ],
    );
}

#[test]
fn a_skills_contribution_without_a_path_is_refused() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"skills\"\nref = \"demo::Skills\"\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `skills`, name `Skills`): a skills contribution needs an absolute `path`"
        )
    );
}

#[test]
fn a_missing_plugin_name_is_refused() {
    for text in ["version = \"1.0.0\"\n", "name = \"  \"\n"] {
        assert_eq!(
            refusal(text),
            format!(
                "manifest file `{FILE}`: field `name` is missing — every plugin needs a string `name`"
            )
        );
    }
}

#[test]
fn a_non_string_plugin_name_is_refused() {
    assert_eq!(
        refusal("name = 5\n"),
        format!("manifest file `{FILE}`: field `name` must be a string")
    );
}

#[test]
fn an_invalid_plugin_name_is_refused() {
    for bad in ["Demo", "1demo", "de mo", "demo.x", "_demo"] {
        assert_eq!(
            refusal(&format!("name = \"{bad}\"\n")),
            format!(
                "manifest file `{FILE}`: field `name` `{bad}` is not a valid plugin name — use a lowercase letter, then lowercase letters, digits, `_` or `-`"
            )
        );
    }
    parse("name = \"my-plugin_2\"\n");
}

#[test]
fn a_non_semver_version_is_refused() {
    let message = refusal("name = \"demo\"\nversion = \"1.0\"\n");
    assert_mentions(
        &message,
        &[
            &format!("manifest file `{FILE}` (plugin `demo`): field `version`"),
            "`1.0` is not a semver version",
        ],
    );
    assert_eq!(
        refusal("name = \"demo\"\nversion = 1\n"),
        format!("manifest file `{FILE}` (plugin `demo`): field `version` must be a string")
    );
}

#[test]
fn a_non_string_requires_noeta_is_refused() {
    assert_eq!(
        refusal("name = \"demo\"\nrequires_noeta = 1\n"),
        format!("manifest file `{FILE}` (plugin `demo`): field `requires-noeta` must be a string")
    );
}

#[test]
fn a_config_schema_that_is_not_a_table_is_refused() {
    for text in ["config-schema = \"object\"", "config_schema = [1]"] {
        assert_eq!(
            refusal(&format!("name = \"demo\"\n{text}\n")),
            format!(
                "manifest file `{FILE}` (plugin `demo`): field `config-schema` must be a table"
            )
        );
    }
}

#[test]
fn contributions_that_are_not_an_array_are_refused() {
    assert_eq!(
        refusal("name = \"demo\"\ncontributions = \"none\"\n"),
        format!(
            "manifest file `{FILE}` (plugin `demo`): field `contributions` must be an array of tables"
        )
    );
}

#[test]
fn a_tools_param_of_the_wrong_type_is_refused() {
    for value in ["5", "[]", "[\"\"]", "[\"ok\", 3]", "\" \""] {
        let message = refusal(&format!(
            "name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nname = \"search\"\nref = \"demo::Search\"\ntools = {value}\n"
        ));
        assert_eq!(
            message,
            format!(
                "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `tool`, name `search`): `tools` must be a tool name or a non-empty list of tool names"
            ),
            "tools = {value}"
        );
    }
}

#[test]
fn an_unknown_seam_is_refused() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"reminder_provider\"\nname = \"memo\"\nref = \"demo::Memo\"\nseams = [\"turn_intake\", \"lunch\"]\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `reminder_provider`, name `memo`): unknown seam `lunch` in `seams` (known: task_seed, turn_intake)"
        )
    );
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"reminder_provider\"\nname = \"memo\"\nref = \"demo::Memo\"\nseams = 3\n",
    );
    assert_mentions(
        &message,
        &[
            "(plugin `demo`)",
            "name `memo`",
            "`seams` must be a seam name or a list of seam names",
        ],
    );
}

#[test]
fn a_toml_syntax_error_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noeta-plugin.toml");
    std::fs::write(&path, "name = \"demo\"\n[[contributions]\n").unwrap();
    let err = read_manifest(&path, &standard_registry()).unwrap_err();
    assert!(matches!(err, ManifestError::Toml { .. }), "{err:?}");
    assert_eq!(err.origin(), &Origin::File(path.clone()));
    assert_mentions(
        &err.to_string(),
        &[&format!(
            "manifest file `{}` is not valid TOML",
            path.display()
        )],
    );
}

#[test]
fn an_unreadable_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent").join("noeta-plugin.toml");
    let err = read_manifest(&path, &standard_registry()).unwrap_err();
    assert!(matches!(err, ManifestError::Read { .. }), "{err:?}");
    assert_mentions(
        &err.to_string(),
        &[&format!("cannot read manifest file `{}`", path.display())],
    );
}

#[test]
fn read_manifest_reads_a_file_and_names_it_as_the_origin_of_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Cargo.toml");
    std::fs::write(
        &path,
        "[package]\nname = \"x\"\nversion = \"0.2.0\"\n[package.metadata.noeta]\nname = \"x\"\n",
    )
    .unwrap();
    let manifest = read_manifest(&path, &standard_registry()).unwrap();
    assert_eq!(
        (manifest.name.as_str(), manifest.version.as_deref()),
        ("x", Some("0.2.0"))
    );

    std::fs::write(&path, "name = \"Nope\"\n").unwrap();
    let err = read_manifest(&path, &standard_registry()).unwrap_err();
    assert_mentions(
        &err.to_string(),
        &[
            &format!("manifest file `{}`", path.display()),
            "field `name`",
            "`Nope`",
        ],
    );
}

#[test]
fn a_crate_origin_is_named_as_a_crate() {
    let err = parse_manifest(
        "name = 1\n",
        &Origin::Crate("noeta-demo".to_owned()),
        &standard_registry(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "manifest crate `noeta-demo`: field `name` must be a string"
    );
}

#[test]
fn an_unknown_top_level_field_is_refused_naming_it() {
    let message = refusal("name = \"typo\"\nrequires-noetaa = \">=0.1\"\n");
    assert_mentions(
        &message,
        &[
            "plugin `typo`",
            "unknown field `requires-noetaa`",
            "known: name, version",
        ],
    );
}

// --- tools a session pack mounts ---------------------------------------------------

const PACK_AND_TOOL: &str = "name = \"demo\"\n[[contributions]]\nsurface = \"session_pack\"\nname = \"kit\"\nref = \"demo::kit\"\npriority = 900\n";

#[test]
fn a_tool_mounted_by_the_plugins_own_session_pack_is_declared_by_name() {
    let manifest = parse(&format!(
        "{PACK_AND_TOOL}[[contributions]]\nsurface = \"tool\"\nname = \"Lint\"\npack = \"kit\"\n"
    ));
    let tool = &manifest.contributions[1];
    assert_eq!(tool.mounted_by(), Some("kit"));
    assert_eq!(tool.tool_names(), ["Lint"]);
    assert_eq!(tool.reference, None);
    // A tool resolved from its ref is not a declaration; nor is a pack on another surface.
    let resolved =
        parse("name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nref = \"demo::Lint\"\n");
    assert_eq!(resolved.contributions[0].mounted_by(), None);
}

#[test]
fn a_declared_tool_naming_a_pack_the_plugin_lacks_is_refused_naming_its_packs() {
    let message = refusal(&format!(
        "{PACK_AND_TOOL}[[contributions]]\nsurface = \"tool\"\nname = \"Lint\"\npack = \"kits\"\n"
    ));
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #2 (surface `tool`, name `Lint`): is mounted by session pack `kits`, which plugin `demo` does not declare (its session packs: kit)"
        )
    );
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"tool\"\nname = \"Lint\"\npack = \"kit\"\n",
    );
    assert_mentions(
        &message,
        &["contribution #1", "`Lint`", "its session packs: none"],
    );
}

#[test]
fn a_declared_tool_with_a_ref_or_a_pack_that_is_not_a_name_is_refused() {
    let message = refusal(&format!(
        "{PACK_AND_TOOL}[[contributions]]\nsurface = \"tool\"\nname = \"Lint\"\nref = \"demo::Lint\"\npack = \"kit\"\n"
    ));
    assert_mentions(
        &message,
        &[
            "contribution #2 (surface `tool`, name `Lint`)",
            "has both a `ref` and a `pack`",
        ],
    );
    for bad in ["7", "\"\"", "[\"kit\"]"] {
        let message = refusal(&format!(
            "{PACK_AND_TOOL}[[contributions]]\nsurface = \"tool\"\nname = \"Lint\"\npack = {bad}\n"
        ));
        assert_mentions(
            &message,
            &[
                "contribution #2",
                "`pack` must name a session pack of this plugin",
            ],
        );
    }
}

#[test]
fn a_float_json_cannot_hold_is_refused_naming_where_it_is() {
    let message = refusal(
        "name = \"demo\"\n[[contributions]]\nsurface = \"prompt_fragment\"\nname = \"f\"\ntext = \"hi\"\nweights = [1.0, nan]\n",
    );
    assert_eq!(
        message,
        format!(
            "manifest file `{FILE}` (plugin `demo`): contribution #1 (surface `prompt_fragment`, name `f`): `weights[1]` is NaN, which JSON cannot hold: give a finite number"
        )
    );
    let message = refusal("name = \"demo\"\n[config-schema]\nlimits = { top = inf }\n");
    assert_mentions(
        &message,
        &[
            "(plugin `demo`)",
            "config-schema",
            "`config-schema.limits.top` is inf",
        ],
    );
}

#[test]
fn a_manifest_over_a_mebibyte_is_refused_naming_the_file_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noeta-plugin.toml");
    let text = format!("name = \"big\"\n# {}\n", "x".repeat(1024 * 1024));
    std::fs::write(&path, &text).unwrap();
    let err = read_manifest(&path, &standard_registry()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "manifest file `{}` is {} bytes, over the 1048576-byte limit of a manifest",
            path.display(),
            text.len()
        )
    );
}
