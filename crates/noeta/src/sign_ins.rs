//! Where a host keeps sign-ins to remote MCP servers: the OS keyring when this build has one
//! (the `keyring` feature), else files under `~/.noeta/mcp-sign-in` that the user alone can
//! read. `noeta mcp login` writes there, and every session's connections read from there.

use std::sync::Arc;

use noeta_builtin_mcp::{FileVault, TokenVault};

use crate::HostPaths;

/// The file vault under `paths`' home (`~/.noeta/mcp-sign-in`); none without a home.
pub fn file_vault(paths: &HostPaths) -> Option<Arc<dyn TokenVault>> {
    paths
        .user_dir()
        .map(|dir| Arc::new(FileVault::new(dir.join("mcp-sign-in"))) as Arc<dyn TokenVault>)
}

/// The keyring service sign-ins are kept under, one entry per server URL.
#[cfg(feature = "keyring")]
pub const KEYRING_SERVICE: &str = "noeta-mcp-sign-in";

/// Sign-ins kept in a keyring-core credential store, one entry per server URL under
/// [`KEYRING_SERVICE`].
#[cfg(feature = "keyring")]
#[derive(Clone)]
pub struct KeyringVault {
    store: Arc<keyring_core::CredentialStore>,
}

#[cfg(feature = "keyring")]
impl KeyringVault {
    /// Keeps sign-ins in `store`.
    pub fn new(store: Arc<keyring_core::CredentialStore>) -> Self {
        Self { store }
    }

    fn entry(&self, url: &str) -> Result<keyring_core::Entry, String> {
        keyring_core::Entry::new_in_store(&self.store, KEYRING_SERVICE, url)
            .map_err(|e| format!("the keyring ({}) has no entry for {url}: {e}", self.place()))
    }
}

#[cfg(feature = "keyring")]
impl TokenVault for KeyringVault {
    fn load(&self, url: &str) -> Result<Option<String>, String> {
        match self.entry(url)?.get_password() {
            Ok(text) => Ok(Some(text)),
            Err(keyring_core::Error::NoEntry) => Ok(None),
            Err(e) => Err(format!(
                "the keyring ({}) cannot read the sign-in for {url}: {e}",
                self.place()
            )),
        }
    }

    fn save(&self, url: &str, record: &str) -> Result<(), String> {
        self.entry(url)?.set_password(record).map_err(|e| {
            format!(
                "the keyring ({}) cannot keep the sign-in for {url}: {e}",
                self.place()
            )
        })
    }

    fn clear(&self, url: &str) -> Result<bool, String> {
        match self.entry(url)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring_core::Error::NoEntry) => Ok(false),
            Err(e) => Err(format!(
                "the keyring ({}) cannot forget the sign-in for {url}: {e}",
                self.place()
            )),
        }
    }

    fn place(&self) -> String {
        format!("the {} keyring", self.store.vendor())
    }
}
