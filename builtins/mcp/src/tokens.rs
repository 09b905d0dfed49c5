//! Where the sign-ins to remote servers are kept: a [`TokenVault`] holds one record per server
//! URL — the OAuth client the server's authorization server registered, the tokens it issued,
//! and the metadata found on the way — kept like other secrets. [`FileVault`] is the default (a
//! file per server, readable by the user alone); a host with an OS keyring hands its own vault
//! under [`TOKENS`].

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, AuthorizationMetadata, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The name the host hands its vault under ([`noeta_core::session::Instances::with_host_value`]).
pub const TOKENS: &str = "mcp_tokens";

/// A store of sign-ins, one opaque text per server URL. Every method names what failed.
pub trait TokenVault: Send + Sync {
    /// The record kept for `url`, if any.
    fn load(&self, url: &str) -> Result<Option<String>, String>;
    /// Keeps `record` for `url`, replacing any.
    fn save(&self, url: &str, record: &str) -> Result<(), String>;
    /// Forgets `url`'s record: whether there was one.
    fn clear(&self, url: &str) -> Result<bool, String>;
    /// Where the records are kept, for messages (`~/.noeta/mcp-sign-in`, `the kernel keyring`).
    fn place(&self) -> String;
}

/// `vault` as the host value the plugin reads (set it under [`TOKENS`]).
pub fn tokens_value(vault: Arc<dyn TokenVault>) -> noeta_core::HostValue {
    noeta_core::HostValue::new(vault)
}

/// The vault a session's host handed over, if any.
pub(crate) fn from_host(values: &noeta_core::HostValues) -> Option<Arc<dyn TokenVault>> {
    values.get::<Arc<dyn TokenVault>>(TOKENS).cloned()
}

/// Sign-ins in files under one directory (`~/.noeta/mcp-sign-in`): the directory is the user's
/// alone (0700), each file too (0600), written whole and renamed into place; a file others can
/// read is refused rather than used.
#[derive(Debug, Clone)]
pub struct FileVault {
    dir: PathBuf,
}

impl FileVault {
    /// A vault in `dir` (created when the first sign-in is kept).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The file of `url`: its name is a hash of the URL, so no URL text reaches a path.
    fn file(&self, url: &str) -> PathBuf {
        let digest = Sha256::digest(url.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }
}

#[cfg(unix)]
fn readable_by_others(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::PermissionsExt as _;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o077 != 0)
}

#[cfg(not(unix))]
fn readable_by_others(_: &Path) -> std::io::Result<bool> {
    Ok(false)
}

impl TokenVault for FileVault {
    fn load(&self, url: &str) -> Result<Option<String>, String> {
        let path = self.file(url);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if readable_by_others(&path).map_err(|e| format!("{}: {e}", path.display()))? {
                    return Err(format!(
                        "{} holds a sign-in and others can read it: it is not used — remove it \
                         and sign in again",
                        path.display()
                    ));
                }
                Ok(Some(text))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    fn save(&self, url: &str, record: &str) -> Result<(), String> {
        let fail = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dirs, 0o700);
        dirs.create(&self.dir).map_err(|e| fail(&self.dir, e))?;
        let path = self.file(url);
        let temp = path.with_extension("json.new");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp).map_err(|e| fail(&temp, e))?;
        file.write_all(record.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| fail(&temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| fail(&path, e))
    }

    fn clear(&self, url: &str) -> Result<bool, String> {
        let path = self.file(url);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
        }
    }

    fn place(&self) -> String {
        self.dir.display().to_string()
    }
}

/// What is kept for one server.
#[derive(Serialize, Deserialize)]
pub(crate) struct Record {
    /// The server's URL (the key, kept for people reading the store).
    pub(crate) url: String,
    /// The registered client and its tokens, as the OAuth client keeps them.
    pub(crate) credentials: Option<StoredCredentials>,
    /// A confidential client's secret (registered or given), for refreshing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// The redirect the client was registered with.
    pub(crate) redirect_uri: String,
    /// The authorization server's metadata, so a connection need not discover it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<AuthorizationMetadata>,
}

impl Record {
    /// The record kept for `url`, if any; a record that cannot be read is an error naming it.
    pub(crate) fn load(vault: &dyn TokenVault, url: &str) -> Result<Option<Self>, String> {
        let Some(text) = vault.load(url)? else {
            return Ok(None);
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "the sign-in kept for {url} in {} cannot be read ({e}): run `noeta mcp logout` \
                 and sign in again",
                vault.place()
            )
        })
    }
}

/// The OAuth client's credential store over one server's record: what the client saves (new
/// tokens after a sign-in or a refresh) is written through to the vault with the rest of the
/// record.
#[derive(Clone)]
pub(crate) struct VaultStore {
    vault: Arc<dyn TokenVault>,
    record: Arc<Mutex<Record>>,
}

impl VaultStore {
    pub(crate) fn new(vault: Arc<dyn TokenVault>, record: Record) -> Self {
        Self {
            vault,
            record: Arc::new(Mutex::new(record)),
        }
    }

    fn with_record<T>(&self, f: impl FnOnce(&mut Record) -> T) -> T {
        f(&mut self.record.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Sets the client secret and metadata the record keeps from now on.
    pub(crate) fn set_client(
        &self,
        secret: Option<String>,
        metadata: Option<AuthorizationMetadata>,
    ) {
        self.with_record(|record| {
            record.client_secret = secret;
            record.metadata = metadata;
        });
    }
}

fn store_error(e: String) -> AuthError {
    AuthError::CredentialStoreError(e)
}

#[async_trait]
impl CredentialStore for VaultStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.with_record(|record| record.credentials.clone()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = self.with_record(|record| {
            record.credentials = Some(credentials);
            serde_json::to_string(&*record)
        });
        let text = text.map_err(|e| store_error(e.to_string()))?;
        let url = self.with_record(|record| record.url.clone());
        self.vault.save(&url, &text).map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let url = self.with_record(|record| {
            record.credentials = None;
            record.url.clone()
        });
        self.vault.clear(&url).map(|_| ()).map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_file_vault_keeps_records_the_user_alone_can_read() {
        let dir = tempfile::tempdir().unwrap();
        let vault = FileVault::new(dir.path().join("sign-in"));
        assert_eq!(vault.load("https://a.example/mcp").unwrap(), None);
        vault.save("https://a.example/mcp", "{}").unwrap();
        assert_eq!(
            vault.load("https://a.example/mcp").unwrap().as_deref(),
            Some("{}")
        );
        assert_eq!(vault.load("https://b.example/mcp").unwrap(), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let file = vault.file("https://a.example/mcp");
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&file), 0o600);
            assert_eq!(mode(&dir.path().join("sign-in")), 0o700);
            // A file others can read is refused, naming it.
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = vault.load("https://a.example/mcp").unwrap_err();
            assert!(err.contains("others can read it"), "{err}");
        }
        assert!(vault.clear("https://a.example/mcp").unwrap());
        assert!(!vault.clear("https://a.example/mcp").unwrap());
    }

    #[test]
    fn a_record_that_cannot_be_read_names_the_server_and_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let vault = FileVault::new(dir.path());
        vault.save("https://a.example/mcp", "not json").unwrap();
        let err = Record::load(&vault, "https://a.example/mcp").err().unwrap();
        assert!(err.contains("https://a.example/mcp"), "{err}");
        assert!(err.contains("noeta mcp logout"), "{err}");
    }
}
