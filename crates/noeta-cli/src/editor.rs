//! The terminal's input: every line the person types — a chat message, an answer to an ask —
//! comes from here, so one reader owns standard input.
//!
//! On a terminal that reader is a line editor (rustyline) on a thread of its own: arrows and
//! the usual editing keys, history (chat messages only, kept per workspace under
//! `~/.noeta/history/`), a pasted text of several lines as one message (bracketed paste),
//! Alt-Enter or a trailing `\` for a new line, Tab completing slash commands, and agent names
//! and file paths after `@`. Ctrl-C clears a half-typed line; on an empty line it interrupts
//! (in chat: leaves; during a turn: stops the turn, as the signal does), and Ctrl-D leaves.
//!
//! Through a pipe, lines are read as they come, with no prompt shown.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, ConditionalEventHandler, Editor, Event, EventContext, EventHandler, KeyCode, KeyEvent,
    Modifiers, Movement, RepeatCount,
};

/// What a line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A chat message: kept in the history, completed.
    Message,
    /// An answer to an ask or a question: not kept.
    Answer,
}

/// What the person did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Typed {
    /// A line (several, for a paste or a continued line), without its end.
    Line(String),
    /// Ctrl-C on an empty line.
    Interrupted,
    /// Ctrl-D, or the input's end.
    Ended,
}

struct Request {
    prompt: String,
    kind: Kind,
    reply: tokio::sync::oneshot::Sender<Typed>,
}

enum Source {
    /// The line editor's thread.
    Editor(std::sync::mpsc::Sender<Request>),
    /// Lines of a pipe, read by a thread of their own.
    Pipe(tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>),
}

/// What the editor completes and where it keeps the history, set by the chat.
#[derive(Default)]
struct Setup {
    /// Slash commands, with their `/`.
    commands: Vec<String>,
    /// Agent names.
    agents: Vec<String>,
    /// The history file of this workspace.
    history: Option<PathBuf>,
}

fn setup() -> &'static Mutex<Setup> {
    static SETUP: OnceLock<Mutex<Setup>> = OnceLock::new();
    SETUP.get_or_init(Mutex::default)
}

/// The slash commands and agent names Tab completes.
pub(crate) fn set_completions(commands: Vec<String>, agents: Vec<String>) {
    let mut setup = setup().lock().unwrap_or_else(PoisonError::into_inner);
    setup.commands = commands;
    setup.agents = agents;
}

/// Keeps chat messages in the history file of `workspace` (`~/.noeta/history/<hash>`).
pub(crate) fn keep_history(home: Option<&std::path::Path>, workspace: &std::path::Path) {
    use sha2::Digest as _;
    let Some(home) = home else { return };
    let digest = sha2::Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    setup()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .history = Some(home.join(".noeta/history").join(name));
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            let (send, receive) = std::sync::mpsc::channel::<Request>();
            std::thread::spawn(move || edit(&receive));
            Source::Editor(send)
        } else {
            let (send, receive) = tokio::sync::mpsc::unbounded_channel();
            std::thread::spawn(move || {
                let stdin = std::io::stdin();
                loop {
                    let mut line = String::new();
                    match stdin.lock().read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            let line = line.trim_end_matches(['\n', '\r']).to_owned();
                            if send.send(line).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            Source::Pipe(tokio::sync::Mutex::new(receive))
        }
    })
}

/// Whether the person types at a line editor (standard input and error are a terminal).
pub(crate) fn editing() -> bool {
    matches!(source(), Source::Editor(_))
}

/// Reads one line: at the editor, after `prompt`; from a pipe, the next line.
pub(crate) async fn read(prompt: &str, kind: Kind) -> Typed {
    match source() {
        Source::Editor(requests) => {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let request = Request {
                prompt: prompt.to_owned(),
                kind,
                reply,
            };
            if requests.send(request).is_err() {
                return Typed::Ended;
            }
            answer.await.unwrap_or(Typed::Ended)
        }
        Source::Pipe(lines) => match lines.lock().await.recv().await {
            Some(line) => Typed::Line(line),
            None => Typed::Ended,
        },
    }
}

/// The editor's thread: one line per request, until the input ends.
fn edit(requests: &std::sync::mpsc::Receiver<Request>) {
    let Ok(mut editor) = editor() else {
        // No editor on this terminal: every read ends (the chat leaves, asks are denied).
        for request in requests {
            let _ = request.reply.send(Typed::Ended);
        }
        return;
    };
    let mut loaded: Option<PathBuf> = None;
    for request in requests {
        let history = setup()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .history
            .clone();
        if request.kind == Kind::Message && history != loaded {
            if let Some(path) = &history {
                let _ = editor.load_history(path);
            }
            loaded.clone_from(&history);
        }
        if let Some(helper) = editor.helper_mut() {
            helper.completing = request.kind == Kind::Message;
        }
        let typed = match editor.readline(&request.prompt) {
            Ok(line) => {
                let line = joined(&line);
                if request.kind == Kind::Message && !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    if let Some(path) = &history {
                        append(&mut editor, path);
                    }
                }
                Typed::Line(line)
            }
            Err(ReadlineError::Interrupted) => Typed::Interrupted,
            Err(_) => Typed::Ended,
        };
        let ended = typed == Typed::Ended;
        let _ = request.reply.send(typed);
        if ended {
            return;
        }
    }
}

/// Adds the latest entry to the history file, made the user's alone.
fn append(editor: &mut Editor<Helper, FileHistory>, path: &std::path::Path) {
    if let Some(dir) = path.parent() {
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dirs, 0o700);
        let _ = dirs.create(dir);
    }
    let _ = editor.append_history(path);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    }
}

/// A line continued with a trailing `\` keeps its line break, not the `\`.
fn joined(line: &str) -> String {
    line.replace("\\\n", "\n")
}

fn editor() -> rustyline::Result<Editor<Helper, FileHistory>> {
    let config = rustyline::Config::builder()
        .max_history_size(2000)?
        .history_ignore_dups(true)?
        .history_ignore_space(true)
        .completion_type(rustyline::CompletionType::List)
        .bracketed_paste(true)
        // The prompt, the echo and the editing go to the terminal itself, so standard output
        // (`noeta chat > replies.txt`) holds the replies alone.
        .behavior(rustyline::Behavior::PreferTerm)
        .build();
    let mut editor = Editor::with_config(config)?;
    editor.set_helper(Some(Helper {
        files: FilenameCompleter::new(),
        completing: false,
    }));
    editor.bind_sequence(
        KeyEvent(KeyCode::Char('C'), Modifiers::CTRL),
        EventHandler::Conditional(Box::new(CtrlC)),
    );
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    Ok(editor)
}

/// Ctrl-C: clears a half-typed line; interrupts on an empty one.
struct CtrlC;

impl ConditionalEventHandler for CtrlC {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        Some(if ctx.line().is_empty() {
            Cmd::Interrupt
        } else {
            Cmd::Kill(Movement::WholeBuffer)
        })
    }
}

/// Completion and continuation for the chat's messages.
struct Helper {
    files: FilenameCompleter,
    /// Whether this line completes (a message, not an answer).
    completing: bool,
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        if !self.completing {
            return Ok((pos, Vec::new()));
        }
        let setup = setup().lock().unwrap_or_else(PoisonError::into_inner);
        Ok(
            candidates(line, pos, &setup.commands, &setup.agents).unwrap_or_else(|| {
                // A path after `@`: the files of the workspace (the current directory).
                let word_start = line[..pos].rfind(char::is_whitespace).map_or(0, |i| i + 1);
                if line[word_start..pos].starts_with('@') {
                    let (start, found) = self
                        .files
                        .complete(&line[word_start + 1..pos], pos - word_start - 1, ctx)
                        .unwrap_or((0, Vec::new()));
                    (word_start + 1 + start, found)
                } else {
                    (pos, Vec::new())
                }
            }),
        )
    }
}

/// Completions of the word before `pos` from the known words: a slash command at the line's
/// start, an agent name after `@` (which may also be a path: then `None` when no agent
/// matches, for the file completer).
fn candidates(
    line: &str,
    pos: usize,
    commands: &[String],
    agents: &[String],
) -> Option<(usize, Vec<Pair>)> {
    let before = &line[..pos];
    if before.starts_with('/') && !before.contains(char::is_whitespace) {
        let found = commands
            .iter()
            .filter(|c| c.starts_with(before))
            .map(|c| Pair {
                display: c.clone(),
                replacement: format!("{c} "),
            })
            .collect();
        return Some((0, found));
    }
    let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let word = before[start..].strip_prefix('@')?;
    let found: Vec<Pair> = agents
        .iter()
        .filter(|a| a.starts_with(word))
        .map(|a| Pair {
            display: format!("@{a}"),
            replacement: format!("{a} "),
        })
        .collect();
    (!found.is_empty()).then_some((start + 1, found))
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

impl Validator for Helper {
    /// A line ending in `\` goes on on the next line.
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if self.completing && ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl rustyline::Helper for Helper {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn words(found: Option<(usize, Vec<Pair>)>) -> Option<(usize, Vec<String>)> {
        found.map(|(at, pairs)| (at, pairs.into_iter().map(|p| p.replacement).collect()))
    }

    #[test]
    fn slash_commands_and_agents_complete_and_paths_are_left_to_the_file_completer() {
        let commands = vec!["/help".to_owned(), "/status".to_owned(), "/show".to_owned()];
        let agents = vec!["explore".to_owned(), "reviewer".to_owned()];
        assert_eq!(
            words(candidates("/s", 2, &commands, &agents)),
            Some((0, vec!["/status ".to_owned(), "/show ".to_owned()]))
        );
        assert_eq!(
            words(candidates("ask @ex", 7, &commands, &agents)),
            Some((5, vec!["explore ".to_owned()]))
        );
        // No agent starts so: a path, for the file completer.
        assert_eq!(
            words(candidates("see @src/ma", 11, &commands, &agents)),
            None
        );
        assert_eq!(
            words(candidates("plain words", 11, &commands, &agents)),
            None
        );
        assert_eq!(joined("one \\\ntwo"), "one \ntwo");
    }

    #[test]
    fn the_history_file_is_per_workspace_under_home() {
        keep_history(
            Some(std::path::Path::new("/h")),
            std::path::Path::new("/w/a"),
        );
        let first = setup().lock().unwrap().history.clone().unwrap();
        keep_history(
            Some(std::path::Path::new("/h")),
            std::path::Path::new("/w/b"),
        );
        let second = setup().lock().unwrap().history.clone().unwrap();
        assert!(first.starts_with("/h/.noeta/history"), "{first:?}");
        assert_ne!(first, second);
    }
}
