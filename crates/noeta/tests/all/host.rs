//! `noeta::Host` as an embedder uses it: open a workspace, get an agent's session, run a task
//! on the host's runtime, and hear the host's warnings.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use noeta::{Host, HostConfig, HostError, HostPaths, Settings};
use noeta_core::provider::ScriptedProvider;
use noeta_core::runner::{RunOutcome, Sessions};
use noeta_core::store::TaskId;
use serde_json::json;

fn paths(root: &tempfile::TempDir) -> HostPaths {
    let home = root.path().join("home");
    let workspace = root.path().join("workspace");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    HostPaths {
        home: Some(home),
        workspace,
    }
}

#[test]
fn a_host_builds_sessions_once_and_runs_a_task_on_its_runtime() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    std::fs::write(paths.workspace.join("notes.txt"), "alpha\n").unwrap();
    let mut defaults = Settings::default();
    defaults
        .set_param("fs", "write_mode", json!("apply"))
        .unwrap();
    let host = Host::open(HostConfig {
        defaults,
        worker: "embedder".into(),
        ..HostConfig::new(paths.clone())
    })
    .unwrap();
    let main = host.session("main").unwrap();
    assert!(
        Arc::ptr_eq(&main, &host.session("main").unwrap()),
        "built once"
    );
    assert!(host.plugins().get("fs").is_some());

    let stores = host.open_store(Some("memory:")).unwrap();
    let model = ScriptedProvider::from_json(
        &json!({ "turns": [
            { "calls": [{ "name": "Read", "input": { "file_path": "notes.txt" } }] },
            { "text": "It says alpha." }
        ]})
        .to_string(),
        "test script",
    )
    .unwrap();
    let runtime = host.runtime(&stores, Arc::new(model));
    let task = TaskId::new("embedded").unwrap();
    block_on(runtime.create(&main, &task, "What do the notes say?")).unwrap();
    let (stopped, outcome) = block_on(runtime.run_tree(&host, &task)).unwrap();
    assert_eq!(stopped, task);
    assert!(matches!(outcome, RunOutcome::Ended { .. }), "{outcome:?}");
    let state = block_on(runtime.load(&main, &task)).unwrap();
    assert!(
        state.core.messages.iter().any(|m| m.text.contains("alpha")),
        "the Read ran in the host's workspace"
    );
}

#[test]
fn an_agent_the_host_cannot_build_is_a_warning_for_a_child_and_an_error_for_a_caller() {
    let root = tempfile::tempdir().unwrap();
    let heard = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = heard.clone();
    let host = Host::open(HostConfig::new(paths(&root)))
        .unwrap()
        .with_warnings(Arc::new(move |text: &str| {
            sink.lock().unwrap().push(text.to_owned())
        }));
    let err = host.session("nobody").unwrap_err();
    assert!(matches!(err, HostError::UnknownAgent { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "no agent named `nobody` (known: explore, general-purpose, main, plan, web)"
    );
    assert!(Sessions::session(&host, "nobody").is_none());
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].starts_with("agent `nobody` cannot run here: no agent named `nobody`"),
        "{heard:?}"
    );
}

#[test]
fn a_bad_settings_file_a_bad_store_url_and_no_model_are_named() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    std::fs::create_dir_all(paths.workspace.join(".noeta")).unwrap();
    let config_file = paths.workspace.join(".noeta/config.toml");
    std::fs::write(&config_file, "model = \"opus\"\n").unwrap();
    let err = Host::open(HostConfig::new(paths.clone())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: `model` is not a top-level key: it belongs under `[plugins.providers]` (write \
             `[plugins.providers]` on the line above it)",
            config_file.display()
        )
    );
    std::fs::write(&config_file, "modle = \"opus\"\n").unwrap();
    let err = Host::open(HostConfig::new(paths.clone())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: unknown key `modle` in the top-level table (known: plugins, agents, policy)",
            config_file.display()
        )
    );
    std::fs::remove_file(&config_file).unwrap();

    let host = Host::open(HostConfig::new(paths)).unwrap();
    let err = host.open_store(Some("postgrez://db")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot open the store `postgrez://db`: store URL `postgrez://db` has unknown scheme `postgrez`"),
        "{err}"
    );
    let Err(err) = host.open_model(Some("nonsense"), None) else {
        panic!("a provider named `nonsense` was set up");
    };
    assert!(
        err.to_string()
            .starts_with("cannot set up provider `nonsense`"),
        "{err}"
    );
}

#[test]
fn a_worker_process_is_gone_when_it_ended_or_is_a_zombie_and_not_while_it_runs() {
    let own = noeta::process_worker("cli");
    assert!(!noeta::process_gone(&own), "this process runs");
    let (name, _) = own.rsplit_once('#').unwrap();
    // A killed child nobody has collected yet is a zombie: it runs no more.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let worker = format!("{name}#{}", child.id());
    child.kill().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
        .unwrap()
        .contains(") Z")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never became a zombie"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(noeta::process_gone(&worker), "a zombie is gone");
    child.wait().unwrap();
    assert!(noeta::process_gone(&worker), "a collected process is gone");
    assert!(
        !noeta::process_gone("cli@another-host#1"),
        "another host's worker is waited for"
    );
}

/// A plugin serving the in-process MCP server `docs` (one tool, `search`).
fn docs_server_plugin() -> noeta_core::LinkedPlugin {
    use noeta_core::{McpServerSpec, RefTable, Resolved};
    let manifest = "name = \"docs-server\"\nversion = \"1.0.0\"\n\n[[contributions]]\n\
                    surface = \"mcp_server\"\nname = \"docs\"\nref = \"docs_server::docs\"\n";
    noeta_testkit::fixtures::linked(
        "docs-server",
        manifest,
        RefTable::new().with("docs_server::docs", |_| {
            let search: Arc<dyn noeta_core::Tool> =
                Arc::new(noeta_testkit::fixtures::EchoTool::named("search"));
            Ok(Resolved::McpServer(Arc::new(McpServerSpec {
                name: "docs".into(),
                version: "1.0.0".into(),
                tools: vec![search],
            })))
        }),
    )
}

#[test]
fn an_in_process_mcp_server_and_a_configured_one_may_not_share_an_alias() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let open = |servers: serde_json::Value| {
        let mut flags = Settings::default();
        flags.set_param("mcp", "servers", servers).unwrap();
        let mut config = HostConfig::new(paths.clone());
        config.options.linked = vec![docs_server_plugin()];
        config.flags = flags;
        Host::open(config).unwrap()
    };
    let clash = open(json!({ "docs": { "command": "docs-mcp" } }));
    let err = clash.session("main").unwrap_err().to_string();
    assert!(
        err.contains(
            "mcp server alias `docs` is taken twice: by plugin `docs-server`'s in-process server \
             (its `mcp_server` contribution `docs`) and by [plugins.mcp.servers.docs] in the \
             settings or a `.mcp.json`; rename one (there is no override)"
        ),
        "{err}"
    );
    let fine = open(json!({ "git": { "command": "git-mcp" } }));
    let session = fine.session("main").unwrap();
    let stores = fine.open_store(Some("memory:")).unwrap();
    let model = ScriptedProvider::from_json(&json!({ "turns": [] }).to_string(), "none").unwrap();
    let runtime = fine.runtime(&stores, Arc::new(model));
    let task = TaskId::new("aliases").unwrap();
    block_on(runtime.create(&session, &task, "hi")).unwrap();
    let tools = block_on(runtime.direct_tools(&session, &task)).unwrap();
    assert!(
        tools.iter().any(|t| t.name() == "mcp__docs__search"),
        "the in-process server's tool is offered beside the configured server"
    );
}

/// A resolver that offers no endpoint and remembers who asked.
#[derive(Default)]
struct Asked(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl noeta::mcp::RemoteResolver for Asked {
    async fn resolve(&self, alias: &str) -> Result<Option<noeta::mcp::Remote>, String> {
        self.0.lock().unwrap().push(alias.to_owned());
        Ok(None)
    }
}

#[test]
fn the_hosts_mcp_server_resolver_is_asked_for_host_resolved_servers() {
    let root = tempfile::tempdir().unwrap();
    let mut flags = Settings::default();
    flags
        .set_param("mcp", "servers", json!({ "crm": { "type": "host" } }))
        .unwrap();
    let asked = Arc::new(Asked::default());
    let mut config = HostConfig::new(paths(&root));
    config.flags = flags;
    config.mcp_server_resolver = Some(asked.clone());
    let host = Host::open(config).unwrap();
    let session = host.session("main").unwrap();
    let stores = host.open_store(Some("memory:")).unwrap();
    let model = ScriptedProvider::from_json(&json!({ "turns": [] }).to_string(), "none").unwrap();
    let runtime = host.runtime(&stores, Arc::new(model));
    let task = TaskId::new("resolved").unwrap();
    block_on(runtime.create(&session, &task, "hi")).unwrap();
    let tools = block_on(runtime.direct_tools(&session, &task)).unwrap();
    assert!(!tools.iter().any(|t| t.name().starts_with("mcp__crm__")));
    assert_eq!(*asked.0.lock().unwrap(), ["crm"]);
}

#[test]
fn an_on_disk_plugin_is_pinned_by_every_file_of_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let dir = paths.home.as_ref().unwrap().join(".noeta/plugins/house");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("noeta-plugin.toml"),
        "name = \"house\"\nversion = \"1.0.0\"\ncontributions = []\n",
    )
    .unwrap();
    std::fs::write(dir.join("helper.py"), "print('one')\n").unwrap();
    let mut flags = Settings::default();
    flags.add_plugin("main", "house");
    let pin = |flags: &Settings| {
        let mut config = HostConfig::new(paths.clone());
        config.flags = flags.clone();
        let host = Host::open(config).unwrap();
        let session = host.session("main").unwrap();
        session
            .pins
            .iter()
            .find(|p| p.name == "house")
            .cloned()
            .unwrap_or_else(|| panic!("house is not pinned: {:?}", session.pins))
    };
    let first = pin(&flags);
    assert_eq!(first.source, "file");
    assert_eq!(
        first.version,
        format!("sha256:{}", noeta::install::tree_hash(&dir).unwrap())
    );
    // A changed script — not the manifest — changes the pin.
    std::fs::write(dir.join("helper.py"), "print('two')\n").unwrap();
    let second = pin(&flags);
    assert_ne!(first.version, second.version);
}

#[test]
fn an_on_disk_plugins_add_to_joins_it_to_those_agents_and_a_linked_crates_does_nothing() {
    let root = tempfile::tempdir().unwrap();
    let paths = paths(&root);
    let write = |dir: &str, manifest: &str| {
        let dir = paths
            .home
            .as_ref()
            .unwrap()
            .join(".noeta/plugins")
            .join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("noeta-plugin.toml"), manifest).unwrap();
    };
    write(
        "everywhere",
        "name = \"everywhere\"\nadd-to = \"*\"\ncontributions = []\n",
    );
    write(
        "reviewers-only",
        "name = \"reviewers-only\"\nadd_to = [\"reviewer\"]\ncontributions = []\n",
    );
    let mut config = HostConfig::new(paths.clone());
    config.options.linked = vec![noeta_testkit::fixtures::linked(
        "dependency",
        "name = \"dependency\"\nadd-to = \"*\"\ncontributions = []\n",
        noeta_core::RefTable::new(),
    )];
    let host = Host::open(config).unwrap();
    let main = host.session("main").unwrap();
    assert!(
        main.spec.plugins.contains(&"everywhere".to_owned()),
        "{:?}",
        main.spec.plugins
    );
    assert!(!main.spec.plugins.contains(&"reviewers-only".to_owned()));
    assert!(!main.spec.plugins.contains(&"dependency".to_owned()));

    write("bad", "name = \"bad\"\nadd-to = 3\ncontributions = []\n");
    let host = Host::open(HostConfig::new(paths.clone())).unwrap();
    let problems: Vec<String> = host
        .plugins()
        .problems()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`add-to`") && p.contains("an agent name or a list of them")),
        "{problems:?}"
    );
}
