//! The cluster's users (docs/users.md): one document in the store, changed through the API
//! one user at a time (passwords hashed here, never stored or shown in clear), persisted with
//! the next version, then pushed to every online proxy with a barrier like a topology change.
//! A proxy behind (unreachable during a push, or started with an unusable document) is
//! brought up to date by the health loop.

use futures_util::future::join_all;
use tracing::{info, warn};

use super::Dashboard;
use super::push::{ProxyFailure, PushError};
use crate::Error;
use tessera_model::users::{self, DEFAULT_USER, MAX_USERS, UserEntry, UserView, Users, UsersDoc};
use tessera_store::model::{self, ProxyModel, SCHEMA_VERSION};
pub use tessera_wire::users::UserChange;

fn apply(e: &mut UserEntry, change: UserChange) -> Result<(), Error> {
    match (change.password, change.password_hash) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "give password or password_hash, not both".to_owned(),
            ));
        }
        (Some(p), None) => {
            users::check_password(&p).map_err(Error::User)?;
            e.password = Some(users::hash_password(&p));
        }
        (None, Some(h)) => {
            // Never echoed: a hash leaked is a password attacked offline.
            if !users::is_password_hash(&h) {
                return Err(Error::invalid(format!(
                    "user {}: password_hash must be sha256$<salt hex, 1 to 64 bytes>$<SHA-256 hex, 32 bytes>, as the users document holds it",
                    e.name
                )));
            }
            e.password = Some(h);
        }
        (None, None) => {}
    }
    match change.commands {
        Some(Some(names)) => {
            let (_, normalized) = users::parse_classes(&e.name, &names).map_err(Error::User)?;
            e.commands = Some(normalized);
        }
        Some(None) => e.commands = None,
        None => {}
    }
    match change.key_prefix {
        Some(Some(p)) if !p.is_empty() => {
            users::check_key_prefix(&e.name, &p).map_err(Error::User)?;
            e.key_prefix = Some(p);
        }
        Some(_) => e.key_prefix = None,
        None => {}
    }
    match change.databases {
        Some(Some(dbs)) => {
            e.databases = Some(users::check_databases(&e.name, &dbs).map_err(Error::User)?);
        }
        Some(None) => e.databases = None,
        None => {}
    }
    if let Some(on) = change.enabled {
        e.enabled = on;
    }
    Ok(())
}

impl Dashboard {
    /// The users document (empty, version 0, when there is none yet).
    ///
    /// # Errors
    /// 503 when the store fails or holds a document that is not a valid users table (the
    /// message names the key; the proxies keep the table they have until it is repaired).
    pub async fn users_doc(&self) -> Result<UsersDoc, Error> {
        let key = self.paths.users();
        let doc = model::read::<UsersDoc>(&*self.store, &key)
            .await
            .map_err(|e| {
                Error::DocumentUnusable(format!(
                    "{e}: repair or remove {key} in the store; proxies keep their table meanwhile"
                ))
            })?
            .map(|(d, _)| d)
            .unwrap_or_default();
        if let Err(e) = Users::from_document(&doc, None) {
            return Err(Error::DocumentUnusable(format!(
                "the users document {key} is not a valid table ({e}): repair or remove it in the store; proxies keep their table meanwhile"
            )));
        }
        Ok(doc)
    }

    /// Every user of the table, sorted by name, without hashes.
    ///
    /// # Errors
    /// As [`Dashboard::users_doc`].
    pub async fn list_users(&self) -> Result<Vec<UserView>, Error> {
        let doc = self.users_doc().await?;
        let mut views: Vec<UserView> = doc.users.iter().map(UserEntry::view).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(views)
    }

    /// Creates or changes a user. A new user needs a password or a password hash (except
    /// `default`, whose password may stay the proxies' `session_password`, or none).
    ///
    /// # Errors
    /// 400 a bad name, password, hash, class or prefix, both a password and a hash, a new user without a password, a full
    /// table; 503 an unusable document; 502 proxies that did not load the new table.
    pub async fn set_user(&self, name: &str, change: UserChange) -> Result<UserView, Error> {
        users::check_name(name).map_err(Error::User)?;
        let _ops = self.ops.lock().await;
        let mut doc = self.users_doc().await?;
        let i = match doc.users.iter().position(|u| u.name == name) {
            Some(i) => i,
            None => {
                if change.password.is_none()
                    && change.password_hash.is_none()
                    && name != DEFAULT_USER
                {
                    return Err(Error::invalid(format!(
                        "user {name} is new: give it a password (or a password_hash)"
                    )));
                }
                if doc.users.len() >= MAX_USERS {
                    return Err(Error::invalid(format!(
                        "the table holds {MAX_USERS} users, the most it may: remove one first"
                    )));
                }
                doc.users.push(UserEntry {
                    name: name.to_owned(),
                    password: None,
                    commands: None,
                    key_prefix: None,
                    databases: None,
                    enabled: true,
                });
                doc.users.len() - 1
            }
        };
        apply(&mut doc.users[i], change)?;
        let view = doc.users[i].view();
        self.save_users(doc).await?;
        info!(user = name, "user set");
        Ok(view)
    }

    /// Removes a user (`default` goes back to being implicit).
    ///
    /// # Errors
    /// 404 unknown user; as [`Dashboard::set_user`].
    pub async fn delete_user(&self, name: &str) -> Result<(), Error> {
        let _ops = self.ops.lock().await;
        let mut doc = self.users_doc().await?;
        let Some(i) = doc.users.iter().position(|u| u.name == name) else {
            return Err(Error::not_found(format!(
                "no user named {} in this cluster",
                name.chars().take(users::MAX_NAME_LEN).collect::<String>()
            )));
        };
        doc.users.remove(i);
        self.save_users(doc).await?;
        info!(user = name, "user removed");
        Ok(())
    }

    /// Checks the whole table, persists it with the next version, pushes it everywhere.
    async fn save_users(&self, mut doc: UsersDoc) -> Result<(), Error> {
        Users::from_document(&doc, None).map_err(Error::User)?;
        doc.schema = SCHEMA_VERSION;
        // Past any version this dashboard saw: a document removed from the store to repair
        // it starts again at 0, and proxies would refuse the lower versions as stale.
        let seen = self
            .users_version
            .load(std::sync::atomic::Ordering::Relaxed);
        doc.version = doc.version.max(seen).saturating_add(1);
        model::write(&*self.store, &self.paths.users(), &doc).await?;
        self.users_version
            .fetch_max(doc.version, std::sync::atomic::Ordering::Relaxed);
        self.push_users(&doc).await?;
        Ok(())
    }

    /// Pushes the table to every online proxy; all must load it.
    pub(crate) async fn push_users(&self, doc: &UsersDoc) -> Result<usize, PushError> {
        const WHAT: &str = "users version";
        let online = self.online_proxies(WHAT, doc.version).await?;
        let results = join_all(online.iter().map(|p| self.push_users_one(p, doc))).await;
        let results = self.excuse_gone(&online, results).await;
        super::push::settle(WHAT, doc.version, &online, results)
    }

    /// Sends the table to one proxy.
    ///
    /// # Errors
    /// Unreachable or refused, with the proxy's reason.
    pub(crate) async fn push_users_one(
        &self,
        proxy: &ProxyModel,
        doc: &UsersDoc,
    ) -> Result<(), ProxyFailure> {
        self.put_to_proxy(proxy, "/api/proxy/users", doc, None)
            .await
    }

    /// Brings proxies whose table is older than the store's up to date (health loop).
    pub(super) async fn catch_up_users(&self, behind: &[String]) {
        let doc = match self.users_doc().await {
            Ok(d) => d,
            Err(e) => {
                // Every second while it lasts; the API's answers and the start-up log say it.
                tracing::debug!(error = %e, "cannot bring proxies' users up to date");
                return;
            }
        };
        for p in self
            .registered_proxies()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|p| behind.contains(&p.token))
        {
            match self.push_users_one(&p, &doc).await {
                Ok(()) => {
                    info!(token = %p.token, version = doc.version, "proxy's users brought up to date")
                }
                Err(e) => {
                    warn!(token = %p.token, error = %e, "could not bring a proxy's users up to date")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(json: &str) -> UserChange {
        serde_json::from_str(json).unwrap()
    }

    fn alice() -> UserEntry {
        UserEntry {
            name: "alice".into(),
            password: None,
            commands: None,
            key_prefix: None,
            databases: None,
            enabled: true,
        }
    }

    #[test]
    fn a_change_hashes_the_password_and_keeps_what_it_leaves_out() {
        let mut e = alice();
        apply(
            &mut e,
            change(r#"{"password":"pw","commands":["READ","write"],"key_prefix":"t:"}"#),
        )
        .unwrap();
        let hash = e.password.clone().unwrap();
        assert!(users::is_password_hash(&hash));
        assert!(!hash.contains("pw$"));
        assert_eq!(
            e.commands.as_deref(),
            Some(&["read".to_owned(), "write".to_owned()][..])
        );
        apply(&mut e, change(r#"{"enabled":false}"#)).unwrap();
        assert_eq!(e.password.as_deref(), Some(hash.as_str()));
        assert_eq!(e.key_prefix.as_deref(), Some("t:"));
        assert!(!e.enabled);
        apply(&mut e, change(r#"{"commands":null,"key_prefix":""}"#)).unwrap();
        assert_eq!((e.commands, e.key_prefix), (None, None));
    }

    #[test]
    fn bad_changes_are_refused_with_the_reason() {
        let bad = |json: &str| apply(&mut alice(), change(json)).unwrap_err().to_string();
        assert!(bad(r#"{"commands":["rede"]}"#).contains("unknown command class \"rede\""));
        assert!(bad(r#"{"password":""}"#).contains("password"));
        assert!(bad(r#"{"key_prefix":"a\nb"}"#).contains("key_prefix"));
        let long = format!(
            r#"{{"password":"{}"}}"#,
            "x".repeat(users::MAX_PASSWORD_LEN + 1)
        );
        assert!(bad(&long).contains("password"));
        assert!(serde_json::from_str::<UserChange>(r#"{"pasword":"x"}"#).is_err());
        let digest = "ab".repeat(32);
        for h in [
            String::new(),
            "sha256$$".to_owned(),
            format!("sha256$zz${digest}"),
            format!("sha256$00${}", "ab".repeat(31)),
            format!("md5$00${digest}"),
            format!("sha256${}${digest}", "00".repeat(65)),
            format!("sha256$00${digest}$x"),
        ] {
            let msg = bad(&format!(r#"{{"password_hash":"{h}"}}"#));
            assert!(msg.contains("password_hash"), "{h}: {msg}");
            assert!(
                h.len() < 8 || !msg.contains(&h),
                "the hash is not echoed: {msg}"
            );
        }
        let both = format!(r#"{{"password":"pw","password_hash":"sha256$00${digest}"}}"#);
        assert!(bad(&both).contains("not both"));
    }

    #[test]
    fn a_hash_given_is_kept_as_is_and_verifies_the_password_it_was_made_from() {
        let hash = users::hash_password("restored-pw");
        let mut e = alice();
        apply(
            &mut e,
            change(&format!(
                r#"{{"password_hash":"{hash}","commands":["read"]}}"#
            )),
        )
        .unwrap();
        assert_eq!(e.password.as_deref(), Some(hash.as_str()));
        let doc = UsersDoc {
            schema: 1,
            version: 1,
            users: vec![e],
        };
        let table = Users::from_document(&doc, None).unwrap();
        assert!(table.authenticate(b"alice", b"restored-pw").is_some());
        assert!(table.authenticate(b"alice", b"other").is_none());
    }
}
