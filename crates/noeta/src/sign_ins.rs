//! What a host hands the `mcp` built-in ([`mcp_host_values`]), and where it keeps sign-ins to
//! remote MCP servers: the OS keyring when this build has one (the `keyring` feature), else
//! files under `~/.noeta/mcp-sign-in` that the user alone can read. `noeta mcp login` writes
//! there, and every session's connections read from there.

use std::sync::Arc;

use noeta_builtin_mcp::{FileVault, TokenVault};
use noeta_core::session::Instances;

use crate::{HostConfig, HostPaths};

/// `instances` with the host values of `config` the `mcp` built-in reads: the resolver of
/// `type = "host"` servers, the elicitor, the sign-in vault, and whether servers start.
pub(crate) fn mcp_host_values(config: &HostConfig, mut instances: Instances) -> Instances {
    if let Some(resolver) = &config.mcp_server_resolver {
        instances = instances.with_host_value(
            noeta_builtin_mcp::RESOLVER,
            noeta_builtin_mcp::host_value(Arc::clone(resolver)),
        );
    }
    if let Some(elicitor) = &config.mcp_elicitor {
        instances = instances.with_host_value(
            noeta_builtin_mcp::ELICITOR,
            noeta_builtin_mcp::elicitor_value(Arc::clone(elicitor)),
        );
    }
    if let Some(tokens) = &config.mcp_tokens {
        instances = instances.with_host_value(
            noeta_builtin_mcp::TOKENS,
            noeta_builtin_mcp::tokens_value(Arc::clone(tokens)),
        );
    }
    if !config.start_mcp_servers {
        instances = instances.with_host_value(
            noeta_builtin_mcp::NO_START,
            noeta_builtin_mcp::no_start_value(),
        );
    }
    instances
}

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
