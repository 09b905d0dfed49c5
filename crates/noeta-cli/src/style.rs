//! The few styles the command line uses. Text is always written styled; `stdio` strips the
//! styles when the stream takes no colour (`NO_COLOR`, no terminal, `TERM=dumb`; forced on by
//! `CLICOLOR_FORCE`), so no caller decides that.

use anstyle::{AnsiColor, Style};

/// A tool call's name.
pub(crate) const CALL: Style = Style::new().bold();
/// What is secondary: a result's preview, counts, hints.
pub(crate) const DIM: Style = Style::new().dimmed();
/// A failure.
pub(crate) const ERROR: Style = AnsiColor::Red.on_default();
/// Something an extension wants the person to see.
pub(crate) const NOTICE: Style = AnsiColor::Yellow.on_default();
/// A line a diff adds.
pub(crate) const ADDED: Style = AnsiColor::Green.on_default();
/// A line a diff removes.
pub(crate) const REMOVED: Style = AnsiColor::Red.on_default();
/// A diff's hunk header and file names.
pub(crate) const HUNK: Style = AnsiColor::Cyan.on_default();

/// `text` in `style`.
pub(crate) fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}
