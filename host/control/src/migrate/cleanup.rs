//! Deleting a group's keys of slots it does not own: the target's leftovers before a copy
//! (an earlier copy that was aborted or lost), the source's copies after a handoff, the
//! target's after an abort. One SCAN of the group's master, keeping the keys of those slots,
//! `UNLINK`ed a batch at a time at a bounded rate, so a cleanup never competes with clients
//! for long: each UNLINK is one call of at most `batch` keys (their memory is freed on the
//! server's background thread), and the rate cap spaces the calls out.
//!
//! Every client database is cleaned (each that holds keys, `INFO keyspace`). Half-copied big
//! keys wait in the target's internal database under their temp names
//! (`tessera_model::migration::temp_key`); those of the slots are deleted too.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tessera_model::migration::{INTERNAL_DB, INTERNAL_PREFIX, temp_key_of};
use tessera_model::redis_client::{Credential, RedisClient, Value};
use tessera_model::router::SlotId;
use tracing::debug;

use super::reply::{MoverError, databases_with_keys, expect_ok, scan_page};

/// How a cleanup goes.
#[derive(Debug, Clone)]
pub struct CleanupConfig {
    /// SCAN's COUNT.
    pub scan_count: usize,
    /// Keys per UNLINK.
    pub batch: usize,
    /// The most keys deleted per second (0: no cap).
    pub max_keys_per_sec: u64,
    pub timeout: Duration,
}

impl Default for CleanupConfig {
    fn default() -> Self {
        Self {
            scan_count: 1000,
            batch: 500,
            max_keys_per_sec: 100_000,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Deletes every key of `slots` on `server`, in every client database, and half-copied ones
/// in the internal database. Returns how many it deleted.
///
/// # Errors
/// The server is unreachable or refuses a command; what was deleted stays deleted, and a
/// cleanup run again finds the rest.
pub async fn delete_slots(
    server: &str,
    slots: &BTreeSet<u16>,
    credential: Option<&Credential>,
    config: &CleanupConfig,
) -> Result<u64, MoverError> {
    let mut c = RedisClient::connect_as(server, config.timeout, credential).await?;
    let started = Instant::now();
    let mut deleted = 0;
    let mut pace = Pace::new(config.max_keys_per_sec);
    for db in databases_with_keys(&mut c, server).await? {
        let db_text = db.to_string();
        expect_ok(&mut c, server, &[b"SELECT", db_text.as_bytes()]).await?;
        let mut cursor = b"0".to_vec();
        let mut doomed: Vec<Bytes> = Vec::new();
        let count = config.scan_count.to_string();
        loop {
            let reply = c
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            let keys = scan_page(server, "SCAN", &reply, &mut cursor)?;
            doomed.extend(
                keys.iter()
                    .filter_map(Value::as_bytes)
                    .filter(|k| of_slots(k, db, slots))
                    .map(Bytes::copy_from_slice),
            );
            let done = cursor == b"0";
            while doomed.len() >= config.batch || (done && !doomed.is_empty()) {
                let rest = doomed.split_off(config.batch.min(doomed.len()));
                let batch = std::mem::replace(&mut doomed, rest);
                let mut args: Vec<&[u8]> = vec![b"UNLINK"];
                args.extend(batch.iter().map(|k| &k[..]));
                expect_ok(&mut c, server, &args).await?;
                deleted += batch.len() as u64;
                pace.wait(batch.len() as u64).await;
            }
            if done {
                break;
            }
        }
    }
    debug!(
        server,
        slots = slots.len(),
        deleted,
        ms = started.elapsed().as_millis() as u64,
        "slots' keys deleted"
    );
    Ok(deleted)
}

/// Whether `key` (found in database `db`) belongs to one of `slots`: in a client database a
/// key of those slots (never Tessera's own), in the internal database a temp key of one.
fn of_slots(key: &[u8], db: u32, slots: &BTreeSet<u16>) -> bool {
    if db != INTERNAL_DB {
        return !key.starts_with(INTERNAL_PREFIX) && slots.contains(&SlotId::of_key(key).0);
    }
    temp_key_of(key).is_some_and(|of| slots.contains(&SlotId::of_key(of).0))
}

/// A simple rate cap: after each step, sleeps as long as the step's keys are ahead of
/// `per_sec` since the start.
struct Pace {
    per_sec: u64,
    started: Instant,
    done: u64,
}

impl Pace {
    fn new(per_sec: u64) -> Self {
        Self {
            per_sec,
            started: Instant::now(),
            done: 0,
        }
    }

    async fn wait(&mut self, keys: u64) {
        self.done += keys;
        if self.per_sec == 0 {
            return;
        }
        let due = Duration::from_secs_f64(self.done as f64 / self.per_sec as f64);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            tokio::time::sleep(ahead).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_slots_keys_and_their_temp_keys_are_picked() {
        let slot = SlotId::of_key(b"{a}k").0;
        let slots = BTreeSet::from([slot]);
        assert!(of_slots(b"{a}k", 0, &slots));
        assert!(!of_slots(b"{b}k", 0, &slots));
        assert!(!of_slots(b"__tessera:script:x", 0, &slots));
        assert!(of_slots(b"__tessera:temp:{a}big", INTERNAL_DB, &slots));
        assert!(!of_slots(b"__tessera:temp:{b}big", INTERNAL_DB, &slots));
        assert!(!of_slots(b"__tessera:script:{a}", INTERNAL_DB, &slots));
        assert!(!of_slots(b"{a}k", INTERNAL_DB, &slots));
        assert!(of_slots(b"{a}k", 5, &slots));
        assert!(of_slots(b"__tessera:tempdb:5:{a}big", INTERNAL_DB, &slots));
        assert!(!of_slots(b"__tessera:tempdb:5:{b}big", INTERNAL_DB, &slots));
    }
}
