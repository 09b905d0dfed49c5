//! `WebSearch` against a local server standing in for the search API.

use noeta_builtin_web::{PROVENANCE, Settings, WebSearch};
use noeta_core::Tool;
use serde_json::{Value, json};

use crate::common::{Reply, Server, call, context, message};

const KEY: &str = "tvly-test-key";

fn tool(server: &Server) -> WebSearch {
    WebSearch::new(
        Settings::parse(&json!({
            "search_api_key": KEY,
            "search_endpoint": server.url("/search"),
        }))
        .unwrap(),
    )
    .unwrap()
}

fn answer() -> Value {
    json!({
        "query": "rust async runtime",
        "results": [
            {
                "title": "Tokio - An asynchronous Rust runtime",
                "url": "https://tokio.rs/",
                "content": "Tokio is an event-driven,\nnon-blocking I/O platform.",
                "score": 0.98
            },
            {
                "title": "async-std",
                "url": "https://async.rs/",
                "content": "Async version of the Rust standard library."
            }
        ],
        "response_time": 1.2
    })
}

#[tokio::test]
async fn results_are_listed_with_title_url_and_snippet() {
    let server = Server::start().await;
    server.route("/search", Reply::json(200, &answer()));
    let output = call(
        &tool(&server),
        json!({ "query": "rust async runtime", "count": 2 }),
        &context(None),
    )
    .await
    .unwrap();
    assert!(!output.is_error);
    assert_eq!(
        output.text,
        format!(
            "{PROVENANCE}\n\nSearch results for \"rust async runtime\" (2):\n\n\
             1. [Tokio - An asynchronous Rust runtime](https://tokio.rs/)\n   \
             Tokio is an event-driven, non-blocking I/O platform.\n\n\
             2. [async-std](https://async.rs/)\n   \
             Async version of the Rust standard library."
        )
    );
    // The API got the key as a bearer token and the query as JSON.
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(
        seen[0].headers.get("authorization").map(String::as_str),
        Some("Bearer tvly-test-key")
    );
    let body: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(
        body,
        json!({ "query": "rust async runtime", "max_results": 2 })
    );
}

#[tokio::test]
async fn the_count_defaults_to_five_and_no_results_is_not_an_error() {
    let server = Server::start().await;
    server.route("/search", Reply::json(200, &json!({ "results": [] })));
    let output = call(&tool(&server), json!({ "query": "zzzq" }), &context(None))
        .await
        .unwrap();
    assert!(!output.is_error);
    assert!(
        output.text.ends_with("No results found for \"zzzq\"."),
        "{}",
        output.text
    );
    let body: Value = serde_json::from_str(&server.seen()[0].body).unwrap();
    assert_eq!(body["max_results"], 5);
}

#[tokio::test]
async fn an_http_error_from_the_api_is_a_clear_tool_error() {
    let server = Server::start().await;
    server.route(
        "/search",
        Reply::json(
            401,
            &json!({ "detail": { "error": format!("Unauthorized: bad key {KEY}") } }),
        ),
    );
    let err = message(call(&tool(&server), json!({ "query": "q" }), &context(None)).await);
    assert!(err.starts_with("WebSearch: "), "{err}");
    assert!(
        err.contains(&format!(
            "the search API at `{}` answered HTTP 401 Unauthorized: ",
            server.url("/search")
        )),
        "{err}"
    );
    assert!(err.contains("Unauthorized: bad key (key)"), "{err}");
    assert!(!err.contains(KEY), "the key leaked: {err}");
}

#[tokio::test]
async fn an_answer_without_results_is_a_tool_error() {
    let server = Server::start().await;
    server.route("/search", Reply::json(200, &json!({ "oops": true })));
    let err = message(call(&tool(&server), json!({ "query": "q" }), &context(None)).await);
    assert!(
        err.contains("the search API's answer has no `results` list"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_api_names_the_endpoint() {
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}/search");
    let tool = WebSearch::new(
        Settings::parse(&json!({ "search_api_key": KEY, "search_endpoint": endpoint })).unwrap(),
    )
    .unwrap();
    let err = message(call(&tool, json!({ "query": "q" }), &context(None)).await);
    assert!(
        err.contains(&format!(
            "the search API at `{endpoint}` could not be reached"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn bad_input_is_refused() {
    let server = Server::start().await;
    let tool = tool(&server);
    for (input, needle) in [
        (json!({ "query": " " }), "`query` is empty"),
        (
            json!({ "query": "q", "count": 21 }),
            "`count` must be between 1 and 20, got 21",
        ),
        (
            json!({ "query": "q", "count": 0 }),
            "`count` must be between 1 and 20, got 0",
        ),
        (json!({ "q": "x" }), "invalid input"),
    ] {
        let err = message(call(&tool, input, &context(None)).await);
        assert!(err.contains(needle), "{err}");
    }
    assert!(server.seen().is_empty());
    let flags = tool.flags();
    assert!(flags.read_only && flags.retry_safe && flags.clearable);
    assert_eq!(tool.input_schema()["properties"]["count"]["maximum"], 20);
}

#[test]
fn the_tool_needs_a_key() {
    let err = WebSearch::new(Settings::default()).unwrap_err();
    assert!(err.contains("search_api_key"), "{err}");
}
