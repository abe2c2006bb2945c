//! Password hashes: `sha256$<salt hex>$<digest hex>`, made and checked in constant time.

use std::sync::LazyLock;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::SALT_LEN;

/// A parsed `sha256$<salt hex>$<digest hex>`: digest = SHA-256(salt bytes ‖ password bytes).
///
/// One SHA-256 per check, like Redis ACL's: AUTH runs for every connection, so a slow hash
/// (argon2, as the console uses for its few logins) would hand clients a CPU lever. The salt
/// defeats precomputed tables; the cost of a leaked store is an offline attack on a fast
/// hash, so use long random passwords.
#[derive(Clone)]
pub(super) struct PasswordHash {
    salt: Vec<u8>,
    digest: [u8; 32],
}

impl PasswordHash {
    pub(super) fn parse(s: &str) -> Option<PasswordHash> {
        let mut parts = s.split('$');
        let (Some("sha256"), Some(salt), Some(digest), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let salt = hex::decode(salt)
            .ok()
            .filter(|s| (1..=64).contains(&s.len()))?;
        let digest: [u8; 32] = hex::decode(digest).ok()?.try_into().ok()?;
        Some(PasswordHash { salt, digest })
    }

    pub(super) fn new(password: &[u8]) -> PasswordHash {
        let salt = rand::random::<[u8; SALT_LEN]>().to_vec();
        let digest = digest(&salt, password);
        PasswordHash { salt, digest }
    }

    pub(super) fn verify(&self, password: &[u8]) -> bool {
        digest(&self.salt, password).ct_eq(&self.digest).into()
    }

    fn encode(&self) -> String {
        format!(
            "sha256${}${}",
            hex::encode(&self.salt),
            hex::encode(self.digest)
        )
    }
}

fn digest(salt: &[u8], password: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(password);
    h.finalize().into()
}

/// Hashes a password for `[[users]]` or the users document: `sha256$<salt hex>$<digest hex>`
/// with a fresh random 16-byte salt.
pub fn hash_password(password: &str) -> String {
    PasswordHash::new(password.as_bytes()).encode()
}

/// Whether `s` is a hash [`hash_password`] could have made (any salt of 1 to 64 bytes).
pub fn is_password_hash(s: &str) -> bool {
    PasswordHash::parse(s).is_some()
}

/// Verified against for unknown names, so a failure costs the same whether the name exists.
pub(super) static DUMMY: LazyLock<PasswordHash> =
    LazyLock::new(|| PasswordHash::new(&rand::random::<[u8; 16]>()));
