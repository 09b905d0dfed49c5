//! Canonical JSON (RFC 8785, JCS) and SHA-256 hex digests for everything hashed or compared byte for byte.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The RFC 8785 canonical bytes of a serialisable value.
pub fn to_canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    serde_json_canonicalizer::to_vec(value)
}

/// The RFC 8785 canonical bytes of a JSON value.
///
/// A `serde_json::Value` holds no non-finite numbers and only string keys, so
/// canonicalisation cannot fail; the empty vector is never produced in practice.
pub fn to_bytes(value: &serde_json::Value) -> Vec<u8> {
    to_canonical_bytes(value).unwrap_or_default()
}

/// Lowercase hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(Sha256::digest(bytes).as_slice())
}

/// Lowercase hex SHA-256 of several byte strings, as if concatenated.
pub fn sha256_hex_parts(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hex(hasher.finalize().as_slice())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_utf16_code_units_as_rfc_8785_requires() {
        let value = serde_json::json!({"\u{E000}": 1, "😀": 2, "a": [3, "é", null]});
        let bytes = to_bytes(&value);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"a\":[3,\"é\",null],\"😀\":2,\"\u{E000}\":1}"
        );
    }

    #[test]
    fn sha256_hex_matches_a_known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
