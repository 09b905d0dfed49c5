//! `{keyring:…}` references read from a keyring-core credential store (the `keyring`
//! feature), with keyring-core's in-memory mock store in place of the OS one.
#![cfg(feature = "keyring")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use noeta::secrets::{
    KeyringSecrets, SecretChain, SecretError, UnavailableKeyring, resolve_plugin_secrets,
};
use noeta::{EnvSecrets, SecretStore};
use serde_json::json;

fn store_with(entries: &[(&str, &str, &str)]) -> KeyringSecrets {
    let store = keyring_core::mock::Store::new().unwrap();
    let store: Arc<keyring_core::CredentialStore> = store;
    for (service, user, value) in entries {
        keyring_core::Entry::new_in_store(&store, service, user)
            .unwrap()
            .set_password(value)
            .unwrap();
    }
    KeyringSecrets::new(store)
}

fn chain(keyring: impl SecretStore + 'static) -> SecretChain {
    SecretChain::new()
        .with(Arc::new(EnvSecrets::with_lookup(|name| {
            (name == "TOKEN").then(|| "env-token".to_owned())
        })))
        .with(Arc::new(keyring))
}

#[test]
fn keyring_references_resolve_from_the_store_next_to_environment_ones() {
    let secrets = chain(store_with(&[("noeta", "alice", "kr-secret")]));
    let resolved = resolve_plugin_secrets(
        "providers",
        &json!({ "api_key": "{keyring:noeta/alice}", "token": "{env:TOKEN}" }),
        &secrets,
    )
    .unwrap();
    assert_eq!(
        resolved,
        json!({ "api_key": "kr-secret", "token": "env-token" })
    );
}

#[test]
fn a_missing_or_empty_keyring_entry_names_service_and_user() {
    let secrets = chain(store_with(&[("noeta", "empty", "")]));
    for user in ["bob", "empty"] {
        let err = resolve_plugin_secrets(
            "providers",
            &json!({ "api_key": format!("{{keyring:noeta/{user}}}") }),
            &secrets,
        )
        .unwrap_err();
        assert!(matches!(err, SecretError::Missing { .. }), "{err:?}");
        let message = err.to_string();
        for part in [
            "service `noeta`",
            &format!("user `{user}`"),
            "plugin `providers`",
            "key `api_key`",
        ] {
            assert!(message.contains(part), "`{message}` lacks `{part}`");
        }
    }
}

#[test]
fn a_failing_keyring_is_an_error_with_its_reason_and_never_the_value() {
    let store = keyring_core::mock::Store::new().unwrap();
    let store: Arc<keyring_core::CredentialStore> = store;
    let entry = keyring_core::Entry::new_in_store(&store, "noeta", "alice").unwrap();
    entry.set_password("kr-secret").unwrap();
    let mock: &keyring_core::mock::Cred = entry.as_any().downcast_ref().unwrap();
    mock.set_error(keyring_core::Error::NoStorageAccess("locked".into()));
    let err = resolve_plugin_secrets(
        "providers",
        &json!({ "api_key": "{keyring:noeta/alice}" }),
        &chain(KeyringSecrets::new(store)),
    )
    .unwrap_err();
    assert!(matches!(err, SecretError::Failed { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("service `noeta`, user `alice`"),
        "{message}"
    );
    assert!(message.contains("locked"), "{message}");
    assert!(!message.contains("kr-secret"), "{message}");
}

#[test]
fn an_unavailable_keyring_fails_keyring_references_and_leaves_env_ones_alone() {
    let secrets = chain(UnavailableKeyring::new("no keyring here".into()));
    let err = resolve_plugin_secrets(
        "providers",
        &json!({ "api_key": "{keyring:noeta/alice}" }),
        &secrets,
    )
    .unwrap_err();
    assert!(err.to_string().contains("no keyring here"), "{err}");
    let resolved =
        resolve_plugin_secrets("providers", &json!({ "token": "{env:TOKEN}" }), &secrets).unwrap();
    assert_eq!(resolved, json!({ "token": "env-token" }));
}

#[test]
fn the_keyring_store_prints_its_vendor_not_its_entries() {
    let shown = format!("{:?}", store_with(&[("noeta", "alice", "kr-secret")]));
    assert!(shown.contains("Mock store"), "{shown}");
    assert!(!shown.contains("kr-secret"), "{shown}");
}
