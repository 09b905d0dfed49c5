//! The `skill` control tool (activates a skill) and `run_skill_script` (runs a script an active
//! skill ships, always after asking).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use noeta_core::exec::ExecCommand;
use noeta_core::{Risk, Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

use crate::extension::{Activation, EXTENSION, Live, State};
use crate::frontmatter::SkillFile;
use crate::index::{IndexedSkill, SKILL_FILE, interpreter, read_skill_file};
use crate::settings::{Enforcement, Settings};

/// The control tool's model-visible name.
pub(crate) const SKILL_TOOL: &str = "skill";

/// The script tool's model-visible name.
pub(crate) const SCRIPT_TOOL: &str = "run_skill_script";

/// The longest `args` text of an activation.
const MAX_ARGS_CHARS: usize = 4_096;

/// At most this many script arguments, each at most [`MAX_ARGS_CHARS`].
const MAX_SCRIPT_ARGS: usize = 16;

/// The largest script run.
pub(crate) const MAX_SCRIPT_BYTES: u64 = 64 * 1024;

/// Bytes kept of each of a script's standard output and error.
pub(crate) const SCRIPT_OUTPUT_CAP: usize = 15_000;

const SKILL_DESCRIPTION: &str = "\
Activate a skill: packaged instructions (sometimes with scripts) for a kind of task. The skills \
you can activate are listed in your context. When a request matches a skill's description, call \
this tool with the skill's name before doing the work, then follow the instructions it returns. \
Pass `args` when the skill takes arguments. Activating a skill again re-reads its instructions.";

const SCRIPT_DESCRIPTION: &str = "\
Run a script shipped in the directory of a skill active in this turn, when its instructions say \
to. `relpath` is the script's path relative to the skill's directory (`.sh` runs with bash, \
`.py` with python3, `.js`/`.mjs` with node); `args` are passed to it. The user is asked before \
every run.";

/// The `skill` control tool.
pub(crate) struct SkillTool {
    enforcement: Enforcement,
    scripts: bool,
}

impl SkillTool {
    pub(crate) fn new(settings: &Settings) -> Self {
        Self {
            enforcement: settings.tool_enforcement,
            scripts: settings.allow_skill_scripts,
        }
    }
}

/// The skill's body with its arguments: `$ARGUMENTS` replaced, or the arguments appended.
fn with_arguments(body: &str, args: Option<&str>) -> String {
    if body.contains("$ARGUMENTS") {
        return body.replace("$ARGUMENTS", args.unwrap_or_default());
    }
    match args {
        Some(args) => format!("{}\n\nARGUMENTS: {args}", body.trim_end()),
        None => body.to_owned(),
    }
}

fn respond(message: String) -> ToolError {
    ToolError::RespondToModel(message)
}

#[async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &str {
        SKILL_TOOL
    }

    fn description(&self) -> &str {
        SKILL_DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string", "description": "The skill's name, as listed"},
                "args": {
                    "type": "string",
                    "description": "Arguments for the skill, if it takes any",
                    "maxLength": MAX_ARGS_CHARS
                }
            },
            "required": ["skill"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default()
            .safe_while_planning()
            // Its only effect is its record, which commits with its result.
            .retry_safe()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = input
            .get("skill")
            .and_then(Value::as_str)
            .map(|n| n.trim().trim_start_matches('/'))
            .filter(|n| !n.is_empty())
            .ok_or_else(|| respond("skill: give the skill's name in `skill`".to_owned()))?;
        let args = input
            .get("args")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let state = State::from_value(ctx.state(EXTENSION));
        let Some(skill) = state.skill(name) else {
            let available: Vec<&str> = state
                .skills
                .iter()
                .filter(|s| !s.disable_model_invocation)
                .map(|s| s.name.as_str())
                .collect();
            return Err(respond(format!(
                "skill: unknown skill `{name}` (available: {})",
                if available.is_empty() {
                    "none".to_owned()
                } else {
                    available.join(", ")
                }
            )));
        };
        if skill.disable_model_invocation {
            return Err(respond(format!(
                "skill: `{name}` cannot be activated by the model — its SKILL.md sets `disable-model-invocation`, so only the user activates it"
            )));
        }
        let (activation, text) =
            activate(skill, args, self.enforcement, self.scripts).map_err(respond)?;
        let data =
            serde_json::to_value(&activation).map_err(|err| ToolError::Fatal(err.to_string()))?;
        ctx.record(EXTENSION, "activated", data);
        Ok(ToolOutput::text(text))
    }
}

/// Activates `skill` (with `args`): reads its SKILL.md now, checks it still names itself as
/// indexed, and gives the activation to record and the text that brings the skill in — for the
/// `skill` tool and for `/<skill>` alike.
pub(crate) fn activate(
    skill: &IndexedSkill,
    args: Option<&str>,
    enforcement: Enforcement,
    scripts: bool,
) -> Result<(Activation, String), String> {
    let name = skill.name.as_str();
    let path = Path::new(&skill.dir).join(SKILL_FILE);
    let (bytes, file) = read_skill_file(&path)
        .and_then(|(bytes, text)| SkillFile::parse(&text).map(|f| (bytes, f)))
        .map_err(|reason| {
            format!(
                "skill: `{name}` cannot be read now (`{}`): {reason}",
                path.display()
            )
        })?;
    // The id it is indexed by: its name (or its directory's, for a display name), under
    // its Claude Code plugin's prefix when it has one.
    let dir_name = Path::new(&skill.dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = file
        .id(&dir_name)
        .map(|(id, _)| match skill.name.split_once(':') {
            Some((plugin, _)) => format!("{plugin}:{id}"),
            None => id,
        });
    if id.as_deref() != Ok(skill.name.as_str()) {
        return Err(format!(
            "skill: `{}` now names itself `{}`; it is activated under the name it is listed by once the skills are indexed again",
            path.display(),
            file.name
        ));
    }
    let activation = Activation {
        name: skill.name.clone(),
        tier: skill.tier,
        dir: skill.dir.clone(),
        sha256: noeta_core::canonical::sha256_hex(&bytes),
        version: file.version.clone(),
        args: args.map(str::to_owned),
        allowed_tools: file.allowed_tools.clone(),
        scripts: skill.scripts.clone(),
        for_next_message: false,
    };
    let mut text = format!(
        "Skill `{}` is active. Base directory for this skill: {}\n",
        skill.name, skill.dir
    );
    if let (Some(tools), true) = (&file.allowed_tools, enforcement != Enforcement::Off) {
        text.push_str(&format!(
            "While it is active, use only these tools: {}\n",
            if tools.is_empty() {
                "none".to_owned()
            } else {
                tools.join(", ")
            }
        ));
    }
    if scripts && !skill.scripts.is_empty() {
        text.push_str(&format!(
            "Its scripts (run them with `{SCRIPT_TOOL}`): {}\n",
            skill.scripts.join(", ")
        ));
    }
    text.push('\n');
    text.push_str(&with_arguments(&file.body, args));
    Ok((activation, text))
}

/// A script call that passed the checks.
pub(crate) struct ScriptCall {
    pub(crate) activation: Activation,
    pub(crate) relpath: String,
    pub(crate) args: Vec<String>,
}

/// Checks a `run_skill_script` input against the active skills: the skill is active, the path
/// is one of its indexed scripts and stays in its directory. The error names what is wrong.
pub(crate) fn check_script(
    active: &BTreeMap<String, Activation>,
    input: &Value,
) -> Result<ScriptCall, String> {
    let skill = input
        .get("skill")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{SCRIPT_TOOL}: give the skill's name in `skill`"))?;
    let relpath = input
        .get("relpath")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{SCRIPT_TOOL}: give the script's path in `relpath`"))?;
    let args: Vec<String> = match input.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("{SCRIPT_TOOL}: `args` must be a list of strings"))?,
        Some(_) => return Err(format!("{SCRIPT_TOOL}: `args` must be a list of strings")),
    };
    if args.len() > MAX_SCRIPT_ARGS || args.iter().any(|a| a.chars().count() > MAX_ARGS_CHARS) {
        return Err(format!(
            "{SCRIPT_TOOL}: at most {MAX_SCRIPT_ARGS} arguments of at most {MAX_ARGS_CHARS} characters each"
        ));
    }
    let activation = active.get(skill).ok_or_else(|| {
        format!(
            "{SCRIPT_TOOL}: the skill `{skill}` is not active — activate it with the `{SKILL_TOOL}` tool first"
        )
    })?;
    let lexical_ok = !relpath.is_empty()
        && Path::new(relpath)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !lexical_ok {
        return Err(format!(
            "{SCRIPT_TOOL}: `{relpath}` is outside the directory of the skill `{skill}` — give a path relative to it"
        ));
    }
    if !activation.scripts.iter().any(|s| s == relpath) {
        return Err(format!(
            "{SCRIPT_TOOL}: `{relpath}` is not a script of the skill `{skill}` (its scripts: {})",
            if activation.scripts.is_empty() {
                "none".to_owned()
            } else {
                activation.scripts.join(", ")
            }
        ));
    }
    Ok(ScriptCall {
        activation: activation.clone(),
        relpath: relpath.to_owned(),
        args,
    })
}

/// The script's real path, fenced to the skill's real directory.
fn fenced(dir: &Path, relpath: &str) -> Result<PathBuf, String> {
    let real_dir = dir
        .canonicalize()
        .map_err(|err| format!("the skill's directory `{}`: {err}", dir.display()))?;
    let real = dir
        .join(relpath)
        .canonicalize()
        .map_err(|err| format!("`{relpath}`: {err}"))?;
    if !real.starts_with(&real_dir) {
        return Err(format!(
            "`{relpath}` resolves outside the skill's directory `{}`",
            real_dir.display()
        ));
    }
    let meta = std::fs::metadata(&real).map_err(|err| format!("`{relpath}`: {err}"))?;
    if !meta.is_file() {
        return Err(format!("`{relpath}` is not a file"));
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "`{relpath}` has {} bytes, over the {MAX_SCRIPT_BYTES}-byte limit for skill scripts",
            meta.len()
        ));
    }
    Ok(real)
}

/// The `run_skill_script` tool.
pub(crate) struct RunSkillScript {
    timeout: Duration,
}

impl RunSkillScript {
    pub(crate) fn new(settings: &Settings) -> Self {
        Self {
            timeout: Duration::from_secs(settings.script_timeout_secs),
        }
    }
}

#[async_trait]
impl Tool for RunSkillScript {
    fn name(&self) -> &str {
        SCRIPT_TOOL
    }

    fn description(&self) -> &str {
        SCRIPT_DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string", "description": "The active skill that ships the script"},
                "relpath": {"type": "string", "description": "The script's path relative to the skill's directory"},
                "args": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": MAX_ARGS_CHARS},
                    "maxItems": MAX_SCRIPT_ARGS,
                    "description": "Arguments passed to the script"
                }
            },
            "required": ["skill", "relpath"],
            "additionalProperties": false
        })
    }

    fn flags(&self) -> ToolFlags {
        ToolFlags::default().with_risk(Risk::High)
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let state = Live::from_value(ctx.state(EXTENSION));
        let call = check_script(&state.active, &input).map_err(respond)?;
        let script = fenced(Path::new(&call.activation.dir), &call.relpath)
            .map_err(|why| respond(format!("{SCRIPT_TOOL}: {why}")))?;
        let program = interpreter(&script).ok_or_else(|| {
            respond(format!(
                "{SCRIPT_TOOL}: `{}` has no runnable suffix",
                call.relpath
            ))
        })?;
        let exec = ctx.exec_env().ok_or_else(|| {
            ToolError::Fatal("no execution environment is available to run skill scripts".into())
        })?;
        let mut args = vec![script.to_string_lossy().into_owned()];
        args.extend(call.args);
        let command = ExecCommand::new(program, args)
            .with_timeout(self.timeout)
            .with_output_cap(SCRIPT_OUTPUT_CAP)
            .with_env("NOETA_SKILL_DIR", call.activation.dir.clone());
        let out = exec
            .run(&command)
            .await
            .map_err(|err| respond(format!("{SCRIPT_TOOL}: {err}")))?;
        let mut text = match (out.timed_out, out.status) {
            (true, _) => format!(
                "`{}` was stopped after {} seconds",
                call.relpath,
                self.timeout.as_secs()
            ),
            (false, Some(code)) => format!("`{}` exited with code {code}", call.relpath),
            (false, None) => format!("`{}` was ended by a signal", call.relpath),
        };
        for (label, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if !bytes.is_empty() {
                text.push_str(&format!(
                    "\n--- {label} ---\n{}",
                    String::from_utf8_lossy(bytes).trim_end()
                ));
            }
        }
        if out.dropped > 0 {
            text.push_str(&format!(
                "\n[{} bytes of output were dropped past the {SCRIPT_OUTPUT_CAP}-byte cap per stream]",
                out.dropped
            ));
        }
        let failed = out.timed_out || out.status != Some(0);
        Ok(if failed {
            ToolOutput::error(text)
        } else {
            ToolOutput::text(text)
        })
    }
}
