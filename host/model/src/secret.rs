//! Secrets: random tokens, their sha256 digests and HMACs, and the one comparison of secrets,
//! which takes the same time whatever the inputs (neither a matching prefix nor the length is
//! revealed). Every part of Tessera that checks a password, token or cookie compares through
//! [`same`].

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// 16 random bytes, hex: registration tokens, admin tokens, proxy secrets, passwords.
pub fn random_token() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// sha256 of `secret`, hex.
pub fn sha256_hex(secret: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(secret.as_ref()))
}

/// HMAC-SHA256 of `message` under `key`, hex.
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether two secrets are equal, in constant time. Both sides are hashed first, so the
/// comparison runs over 32 bytes whatever their lengths: a guess's length tells nothing.
pub fn same(a: impl AsRef<[u8]>, b: impl AsRef<[u8]>) -> bool {
    let (a, b) = (Sha256::digest(a.as_ref()), Sha256::digest(b.as_ref()));
    a.as_slice().ct_eq(b.as_slice()).into()
}

/// Whether `secret` hashes to the hex digest `digest` (stored hashes), in constant time.
pub fn matches_sha256_hex(secret: impl AsRef<[u8]>, digest: &str) -> bool {
    let got = Sha256::digest(secret.as_ref());
    let Ok(want) = hex::decode(digest) else {
        return false;
    };
    want.len() == got.len() && bool::from(got.as_slice().ct_eq(&want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_whole_secrets_of_any_length() {
        assert!(same("secret", "secret"));
        assert!(!same("secret", "secreT"));
        assert!(!same("secret", "secret2"));
        assert!(!same("", "x"));
        assert!(same("", ""));
    }

    #[test]
    fn digests_match_their_secret_only() {
        let d = sha256_hex("token");
        assert!(matches_sha256_hex("token", &d));
        assert!(!matches_sha256_hex("token2", &d));
        assert!(!matches_sha256_hex("token", "not hex"));
        assert_eq!(random_token().len(), 32);
    }

    #[test]
    fn hmac_matches_rfc_4231_test_case_2() {
        assert_eq!(
            hmac_sha256_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
