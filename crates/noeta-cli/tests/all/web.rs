//! The web frontend in a real browser: headless Chromium (Debian's `chromium`) driven over the
//! DevTools Protocol against `noeta serve` — the task list, a task streaming, an ask approved
//! from the keyboard, a question answered, a message sent, a task cancelled, and a tool result
//! holding `<script>` and `<img onerror>` shown as text, running nothing. Screenshots of the
//! task list and a task page are written under the test's target temporary directory
//! (`web-screenshots/`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::ScreenshotParams;
use futures::StreamExt;
use noeta_testkit::cli::CliEnv;
use noeta_testkit::serve::{Server, chromium, is_root};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// `noeta serve` for the page: its tasks may run in any permission mode (one of them bypasses
/// permissions).
fn serve(env: &CliEnv, vars: &[(&str, &str)]) -> Server {
    noeta_testkit::serve::serve_with(
        env,
        "sqlite:web.db",
        vars,
        std::fs::File::create(env.root().join("serve.log"))
            .unwrap()
            .into(),
        &["--permission-mode", "bypassPermissions"],
    )
}

/// One API request from the test itself (not the page): the status and the JSON body.
fn call(server: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    server.call(method, path, body.as_ref())
}

fn create(server: &Server, goal: &str, provider: &str, mode: &str) -> String {
    let (status, created) = call(
        server,
        "POST",
        "/v1/tasks",
        Some(json!({ "goal": goal, "provider": provider, "permission_mode": mode })),
    );
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

fn script(env: &CliEnv, name: &str, turns: Value) -> String {
    let path = env.write(name, &json!({ "turns": turns }).to_string());
    format!("scripted:{}", path.display())
}

async fn browser(profile: &std::path::Path) -> Browser {
    let mut config = BrowserConfig::builder()
        .chrome_executable(chromium().expect(
            "Chromium is not installed: apt-get install chromium (`cargo xtask test` installs it)",
        ))
        .user_data_dir(profile)
        .window_size(1000, 800)
        .arg("--disable-gpu")
        .arg("--disable-dev-shm-usage");
    // Chromium's own sandbox does not run as root.
    if is_root() {
        config = config.no_sandbox();
    }
    let (browser, mut handler) = Browser::launch(config.build().unwrap()).await.unwrap();
    tokio::spawn(async move { while handler.next().await.is_some() {} });
    browser
}

/// Moves the page to `hash` (a route of the page: no new document is loaded).
async fn go(page: &Page, hash: &str) {
    eval(page, &format!("location.hash = {}", json!(hash))).await;
}

/// The value of `expression` in the page.
async fn eval(page: &Page, expression: &str) -> Value {
    page.evaluate(expression)
        .await
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
        .into_value::<Value>()
        .unwrap_or(Value::Null)
}

/// Waits until `condition` (a JavaScript expression) is true in the page.
async fn wait_for(page: &Page, condition: &str) {
    let start = Instant::now();
    loop {
        if eval(page, &format!("Boolean({condition})")).await == json!(true) {
            return;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let text = eval(page, "document.body.innerText").await;
            panic!("never true: {condition}\npage: {text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn screenshot(page: &Page, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = page
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = dir.join(name);
    std::fs::write(&path, png).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_follows_answers_messages_and_cancels_tasks_and_shows_output_as_text() {
    let env = CliEnv::new(NOETA);
    let server = serve(&env, &[]);

    // A task that asks to run a command, then answers twice.
    let asking = create(
        &server,
        "run the tests",
        &script(
            &env,
            "ask.json",
            json!([
                { "calls": [{ "name": "Bash", "input": { "command": "echo approved >> effects.txt" } }] },
                { "text": "The tests ran." },
                { "text": "Second answer." }
            ]),
        ),
        "default",
    );
    // A task whose tool result is hostile markup.
    let hostile = create(
        &server,
        "print markup",
        &script(
            &env,
            "xss.json",
            json!([
                { "calls": [{ "name": "Bash", "input": { "command":
                    "printf '%s\\n' '<script>document.title=\"pwned\"</script>' '<img src=x onerror=\"document.title=&quot;pwned2&quot;;window.pwned=1\">'" } }] },
                { "text": "<b>bold?</b> <img src=x onerror=\"window.pwned=2\">" }
            ]),
        ),
        "bypassPermissions",
    );
    // A task that asks a question.
    let question = create(
        &server,
        "pick a colour",
        &script(
            &env,
            "question.json",
            json!([
                { "calls": [{ "name": "AskUserQuestion", "input": { "questions": [{
                    "question": "Which colour?", "header": "Colour", "multiSelect": false,
                    "options": [
                        { "label": "Red", "description": "warm" },
                        { "label": "Blue", "description": "cool" }
                    ]
                }] } }] },
                { "text": "Blue it is." }
            ]),
        ),
        "default",
    );
    // A task that takes its time: cancelled from the page.
    let slow = create(
        &server,
        "take your time",
        &script(
            &env,
            "slow.json",
            json!([{ "text": "late", "delay_ms": 30_000 }]),
        ),
        "default",
    );

    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path()).await;
    let page = browser.new_page(server.page()).await.unwrap();

    // The list: every task, the ones waiting on a person first.
    wait_for(&page, "document.body.dataset.listed === '4'").await;
    wait_for(
        &page,
        "document.querySelector('tbody tr.you') && document.querySelectorAll('tbody tr.you').length === 2",
    )
    .await;
    let first = eval(
        &page,
        "document.querySelector('tbody tr td.goal').innerText",
    )
    .await;
    assert!(
        first == "run the tests" || first == "pick a colour",
        "waiting tasks first: {first}"
    );
    let shot = screenshot(&page, "task-list.png").await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 1_000);

    // Reply text streams into the page as the model writes it, then gives way to the reply.
    let words = "one two three four five six seven eight nine ten";
    let streaming = create(
        &server,
        "stream a reply",
        &script(
            &env,
            "stream.json",
            json!([{ "text": words, "delay_ms": 5_000 }]),
        ),
        "default",
    );
    go(&page, &format!("#/task/{streaming}")).await;
    wait_for(
        &page,
        "document.querySelector('.entry.streaming .text')?.textContent.length > 0",
    )
    .await;
    let partial = eval(
        &page,
        "document.querySelector('.entry.streaming .text').textContent",
    )
    .await;
    let partial = partial.as_str().unwrap();
    assert!(
        words.contains(partial) && partial.len() < words.len(),
        "streamed so far: {partial:?}"
    );
    wait_for(&page, "document.body.dataset.status === 'turn ended'").await;
    wait_for(
        &page,
        "document.querySelector('.entry.streaming') === null && document.querySelector('.transcript').innerText.includes('nine ten')",
    )
    .await;
    assert_eq!(
        eval(
            &page,
            "[...document.querySelectorAll('.entry.assistant')].filter(e => e.innerText.includes('one two')).length"
        )
        .await,
        json!(1),
        "the recorded reply once, the streamed text gone"
    );

    // The asking task: its ask shown, approved with the keyboard.
    go(&page, &format!("#/task/{asking}")).await;
    wait_for(&page, "document.body.dataset.waiting === 'permission'").await;
    wait_for(&page, "document.getElementById('allow') !== null").await;
    let asked = eval(&page, "document.querySelector('.ask').innerText").await;
    assert!(asked.as_str().unwrap().contains("Bash"), "{asked}");
    eval(
        &page,
        "document.body.dispatchEvent(new KeyboardEvent('keydown', { key: 'a', bubbles: true }))",
    )
    .await;
    wait_for(&page, "document.body.dataset.status === 'turn ended'").await;
    wait_for(
        &page,
        "document.querySelector('.transcript').innerText.includes('The tests ran.')",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("effects.txt")).unwrap(),
        "approved\n"
    );
    let shot = screenshot(&page, "task-page.png").await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 1_000);

    // The next message, typed into the box and sent.
    eval(
        &page,
        "(() => { const m = document.getElementById('message'); m.value = 'once more'; m.form.requestSubmit(); })()",
    )
    .await;
    wait_for(
        &page,
        "document.querySelector('.transcript').innerText.includes('Second answer.')",
    )
    .await;
    wait_for(
        &page,
        "document.querySelector('.transcript').innerText.includes('once more')",
    )
    .await;

    // The question: an option picked and sent.
    go(&page, &format!("#/task/{question}")).await;
    wait_for(&page, "document.body.dataset.waiting === 'question'").await;
    wait_for(
        &page,
        "document.querySelector('#question-form input[value=\"Blue\"]') !== null",
    )
    .await;
    eval(
        &page,
        "(() => { document.querySelector('#question-form input[value=\"Blue\"]').click(); document.getElementById('question-form').requestSubmit(); })()",
    )
    .await;
    wait_for(&page, "document.body.dataset.status === 'turn ended'").await;
    wait_for(
        &page,
        "document.querySelector('.transcript').innerText.includes('Blue it is.')",
    )
    .await;
    let (_, events) = call(
        &server,
        "GET",
        &format!("/v1/tasks/{question}/events"),
        None,
    );
    assert!(
        events
            .to_string()
            .contains(r#""answers":{"Which colour?":"Blue"}"#),
        "{events}"
    );

    // Hostile output: shown as text, nothing runs, no element is made from it.
    go(&page, &format!("#/task/{hostile}")).await;
    wait_for(&page, "document.body.dataset.status === 'turn ended'").await;
    wait_for(
        &page,
        "document.querySelector('.transcript').innerText.includes('onerror')",
    )
    .await;
    let text = eval(&page, "document.querySelector('.transcript').innerText").await;
    let text = text.as_str().unwrap();
    assert!(
        text.contains("<script>document.title=\"pwned\"</script>"),
        "{text}"
    );
    assert!(text.contains("<img src=x onerror="), "{text}");
    assert!(text.contains("<b>bold?</b>"), "{text}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(eval(&page, "document.title").await, json!("noeta"));
    assert_eq!(eval(&page, "window.pwned === undefined").await, json!(true));
    assert_eq!(
        eval(
            &page,
            "document.querySelectorAll('main img, main script, main b').length"
        )
        .await,
        json!(0)
    );

    // Cancel from the page.
    go(&page, &format!("#/task/{slow}")).await;
    wait_for(&page, "document.getElementById('task-status') !== null").await;
    eval(
        &page,
        "(() => { window.confirm = () => true; [...document.querySelectorAll('button')].find(b => b.innerText === 'Cancel task').click(); })()",
    )
    .await;
    wait_for(&page, "document.body.dataset.status === 'failed'").await;
    wait_for(
        &page,
        "document.getElementById('task-status').innerText.includes('cancelled')",
    )
    .await;

    // The raw log.
    go(&page, &format!("#/task/{asking}/log")).await;
    wait_for(&page, "document.querySelectorAll('tbody tr').length > 10").await;
    let rows = eval(&page, "document.querySelector('tbody').innerText").await;
    assert!(
        rows.as_str().unwrap().contains("core/ask_answered"),
        "{rows}"
    );
    drop(browser);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_has_a_strict_policy_and_forged_posts_are_refused() {
    let env = CliEnv::new(NOETA);
    let server = serve(&env, &[]);
    for path in ["/", "/assets/app.js", "/v1/tasks", "/nothing"] {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n",
            server.addr
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let head = response
            .split("\r\n\r\n")
            .next()
            .unwrap()
            .to_ascii_lowercase();
        assert!(
            head.contains("content-security-policy: default-src 'none'; script-src 'self';"),
            "{path}: {head}"
        );
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{path}: {head}"
        );
    }
    // A form from another site, or a POST that is not JSON, is refused.
    let forged = [
        (
            "Content-Type: text/plain\r\n",
            "Content-Type: application/json",
        ),
        (
            "Content-Type: application/json\r\nOrigin: http://evil.example\r\n",
            "origin `http://evil.example` is refused",
        ),
        (
            "Content-Type: application/json\r\nSec-Fetch-Site: cross-site\r\n",
            "another site",
        ),
    ];
    for (headers, says) in forged {
        let mut stream = TcpStream::connect(&server.addr).unwrap();
        let body = r#"{"goal":"x"}"#;
        write!(
            stream,
            "POST /v1/tasks HTTP/1.0\r\nHost: {}\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            server.addr,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.0 403"), "{response}");
        assert!(response.contains(says), "{response}");
    }
    // The page's own origin may post.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let body = r#"{"goal":"  "}"#;
    write!(
        stream,
        "POST /v1/tasks HTTP/1.0\r\nHost: {0}\r\nOrigin: http://{0}\r\nSec-Fetch-Site: same-origin\r\nAuthorization: Bearer {2}\r\nContent-Type: application/json\r\nContent-Length: {1}\r\n\r\n{body}",
        server.addr,
        body.len(),
        server.token.as_deref().unwrap()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 400"), "{response}");
    // An unknown frontend is named with the known ones.
    let out = env.run(&["open", "tui"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        noeta_testkit::cli::stderr(&out)
            .contains("there is no frontend `tui` — known frontends: terminal, web"),
        "{}",
        noeta_testkit::cli::stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_asks_for_the_token_once_per_tab() {
    let env = CliEnv::new(NOETA);
    std::fs::create_dir_all(env.home.join(".noeta")).unwrap();
    std::fs::write(
        env.home.join(".noeta/config.toml"),
        "[plugins.serve]\ntoken = \"{env:NOETA_SERVE_TOKEN}\"\n",
    )
    .unwrap();
    let server = serve(&env, &[("NOETA_SERVE_TOKEN", "page-s3cret-0123456789")]);
    let provider = script(
        &env,
        "hello.json",
        json!([{ "text": "Hello from behind a token." }]),
    );
    let (status, created) = server.call_as(
        "POST",
        "/v1/tasks",
        Some(&json!({ "goal": "behind a token", "provider": provider })),
        Some("page-s3cret-0123456789"),
    );
    assert_eq!(status, 201, "{created}");
    let task = created["id"].as_str().unwrap().to_owned();

    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path()).await;
    let page = browser.new_page(server.page()).await.unwrap();
    wait_for(&page, "document.getElementById('token') !== null").await;
    assert_eq!(
        eval(&page, "document.body.dataset.listed === undefined").await,
        json!(true),
        "nothing listed without the token"
    );
    let submit = |token: &str| {
        format!(
            "(() => {{ const t = document.getElementById('token'); t.value = {}; t.form.requestSubmit(); }})()",
            json!(token)
        )
    };
    // A wrong token: asked for again.
    eval(&page, &submit("wrong")).await;
    wait_for(
        &page,
        "sessionStorage.getItem('noeta-token') === 'wrong' && document.getElementById('token')?.value === ''",
    )
    .await;
    // The right one: the list, then the task followed over the event stream with it.
    eval(&page, &submit("page-s3cret-0123456789")).await;
    wait_for(&page, "document.body.dataset.listed === '1'").await;
    go(&page, &format!("#/task/{task}")).await;
    wait_for(
        &page,
        "document.querySelector('.transcript')?.innerText.includes('Hello from behind a token.')",
    )
    .await;
    // Kept for the tab: a reload asks nothing.
    page.reload().await.unwrap();
    wait_for(
        &page,
        "document.querySelector('.transcript')?.innerText.includes('Hello from behind a token.')",
    )
    .await;
    assert_eq!(
        eval(&page, "document.getElementById('token') === null").await,
        json!(true)
    );
    // Another tab has its own session storage: it asks again.
    let other = browser.new_page(server.page()).await.unwrap();
    wait_for(&other, "document.getElementById('token') !== null").await;
    drop(browser);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noeta_open_web_prints_the_pages_address_first_and_the_page_starts_a_task() {
    use std::io::BufRead as _;
    let env = CliEnv::new(NOETA);
    // The usual port, when nothing else holds it.
    let usual_free = std::net::TcpListener::bind("127.0.0.1:7878").is_ok();
    let mut child = noeta_testkit::reap::Reaped::new(
        env.command(&["open", "web", "--workers", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(env.root().join("open.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let page_url = lines.next().unwrap().unwrap();
    let api = lines.next().unwrap().unwrap();
    assert!(api.ends_with("/v1/"), "{api}");
    let token = noeta_testkit::serve::kept_token(&env).unwrap();
    assert_eq!(
        page_url,
        format!("{}#token={token}", api.trim_end_matches("v1/")),
        "the page's address comes first and carries the kept token"
    );
    if usual_free {
        assert!(page_url.starts_with("http://127.0.0.1:7878/"), "{page_url}");
    }
    // A second page opened while the first holds the port gets a free one, and says so.
    let mut second = noeta_testkit::reap::Reaped::new(
        env.command(&["open", "web", "--workers", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Both its lines are read, and its output kept open while it runs.
    let mut second_out = std::io::BufReader::new(second.stdout.take().unwrap()).lines();
    let second_page = second_out.next().unwrap().unwrap();
    let second_api = second_out.next().unwrap().unwrap();
    assert!(second_api.ends_with("/v1/"), "{second_api}");
    let port = |url: &str| {
        url.split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_ne!(port(&second_page), port(&page_url));
    // What it says up to its API line.
    let mut said = String::new();
    for line in std::io::BufReader::new(second.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.contains("noeta API on") {
            break;
        }
    }
    if usual_free {
        assert!(said.contains("port 7878 is in use"), "{said}");
    }
    let _ = second.kill();
    let _ = second.wait();
    let log = std::fs::read_to_string(env.root().join("open.log")).unwrap_or_default();
    assert!(
        !log.contains("  pin "),
        "no pins before or after the address: {log}"
    );

    let profile = tempfile::tempdir().unwrap();
    let browser = browser(profile.path()).await;
    let page = browser.new_page(page_url.as_str()).await.unwrap();
    wait_for(&page, "document.body.dataset.listed === '0'").await;
    assert_eq!(
        eval(&page, "document.getElementById('token') === null").await,
        json!(true),
        "no token asked for"
    );
    assert_eq!(
        eval(&page, "location.hash").await,
        json!("#/"),
        "the token is taken out of the address"
    );

    // The new-task form: the agents listed, the modes this server allows `main` (its own,
    // `default`, and the stricter `plan`), an empty goal refused in the page.
    wait_for(
        &page,
        "document.querySelectorAll('#agent option').length > 0",
    )
    .await;
    assert_eq!(
        eval(
            &page,
            "[...document.querySelectorAll('#mode option')].map(o => o.value)"
        )
        .await,
        json!(["plan", "default"])
    );
    assert_eq!(
        eval(&page, "document.getElementById('mode').value").await,
        json!("default")
    );
    screenshot(&page, "new-task-form.png").await;
    eval(&page, "document.getElementById('start').click()").await;
    wait_for(
        &page,
        "document.querySelector('.new-task .error').textContent.length > 0",
    )
    .await;
    eval(
        &page,
        "document.getElementById('goal').value = 'Summarise the notes'; \
         document.getElementById('mode').value = 'plan'; \
         document.getElementById('start').click()",
    )
    .await;
    wait_for(&page, "location.hash.startsWith('#/task/')").await;
    let id = eval(
        &page,
        "decodeURIComponent(location.hash.slice('#/task/'.length))",
    )
    .await;
    let id = id.as_str().unwrap().to_owned();
    let listed = env.run(&["tasks", "--json"]);
    let task: Value = serde_json::from_str(
        noeta_testkit::cli::stdout(&listed)
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .unwrap();
    assert_eq!(task["id"], json!(id), "{task}");
    assert_eq!(task["goal"], json!("Summarise the notes"), "{task}");
    assert_eq!(task["agent"], json!("main"), "{task}");
    let events = noeta_testkit::cli::stdout(&env.run(&["log", "--json", &id]));
    assert!(events.contains("\"permission_mode\":\"plan\""), "{events}");
    screenshot(&page, "new-task.png").await;
    drop(browser);
    let _ = child.kill();
    let _ = child.wait();
}
