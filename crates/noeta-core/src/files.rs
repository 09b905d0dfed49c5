//! The one bounded reader of the files noeta reads at start — settings, the trust store,
//! manifests, hooks and MCP configurations, agent files, commands, skills, instructions, model
//! scripts: regular files only (a named pipe, a device or a directory is refused without
//! blocking on it), the size checked before anything is parsed, every error naming the file.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Why a file was not read. Every message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// It cannot be opened or read (missing, no permission, …).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a regular file.
    #[error("{path} is a {kind}, not a regular file: it is not read")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is (`named pipe`, `directory`, …).
        kind: &'static str,
    },
    /// It is larger than a file of its kind may be.
    #[error("{path} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (or how much was read past the limit).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// It is not UTF-8 text, or holds a NUL byte (a binary file).
    #[error("{path} is not text (a binary file, or not UTF-8 at byte {offset})")]
    NotText {
        /// The file.
        path: PathBuf,
        /// The first byte that is not text.
        offset: usize,
    },
}

impl FileError {
    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// The error as one `std::io::Error` whose message does not repeat the path (the kinds
    /// other than I/O as `InvalidData`), for callers whose own errors name the file and wrap
    /// an I/O error: "cannot read F: a named pipe, not a regular file".
    pub fn into_io(self) -> std::io::Error {
        let text = match self {
            Self::Io { source, .. } => return source,
            Self::NotRegular { kind, .. } => format!("a {kind}, not a regular file"),
            Self::TooLarge { size, limit, .. } => {
                format!("{size} bytes, over the {limit}-byte limit")
            }
            Self::NotText { offset, .. } => {
                format!("not text (a binary file, or not UTF-8 at byte {offset})")
            }
        };
        std::io::Error::new(std::io::ErrorKind::InvalidData, text)
    }
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = meta.file_type();
    if kind.is_dir() {
        "directory"
    } else if kind.is_fifo() {
        "named pipe"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Whether `path` is a regular file, without opening it: a named pipe or a device is named as
/// such (a check before a file is handed on to be read later, by another process).
///
/// # Errors
/// See [`FileError`]: `Io` when it cannot be looked at, `NotRegular` when it is no regular file.
pub fn regular(path: &Path) -> Result<(), FileError> {
    let meta = std::fs::metadata(path).map_err(|source| FileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta),
        })
    }
}

/// The bytes of the regular file at `path`, at most `limit` of them. The file is opened without
/// blocking (a named pipe swapped in after a check cannot hang the reader) and its type and
/// size are taken from the open file before anything is read.
///
/// # Errors
/// See [`FileError`].
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_regular = |meta: &std::fs::Metadata| FileError::NotRegular {
        path: path.to_path_buf(),
        kind: kind_of(meta),
    };
    // Looked at before it is opened (opening some devices does something), and again once
    // open (it may have been swapped in between).
    let before = std::fs::metadata(path).map_err(io)?;
    if !before.is_file() {
        return Err(not_regular(&before));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    if meta.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    // A file that grew while it was read.
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, at most `limit` bytes of UTF-8 without NUL bytes.
///
/// # Errors
/// See [`FileError`].
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    let bytes = read_bounded(path, limit)?;
    text(path, bytes)
}

/// `bytes` read from `path` as text, or why they are not.
///
/// # Errors
/// [`FileError::NotText`].
pub fn text(path: &Path, bytes: Vec<u8>) -> Result<String, FileError> {
    let not_text = |offset| FileError::NotText {
        path: path.to_path_buf(),
        offset,
    };
    if let Some(offset) = bytes.iter().position(|b| *b == 0) {
        return Err(not_text(offset));
    }
    String::from_utf8(bytes).map_err(|err| not_text(err.utf8_error().valid_up_to()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_whole_within_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(read_text(&file, 6).unwrap(), "x = 1\n");
        let err = read_text(&file, 5).unwrap_err();
        assert!(matches!(
            err,
            FileError::TooLarge {
                size: 6,
                limit: 5,
                ..
            }
        ));
        assert!(
            err.to_string()
                .contains("a.toml is 6 bytes, over the 5-byte limit")
        );
        assert!(
            read_text(&dir.path().join("none"), 10)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn a_named_pipe_a_directory_and_a_device_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo (coreutils) is needed");
        let err = read_text(&pipe, 100).unwrap_err().to_string();
        assert!(
            err.ends_with("pipe is a named pipe, not a regular file: it is not read"),
            "{err}"
        );
        let err = read_text(dir.path(), 100).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        let err = read_text(Path::new("/dev/zero"), 100)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/dev/zero is a device"), "{err}");
    }

    #[test]
    fn a_binary_file_is_not_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("NOETA.md");
        std::fs::write(&file, b"# hi\n\x00\x01\x02").unwrap();
        let err = read_text(&file, 100).unwrap_err().to_string();
        assert!(err.contains("NOETA.md is not text"), "{err}");
        std::fs::write(&file, b"ok \xff").unwrap();
        assert!(matches!(
            read_text(&file, 100).unwrap_err(),
            FileError::NotText { offset: 3, .. }
        ));
    }
}
