//! The `skills` extension: indexes the tiers, records the index, lists it, and gates calls while
//! skills are active.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::Verdict;
use noeta_core::extension::{
    CommandReply, CommandSpec, ContextPart, Extension, HookError, HookResult, OfferedTool,
    ToolChanges, View,
};
use noeta_core::model::ToolCall;
use noeta_core::records::ERASED_KIND;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::index::{self, IndexedSkill, Tier};
use crate::menu;
use crate::settings::{Enforcement, Settings};
use crate::tools::{SCRIPT_TOOL, SKILL_TOOL, activate, check_script};

/// The extension's name; its records are `skills/indexed`, `skills/activated`, `skills/cleared`.
pub(crate) const EXTENSION: &str = "skills";

/// One activation, as recorded by the `skill` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Activation {
    pub(crate) name: String,
    pub(crate) tier: Tier,
    /// The skill's directory.
    pub(crate) dir: String,
    /// SHA-256 of the SKILL.md bytes returned.
    pub(crate) sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) args: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) allowed_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) scripts: Vec<String>,
    /// Made by `/<skill>` for the message it sends: the next turn's intake keeps it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) for_next_message: bool,
}

/// What the records fold to.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct State {
    /// Whether an index was recorded.
    #[serde(default)]
    pub(crate) indexed: bool,
    /// The index, by name.
    #[serde(default)]
    pub(crate) skills: Vec<IndexedSkill>,
    /// The skills active in this turn, by name.
    #[serde(default)]
    pub(crate) active: BTreeMap<String, Activation>,
    /// The listing resident, rendered once when the index is folded (not on every compose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) listing: Option<String>,
    /// Whether any indexed skill may be activated by the model.
    #[serde(default)]
    pub(crate) invocable: bool,
}

/// The part of the folded state the per-step hooks read (`context` reads the listing text
/// in place): not the index, so a step does not decode every indexed skill.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Live {
    #[serde(default)]
    pub(crate) active: BTreeMap<String, Activation>,
    #[serde(default)]
    pub(crate) invocable: bool,
}

impl Live {
    /// The live part of the folded state (the default when there is none or it does not read).
    pub(crate) fn from_value(value: Option<&Value>) -> Self {
        value
            .and_then(|v| Self::deserialize(v).ok())
            .unwrap_or_default()
    }
}

impl State {
    /// The folded state (the default when there is none or it does not read).
    pub(crate) fn from_value(value: Option<&Value>) -> Self {
        value
            .and_then(|v| Self::deserialize(v).ok())
            .unwrap_or_default()
    }

    pub(crate) fn skill(&self, name: &str) -> Option<&IndexedSkill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// The `skills` extension.
pub(crate) struct Skills {
    settings: Settings,
    home: Option<PathBuf>,
    plugin_dirs: Vec<(String, PathBuf)>,
}

impl Skills {
    pub(crate) fn new(
        settings: Settings,
        home: Option<PathBuf>,
        plugin_dirs: Vec<(String, PathBuf)>,
    ) -> Self {
        Self {
            settings,
            home,
            plugin_dirs,
        }
    }

    /// Indexes the tiers now and records the index when it differs from the folded one.
    fn index(&self, view: &View<'_>, state: &State) -> HookResult<()> {
        let skills = self.tiers_now(view)?;
        if state.indexed && state.skills == skills {
            return Ok(());
        }
        let data = serde_json::to_value(&skills).map_err(|err| HookError::new(err.to_string()))?;
        view.record(EXTENSION, "indexed", json!({ "skills": data }));
        Ok(())
    }

    /// The skills as indexed in the task, or — before the task has an index (a command run on
    /// a new task) — as the tiers hold them now.
    fn current(&self, view: &View<'_>) -> HookResult<Vec<IndexedSkill>> {
        let state = State::from_value(view.ext_state(EXTENSION));
        if state.indexed {
            return Ok(state.skills);
        }
        self.tiers_now(view)
    }

    /// The skills the tiers hold now.
    fn tiers_now(&self, view: &View<'_>) -> HookResult<Vec<IndexedSkill>> {
        let dirs = index::tier_dirs(
            &self.settings,
            view.workspace(),
            self.home.as_deref(),
            &self.plugin_dirs,
        )
        .map_err(HookError::new)?;
        Ok(index::build(dirs).skills.into_values().collect())
    }

    /// `/<skill> args`: activates the skill as the `skill` tool does and sends its
    /// instructions, with the arguments, as the message. In a started task the activation is
    /// recorded (so its `allowed-tools` apply); a task the command starts has no record yet to
    /// hold it, and gets the instructions alone.
    fn invoke(&self, view: &View<'_>, name: &str, args: &str) -> HookResult<CommandReply> {
        let state = State::from_value(view.ext_state(EXTENSION));
        let started = state.indexed;
        let skills = self.current(view)?;
        let Some(skill) = skills.iter().find(|s| s.name == name) else {
            return Err(HookError::new(format!("unknown command `/{name}`")));
        };
        if !skill.user_invocable {
            return Err(HookError::new(format!(
                "`/{name}`: the skill sets `user-invocable: false`; only the model activates it"
            )));
        }
        let args = Some(args.trim()).filter(|a| !a.is_empty());
        let (activation, text) = activate(
            skill,
            args,
            self.settings.tool_enforcement,
            self.settings.allow_skill_scripts,
        )
        .map_err(HookError::new)?;
        if started {
            self.index(view, &state)?;
            let activation = Activation {
                for_next_message: true,
                ..activation
            };
            let data =
                serde_json::to_value(&activation).map_err(|e| HookError::new(e.to_string()))?;
            view.record(EXTENSION, "activated", data);
        }
        Ok(CommandReply::Send(text))
    }

    /// The tools `call` may not use under the active skills' `allowed-tools`: the verdict, or
    /// `None` when the active skills do not restrict it.
    fn enforce(&self, active: &BTreeMap<String, Activation>, tool: &str) -> Option<Verdict> {
        if self.settings.tool_enforcement == Enforcement::Off || tool == SKILL_TOOL {
            return None;
        }
        let declaring: Vec<&Activation> = active
            .values()
            .filter(|a| a.allowed_tools.is_some())
            .collect();
        if declaring.is_empty() {
            return None;
        }
        let granted = declaring
            .iter()
            .flat_map(|a| a.allowed_tools.iter().flatten())
            .any(|grant| grants(grant, tool));
        if granted {
            return None;
        }
        let names: Vec<String> = declaring.iter().map(|a| format!("`{}`", a.name)).collect();
        let mut allowed: Vec<&str> = declaring
            .iter()
            .flat_map(|a| a.allowed_tools.iter().flatten())
            .map(String::as_str)
            .collect();
        allowed.sort_unstable();
        allowed.dedup();
        let allowed = if allowed.is_empty() {
            "no tools".to_owned()
        } else {
            allowed.join(", ")
        };
        let (who, verb) = if names.len() == 1 {
            (format!("the active skill {}", names[0]), "allows")
        } else {
            (format!("the active skills {}", names.join(", ")), "allow")
        };
        Some(match self.settings.tool_enforcement {
            Enforcement::Deny => Verdict::Deny {
                reason: format!(
                    "`{tool}` is not allowed: {who} {verb} only {allowed} (allowed-tools)"
                ),
            },
            _ => Verdict::Ask {
                reason: format!(
                    "{who} {verb} only {allowed} (allowed-tools) — allow this call of `{tool}`?"
                ),
                firm: false,
            },
        })
    }
}

/// Whether an `allowed-tools` entry grants `tool`: the exact name, the name before an argument
/// pattern (`Bash(git:*)` grants `Bash`), or a prefix ending in `*`.
fn grants(grant: &str, tool: &str) -> bool {
    let name = grant.split('(').next().unwrap_or(grant).trim();
    match name.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => name == tool,
    }
}

#[async_trait]
impl Extension for Skills {
    fn name(&self) -> &str {
        EXTENSION
    }

    async fn on_start(&self, view: &View<'_>) -> HookResult<()> {
        let state = State::from_value(view.ext_state(EXTENSION));
        if state.indexed {
            return Ok(());
        }
        self.index(view, &state)
    }

    /// Each user message re-reads the tiers and ends the last turn's activations — but not
    /// one a `/<skill>` command made for this very message.
    async fn turn_intake(&self, view: &View<'_>, _message: &str) -> HookResult<()> {
        let state = State::from_value(view.ext_state(EXTENSION));
        self.index(view, &state)?;
        if !state.active.is_empty() {
            let keep: Vec<&str> = state
                .active
                .values()
                .filter(|a| a.for_next_message)
                .map(|a| a.name.as_str())
                .collect();
            view.record(EXTENSION, "cleared", json!({ "keep": keep }));
        }
        Ok(())
    }

    fn tool_changes(&self, view: &View<'_>, offered: &[OfferedTool]) -> HookResult<ToolChanges> {
        let state = Live::from_value(view.ext_state(EXTENSION));
        let mut changes = ToolChanges::none();
        let offers = |name: &str| offered.iter().any(|t| t.tool.name() == name);
        if offers(SKILL_TOOL) && !state.invocable {
            changes.withhold.push((
                SKILL_TOOL.to_owned(),
                "no skill is available to activate".to_owned(),
            ));
        }
        if offers(SCRIPT_TOOL) && !state.active.values().any(|a| !a.scripts.is_empty()) {
            changes.withhold.push((
                SCRIPT_TOOL.to_owned(),
                "no active skill ships scripts — activate one with the `skill` tool first"
                    .to_owned(),
            ));
        }
        Ok(changes)
    }

    fn context(&self, view: &View<'_>) -> HookResult<Vec<ContextPart>> {
        let listing = view
            .ext_state(EXTENSION)
            .and_then(|s| s.get("listing"))
            .and_then(Value::as_str);
        Ok(listing
            .map(|text| vec![ContextPart::resident_of(crate::LISTING_KIND.0, text)])
            .unwrap_or_default())
    }

    async fn before_tool(&self, view: &View<'_>, call: &ToolCall) -> HookResult<Option<Verdict>> {
        let state = Live::from_value(view.ext_state(EXTENSION));
        if call.name == SCRIPT_TOOL {
            return Ok(Some(match check_script(&state.active, &call.input) {
                Ok(script) => Verdict::Ask {
                    reason: format!(
                        "run the script `{}` of the skill `{}`{}?",
                        script.relpath,
                        script.activation.name,
                        if script.args.is_empty() {
                            String::new()
                        } else {
                            format!(" with arguments {}", script.args.join(" "))
                        }
                    ),
                    firm: true,
                },
                Err(reason) => Verdict::Deny { reason },
            }));
        }
        Ok(self.enforce(&state.active, &call.name))
    }

    /// What must stay after compaction: which skills are active.
    fn resident(&self, view: &View<'_>) -> HookResult<Option<String>> {
        let state = State::from_value(view.ext_state(EXTENSION));
        if state.active.is_empty() {
            return Ok(None);
        }
        let lines: Vec<String> = state
            .active
            .values()
            .map(|a| format!("- `{}` (base directory: {})", a.name, a.dir))
            .collect();
        Ok(Some(format!(
            "Skills active in this turn (their instructions still apply; activate one again to re-read them):\n{}",
            lines.join("\n")
        )))
    }

    fn reduce(&self, state: &mut Value, kind: &str, data: &Value) -> Result<(), String> {
        let mut folded = if state.is_null() {
            State::default()
        } else {
            State::deserialize(&*state).map_err(|err| format!("bad folded state: {err}"))?
        };
        match kind {
            "indexed" => {
                folded.skills = Vec::<IndexedSkill>::deserialize(&data["skills"])
                    .map_err(|err| format!("bad `indexed` record: {err}"))?;
                folded.indexed = true;
                folded.listing = menu::listing(&folded.skills, self.settings.listing_budget_tokens);
                folded.invocable = folded.skills.iter().any(|s| !s.disable_model_invocation);
            }
            "activated" => {
                let activation = Activation::deserialize(data)
                    .map_err(|err| format!("bad `activated` record: {err}"))?;
                folded.active.insert(activation.name.clone(), activation);
            }
            "cleared" => {
                // Kept: activations a command made for the message this turn starts with; they
                // end with the turn like any other.
                let keep: Vec<&str> = data
                    .get("keep")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                folded
                    .active
                    .retain(|name, _| keep.contains(&name.as_str()));
                for activation in folded.active.values_mut() {
                    activation.for_next_message = false;
                }
            }
            ERASED_KIND => return Ok(()),
            other => return Err(format!("unknown record kind `{other}`")),
        }
        *state = serde_json::to_value(&folded).map_err(|err| err.to_string())?;
        Ok(())
    }

    /// `/skills`, and `/<skill>` for every skill a person may invoke (`user-invocable`, the
    /// default), `disable-model-invocation` ones included.
    fn commands(&self, view: &View<'_>) -> HookResult<Vec<CommandSpec>> {
        let mut commands = vec![CommandSpec {
            name: "skills".to_owned(),
            description: "Show the indexed skills and which are active.".to_owned(),
        }];
        for skill in self.current(view)? {
            if !skill.user_invocable || skill.name == "skills" {
                continue;
            }
            let mut description = format!("{} (skill, {})", skill.description, skill.tier.as_str());
            if let Some(hint) = &skill.argument_hint {
                description.push_str(&format!(" — arguments: {hint}"));
            }
            commands.push(CommandSpec {
                name: skill.name,
                description,
            });
        }
        Ok(commands)
    }

    async fn run_command(
        &self,
        view: &View<'_>,
        name: &str,
        args: &str,
    ) -> HookResult<CommandReply> {
        if name != "skills" {
            return self.invoke(view, name, args);
        }
        let state = State::from_value(view.ext_state(EXTENSION));
        if state.skills.is_empty() {
            return Ok(CommandReply::Show("No skills are indexed.".to_owned()));
        }
        Ok(CommandReply::Show(
            state
                .skills
                .iter()
                .map(|s| {
                    let mut notes = vec![s.tier.as_str().to_owned()];
                    if state.active.contains_key(&s.name) {
                        notes.push("active".to_owned());
                    }
                    if s.disable_model_invocation {
                        notes.push("user only".to_owned());
                    }
                    format!("{} ({}): {}", s.name, notes.join(", "), s.description)
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ))
    }
}

/// The extension as the pack adds it.
pub(crate) fn extension(
    settings: Settings,
    home: Option<PathBuf>,
    plugin_dirs: Vec<(String, PathBuf)>,
) -> Arc<dyn Extension> {
    Arc::new(Skills::new(settings, home, plugin_dirs))
}

#[cfg(test)]
mod tests {
    use super::grants;

    #[test]
    fn grants_match_names_patterns_and_prefixes() {
        assert!(grants("Read", "Read"));
        assert!(!grants("Read", "ReadMore"));
        assert!(grants("Bash(git:*)", "Bash"));
        assert!(grants("mcp__docs__*", "mcp__docs__search"));
        assert!(!grants("mcp__docs__*", "mcp__other__x"));
    }
}
