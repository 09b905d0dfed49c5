//! Writing to standard output and error without ever panicking.
//!
//! `println!` panics when standard output is a closed pipe (`noeta log T | head`) or a full
//! disk (`> /dev/full`). Everything the command line prints goes through these macros instead:
//! a closed pipe ends the command quietly with status 141 (128 + SIGPIPE, what a shell shows for
//! a tool killed by the signal), any other write error ends it with one line on standard error
//! and status 74 (`EX_IOERR`). Standard error that cannot be written is given up silently:
//! there is nowhere left to say so.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::sync::OnceLock;

use anstream::AutoStream;
use anstream::ColorChoice;

/// The status of a command whose standard output was closed under it.
pub(crate) const CLOSED_PIPE: u8 = 141;

/// The status of a command that could not write its output for another reason.
pub(crate) const IO_ERROR: u8 = 74;

/// Whether standard output and standard error take colour, decided once: `NO_COLOR`,
/// `CLICOLOR_FORCE`, `CLICOLOR`, `TERM` and whether each is a terminal.
fn choices() -> (ColorChoice, ColorChoice) {
    static CHOICES: OnceLock<(ColorChoice, ColorChoice)> = OnceLock::new();
    *CHOICES.get_or_init(|| {
        (
            AutoStream::choice(&io::stdout()),
            AutoStream::choice(&io::stderr()),
        )
    })
}

/// `text` with its styles already stripped where colour is off. A stripping stream writes each
/// piece between two styles by itself, and standard error is not buffered: a styled line
/// would take one `write` per piece instead of one.
fn one_piece(text: &str, choice: ColorChoice) -> Cow<'_, str> {
    if choice == ColorChoice::Never && text.contains('\x1b') {
        Cow::Owned(anstream::adapter::strip_str(text).to_string())
    } else {
        Cow::Borrowed(text)
    }
}

/// Writes `text` to `stream` in one piece: as it is (already stripped) where colour is off,
/// through anstream where it is on. Standard error is not buffered: nothing to flush.
fn write_to(
    mut stream: impl anstream::stream::RawStream + anstream::stream::AsLockedWrite,
    choice: ColorChoice,
    text: &str,
) -> io::Result<()> {
    let text = one_piece(text, choice);
    if choice == ColorChoice::Never {
        return stream.write_all(text.as_bytes());
    }
    AutoStream::new(stream, choice).write_all(text.as_bytes())
}

fn stdout_is_terminal() -> bool {
    static TERMINAL: OnceLock<bool> = OnceLock::new();
    *TERMINAL.get_or_init(|| io::IsTerminal::is_terminal(&io::stdout()))
}

/// Writes to standard output (styles stripped where colour is off, the status line cleared
/// first); a failure ends the process (see the module docs).
pub(crate) fn write_out(args: fmt::Arguments<'_>) {
    let text = fmt::format(args);
    // Only a terminal's cursor matters to the status line.
    let ends_line = (stdout_is_terminal() && !text.is_empty()).then(|| text.ends_with('\n'));
    let written = crate::status::clear_for(ends_line, || {
        write_to(io::stdout().lock(), choices().0, &text)
    });
    if let Err(err) = written {
        gone(&err);
    }
}

/// Flushes standard output before the process ends, so a failure is seen and reported.
pub(crate) fn flush_out() {
    if let Err(err) = io::stdout().lock().flush() {
        gone(&err);
    }
}

/// Writes to standard error (styles stripped where colour is off, the status line cleared
/// first); a failure is ignored.
pub(crate) fn write_err(args: fmt::Arguments<'_>) {
    let text = fmt::format(args);
    crate::status::clear_for((!text.is_empty()).then(|| text.ends_with('\n')), || {
        let _ = write_to(io::stderr().lock(), choices().1, &text);
    });
}

/// Ends the process after standard output failed with `err` (see the module docs).
pub(crate) fn gone(err: &io::Error) -> ! {
    if err.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(CLOSED_PIPE));
    }
    write_err(format_args!(
        "error: cannot write to standard output: {err}\n"
    ));
    std::process::exit(i32::from(IO_ERROR));
}

/// `print!` that never panics.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdio::write_out(format_args!($($arg)*)) };
}

/// `println!` that never panics.
macro_rules! outln {
    () => { $crate::stdio::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that never panics.
macro_rules! eout {
    ($($arg:tt)*) => { $crate::stdio::write_err(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics.
macro_rules! eoutln {
    () => { $crate::stdio::write_err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdio::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {eout, eoutln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_stripped_in_one_piece_only_where_colour_is_off() {
        let styled = "\x1b[1mRead\x1b[0m f.txt \x1b[2m(20 lines)\x1b[0m\n";
        assert_eq!(
            one_piece(styled, ColorChoice::Never),
            "Read f.txt (20 lines)\n"
        );
        assert!(matches!(
            one_piece("plain\n", ColorChoice::Never),
            Cow::Borrowed("plain\n")
        ));
        assert_eq!(one_piece(styled, ColorChoice::AlwaysAnsi), styled);
    }
}
