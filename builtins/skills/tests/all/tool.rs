//! The `skill` control tool through the real runtime: activation, its record and hash, resume,
//! errors, and when the tool is offered.

use noeta_core::canonical::sha256_hex;
use noeta_core::runner::RunOutcome;
use serde_json::{Value, json};

use crate::common::{Run, call_then_done, done, skill_md, tool_names};

fn run_with(skills: &[(&str, &str)]) -> Run {
    let run = Run::new(Value::Null);
    for (name, text) in skills {
        let path = run.tree.ws(".noeta/skills").join(name).join("SKILL.md");
        run.tree.write(&path, text);
    }
    run
}

const DEPLOY: &str = "---\nname: deploy\ndescription: Deploy the service.\nversion: \"3\"\n---\n\nDeploy to $ARGUMENTS with care.\n";

#[test]
fn activation_returns_the_body_and_records_the_file_hash() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn(
        "t",
        "ship it",
        call_then_done("skill", json!({ "skill": "deploy", "args": "staging" })),
    );
    let results = run.results("t");
    let dir = run.tree.ws(".noeta/skills/deploy");
    assert_eq!(
        results,
        vec![(
            format!(
                "Skill `deploy` is active. Base directory for this skill: {}\n\nDeploy to staging with care.\n",
                dir.display()
            ),
            false
        )]
    );
    let activated: Vec<Value> = run
        .records("t")
        .into_iter()
        .filter(|(kind, _)| kind == "activated")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(
        activated,
        vec![json!({
            "name": "deploy",
            "tier": "workspace",
            "dir": dir.to_string_lossy(),
            "sha256": sha256_hex(DEPLOY.as_bytes()),
            "version": "3",
            "args": "staging",
        })]
    );
}

#[test]
fn a_resume_folds_the_activation_back() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn(
        "t",
        "ship it",
        call_then_done("skill", json!({ "skill": "deploy" })),
    );
    // A fresh fold of the log, as another worker would do it.
    let state = run.state("t");
    let skills = state.ext_state("skills").unwrap();
    assert_eq!(
        skills["active"]["deploy"]["sha256"],
        json!(sha256_hex(DEPLOY.as_bytes()))
    );
    assert_eq!(skills["skills"][0]["name"], json!("deploy"));
}

#[test]
fn without_arguments_the_placeholder_is_emptied_and_arguments_are_appended_when_there_is_none() {
    let run = run_with(&[("deploy", DEPLOY), ("plain", &skill_md("plain", "Plain."))]);
    run.turn(
        "t",
        "go",
        json!([
            { "calls": [
                { "name": "skill", "input": { "skill": "deploy" } },
                { "name": "skill", "input": { "skill": "plain", "args": "x y" } }
            ] },
            { "text": "done" }
        ]),
    );
    let results = run.results("t");
    assert!(
        results[0].0.ends_with("\n\nDeploy to  with care.\n"),
        "{}",
        results[0].0
    );
    assert!(
        results[1]
            .0
            .ends_with("\n\nInstructions of plain.\n\nARGUMENTS: x y"),
        "{}",
        results[1].0
    );
}

#[test]
fn an_unknown_skill_is_an_error_naming_it_and_the_available_ones() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn(
        "t",
        "go",
        call_then_done("skill", json!({ "skill": "deplyo" })),
    );
    assert_eq!(
        run.results("t"),
        vec![(
            "skill: unknown skill `deplyo` (available: deploy)".to_owned(),
            true
        )]
    );
    assert!(!run.records("t").iter().any(|(kind, _)| kind == "activated"));
}

#[test]
fn a_disable_model_invocation_skill_cannot_be_activated_by_the_model() {
    let manual = "---\nname: manual\ndescription: Only when asked.\ndisable-model-invocation: true\n---\nSecret steps.\n";
    let run = run_with(&[("deploy", DEPLOY), ("manual", manual)]);
    run.turn(
        "t",
        "go",
        call_then_done("skill", json!({ "skill": "manual" })),
    );
    let results = run.results("t");
    assert_eq!(
        results,
        vec![(
            "skill: `manual` cannot be activated by the model — its SKILL.md sets `disable-model-invocation`, so only the user activates it".to_owned(),
            true
        )]
    );
    assert!(!run.records("t").iter().any(|(kind, _)| kind == "activated"));
}

#[test]
fn a_skill_whose_file_broke_since_indexing_is_an_error_naming_the_file() {
    let run = Run::new(json!({ "tool_enforcement": "approve" }));
    let skills = run.tree.ws(".noeta/skills");
    run.tree.write(
        &skills.join("limited/SKILL.md"),
        "---\nname: limited\ndescription: d\nallowed-tools: Read\n---\nRead only.\n",
    );
    run.tree.write(&skills.join("deploy/SKILL.md"), DEPLOY);
    let outcome = run.turn(
        "t",
        "go",
        json!([
            { "calls": [{ "name": "skill", "input": { "skill": "limited" } }] },
            { "calls": [{ "name": "Bash", "input": {} }] },
            { "calls": [{ "name": "skill", "input": { "skill": "deploy" } }] },
            { "text": "done" }
        ]),
    );
    let RunOutcome::Parked { call_id, .. } = outcome else {
        panic!("{outcome:?}");
    };
    // While the turn waits, the file breaks; the index of this turn still lists the skill.
    std::fs::write(skills.join("deploy/SKILL.md"), "no frontmatter").unwrap();
    run.answer("t", &call_id, true);
    let results = run.results("t");
    let path = skills.join("deploy/SKILL.md");
    assert_eq!(
        results[2],
        (
            format!(
                "skill: `deploy` cannot be read now (`{}`): SKILL.md does not start with a `---` frontmatter fence",
                path.display()
            ),
            true
        )
    );
}

#[test]
fn a_call_without_a_name_is_an_error_saying_so() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn("t", "go", call_then_done("skill", json!({ "skill": " " })));
    assert_eq!(
        run.results("t"),
        vec![("skill: give the skill's name in `skill`".to_owned(), true)]
    );
}

#[test]
fn the_tool_is_withheld_while_no_skill_can_be_activated() {
    let manual = "---\nname: manual\ndescription: d\ndisable-model-invocation: true\n---\n";
    let run = run_with(&[("manual", manual)]);
    run.turn("t", "go", done());
    assert!(!tool_names(&run.last()).contains(&"skill".to_owned()));
    run.tree
        .write(&run.tree.ws(".noeta/skills/deploy/SKILL.md"), DEPLOY);
    run.turn("t", "again", done());
    assert!(tool_names(&run.last()).contains(&"skill".to_owned()));
}

#[test]
fn the_index_is_recorded_once_and_again_only_when_it_changed() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn("t", "one", done());
    run.turn("t", "two", done());
    let indexed = |run: &Run| {
        run.records("t")
            .iter()
            .filter(|(kind, _)| kind == "indexed")
            .count()
    };
    assert_eq!(indexed(&run), 1);
    run.tree.write(
        &run.tree.ws(".noeta/skills/deploy/SKILL.md"),
        DEPLOY.replace("with care", "carefully"),
    );
    run.turn("t", "three", done());
    assert_eq!(indexed(&run), 2);
}

#[test]
fn activations_end_at_the_next_user_message() {
    let run = run_with(&[("deploy", DEPLOY)]);
    run.turn(
        "t",
        "go",
        call_then_done("skill", json!({ "skill": "deploy" })),
    );
    assert!(run.state("t").ext_state("skills").unwrap()["active"]["deploy"].is_object());
    run.turn("t", "something else", done());
    assert_eq!(
        run.state("t").ext_state("skills").unwrap()["active"],
        json!({})
    );
    let kinds: Vec<String> = run.records("t").into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(kinds, ["indexed", "activated", "cleared"]);
}

type Asked = std::sync::Arc<std::sync::Mutex<Vec<Vec<(String, String)>>>>;

/// Asks the other extensions for their compaction residents before every request.
struct Asker(Asked);

#[async_trait::async_trait]
impl noeta_core::extension::Extension for Asker {
    fn name(&self) -> &str {
        "asker"
    }
    async fn before_model(
        &self,
        view: &noeta_core::extension::View<'_>,
        request: noeta_core::model::ModelRequest,
    ) -> Result<noeta_core::model::ModelRequest, noeta_core::extension::StepSignal> {
        self.0.lock().unwrap().push(view.ask_residents("asker"));
        Ok(request)
    }
}

#[test]
fn active_skills_stay_named_through_a_compaction() {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let run =
        run_with(&[("deploy", DEPLOY)]).with_extension(std::sync::Arc::new(Asker(asked.clone())));
    run.turn(
        "t",
        "go",
        call_then_done("skill", json!({ "skill": "deploy" })),
    );
    let asked = asked.lock().unwrap().clone();
    assert!(asked[0].is_empty(), "{asked:?}");
    let dir = run.tree.ws(".noeta/skills/deploy");
    assert_eq!(
        asked[1],
        vec![(
            "skills".to_owned(),
            format!(
                "Skills active in this turn (their instructions still apply; activate one again to re-read them):\n- `deploy` (base directory: {})",
                dir.display()
            )
        )]
    );
}

#[test]
fn the_skills_command_shows_the_index_and_what_is_active() {
    let manual = "---\nname: manual\ndescription: By hand.\ndisable-model-invocation: true\n---\n";
    let run = run_with(&[("deploy", DEPLOY), ("manual", manual)]);
    run.turn(
        "t",
        "go",
        call_then_done("skill", json!({ "skill": "deploy" })),
    );
    assert_eq!(
        run.command("t", "skills"),
        "deploy (workspace, active): Deploy the service.\nmanual (workspace, user only): By hand."
    );
    let empty = Run::new(Value::Null);
    empty.turn("t", "go", done());
    assert_eq!(empty.command("t", "skills"), "No skills are indexed.");
}

#[test]
fn a_plugin_skill_with_a_display_name_is_activated_by_its_id() {
    let tree = crate::common::Tree::new();
    let dir = tree.path("plugins/dev/skills");
    tree.skill_file(
        &dir,
        "skill-development",
        "---\nname: Skill Development\ndescription: How to write skills.\n---\n\nWrite them well.\n",
    );
    let run = crate::common::Run::with_tree(
        tree,
        json!({ "plugin_skill_dirs": [{ "plugin": "dev", "dir": dir }] }),
        Vec::new(),
    );
    run.turn(
        "t",
        "teach me",
        call_then_done("skill", json!({ "skill": "dev:skill-development" })),
    );
    let results = run.results("t");
    assert!(
        results[0]
            .0
            .starts_with("Skill `dev:skill-development` is active."),
        "{results:?}"
    );
    assert!(results[0].0.ends_with("Write them well.\n"), "{results:?}");
}
