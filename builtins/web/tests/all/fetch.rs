//! `WebFetch` against a local server: redirects, the cache, conversion, caps, the prompt's
//! answer and its fallback, provenance.

use std::sync::Arc;

use noeta_builtin_web::{PROVENANCE, Settings, WebFetch};
use noeta_core::store::ManualClock;
use noeta_core::{Risk, Tool, ToolOutput};
use serde_json::{Value, json};

use crate::common::{Reply, Server, TestModel, call, context, message};

const PAGE: &str = "<!doctype html><html><head><title>Doc</title>\
<style>body { color: red }</style><script>window.tracker = 'spy';</script></head>\
<body><h1>Release notes</h1><p>Version <b>2.0</b> is out. See \
<a href=\"https://example.org/changes\">the changes</a>.</p>\
<h2>Fixes</h2><ul><li>one</li><li>two</li></ul>\
<script>document.write('injected')</script></body></html>";

fn tool(settings: Value) -> WebFetch {
    WebFetch::new(Settings::parse(&settings).unwrap()).unwrap()
}

fn input(url: &str) -> Value {
    json!({ "url": url, "prompt": "What version is out?" })
}

/// One call without a model: the fallback, which carries the page itself.
async fn fetch(tool: &WebFetch, url: &str) -> ToolOutput {
    let output = call(tool, input(url), &context(None)).await.unwrap();
    assert!(!output.is_error, "{}", output.text);
    output
}

#[tokio::test]
async fn the_prompt_is_answered_by_the_auxiliary_model_over_the_page() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let model = TestModel::answering("Version 2.0 is out.");
    let tool = tool(Value::Null);
    let output = call(
        &tool,
        input(&server.url("/notes")),
        &context(Some(model.clone())),
    )
    .await
    .unwrap();
    assert!(!output.is_error);
    let (first, rest) = output.text.split_once("\n\n").unwrap();
    assert!(first.starts_with(PROVENANCE), "{first}");
    assert_eq!(rest, "Version 2.0 is out.");
    assert_eq!(model.calls(), 1);
    // The model saw the page as Markdown, and the prompt.
    let prompt = model.prompt(0);
    assert!(prompt.contains("# Release notes"), "{prompt}");
    assert!(prompt.contains("Prompt: What version is out?"), "{prompt}");
    assert!(!prompt.contains("tracker"), "{prompt}");
    assert_eq!(output.data.as_ref().unwrap()["answered_by_model"], true);
}

#[tokio::test]
async fn a_failing_model_falls_back_to_the_page_with_a_note() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let model = TestModel::failing();
    let output = call(
        &tool(Value::Null),
        input(&server.url("/notes")),
        &context(Some(model.clone())),
    )
    .await
    .unwrap();
    assert!(!output.is_error);
    assert_eq!(model.calls(), 1);
    assert!(
        output.text.contains("(No model answered the prompt: the model call failed: provider error: the test model is down."),
        "{}",
        output.text
    );
    assert!(output.text.contains("# Release notes"), "{}", output.text);
    assert_eq!(output.data.as_ref().unwrap()["answered_by_model"], false);
}

#[tokio::test]
async fn without_a_model_the_page_itself_is_returned() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let output = fetch(&tool(Value::Null), &server.url("/notes")).await;
    assert!(
        output
            .text
            .contains("(No model answered the prompt: no model is available to this tool here."),
        "{}",
        output.text
    );
}

#[tokio::test]
async fn html_becomes_markdown_without_scripts_and_styles() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let text = fetch(&tool(Value::Null), &server.url("/notes")).await.text;
    for kept in [
        "# Release notes",
        "## Fixes",
        "Version **2.0** is out.",
        "[the changes](https://example.org/changes)",
        "one",
    ] {
        assert!(text.contains(kept), "{kept} missing from {text}");
    }
    for gone in ["tracker", "color: red", "injected", "<script", "<h1>"] {
        assert!(!text.contains(gone), "{gone} left in {text}");
    }
}

#[tokio::test]
async fn plain_text_is_returned_as_it_is() {
    let server = Server::start().await;
    server.route(
        "/readme.md",
        Reply::ok("text/markdown", "# Title\n\n<b>not html</b>\n"),
    );
    server.route(
        "/data.json",
        Reply::ok("application/json", "{\"a\": [1, 2]}"),
    );
    let tool = tool(Value::Null);
    let text = fetch(&tool, &server.url("/readme.md")).await.text;
    assert!(text.ends_with("# Title\n\n<b>not html</b>"), "{text}");
    let text = fetch(&tool, &server.url("/data.json")).await.text;
    assert!(text.ends_with("{\"a\": [1, 2]}"), "{text}");
}

#[tokio::test]
async fn binary_content_is_refused() {
    let server = Server::start().await;
    server.route(
        "/logo.png",
        Reply::ok("image/png", b"\x89PNG\r\n\x1a\n\0\0\0".to_vec()),
    );
    let err = message(
        call(
            &tool(Value::Null),
            input(&server.url("/logo.png")),
            &context(None),
        )
        .await,
    );
    assert!(err.starts_with("WebFetch: "), "{err}");
    assert!(
        err.contains("is binary content (`image/png`, 11 bytes read)"),
        "{err}"
    );
    assert!(err.contains("reads only HTML and text"), "{err}");
}

#[tokio::test]
async fn an_http_error_is_a_tool_error_and_is_not_cached() {
    let server = Server::start().await;
    let tool = tool(Value::Null);
    for _ in 0..2 {
        let err = message(call(&tool, input(&server.url("/gone")), &context(None)).await);
        assert!(err.contains("/gone` answered HTTP 404 Not Found"), "{err}");
    }
    assert_eq!(server.hits("/gone"), 2);
}

#[tokio::test]
async fn the_provenance_line_names_the_url_status_type_and_time() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let clock = ManualClock::at(1_796_212_245_000);
    let tool = WebFetch::with_clock(Settings::default(), clock).unwrap();
    let output = fetch(&tool, &server.url("/notes")).await;
    let first = output.text.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "{PROVENANCE} URL: {}/notes · HTTP 200 · text/html · fetched 2026-12-02T11:50:45Z",
            server.base
        )
    );
    let data = output.data.unwrap();
    assert_eq!(data["status"], 200);
    assert_eq!(data["final_url"], server.url("/notes"));
    assert_eq!(data["from_cache"], false);
}

#[tokio::test]
async fn same_host_redirects_are_followed_and_named() {
    let server = Server::start().await;
    server
        .route("/start", Reply::redirect(302, "/middle"))
        .route("/middle", Reply::redirect(301, &server.url("/end")))
        .route("/end", Reply::html("<p>arrived</p>"));
    let output = fetch(&tool(Value::Null), &server.url("/start")).await;
    assert!(
        output.text.contains(&format!(
            "URL: {} (final URL after 2 redirects: {}) · HTTP 200",
            server.url("/start"),
            server.url("/end")
        )),
        "{}",
        output.text
    );
    assert!(output.text.ends_with("arrived"), "{}", output.text);
    assert_eq!(
        [
            server.hits("/start"),
            server.hits("/middle"),
            server.hits("/end")
        ],
        [1, 1, 1]
    );
}

/// Routes `/<prefix>0` … `/<prefix><n>`, each redirecting to the next, the last a page.
fn chain(server: &Server, prefix: &str, redirects: usize) {
    for n in 0..redirects {
        server.route(
            &format!("/{prefix}{n}"),
            Reply::redirect(307, &format!("/{prefix}{}", n + 1)),
        );
    }
    server.route(
        &format!("/{prefix}{redirects}"),
        Reply::html("<p>the end</p>"),
    );
}

#[tokio::test]
async fn five_redirects_are_followed_and_a_sixth_is_refused() {
    let server = Server::start().await;
    chain(&server, "five", 5);
    chain(&server, "six", 6);
    let tool = tool(Value::Null);
    let output = fetch(&tool, &server.url("/five0")).await;
    assert!(output.text.contains("after 5 redirects"), "{}", output.text);
    assert!(output.text.ends_with("the end"), "{}", output.text);

    let err = message(call(&tool, input(&server.url("/six0")), &context(None)).await);
    assert!(
        err.contains(&format!(
            "`{}` redirected more than 5 times (the next hop was `{}`)",
            server.url("/six0"),
            server.url("/six6")
        )),
        "{err}"
    );
    assert_eq!(server.hits("/six5"), 1);
    assert_eq!(server.hits("/six6"), 0);
}

#[tokio::test]
async fn a_cross_host_redirect_is_not_followed_and_names_the_target() {
    let server = Server::start().await;
    // `localhost` is another host name than `127.0.0.1`, though the same server.
    let target = format!("http://localhost:{}/there", server.port);
    server
        .route("/away", Reply::redirect(301, &target))
        .route("/there", Reply::html("<p>elsewhere</p>"));
    let output = fetch(&tool(Value::Null), &server.url("/away")).await;
    assert!(output.text.starts_with(PROVENANCE), "{}", output.text);
    assert!(
        output.text.contains(&format!(
            "The page redirects to a different host: `{}` → `{target}`",
            server.url("/away")
        )),
        "{}",
        output.text
    );
    assert!(
        output
            .text
            .contains(&format!("call WebFetch again with url `{target}`")),
        "{}",
        output.text
    );
    assert_eq!(output.data.unwrap()["redirect"], target);
    assert_eq!(server.hits("/there"), 0);
}

#[tokio::test]
async fn a_second_fetch_is_served_from_the_cache() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let tool = tool(Value::Null);
    let first = fetch(&tool, &server.url("/notes")).await;
    let second = fetch(&tool, &server.url("/notes")).await;
    assert_eq!(server.hits("/notes"), 1);
    assert!(!first.text.lines().next().unwrap().contains("from cache"));
    assert!(
        second
            .text
            .lines()
            .next()
            .unwrap()
            .contains("· from cache (fetched "),
        "{}",
        second.text
    );
    assert_eq!(second.data.unwrap()["from_cache"], true);
    // The page is the same; each call's prompt still goes to the model.
    let model = TestModel::answering("2.0");
    call(
        &tool,
        input(&server.url("/notes")),
        &context(Some(model.clone())),
    )
    .await
    .unwrap();
    assert_eq!(server.hits("/notes"), 1);
    assert_eq!(model.calls(), 1);
}

#[tokio::test]
async fn a_cached_page_expires_after_fifteen_minutes() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let clock = ManualClock::at(0);
    let tool = WebFetch::with_clock(Settings::default(), clock.clone()).unwrap();
    fetch(&tool, &server.url("/notes")).await;
    clock.advance(15 * 60 * 1000 - 1);
    fetch(&tool, &server.url("/notes")).await;
    assert_eq!(server.hits("/notes"), 1);
    clock.advance(1);
    let output = fetch(&tool, &server.url("/notes")).await;
    assert_eq!(server.hits("/notes"), 2);
    assert!(
        output
            .text
            .lines()
            .next()
            .unwrap()
            .ends_with("fetched 1970-01-01T00:15:00Z"),
        "{}",
        output.text
    );
}

#[tokio::test]
async fn the_cache_lifetime_is_a_setting() {
    let server = Server::start().await;
    server.route("/notes", Reply::html(PAGE));
    let tool = tool(json!({ "cache_ttl_secs": 0 }));
    fetch(&tool, &server.url("/notes")).await;
    fetch(&tool, &server.url("/notes")).await;
    assert_eq!(server.hits("/notes"), 2);
}

#[tokio::test]
async fn a_body_over_max_bytes_is_cut_with_a_note() {
    let server = Server::start().await;
    server.route("/big.txt", Reply::ok("text/plain", "a".repeat(5000)));
    let output = fetch(&tool(json!({ "max_bytes": 1000 })), &server.url("/big.txt")).await;
    assert!(
        output
            .text
            .lines()
            .next()
            .unwrap()
            .contains("· cut at 1000 bytes"),
        "{}",
        output.text
    );
    let content = output.text.rsplit("\n\n").next().unwrap();
    assert_eq!(content, "a".repeat(1000));
    let data = output.data.unwrap();
    assert_eq!(data["cut"], true);
    assert_eq!(data["bytes"], 1000);
}

#[tokio::test]
async fn the_content_handed_to_the_model_is_capped() {
    let server = Server::start().await;
    server.route("/long.txt", Reply::ok("text/plain", "b".repeat(500)));
    let tool = tool(json!({ "max_content_chars": 100 }));
    let model = TestModel::answering("short");
    call(
        &tool,
        input(&server.url("/long.txt")),
        &context(Some(model.clone())),
    )
    .await
    .unwrap();
    let prompt = model.prompt(0);
    assert!(
        prompt.contains(&format!("<page>\n{}\n</page>", "b".repeat(100))),
        "{prompt}"
    );
    assert!(
        prompt.contains("(The page was cut at 100 characters.)"),
        "{prompt}"
    );

    // And the fallback returns no more than that, saying so.
    let output = fetch(&tool, &server.url("/long.txt")).await;
    assert!(
        output.text.contains("follows, cut at 100 characters;"),
        "{}",
        output.text
    );
    assert!(
        output.text.ends_with(&format!("\n\n{}", "b".repeat(100))),
        "{}",
        output.text
    );
    assert!(!output.text.contains(&"b".repeat(101)));
}

#[tokio::test]
async fn bad_urls_and_empty_prompts_are_refused_before_any_request() {
    let tool = tool(Value::Null);
    for (input, needle) in [
        (
            json!({ "url": "ftp://example.com/x", "prompt": "p" }),
            "only http and https URLs",
        ),
        (
            json!({ "url": "nonsense", "prompt": "p" }),
            "is not a valid URL",
        ),
        (
            json!({ "url": "https://example.com/", "prompt": "  " }),
            "`prompt` is empty",
        ),
        (
            json!({ "url": "https://example.com/" }),
            "invalid input: missing field `prompt`",
        ),
    ] {
        let err = message(call(&tool, input, &context(None)).await);
        assert!(
            err.starts_with("WebFetch: ") && err.contains(needle),
            "{err}"
        );
    }
}

#[tokio::test]
async fn the_tool_is_read_only_clearable_and_safe_to_retry() {
    let tool = tool(Value::Null);
    let flags = tool.flags();
    assert!(flags.read_only && flags.clearable && flags.retry_safe);
    assert_eq!(flags.risk, Risk::Low);
    assert_eq!(flags.max_result_chars, Some(50_000));
    assert_eq!(tool.input_schema()["required"], json!(["url", "prompt"]));
    let _: Arc<dyn Tool> = Arc::new(tool);
}
