//! The API token of `noeta serve`: the one the settings give (`[plugins.serve] token`, a secret
//! reference), else the one kept in `~/.noeta/serve-token` — made on first use (256 random
//! bits, hex), readable by its owner only — so a script reads it from that file and the page
//! gets it in the URL `noeta serve` prints.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The file that keeps the made token, under `~/.noeta/`.
pub(crate) const TOKEN_FILE: &str = "serve-token";

/// Where the token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// `[plugins.serve] token`.
    Settings,
    /// The token file (its path).
    File(PathBuf),
    /// Made for this process only: there is no home directory to keep it in.
    Process,
}

/// The token a server checks, and where it comes from.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub(crate) value: String,
    pub(crate) source: Source,
}

/// 256 random bits, as 64 hex digits.
fn random_token() -> Result<String> {
    noeta_toolkit::random_hex(32).map_err(anyhow::Error::msg)
}

/// The token kept in `file`, made first when there is none. A file others may read, or one
/// that is not a plain file holding a token, is refused with what to do.
pub(crate) fn kept(file: &Path) -> Result<String> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {} for the API token", dir.display()))?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
    {
        Ok(mut out) => {
            let token = random_token()?;
            out.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| out.sync_all())
                .with_context(|| format!("cannot write the API token to {}", file.display()))?;
            return Ok(token);
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => {
            return Err(err).with_context(|| format!("cannot create {}", file.display()));
        }
    }
    let meta = std::fs::symlink_metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    if !meta.is_file() {
        bail!(
            "{} is not a plain file: remove it, and `noeta serve` makes a new token there",
            file.display()
        );
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "{} may be read by other users (mode {:o}): `chmod 600 {}`, or remove it for a new token",
            file.display(),
            meta.mode() & 0o777,
            file.display()
        );
    }
    let text = noeta_core::files::read_text(file, 1024)?;
    let token = text.trim();
    if token.len() < 32 || !token.chars().all(|c| c.is_ascii_graphic()) {
        bail!(
            "{} does not hold a token (at least 32 visible characters): remove it, and `noeta \
             serve` makes a new one",
            file.display()
        );
    }
    Ok(token.to_owned())
}

/// The token of a server: `configured` when the settings give one, else the kept one (or one
/// for this process when there is no home directory).
pub(crate) fn token(configured: Option<String>, user_dir: Option<&Path>) -> Result<Token> {
    if let Some(value) = configured {
        return Ok(Token {
            value,
            source: Source::Settings,
        });
    }
    match user_dir {
        Some(dir) => {
            let file = dir.join(TOKEN_FILE);
            Ok(Token {
                value: kept(&file)?,
                source: Source::File(file),
            })
        }
        None => Ok(Token {
            value: random_token()?,
            source: Source::Process,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_token_is_made_once_private_and_kept() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".noeta").join(TOKEN_FILE);
        let first = kept(&file).unwrap();
        assert_eq!(first.len(), 64);
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()));
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(kept(&file).unwrap(), first, "kept, not made again");
        let other = tempfile::tempdir().unwrap();
        assert_ne!(kept(&other.path().join(TOKEN_FILE)).unwrap(), first);
    }

    #[test]
    fn a_token_file_others_may_read_or_that_holds_no_token_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(TOKEN_FILE);
        std::fs::write(&file, "0123456789abcdef0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = kept(&file).unwrap_err().to_string();
        assert!(
            err.contains("may be read by other users (mode 644)"),
            "{err}"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(kept(&file).unwrap(), "0123456789abcdef0123456789abcdef");
        std::fs::write(&file, "short\n").unwrap();
        let err = kept(&file).unwrap_err().to_string();
        assert!(err.contains("does not hold a token"), "{err}");
    }
}
