//! Plugin instances: sessions built over one `Instances` share a pack between every agent that
//! uses its plugin with the same parameters.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use noeta_core::extension::Extension;
use noeta_core::session::{Instances, SessionError, build_session_shared};
use noeta_core::{
    AgentOptions, PackContribution, PluginSet, PluginSource, Resolved, SessionBuildContext,
    SessionPackFactory,
};
use serde_json::{Value, json};

use crate::support::{Manifest, ResolveWith, agent, compile, load};

/// A pack adding one extension, counting its builds; it fails while its params say so.
struct Counted {
    builds: Arc<AtomicUsize>,
    reads_agent: bool,
}

struct Marker;

impl Extension for Marker {
    fn name(&self) -> &str {
        "shared/marker"
    }
}

impl SessionPackFactory for Counted {
    fn build(&self, ctx: &SessionBuildContext) -> Result<PackContribution, String> {
        self.builds.fetch_add(1, Ordering::SeqCst);
        if ctx.config("shared").get("fail") == Some(&Value::Bool(true)) {
            return Err("settings [plugins.shared] fail: told to fail".to_owned());
        }
        let mut pack = PackContribution::empty();
        pack.extensions.push(Arc::new(Marker));
        Ok(pack)
    }

    fn reads_agent(&self) -> bool {
        self.reads_agent
    }
}

fn plugin_set(reads_agent: bool) -> (PluginSet, Arc<AtomicUsize>) {
    let builds = Arc::new(AtomicUsize::new(0));
    let pack = Arc::new(Counted {
        builds: Arc::clone(&builds),
        reads_agent,
    });
    let set = load(&[PluginSource::Linked(
        Manifest::new("shared")
            .with("session_pack", "counted", "priority = 100")
            .linked(
                "noeta-shared",
                ResolveWith(move |_: &noeta_core::ResolveRequest<'_>| {
                    Ok(Resolved::SessionPack(pack.clone()))
                }),
            ),
    )]);
    (set, builds)
}

fn with_params(name: &str, params: Value) -> AgentOptions {
    let mut options = agent(name, &["shared"]);
    options.config.insert("shared".to_owned(), params);
    options
}

/// The marker extension of `options`'s session built over `instances`.
fn marker(
    set: &PluginSet,
    options: &AgentOptions,
    instances: &Instances,
) -> Result<Arc<dyn Extension>, SessionError> {
    let compiled = compile(set, options).unwrap();
    let config: BTreeMap<String, Value> = options.config.clone();
    let session = build_session_shared(set, &compiled, &config, &config, None, instances)?;
    Ok(session
        .extensions
        .iter()
        .find(|e| e.name() == "shared/marker")
        .cloned()
        .unwrap())
}

#[test]
fn agents_using_a_plugin_with_the_same_params_share_one_instance() {
    let (set, builds) = plugin_set(false);
    let instances = Instances::new();
    let main = marker(&set, &with_params("main", json!({ "x": 1 })), &instances).unwrap();
    let explore = marker(&set, &with_params("explore", json!({ "x": 1 })), &instances).unwrap();
    assert!(Arc::ptr_eq(&main, &explore));
    assert_eq!(builds.load(Ordering::SeqCst), 1);
    assert_eq!(instances.len(), 1);

    // Other params: another instance; the first is still shared.
    let other = marker(&set, &with_params("plan", json!({ "x": 2 })), &instances).unwrap();
    assert!(!Arc::ptr_eq(&main, &other));
    let again = marker(&set, &with_params("main", json!({ "x": 1 })), &instances).unwrap();
    assert!(Arc::ptr_eq(&main, &again));
    assert_eq!(builds.load(Ordering::SeqCst), 2);
    assert_eq!(
        format!("{instances:?}"),
        r#"["shared/counted", "shared/counted"]"#
    );

    // Without shared instances every session builds its own.
    let fresh = marker(
        &set,
        &with_params("main", json!({ "x": 1 })),
        &Instances::new(),
    )
    .unwrap();
    assert!(!Arc::ptr_eq(&main, &fresh));
}

#[test]
fn a_pack_that_reads_the_agent_is_built_once_per_agent() {
    let (set, builds) = plugin_set(true);
    let instances = Instances::new();
    let main = marker(&set, &with_params("main", json!({})), &instances).unwrap();
    let explore = marker(&set, &with_params("explore", json!({})), &instances).unwrap();
    let main_again = marker(&set, &with_params("main", json!({})), &instances).unwrap();
    assert!(!Arc::ptr_eq(&main, &explore));
    assert!(Arc::ptr_eq(&main, &main_again));
    assert_eq!(builds.load(Ordering::SeqCst), 2);
}

#[test]
fn a_pack_that_failed_to_build_is_not_kept_and_names_plugin_pack_and_agent() {
    let (set, builds) = plugin_set(false);
    let instances = Instances::new();
    let err = marker(
        &set,
        &with_params("main", json!({ "fail": true })),
        &instances,
    )
    .err()
    .unwrap();
    let message = err.to_string();
    for part in ["shared", "counted", "main", "told to fail"] {
        assert!(message.contains(part), "`{message}` lacks `{part}`");
    }
    assert!(instances.is_empty());
    assert!(
        marker(
            &set,
            &with_params("main", json!({ "fail": true })),
            &instances
        )
        .is_err()
    );
    assert_eq!(builds.load(Ordering::SeqCst), 2, "the failure was retried");
}
