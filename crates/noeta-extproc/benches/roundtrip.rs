//! The out-of-process hook benchmark, printed as `name: value unit`: one `before_tool` round
//! trip to a plugin program — the view and the call serialised, a line written to its stdin,
//! its answer read and parsed — through the extension the session would hold. The program is
//! the Python example (`examples/python-plugin`), so the figure includes its interpreter's work.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use futures::executor::block_on;
use noeta_core::contrib::SessionBuildContext;
use noeta_core::extension::View;
use noeta_core::fold::TaskState;
use noeta_core::model::ToolCall;
use noeta_core::plugin_command::CommandPlugins;
use noeta_core::store::TaskId;
use noeta_core::{ResolveRequest, Resolved};
use noeta_extproc::ProgramPlugins;
use noeta_testkit::bench;
use serde_json::json;

const WARMUP: usize = 50;
const CALLS: usize = 2_000;

fn fail(message: &str) -> ! {
    eprintln!("bench failed: {message}");
    std::process::exit(1)
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/python-plugin");
    let manifest = noeta_core::manifest::read_manifest(
        &dir.join("noeta-plugin.toml"),
        &noeta_core::standard_registry(),
    )
    .unwrap_or_else(|e| fail(&e.to_string()));
    let resolver = ProgramPlugins::default().resolver(&manifest, &dir);
    let params = BTreeMap::new();
    let resolved = resolver
        .resolve(&ResolveRequest::new(
            &manifest.name,
            noeta_core::surface::names::SESSION_PACK,
            "py-words",
            "command:py-words",
            &params,
        ))
        .unwrap_or_else(|e| fail(&e));
    let Resolved::SessionPack(pack) = resolved else {
        fail("the ref did not resolve to a session pack")
    };
    let pack = pack
        .build(&SessionBuildContext::new("main"))
        .unwrap_or_else(|e| fail(&format!("starting python3 with the example: {e}")));
    let Some(extension) = pack.extensions.first() else {
        fail("the example's export has no hooks")
    };
    let task = TaskId::new("bench").unwrap_or_else(|e| fail(&e.to_string()));
    let state = TaskState::default();
    let view = View::new(&task, "main", &state, &[], &[]);
    let call = ToolCall {
        id: "call-1".to_owned(),
        name: "Bash".to_owned(),
        input: json!({ "command": "ls -la" }),
    };
    let mut samples = Vec::with_capacity(CALLS);
    for n in 0..WARMUP + CALLS {
        let start = Instant::now();
        let verdict = block_on(extension.before_tool(&view, &call))
            .unwrap_or_else(|e| fail(&format!("{e:?}")));
        if n >= WARMUP {
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
        if verdict.is_some() {
            fail("the guard refused a harmless command");
        }
    }
    bench::report(
        "ext_process_hook_roundtrip_us",
        "us",
        1,
        &bench::run_medians(&samples, bench::runs(5)),
    );
}
