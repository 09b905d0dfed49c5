//! The terminal's input in a pseudo-terminal (util-linux `script`), keys typed as a person
//! types them: in chat, arrows edit the line, ↑ brings back the last message, a pasted text of
//! two lines is one message, Ctrl-C clears a half-typed line and, on an empty one, leaves; a
//! `Write` ask shows the file's diff before the answer, paged when it is long.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions"
)]

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use noeta_testkit::cli::{CliEnv, stdout};
use serde_json::{Value, json};

const NOETA: &str = env!("CARGO_BIN_EXE_noeta");

/// A program in a pseudo-terminal, with what it has shown so far.
struct Terminal {
    child: noeta_testkit::reap::Reaped,
    shown: Arc<Mutex<String>>,
    /// How much of `shown` earlier waits consumed.
    seen: usize,
}

impl Terminal {
    fn start(env: &CliEnv, line: &str) -> Self {
        Self::start_with(env, line, &[])
    }

    fn start_with(env: &CliEnv, line: &str, vars: &[(&str, &str)]) -> Self {
        let script = Path::new("/usr/bin/script");
        assert!(
            script.exists(),
            "this test needs util-linux `script` (Debian package bsdutils) for a pseudo-terminal"
        );
        let mut child = Command::new(script)
            .args(["-qfec", line, "/dev/null"])
            .current_dir(&env.workspace)
            .env("HOME", &env.home)
            .env("TERM", "xterm-256color")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let shown = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().unwrap();
        let keep = Arc::clone(&shown);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                keep.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self {
            child: noeta_testkit::reap::Reaped::new(child),
            shown,
            seen: 0,
        }
    }

    /// Waits until `text` is shown after what earlier waits saw.
    fn wait_for(&mut self, text: &str) {
        let start = Instant::now();
        loop {
            {
                let shown = self.shown.lock().unwrap();
                if let Some(at) = shown[self.seen..].find(text) {
                    self.seen += at + text.len();
                    return;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never shown: {text:?}\nshown: {:?}",
                self.shown.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `keys` (bytes as a terminal sends them), a little at a time.
    fn types(&mut self, keys: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(keys.as_bytes()).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(150));
    }
}

const LEFT: &str = "\x1b[D";
const UP: &str = "\x1b[A";
const CTRL_C: &str = "\x03";

#[test]
fn arrows_history_paste_and_ctrl_c_edit_the_chats_line() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([
        { "text": "reply-one" },
        { "text": "reply-two" },
        { "text": "reply-three" },
        { "text": "reply-four" }
    ]));
    let mut term = Terminal::start(&env, &format!("{NOETA} chat --provider '{provider}'"));
    term.wait_for("› ");
    // A typo mended with ←.
    term.types("helo");
    term.types(LEFT);
    term.types("l\r");
    term.wait_for("reply-one");
    term.wait_for("› ");
    // ↑ brings the last message back to be edited.
    term.types(UP);
    term.types(" again\r");
    term.wait_for("reply-two");
    term.wait_for("› ");
    // A pasted text of two lines is one message.
    term.types("\x1b[200~line one\rline two\x1b[201~");
    term.types("\r");
    term.wait_for("reply-three");
    term.wait_for("› ");
    // Ctrl-C clears a half-typed line; the chat goes on.
    term.types("half typed");
    term.types(CTRL_C);
    term.types("real\r");
    term.wait_for("reply-four");
    term.wait_for("› ");
    // Ctrl-C on an empty line leaves.
    term.types(CTRL_C);
    let status = {
        let start = Instant::now();
        loop {
            if let Some(status) = term.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "Ctrl-C on an empty line did not leave the chat"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(status.success(), "{status:?}");

    let events = stdout(&env.run(&["log", "--last", "--json"]));
    let messages: Vec<String> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "user_message")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        messages,
        ["hello", "hello again", "line one\nline two", "real"],
        "{events}"
    );

    // The history is the workspace's, under home, the user's alone.
    let dir = env.home.join(".noeta/history");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let kept = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(kept.contains("hello again"), "{kept}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = files[0].metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

#[test]
fn a_write_ask_shows_the_diff_before_the_answer_and_pages_a_long_one() {
    let env = CliEnv::new(NOETA);
    let long: String = (1..=60).map(|n| format!("line {n}\n")).collect();
    let provider = env.script(json!([
        { "calls": [{ "name": "Write", "input": { "file_path": "short.txt", "content": "one\nTWO\n" } }] },
        { "calls": [{ "name": "Write", "input": { "file_path": "long.txt", "content": long } }] },
        { "text": "written" }
    ]));
    let line = format!("{NOETA} run --store memory: --provider '{provider}' 'write them'");
    let mut term = Terminal::start_with(&env, &line, &[("PAGER", "sed 's/^/paged: /'")]);
    // The short change is shown as it is, before the question.
    term.wait_for("+one");
    term.wait_for("+TWO");
    term.wait_for("allow?");
    assert!(
        !term.shown.lock().unwrap()[..term.seen].contains("paged: "),
        "a short change is not paged"
    );
    term.types("y\r");
    // The long one goes through the pager first.
    term.wait_for("paged: ");
    term.wait_for("+line 60");
    term.wait_for("allow?");
    term.types("y\r");
    term.wait_for("written");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        std::fs::read_to_string(env.workspace.join("short.txt")).unwrap(),
        "one\nTWO\n"
    );
    assert!(env.workspace.join("long.txt").exists());
}

/// With standard output sent to a file, the prompt and the editing stay on the terminal: the
/// file holds the replies alone.
#[test]
fn the_editor_writes_to_the_terminal_not_to_standard_output() {
    let env = CliEnv::new(NOETA);
    let provider = env.script(json!([{ "text": "reply-one" }]));
    let out = env.root().join("replies.txt");
    let mut term = Terminal::start(
        &env,
        &format!(
            "{NOETA} chat --store memory: --provider '{provider}' > '{}'",
            out.display()
        ),
    );
    term.wait_for("› ");
    term.types("hello\r");
    term.wait_for("› ");
    term.types("\x04");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "reply-one\n");
}
