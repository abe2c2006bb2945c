//! Loads one RDB image through the proxy, for `restore` and for a full resync: the whole
//! image is parsed and checked first (checksum, every value, no module types), and only then
//! walked again and written, so a bad file writes nothing. Every database's keys are written
//! into the same database through the proxy (a proxy that does not serve the highest is
//! found out before anything is written), or, for a Tessera backup, into the client database
//! each of its servers' databases holds, their internal one skipped and counted. Expired keys
//! are skipped.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::apply;
use super::rdb::{Parser, RdbError};
use super::target::{OnError, Target, TargetError};
use super::value::Item;

pub use tessera_model::clock::now_ms;

/// Why a load stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the RDB data is not importable, nothing was written: {0}")]
    Rdb(#[from] RdbError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(
        "the source has keys in database(s) {dbs} besides 0, which the target does not serve (a proxy serves `databases`, 16 by default, and its backends need one more than the highest); nothing was written: {reason}"
    )]
    Databases { dbs: String, reason: TargetError },
}

/// Which databases of the image a load writes, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Databases {
    /// Each into the same database of the proxy.
    Every,
    /// The image is a Tessera backend's (a backup's): its database `n` is the client database
    /// `tessera_model::databases::client_db(n)`, and Tessera's internal one is skipped
    /// (counted).
    Backend,
}

impl Databases {
    /// The proxy's database the image's database `db` is written into; `None`: skipped.
    pub fn client(self, db: u64) -> Option<u64> {
        match self {
            Databases::Every => Some(db),
            Databases::Backend => {
                tessera_model::databases::client_db(u32::try_from(db).ok()?).map(u64::from)
            }
        }
    }
}

/// What a load did, counted as it goes (progress reads it meanwhile).
#[derive(Debug, Default)]
pub struct LoadCounts {
    /// Keys in the image (known after validation).
    pub keys_total: AtomicU64,
    /// Keys written.
    pub keys: AtomicU64,
    /// Keys already expired, not written.
    pub expired: AtomicU64,
    /// Keys of Tessera's internal database, not written (with [`Databases::Backend`]).
    pub other_db: AtomicU64,
    /// Function libraries loaded.
    pub functions: AtomicU64,
}

/// Parses the whole image without writing: the keys it holds.
///
/// # Errors
/// The first problem in the image.
pub fn validate(data: &[u8]) -> Result<u64, RdbError> {
    Ok(survey(data)?.0)
}

/// Parses the whole image without writing: the keys it holds, and the databases other than
/// 0 that hold some.
fn survey(data: &[u8]) -> Result<(u64, BTreeSet<u64>), RdbError> {
    let mut parser = Parser::new(data)?;
    let (mut keys, mut dbs) = (0, BTreeSet::new());
    while let Some(item) = parser.next_item()? {
        if let Item::Entry(e) = item {
            keys += 1;
            if e.db != 0 {
                dbs.insert(e.db);
            }
        }
    }
    Ok((keys, dbs))
}

/// Validates `data`, then writes every live key of `databases` and every function library
/// through `target`, and waits for every reply. The target is asked for the image's
/// highest database before anything is written.
///
/// # Errors
/// [`LoadError::Rdb`] or [`LoadError::Databases`] before anything is written;
/// [`LoadError::Target`] on a refused command or a lost connection.
pub async fn load(
    data: &[u8],
    target: &mut Target,
    counts: &Arc<LoadCounts>,
    databases: Databases,
) -> Result<(), LoadError> {
    let (total, dbs) = survey(data)?;
    counts.keys_total.store(total, Ordering::Relaxed);
    if let Some(highest) = dbs.iter().filter_map(|&d| databases.client(d)).max()
        && highest > 0
    {
        let probe = async {
            target.use_db(highest).await?;
            target.use_db(0).await?;
            target.flush().await
        };
        if let Err(reason) = probe.await {
            let dbs: Vec<String> = dbs
                .iter()
                .filter_map(|&d| databases.client(d))
                .map(|d| d.to_string())
                .collect();
            return Err(LoadError::Databases {
                dbs: dbs.join(", "),
                reason,
            });
        }
    }
    let mut parser = Parser::new(data)?;
    while let Some(item) = parser.next_item()? {
        match item {
            Item::Aux { .. } => {}
            Item::Function(code) => {
                let cmd = apply::encode(&[b"FUNCTION", b"LOAD", b"REPLACE", &code]);
                target
                    .send(
                        cmd,
                        OnError::Fail,
                        b"FUNCTION LOAD (a function library)",
                        None,
                    )
                    .await?;
                counts.functions.fetch_add(1, Ordering::Relaxed);
            }
            Item::Entry(e) => {
                let Some(db) = databases.client(e.db) else {
                    let n = counts.other_db.fetch_add(1, Ordering::Relaxed);
                    if n == 0 {
                        tracing::warn!(
                            db = e.db,
                            "keys of Tessera's internal database are skipped"
                        );
                    }
                    continue;
                };
                target.use_db(db).await?;
                let Some(cmds) = apply::commands(&e, now_ms()) else {
                    counts.expired.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let what = [e.value.type_name().as_bytes(), b" key ", &e.key].concat();
                for c in cmds {
                    target.send(c, OnError::Fail, &what, None).await?;
                }
                counts.keys.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    target.use_db(0).await?;
    target.flush().await?;
    Ok(())
}
