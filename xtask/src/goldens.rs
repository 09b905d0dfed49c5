//! `cargo xtask goldens [--bless]`: byte-equality goldens for every order that feeds the prompt cache.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use futures::executor::block_on;
use noeta_core::canonical;
use noeta_core::model::{ModelReply, ModelRequest};
use noeta_core::provider::{Provider, ProviderError};
use noeta_core::runner::{RunOutcome, Runtime};
use noeta_core::store::{ManualClock, MemoryContentStore, MemoryEventLog, TaskId};
use noeta_testkit::golden::{self, GoldenOutcome};
use serde_json::{Value, json};

/// A model that keeps the request it is sent and answers "done".
#[derive(Default)]
struct Capture(Mutex<Vec<ModelRequest>>);

#[async_trait]
impl Provider for Capture {
    fn name(&self) -> &str {
        "capture"
    }
    fn model(&self) -> &str {
        "capture"
    }
    fn context_window(&self) -> u64 {
        200_000
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelReply, ProviderError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        Ok(ModelReply {
            text: "done".to_owned(),
            ..ModelReply::default()
        })
    }
}

/// The default agent's first model request, as the runner sends it: its tool schema list
/// (pretty JSON) and its stable prefix (the hash, then the canonical bytes it hashes).
fn default_agent_request() -> Result<(Vec<u8>, Vec<u8>)> {
    let (set, agent) = crate::producers::builtin_agent(&noeta::default_agent())?;
    let session = noeta::build_session(&set, &agent, &BTreeMap::new())?;
    let capture = Arc::new(Capture::default());
    let log = Arc::new(MemoryEventLog::new(ManualClock::at(0)));
    let rt = Runtime::new(
        log.clone(),
        Arc::new(MemoryContentStore::new()),
        capture.clone(),
    );
    let task = TaskId::new("golden")?;
    block_on(rt.create(&session, &task, "hello"))?;
    let outcome = block_on(rt.run(&session, &task))?;
    if !matches!(outcome, RunOutcome::Ended { .. }) {
        bail!("the default agent's golden task did not end: {outcome:?}");
    }
    let request = capture
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .first()
        .cloned()
        .context("the default agent made no model request")?;
    let stable =
        json!({ "system": request.system, "tools": request.tools, "entries": request.entries });
    let bytes = canonical::to_bytes(&stable);
    let hash = canonical::sha256_hex(&bytes);
    // The same hash the runner recorded for the request.
    let recorded = block_on(noeta_core::store::EventLog::read(log.as_ref(), &task, 0))?
        .into_iter()
        .find(|e| e.record.kind == "request_composed")
        .and_then(|e| {
            e.record
                .data
                .get("stable")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .context("no request_composed record")?;
    if recorded != hash {
        bail!("the stable-prefix hash {hash} differs from the recorded {recorded}");
    }
    let mut tools = serde_json::to_string_pretty(&Value::Array(request.tools.to_vec()))?;
    tools.push('\n');
    let mut prefix = format!("sha256 {hash}\n").into_bytes();
    prefix.extend_from_slice(&bytes);
    prefix.push(b'\n');
    Ok((tools.into_bytes(), prefix))
}

/// A third-party plugin for the layout golden, registered like any other crate: a session
/// pack at band 900 (past every built-in band) mounting one tool and declaring one content
/// kind.
const HOUSE_MANIFEST: &str = r#"name = "house"
version = "0.1.0"

[[contributions]]
surface = "session_pack"
name = "house"
ref = "xtask::house"
priority = 900
tools = ["HouseRules"]
"#;

struct HousePack;

impl noeta_core::SessionPackFactory for HousePack {
    fn build(
        &self,
        _ctx: &noeta_core::SessionBuildContext,
    ) -> Result<noeta_core::PackContribution, String> {
        let mut pack = noeta_core::PackContribution::empty();
        pack.tools.push(Arc::new(HouseRules));
        pack.content_kinds.push(noeta_core::ContentKindSpec {
            kind: "house".to_owned(),
            band: 500,
            title: "House rules".to_owned(),
        });
        Ok(pack)
    }
}

/// The house pack's tool.
struct HouseRules;

#[async_trait]
impl noeta_core::Tool for HouseRules {
    fn name(&self) -> &str {
        "HouseRules"
    }
    fn description(&self) -> &str {
        "The house rules."
    }
    fn input_schema(&self) -> Value {
        json!({ "type": "object", "properties": {}, "additionalProperties": false })
    }
    async fn run(
        &self,
        _input: Value,
        _ctx: &noeta_core::ToolContext,
    ) -> Result<noeta_core::ToolOutput, noeta_core::ToolError> {
        Ok(noeta_core::ToolOutput::text("Be kind."))
    }
}

/// Every session pack that exists (each built-in's, the house pack at 900), the extension
/// list they make and the resident content kinds, for an agent activating all of them. The
/// settings turn on what needs them (a search key mounts `WebSearch`); no path is read.
fn session_layout() -> Result<Vec<u8>> {
    let house = noeta_core::LinkedPlugin::new(
        "xtask",
        HOUSE_MANIFEST,
        noeta_core::RefTable::new().with("xtask::house", |_| {
            Ok(noeta_core::Resolved::SessionPack(Arc::new(HousePack)))
        }),
    );
    let config: BTreeMap<String, Value> = [
        ("memory".to_owned(), json!({ "dir": "/var/empty/memories" })),
        ("web".to_owned(), json!({ "search_api_key": "golden" })),
    ]
    .into_iter()
    .collect();
    Ok(crate::producers::session_layout_text(vec![house], &config)?.into_bytes())
}

/// Each golden: its file under the root and the bytes the code produces now.
pub(crate) fn produce() -> Result<Vec<(&'static str, Vec<u8>)>> {
    let (default_tools, default_prefix) = default_agent_request()?;
    Ok(vec![
        (
            "tests/golden/surfaces.json",
            noeta::listing::surfaces_json(&noeta_core::standard_registry()).into_bytes(),
        ),
        (
            "tests/golden/builtin-contributions.json",
            crate::producers::builtin_contributions_json()?.into_bytes(),
        ),
        (
            "tests/golden/control-tools.json",
            crate::producers::control_tool_schemas_json()?.into_bytes(),
        ),
        (
            "tests/golden/builtin-tools.json",
            crate::producers::builtin_tool_schemas_json()?.into_bytes(),
        ),
        ("tests/golden/default-agent-tools.json", default_tools),
        (
            "tests/golden/default-agent-stable-prefix.txt",
            default_prefix,
        ),
        ("tests/golden/session-layout.txt", session_layout()?),
    ])
}

/// Checks every golden (or rewrites them with `bless`).
pub(crate) fn run(root: &Path, bless: bool) -> Result<()> {
    let mut failures = 0;
    for (file, bytes) in produce()? {
        match golden::check(&root.join(file), &bytes, bless) {
            Ok(GoldenOutcome::Same) => println!("goldens: {file} ok"),
            Ok(GoldenOutcome::Blessed) => println!("goldens: {file} blessed"),
            Err(err) => {
                eprintln!("goldens: {err}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        bail!("{failures} golden(s) differ");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_golden_matches_and_a_changed_byte_is_caught() {
        let root = crate::root();
        for (file, bytes) in produce().unwrap() {
            golden::check(&root.join(file), &bytes, false).unwrap();
            // A tool description edited by one character no longer matches its golden.
            let mut changed = bytes.clone();
            if let Some(pos) = changed.iter().position(|b| b.is_ascii_lowercase()) {
                changed[pos] = changed[pos].to_ascii_uppercase();
                assert!(
                    golden::check(&root.join(file), &changed, false).is_err(),
                    "{file}"
                );
            }
        }
    }
}
