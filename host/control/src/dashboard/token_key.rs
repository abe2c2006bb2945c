//! The token key: the per-cluster HMAC key API tokens are stored under, kept in a file outside
//! the store (mode 0600). Whoever reads the store (an etcd dump, a backup, a world-readable
//! file) then holds only HMACs that cannot be checked against guesses without this file.
//! Which tokens exist and their roles are `tokens`' business.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use tessera_model::secret::hmac_sha256_hex;

/// What the key's id is an HMAC of (the id tells keys apart without revealing them).
const ID_LABEL: &[u8] = b"tessera token key id";

/// A cluster's token key, loaded.
pub(crate) struct TokenKey {
    key: [u8; 32],
}

impl TokenKey {
    /// Reads the key file; `None` when it does not exist.
    ///
    /// # Errors
    /// Unreadable, not 64 hex digits, or readable by group or others (`chmod 600` it).
    pub(crate) fn load(path: &Path) -> anyhow::Result<Option<Self>> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if meta.permissions().mode() & 0o077 != 0 {
            bail!(
                "the token key {} is readable by other users (mode {:o}): chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token key {}", path.display()))?;
        let bytes = hex::decode(text.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .with_context(|| {
                format!(
                    "the token key {} is not 64 hex digits (32 bytes)",
                    path.display()
                )
            })?;
        Ok(Some(Self { key: bytes }))
    }

    /// Creates a new random key file (mode 0600; its directory, if new, 0700).
    ///
    /// # Errors
    /// The file exists already or cannot be written.
    pub(crate) fn create(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        let key: [u8; 32] = rand::random();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("creating the token key {}", path.display()))?;
        f.write_all(format!("{}\n", hex::encode(key)).as_bytes())?;
        f.sync_all()?;
        Ok(Self { key })
    }

    /// A short public id of the key: the tokens document records it, so a dashboard given
    /// the wrong key file says so instead of refusing every token.
    pub(crate) fn id(&self) -> String {
        hmac_sha256_hex(&self.key, ID_LABEL)[..16].to_owned()
    }

    /// The stored form of `token`: HMAC-SHA256(key, sha256(token)), hex.
    pub(crate) fn digest(&self, token: &str) -> String {
        self.digest_of_sha256(&Sha256::digest(token.as_bytes()))
    }

    /// The stored form of a token known only by its sha256 (a store from before tokens were
    /// HMACs): the same value as [`Self::digest`] of the token itself, so it migrates without
    /// the token.
    pub(crate) fn digest_of_sha256(&self, sha256: &[u8]) -> String {
        hmac_sha256_hex(&self.key, sha256)
    }
}

/// Where the key of `cluster` lives when `--token-key-file` is not given: beside an fs store
/// (`fs:///var/lib/tessera/store` → `/var/lib/tessera/store.keys/<cluster>.token-key`), so a
/// copy of the store directory does not carry it. An etcd store has no such place: `None`.
pub fn default_key_file(store_url: &str, cluster: &str) -> Option<PathBuf> {
    let dir = store_url.strip_prefix("fs://")?.trim_end_matches('/');
    if dir.is_empty() {
        return None;
    }
    Some(PathBuf::from(format!("{dir}.keys")).join(format!("{cluster}.token-key")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_key_loads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/c.token-key");
        assert!(TokenKey::load(&path).unwrap().is_none());
        let k = TokenKey::create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = TokenKey::load(&path).unwrap().unwrap();
        assert_eq!(back.id(), k.id());
        assert_eq!(back.digest("t"), k.digest("t"));
        assert!(TokenKey::create(&path).is_err(), "never overwrites a key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = TokenKey::load(&path).err().unwrap().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn the_stored_form_is_not_a_plain_sha256_and_migrates_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let k = TokenKey::create(&dir.path().join("k")).unwrap();
        let sha = Sha256::digest(b"tok");
        assert_ne!(k.digest("tok"), hex::encode(sha));
        assert_eq!(k.digest_of_sha256(&sha), k.digest("tok"));
        let other = TokenKey::create(&dir.path().join("k2")).unwrap();
        assert_ne!(other.digest("tok"), k.digest("tok"));
        assert_ne!(other.id(), k.id());
    }

    #[test]
    fn the_default_key_sits_beside_an_fs_store_only() {
        assert_eq!(
            default_key_file("fs:///var/lib/tessera/store/", "c1"),
            Some(PathBuf::from("/var/lib/tessera/store.keys/c1.token-key"))
        );
        assert_eq!(default_key_file("etcd://127.0.0.1:2379", "c1"), None);
    }
}
