//! Loads one RDB image through the proxy, for `restore` and for a full resync: the whole
//! image is parsed and checked first (checksum, every value, no module types), and only then
//! walked again and written, so a bad file writes nothing. Keys of databases other than 0
//! are skipped and counted (a proxy serves db 0 only); expired keys are skipped.

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
    /// Keys of databases other than 0, not written.
    pub other_db: AtomicU64,
    /// Function libraries loaded.
    pub functions: AtomicU64,
}

/// Parses the whole image without writing: the keys it holds.
///
/// # Errors
/// The first problem in the image.
pub fn validate(data: &[u8]) -> Result<u64, RdbError> {
    let mut parser = Parser::new(data)?;
    let mut keys = 0;
    while let Some(item) = parser.next_item()? {
        if let Item::Entry(_) = item {
            keys += 1;
        }
    }
    Ok(keys)
}

/// Validates `data`, then writes every live key of db 0 and every function library through
/// `target`, and waits for every reply.
///
/// # Errors
/// [`LoadError::Rdb`] before anything is written; [`LoadError::Target`] on a refused command
/// or a lost connection.
pub async fn load(
    data: &[u8],
    target: &mut Target,
    counts: &Arc<LoadCounts>,
) -> Result<(), LoadError> {
    let total = validate(data)?;
    counts.keys_total.store(total, Ordering::Relaxed);
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
            Item::Entry(e) if e.db != 0 => {
                let n = counts.other_db.fetch_add(1, Ordering::Relaxed);
                if n == 0 {
                    tracing::warn!(
                        db = e.db,
                        "keys of databases other than 0 are skipped (a proxy serves db 0)"
                    );
                }
            }
            Item::Entry(e) => {
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
    target.flush().await?;
    Ok(())
}
