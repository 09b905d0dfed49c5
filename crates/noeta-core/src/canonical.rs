//! Canonical JSON (RFC 8785, JCS) and SHA-256 hex digests for everything hashed or compared byte for byte.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

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

/// A 32-byte digest kept as bytes; it serialises (and displays) as lowercase hex. Used with
/// SHA-256 over the files under `dir` (`.git` left out): for each, in the order of their
/// relative paths (`/`-separated), the path, a NUL, the SHA-256 hex of its bytes and a new
/// line. What an on-disk plugin is pinned by, and what `noeta plugin list` shows.
///
/// # Errors
/// A file or directory under `dir` cannot be read.
pub fn tree_sha256(dir: &std::path::Path) -> std::io::Result<String> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<(String, std::path::PathBuf)>,
    ) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                if entry.file_name() != ".git" {
                    walk(root, &path, out)?;
                }
            } else {
                let relative = path
                    .strip_prefix(root)
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                out.push((relative, path));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for (relative, path) in files {
        let body = std::fs::read(&path)?;
        all.extend_from_slice(relative.as_bytes());
        all.push(0);
        all.extend_from_slice(sha256_hex(&body).as_bytes());
        all.push(b'\n');
    }
    Ok(sha256_hex(&all))
}

/// BLAKE3 for the kernel's internal hashes (per-message hashes and the conversation chain),
/// which every fold from scratch recomputes and which need speed, not interoperability;
/// identities and content refs use SHA-256.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// BLAKE3 of several byte strings, as if concatenated.
    pub fn blake3(parts: &[&[u8]]) -> Self {
        // Short inputs (most messages) are gathered and hashed in one call: feeding the hasher
        // piece by piece costs more than the hashing itself.
        const GATHER: usize = 1024;
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total <= GATHER {
            let mut buf = [0u8; GATHER];
            let mut at = 0;
            for part in parts {
                buf[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            return Self(*blake3::hash(&buf[..at]).as_bytes());
        }
        let mut hasher = blake3::Hasher::new();
        for part in parts {
            hasher.update(part);
        }
        Self(*hasher.finalize().as_bytes())
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = text.as_bytes();
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut out = [0u8; 32];
        if bytes.len() != 64 {
            return Err(serde::de::Error::custom(
                "a digest is 64 lowercase hex digits",
            ));
        }
        for (i, pair) in bytes.chunks(2).enumerate() {
            match (nibble(pair[0]), nibble(pair[1])) {
                (Some(hi), Some(lo)) => out[i] = (hi << 4) | lo,
                _ => {
                    return Err(serde::de::Error::custom(
                        "a digest is 64 lowercase hex digits",
                    ));
                }
            }
        }
        Ok(Self(out))
    }
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
