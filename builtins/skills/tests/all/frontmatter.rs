//! SKILL.md frontmatter: every form of the keys, metadata, and each reason a skill is skipped.

use serde_json::{Value, json};

use crate::common::{Tree, skip_reason};

/// Indexes one workspace skill written as `text`: its listing entry, or the skip reason.
fn index(text: &str) -> Result<noeta_builtin_skills::listing::ListedSkill, String> {
    let tree = Tree::new();
    let path = tree.skill_file(&tree.ws(".noeta/skills"), "s", text);
    let listing = tree.list(Value::Null);
    match listing.skills.first() {
        Some(skill) => Ok(skill.clone()),
        None => Err(skip_reason(&listing, &path)),
    }
}

fn skill(text: &str) -> noeta_builtin_skills::listing::ListedSkill {
    index(text).unwrap_or_else(|reason| panic!("skipped: {reason}"))
}

fn reason(text: &str) -> String {
    index(text).map(|s| format!("indexed: {s:?}")).unwrap_err()
}

#[test]
fn a_literal_block_description_keeps_its_lines() {
    let s = skill("---\nname: s\ndescription: |\n  line one\n  line two\n---\nbody\n");
    assert_eq!(s.description, "line one\nline two");
}

#[test]
fn a_folded_block_description_joins_its_lines() {
    let s = skill("---\nname: s\ndescription: >\n  line one\n  line two\n---\nbody\n");
    assert_eq!(s.description, "line one line two");
}

#[test]
fn a_stripped_literal_block_description() {
    let s = skill("---\nname: s\ndescription: |-\n  first\n  second\n\n---\nbody\n");
    assert_eq!(s.description, "first\nsecond");
}

#[test]
fn allowed_tools_as_a_block_list() {
    let s = skill(
        "---\nname: s\ndescription: d\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\nbody\n",
    );
    assert_eq!(
        s.allowed_tools,
        Some(vec!["Read".to_owned(), "Bash(git:*)".to_owned()])
    );
}

#[test]
fn allowed_tools_as_a_flow_list() {
    let s = skill("---\nname: s\ndescription: d\nallowed-tools: [Read, Grep]\n---\nbody\n");
    assert_eq!(
        s.allowed_tools,
        Some(vec!["Read".to_owned(), "Grep".to_owned()])
    );
}

#[test]
fn allowed_tools_as_a_comma_string() {
    let s = skill("---\nname: s\ndescription: d\nallowed-tools: Read, Grep ,Glob\n---\nbody\n");
    assert_eq!(
        s.allowed_tools,
        Some(vec![
            "Read".to_owned(),
            "Grep".to_owned(),
            "Glob".to_owned()
        ])
    );
}

#[test]
fn no_allowed_tools_restricts_nothing_and_an_empty_list_allows_none() {
    assert_eq!(
        skill("---\nname: s\ndescription: d\n---\n").allowed_tools,
        None
    );
    assert_eq!(
        skill("---\nname: s\ndescription: d\nallowed-tools: []\n---\n").allowed_tools,
        Some(Vec::new())
    );
}

#[test]
fn a_byte_order_mark_is_tolerated() {
    let s = skill("\u{feff}---\nname: s\ndescription: d\n---\nbody\n");
    assert_eq!(s.name, "s");
}

#[test]
fn crlf_line_ends_are_read() {
    let s = skill("---\r\nname: s\r\ndescription: d\r\n---\r\nbody\r\n");
    assert_eq!(s.description, "d");
}

#[test]
fn the_known_keys_are_read() {
    let s = skill(
        "---\nname: s\ndescription: d\nversion: 1.2.0\npriority: 7\ndisable-model-invocation: true\nuser-invocable: false\nargument-hint: <file>\n---\nbody\n",
    );
    assert_eq!(s.version.as_deref(), Some("1.2.0"));
    assert_eq!(s.priority, 7);
    assert!(!s.model_invocable);
    assert!(!s.user_invocable);
    assert!(s.metadata.is_empty(), "{:?}", s.metadata);
}

#[test]
fn defaults_of_the_known_keys() {
    let s = skill("---\nname: s\ndescription: d\n---\n");
    assert_eq!(s.version, None);
    assert_eq!(s.priority, 100);
    assert!(s.model_invocable);
    assert!(s.user_invocable);
}

#[test]
fn a_numeric_version_and_quoted_flags_are_read_as_written() {
    let s = skill(
        "---\nname: s\ndescription: d\nversion: 2\npriority: \"3\"\ndisable-model-invocation: \"false\"\n---\n",
    );
    assert_eq!(s.version.as_deref(), Some("2"));
    assert_eq!(s.priority, 3);
    assert!(s.model_invocable);
}

#[test]
fn other_keys_are_kept_as_metadata() {
    let s = skill(
        "---\nname: s\ndescription: d\nlicense: MIT\ntags: [pdf, forms]\nmetadata:\n  author: ops\n  reviewed: true\n---\n",
    );
    assert_eq!(
        serde_json::to_value(&s.metadata).unwrap(),
        json!({
            "license": "MIT",
            "tags": ["pdf", "forms"],
            "metadata": {"author": "ops", "reviewed": true}
        })
    );
}

#[test]
fn skipped_without_a_frontmatter_fence() {
    assert_eq!(
        reason("# Just markdown\n"),
        "SKILL.md does not start with a `---` frontmatter fence"
    );
}

#[test]
fn skipped_without_a_closing_fence() {
    assert_eq!(
        reason("---\nname: s\ndescription: d\n"),
        "the frontmatter has no closing `---` fence"
    );
}

#[test]
fn skipped_with_bad_yaml() {
    let why = reason("---\nname: [s\ndescription: d\n---\n");
    assert!(
        why.starts_with("the frontmatter is not valid YAML: "),
        "{why}"
    );
}

#[test]
fn skipped_when_the_frontmatter_is_not_a_mapping() {
    assert_eq!(
        reason("---\n- a\n- b\n---\n"),
        "the frontmatter is not a mapping of keys to values"
    );
}

#[test]
fn skipped_with_a_key_that_is_not_text() {
    assert_eq!(
        reason("---\nname: s\ndescription: d\n1: x\n---\n"),
        "the frontmatter key `1` is not text"
    );
}

#[test]
fn skipped_without_a_name() {
    assert_eq!(
        reason("---\ndescription: d\n---\n"),
        "the frontmatter has no `name`"
    );
    assert_eq!(
        reason("---\nname: [a]\ndescription: d\n---\n"),
        "`name` must be text, got a list"
    );
}

#[test]
fn a_display_name_is_kept_and_the_directory_gives_the_id() {
    let long = "a".repeat(65);
    for display in [
        "My Skill",
        "Skill Development",
        "-lead",
        "under_score",
        "UPPER",
        &long,
    ] {
        let s = skill(&format!("---\nname: {display}\ndescription: d\n---\n"));
        assert_eq!(s.name, "s", "the directory `s` gives the id");
        assert_eq!(s.display_name.as_deref(), Some(display));
    }
    assert_eq!(
        skill("---\nname: s\ndescription: d\n---\n").display_name,
        None
    );
}

#[test]
fn skipped_when_neither_the_name_nor_the_directory_is_an_id() {
    let tree = Tree::new();
    let path = tree.skill_file(
        &tree.ws(".noeta/skills"),
        "Bad Dir",
        "---\nname: My Skill\ndescription: d\n---\n",
    );
    let listing = tree.list(Value::Null);
    assert!(listing.skills.is_empty());
    let why = skip_reason(&listing, &path);
    assert!(
        why.starts_with(
            "neither the name `My Skill` nor the directory name `Bad Dir` is a valid skill id"
        ),
        "{why}"
    );
}

#[test]
fn skipped_without_a_description() {
    assert_eq!(
        reason("---\nname: s\n---\n"),
        "the frontmatter has no `description`"
    );
    assert_eq!(
        reason("---\nname: s\ndescription: \"  \"\n---\n"),
        "the frontmatter has no `description`"
    );
    assert_eq!(
        reason("---\nname: s\ndescription: {a: b}\n---\n"),
        "`description` must be text, got a mapping"
    );
}

#[test]
fn skipped_with_a_priority_that_is_not_an_integer() {
    assert_eq!(
        reason("---\nname: s\ndescription: d\npriority: high\n---\n"),
        "`priority` must be an integer, got `high`"
    );
}

#[test]
fn skipped_with_a_flag_that_is_not_a_boolean() {
    assert_eq!(
        reason("---\nname: s\ndescription: d\ndisable-model-invocation: sometimes\n---\n"),
        "`disable-model-invocation` must be true or false, got `sometimes`"
    );
    assert_eq!(
        reason("---\nname: s\ndescription: d\nuser-invocable: 1\n---\n"),
        "`user-invocable` must be true or false, got `1`"
    );
}

#[test]
fn skipped_with_allowed_tools_of_the_wrong_shape() {
    assert_eq!(
        reason("---\nname: s\ndescription: d\nallowed-tools: {Read: true}\n---\n"),
        "`allowed-tools` must be a list of tool names or a comma-separated string, got a mapping"
    );
    assert_eq!(
        reason("---\nname: s\ndescription: d\nallowed-tools: [Read, 3]\n---\n"),
        "`allowed-tools` must list tool names, but one item is `3`"
    );
}

#[test]
fn skipped_when_not_utf8() {
    let tree = Tree::new();
    let path = tree.ws(".noeta/skills/s/SKILL.md");
    tree.write(&path, b"---\nname: s\ndescription: \xff\n---\n");
    let listing = tree.list(Value::Null);
    assert_eq!(skip_reason(&listing, &path), "SKILL.md is not UTF-8 text");
}

#[test]
fn skipped_when_too_large() {
    let tree = Tree::new();
    let path = tree.ws(".noeta/skills/s/SKILL.md");
    let mut text = crate::common::skill_md("s", "d");
    text.push_str(&"x".repeat(1024 * 1024));
    tree.write(&path, text);
    let listing = tree.list(Value::Null);
    let why = skip_reason(&listing, &path);
    assert!(why.ends_with("over the 1048576-byte limit"), "{why}");
}

#[test]
fn a_directory_without_a_skill_md_and_hidden_directories_are_not_candidates() {
    let tree = Tree::new();
    let dir = tree.ws(".noeta/skills");
    tree.write(&dir.join("notes/README.md"), "x");
    tree.write(
        &dir.join(".hidden/SKILL.md"),
        crate::common::skill_md("hidden", "x"),
    );
    tree.write(&dir.join("loose.md"), "x");
    let listing = tree.list(Value::Null);
    assert!(listing.skills.is_empty());
    assert!(listing.skipped.is_empty());
}

#[test]
fn the_skill_hash_is_the_sha256_of_its_file() {
    let tree = Tree::new();
    let path = tree.skill(&tree.ws(".noeta/skills"), "s", "d");
    let listing = tree.list(Value::Null);
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        listing.skills[0].sha256,
        noeta_core::canonical::sha256_hex(&bytes)
    );
}

#[test]
fn a_list_argument_hint_is_kept_as_written_and_a_mapping_is_refused() {
    // Loaded, not skipped; a text field written as a list keeps its text.
    let listed = skill("---\nname: release\ndescription: d\nargument-hint: [version]\n---\n");
    assert_eq!(listed.name, "release");
    let listed = skill("---\nname: release\ndescription: [ship, tag]\n---\n");
    assert_eq!(listed.description, "[ship, tag]");
    assert_eq!(
        reason("---\nname: release\ndescription: d\nargument-hint: {v: 1}\n---\n"),
        "`argument-hint` must be text, got a mapping"
    );
}
