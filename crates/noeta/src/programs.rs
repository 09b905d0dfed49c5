//! What `noeta plugins check --resolve` reports about plugins that bring a program: it starts
//! each one, performs the handshake, ends it, and compares what the program offers with the
//! `command:<export>` refs its manifest makes.

use std::sync::Arc;

use noeta_core::plugin_command::command_export;
use noeta_core::{Origin, PluginSet};
use serde_json::Value;

pub use noeta_extproc::{Export, Handshake};

use crate::secrets::SecretStore;

/// One plugin program, as the check found it.
#[derive(Debug, Clone)]
pub struct ProgramCheck {
    /// The plugin's name.
    pub plugin: String,
    /// What the handshake offered, or why there was none.
    pub handshake: Result<Handshake, String>,
    /// The manifest's `command:` refs naming an export the handshake does not list, each as
    /// `(contribution index, export)`.
    pub unlisted: Vec<(usize, String)>,
}

impl ProgramCheck {
    /// The problems a check reports: no handshake, or a ref it does not offer.
    pub fn problems(&self) -> Vec<String> {
        match &self.handshake {
            Err(why) => vec![format!(
                "plugin `{}`: its program gave no handshake: {why}",
                self.plugin
            )],
            Ok(handshake) => self
                .unlisted
                .iter()
                .map(|(index, export)| {
                    format!(
                        "plugin `{}`: contribution {index} refs `command:{export}`, which the \
                         program's handshake does not list (it lists: {})",
                        self.plugin,
                        handshake.export_names()
                    )
                })
                .collect(),
        }
    }

    /// One line per export: its hooks and tools.
    pub fn summary(&self) -> Vec<String> {
        let Ok(handshake) = &self.handshake else {
            return Vec::new();
        };
        handshake
            .exports
            .iter()
            .map(|(name, export)| {
                let hooks: Vec<&str> = export.hooks.iter().map(String::as_str).collect();
                let tools: Vec<&str> = export.tools.iter().map(|t| t.name.as_str()).collect();
                format!(
                    "export {name}: hooks [{}], tools [{}]",
                    hooks.join(", "),
                    tools.join(", ")
                )
            })
            .collect()
    }
}

/// Starts the program of every plugin in `set` that has one (with its `[plugins.<name>]`
/// parameters from `config`, secret references resolved through `secrets`), in the set's order.
pub fn check(
    set: &PluginSet,
    config: &std::collections::BTreeMap<String, Value>,
    secrets: Arc<dyn SecretStore>,
) -> Vec<ProgramCheck> {
    let env = crate::host::program_env(secrets);
    set.plugins()
        .filter(|plugin| plugin.manifest.extension.is_some())
        .filter_map(|plugin| {
            let Origin::File(file) = &plugin.origin else {
                return None;
            };
            let dir = file.parent()?;
            let params = config.get(plugin.name()).cloned().unwrap_or(Value::Null);
            let handshake =
                noeta_extproc::handshake(&plugin.manifest, dir, &params, Arc::clone(&env));
            let unlisted = match &handshake {
                Ok(handshake) => plugin
                    .manifest
                    .contributions
                    .iter()
                    .filter_map(|c| {
                        let export = command_export(c.reference.as_deref()?)?;
                        (!handshake.exports.contains_key(export))
                            .then(|| (c.index, export.to_owned()))
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            Some(ProgramCheck {
                plugin: plugin.name().to_owned(),
                handshake,
                unlisted,
            })
        })
        .collect()
}
