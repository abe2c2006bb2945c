//! The cluster's API tokens (docs/api.md, "Tokens"): several, each with a name and a role, in
//! one store document, `/tessera/<cluster>/tokens`, each kept only as HMAC-SHA256(token key,
//! sha256(token)) under the cluster's key file (`token_key`). The dashboard reads the document
//! at start and is its only writer (it holds the cluster lock); every request's bearer token
//! is checked against its copy. At start it also migrates a store from before tokens: the
//! meta's unsalted sha256 of the admin token becomes the token named `admin`.

use std::sync::RwLock;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::token_key::{TokenKey, default_key_file};
use super::{Dashboard, DashboardOptions};
use crate::Error;
use tessera_model::secret::{matches_sha256_hex, random_token, same};
use tessera_store::model::{self, ClusterMeta, Paths, SCHEMA_VERSION};
use tessera_store::{Cas, Store};
use tessera_wire::access::Role;

/// The token `--admin-token` names, and the one a new cluster starts with.
pub const ADMIN_TOKEN: &str = "admin";
/// Tokens a cluster may hold: each request is compared with every one of them.
pub const MAX_TOKENS: usize = 100;
const MAX_NAME_LEN: usize = 64;

/// The document, as stored.
///
/// ```text
/// {"schema": 1, "key_id": "3f0c…", "tokens": [{"name": "admin", "role": "admin",
///   "hmac": "9a1e…", "created_unix": 1767225600, "created_by": "generated"}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokensDoc {
    pub schema: u32,
    /// The id of the token key the HMACs were made with.
    pub key_id: String,
    pub tokens: Vec<TokenEntry>,
}

/// One token, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenEntry {
    pub name: String,
    pub role: Role,
    /// HMAC-SHA256(token key, sha256(token)), hex.
    pub hmac: String,
    pub created_unix: u64,
    /// The name of the token that created it, or how the dashboard made it at start:
    /// `generated`, `--admin-token`, `migrated` (from the meta's sha256).
    pub created_by: String,
}

pub use tessera_wire::tokens::TokenView;

impl TokenEntry {
    fn view(&self) -> TokenView {
        TokenView {
            name: self.name.clone(),
            role: self.role,
            created_unix: self.created_unix,
            created_by: self.created_by.clone(),
        }
    }
}

/// Who made a request: the token it carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub role: Role,
}

/// The key and the dashboard's copy of the document.
pub(crate) struct Tokens {
    key: TokenKey,
    /// The document and its store version. std RwLock: read on every request, never held
    /// across an await.
    doc: RwLock<(TokensDoc, u64)>,
    /// Serializes changes (read, change, compare-and-swap).
    writes: tokio::sync::Mutex<()>,
}

impl Tokens {
    fn new(key: TokenKey, doc: TokensDoc, version: u64) -> Self {
        Self {
            key,
            doc: RwLock::new((doc, version)),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The token `presented` is, if any. Its HMAC is compared with every stored one, each in
    /// constant time and without stopping at a match, so the time taken says nothing about
    /// how close a guess came or which entry it hit.
    pub(crate) fn authenticate(&self, presented: &str) -> Option<Caller> {
        let digest = self.key.digest(presented);
        let doc = self.doc.read().expect("tokens lock poisoned");
        let mut found = None;
        for e in &doc.0.tokens {
            if same(&digest, &e.hmac) {
                found = Some(Caller {
                    name: e.name.clone(),
                    role: e.role,
                });
            }
        }
        found
    }

    fn views(&self) -> Vec<TokenView> {
        let doc = self.doc.read().expect("tokens lock poisoned");
        let mut v: Vec<TokenView> = doc.0.tokens.iter().map(TokenEntry::view).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Applies `change` to a copy of the document and stores it; the copy becomes the
    /// dashboard's once the store has it.
    async fn save<R>(
        &self,
        store: &dyn Store,
        paths: &Paths,
        change: impl FnOnce(&mut TokensDoc) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let _w = self.writes.lock().await;
        let (mut doc, version) = self.doc.read().expect("tokens lock poisoned").clone();
        let r = change(&mut doc)?;
        let bytes = serde_json::to_vec(&doc).expect("the tokens document serializes");
        match store
            .compare_and_swap(&paths.tokens(), Some(version), bytes.into())
            .await?
        {
            Cas::Written(v) => {
                *self.doc.write().expect("tokens lock poisoned") = (doc, v);
                Ok(r)
            }
            Cas::Conflict(_) => Err(Error::conflict(format!(
                "{} was changed in the store by someone else than this dashboard: restart the \
                 dashboard to reload it",
                paths.tokens()
            ))),
        }
    }

    /// `--admin-token` on a later start: it must be the token named `admin`; when that one
    /// was revoked, it becomes it again (how an operator locked out of the API gets back in).
    async fn check_admin(
        &self,
        store: &dyn Store,
        paths: &Paths,
        cluster: &str,
        token: &str,
    ) -> anyhow::Result<()> {
        let caller = self.authenticate(token);
        let exists = self.views().iter().any(|t| t.name == ADMIN_TOKEN);
        match caller {
            Some(c) if c.name == ADMIN_TOKEN => return Ok(()),
            Some(c) => bail!(
                "--admin-token is the token named {} of cluster {cluster}, not {ADMIN_TOKEN}",
                c.name
            ),
            None if exists => bail!(
                "--admin-token does not match the token named {ADMIN_TOKEN} of cluster {cluster}"
            ),
            None => {}
        }
        let hmac = self.key.digest(token);
        self.save(store, paths, |doc| {
            doc.tokens
                .push(entry(ADMIN_TOKEN, Role::Admin, hmac, "--admin-token"));
            Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("restoring the token {ADMIN_TOKEN}: {e}"))?;
        warn!(
            cluster,
            "the token named admin had been revoked: --admin-token restored it"
        );
        Ok(())
    }
}

fn entry(name: &str, role: Role, hmac: String, created_by: &str) -> TokenEntry {
    TokenEntry {
        name: name.to_owned(),
        role,
        hmac,
        created_unix: model::now_unix(),
        created_by: created_by.to_owned(),
    }
}

/// Names: 1–64 of letters, digits, `.`, `_` and `-` (they travel in paths and headers).
fn check_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "token name {:?} is not 1-{MAX_NAME_LEN} letters, digits, '.', '_' or '-'",
            name.chars().take(MAX_NAME_LEN + 1).collect::<String>()
        )))
    }
}

// === start ===

/// Loads the key and the tokens at start, creating both for a new cluster (or one from
/// before tokens, migrating its sha256 admin token). Returns the admin token when it was
/// generated now (printed once by the caller).
///
/// # Errors
/// No key file can be found or made, it is not the key the tokens were made with, or
/// `--admin-token` is not the cluster's.
pub(super) async fn init(
    store: &dyn Store,
    paths: &Paths,
    opts: &DashboardOptions,
) -> anyhow::Result<(Tokens, Option<String>)> {
    let key_path = match &opts.token_key_file {
        Some(p) => p.clone(),
        None => default_key_file(&opts.store_url, &opts.cluster).with_context(|| {
            format!(
                "cluster {} is in {}, which has no place beside it for the token key: give \
                 --token-key-file PATH (created if missing; every dashboard of the cluster \
                 needs the same file)",
                opts.cluster, opts.store_url
            )
        })?,
    };
    let (meta, _) = model::read::<ClusterMeta>(store, &paths.meta())
        .await?
        .context("the cluster's meta vanished while the dashboard started")?;
    let existing = model::read::<TokensDoc>(store, &paths.tokens())
        .await
        .context("reading the tokens document")?;
    let mut new_token = None;
    let tokens = match existing {
        Some((doc, version)) => {
            let key = TokenKey::load(&key_path)?.with_context(|| {
                format!(
                    "the tokens of cluster {} were made with a token key, but {} does not \
                     exist: give the right one with --token-key-file (if it is lost, remove \
                     {} from the store and start again with --admin-token)",
                    opts.cluster,
                    key_path.display(),
                    paths.tokens()
                )
            })?;
            if key.id() != doc.key_id {
                bail!(
                    "the token key {} (id {}) is not the one the tokens of cluster {} were \
                     made with (id {}): give the right one with --token-key-file",
                    key_path.display(),
                    key.id(),
                    opts.cluster,
                    doc.key_id
                );
            }
            let tokens = Tokens::new(key, doc, version);
            if let Some(t) = &opts.admin_token {
                tokens.check_admin(store, paths, &opts.cluster, t).await?;
            }
            tokens
        }
        None => {
            let key = match TokenKey::load(&key_path)? {
                Some(k) => k,
                None => {
                    let k = TokenKey::create(&key_path)?;
                    info!(path = %key_path.display(), "created the cluster's token key");
                    k
                }
            };
            let (hmac, how) = if meta.admin_token_sha256.is_empty() {
                let (token, how) = match &opts.admin_token {
                    Some(t) => (t.clone(), "--admin-token"),
                    None => {
                        let t = random_token();
                        new_token = Some(t.clone());
                        (t, "generated")
                    }
                };
                (key.digest(&token), how)
            } else {
                if let Some(t) = &opts.admin_token
                    && !matches_sha256_hex(t, &meta.admin_token_sha256)
                {
                    bail!(
                        "--admin-token does not match the token cluster {} was created with",
                        opts.cluster
                    );
                }
                let sha = hex::decode(&meta.admin_token_sha256)
                    .context("the meta's admin_token_sha256 is not hex")?;
                (key.digest_of_sha256(&sha), "migrated")
            };
            let doc = TokensDoc {
                schema: SCHEMA_VERSION,
                key_id: key.id(),
                tokens: vec![entry(ADMIN_TOKEN, Role::Admin, hmac, how)],
            };
            let bytes = serde_json::to_vec(&doc)?;
            let version = match store
                .compare_and_swap(&paths.tokens(), None, bytes.into())
                .await?
            {
                Cas::Written(v) => v,
                Cas::Conflict(_) => bail!(
                    "the tokens of cluster {} were created concurrently; start again",
                    opts.cluster
                ),
            };
            Tokens::new(key, doc, version)
        }
    };
    if !meta.admin_token_sha256.is_empty() {
        forget_sha256(store, paths).await?;
        info!(cluster = %opts.cluster, "the admin token's sha256 in the meta is now the HMAC of the token named admin");
    }
    Ok((tokens, new_token))
}

/// Empties the meta's `admin_token_sha256` once the tokens document holds its HMAC. Empty,
/// not removed: proxies of the version before still parse the meta.
async fn forget_sha256(store: &dyn Store, paths: &Paths) -> anyhow::Result<()> {
    let (mut meta, version) = model::read::<ClusterMeta>(store, &paths.meta())
        .await?
        .context("the cluster's meta vanished")?;
    meta.admin_token_sha256.clear();
    let bytes = serde_json::to_vec(&meta)?;
    match store
        .compare_and_swap(&paths.meta(), Some(version), bytes.into())
        .await?
    {
        Cas::Written(_) => Ok(()),
        Cas::Conflict(_) => {
            bail!("the cluster's meta changed while the dashboard started; start again")
        }
    }
}

// === impl Dashboard ===

impl Dashboard {
    /// The token `presented` is, if it is one of the cluster's.
    pub fn authenticate(&self, presented: &str) -> Option<Caller> {
        self.tokens.authenticate(presented)
    }

    /// Every token, sorted by name.
    pub fn list_tokens(&self) -> Vec<TokenView> {
        self.tokens.views()
    }

    /// Creates a token; returns it and its secret, which is shown this once.
    ///
    /// # Errors
    /// 400 a bad name or a full table; 409 a name taken; 503 the store fails.
    pub async fn create_token(
        &self,
        name: &str,
        role: Role,
        by: &Caller,
    ) -> Result<(TokenView, String), Error> {
        check_name(name)?;
        let secret = random_token();
        let hmac = self.tokens.key.digest(&secret);
        let view = self
            .tokens
            .save(&*self.store, &self.paths, |doc| {
                if doc.tokens.iter().any(|t| t.name == name) {
                    return Err(Error::conflict(format!(
                        "a token named {name} exists: revoke it first, or pick another name"
                    )));
                }
                if doc.tokens.len() >= MAX_TOKENS {
                    return Err(Error::invalid(format!(
                        "the cluster holds {MAX_TOKENS} tokens, the most it may: revoke one first"
                    )));
                }
                let e = entry(name, role, hmac, &by.name);
                let view = e.view();
                doc.tokens.push(e);
                Ok(view)
            })
            .await?;
        info!(token = name, %role, by = %by.name, "token created");
        Ok((view, secret))
    }

    /// Revokes a token: from now on it is refused (401).
    ///
    /// # Errors
    /// 404 unknown name; 409 the last admin token (nobody could manage tokens then); 503 the
    /// store fails.
    pub async fn revoke_token(&self, name: &str, by: &Caller) -> Result<(), Error> {
        self.tokens
            .save(&*self.store, &self.paths, |doc| {
                let Some(i) = doc.tokens.iter().position(|t| t.name == name) else {
                    return Err(Error::not_found(format!(
                        "no token named {} in this cluster",
                        name.chars().take(MAX_NAME_LEN).collect::<String>()
                    )));
                };
                let admins = doc.tokens.iter().filter(|t| t.role == Role::Admin).count();
                if doc.tokens[i].role == Role::Admin && admins == 1 {
                    return Err(Error::conflict(format!(
                        "{name} is the last admin token: create another admin token first"
                    )));
                }
                doc.tokens.remove(i);
                Ok(())
            })
            .await?;
        info!(token = name, by = %by.name, "token revoked");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> (Tokens, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let key = TokenKey::create(&dir.path().join("k")).unwrap();
        let doc = TokensDoc {
            schema: SCHEMA_VERSION,
            key_id: key.id(),
            tokens: vec![
                entry("admin", Role::Admin, key.digest("a-secret"), "generated"),
                entry("ci", Role::Viewer, key.digest("c-secret"), "admin"),
            ],
        };
        (Tokens::new(key, doc, 1), dir)
    }

    #[test]
    fn a_token_authenticates_as_its_entry_only() {
        let (t, _dir) = tokens();
        let ci = t.authenticate("c-secret").unwrap();
        assert_eq!((ci.name.as_str(), ci.role), ("ci", Role::Viewer));
        assert_eq!(t.authenticate("a-secret").unwrap().role, Role::Admin);
        assert_eq!(t.authenticate("c-secret "), None);
        assert_eq!(t.authenticate(""), None);
    }

    #[test]
    fn views_hold_no_secret_and_sort_by_name() {
        let (t, _dir) = tokens();
        let text = serde_json::to_string(&t.views()).unwrap();
        assert!(!text.contains("hmac"), "{text}");
        assert_eq!(t.views()[0].name, "admin");
    }

    #[test]
    fn names_are_short_path_safe_words() {
        assert!(check_name("ci-deploy_2.x").is_ok());
        for bad in ["", "a b", "a/b", "ä", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
