//! Clients' numbered databases (`SELECT n`) and the backends' numbers for them. Database 1 of
//! every backend is Tessera's own ([`INTERNAL_DB`]: a migration's half-copied keys), so client
//! databases are mapped around it: client 0 is backend 0, client `n ≥ 1` is backend `n + 1`.
//! No client database is ever backend 1, and a backend's 1 is no client's. Backends therefore
//! need `databases` ≥ the clients' count + 1 (17 for Redis's usual 16). Keyspace
//! notifications name their database in their channel (`__keyspace@<db>__:<key>`): the
//! names are read and renumbered here too.

use bytes::Bytes;

use crate::migration::INTERNAL_DB;

/// How many databases clients may use unless configured (Redis's default).
pub const DEFAULT_DATABASES: u32 = 16;
/// The most a proxy may be configured with.
pub const MAX_DATABASES: u32 = 1024;

const _: () = assert!(INTERNAL_DB == 1, "the mapping below skips database 1");

/// The backend database of client database `db`.
#[inline]
pub fn backend_db(db: u32) -> u32 {
    if db == 0 { 0 } else { db + 1 }
}

/// The client database of backend database `db`; `None` for Tessera's own.
#[inline]
pub fn client_db(db: u32) -> Option<u32> {
    match db {
        0 => Some(0),
        INTERNAL_DB => None,
        n => Some(n - 1),
    }
}

/// A client's database argument (`SELECT`, `MOVE`, `COPY … DB`, `SWAPDB`), checked against
/// the `databases` clients may use.
///
/// # Errors
/// Redis's own texts: not an integer, or out of range.
pub fn parse_client_db(arg: &[u8], databases: u32) -> Result<u32, DbArgError> {
    let n: i64 = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(DbArgError::NotAnInteger)?;
    if n < 0 || n >= i64::from(databases) {
        return Err(DbArgError::OutOfRange);
    }
    Ok(n as u32)
}

/// A keyspace notification's channel, or a name that starts as one (a pattern's literal
/// start): `__keyspace@<db>__…` or `__keyevent@<db>__…`, split into its head (up to `@`), its
/// database's number and the rest (from `__`). `None` for any other name, and for one whose
/// number is a wildcard.
pub fn keyspace_parts(name: &[u8]) -> Option<(&[u8], u32, &[u8])> {
    let head_len = if name.starts_with(b"__keyspace@") || name.starts_with(b"__keyevent@") {
        b"__keyspace@".len()
    } else {
        return None;
    };
    let (head, tail) = name.split_at(head_len);
    let digits = tail.iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = &tail[digits..];
    if digits == 0 || digits > 9 || !rest.starts_with(b"__") {
        return None;
    }
    let db = std::str::from_utf8(&tail[..digits]).ok()?.parse().ok()?;
    Some((head, db, rest))
}

/// The database a keyspace notification's channel (or a name starting as one) names.
pub fn keyspace_db(name: &[u8]) -> Option<u32> {
    keyspace_parts(name).map(|(_, db, _)| db)
}

/// `name` naming database `db` instead (a keyspace channel or pattern); any other name as it
/// is.
pub fn with_keyspace_db(name: &Bytes, db: u32) -> Bytes {
    match keyspace_parts(name) {
        Some((head, _, rest)) => {
            let n = db.to_string();
            Bytes::from([head, n.as_bytes(), rest].concat())
        }
        None => name.clone(),
    }
}

/// The databases an `INFO keyspace` text lists (`db3:keys=5,expires=0,avg_ttl=0`), with
/// their key counts, in order. Lines of any other shape are left out.
pub fn info_keyspace(text: &str) -> Vec<(u32, u64)> {
    let mut dbs: Vec<(u32, u64)> = text
        .lines()
        .filter_map(|line| {
            let (name, fields) = line.trim_end().split_once(':')?;
            let db = name.strip_prefix("db")?.parse().ok()?;
            let keys = fields.split(',').find_map(|f| f.strip_prefix("keys="))?;
            Some((db, keys.parse().ok()?))
        })
        .collect();
    dbs.sort_unstable();
    dbs
}

/// The name the backends know a client's channel or pattern by: a keyspace notification's
/// of client database n names the backends' n + 1; any other as it is.
pub fn backend_channel(name: &Bytes) -> Bytes {
    match keyspace_db(name) {
        Some(db) if db != 0 => with_keyspace_db(name, backend_db(db)),
        _ => name.clone(),
    }
}

/// Why a database argument is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbArgError {
    NotAnInteger,
    OutOfRange,
}

#[cfg(test)]
mod tests {

    #[test]
    fn info_keyspace_lists_each_database_and_its_keys() {
        let text = "# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=0\r\ndb12:keys=40,expires=0,avg_ttl=0\r\ndbx:keys=1\r\n";
        assert_eq!(info_keyspace(text), vec![(0, 3), (12, 40)]);
        assert!(info_keyspace("").is_empty());
    }
    use super::*;

    #[test]
    fn client_databases_map_around_the_internal_one_and_back() {
        assert_eq!(backend_db(0), 0);
        assert_eq!(backend_db(1), 2);
        assert_eq!(backend_db(15), 16);
        for db in 0..MAX_DATABASES {
            assert_ne!(backend_db(db), INTERNAL_DB);
            assert_eq!(client_db(backend_db(db)), Some(db));
        }
        assert_eq!(client_db(INTERNAL_DB), None);
    }

    #[test]
    fn database_arguments_are_checked_as_redis_checks_them() {
        assert_eq!(parse_client_db(b"0", 16), Ok(0));
        assert_eq!(parse_client_db(b"15", 16), Ok(15));
        assert_eq!(parse_client_db(b"16", 16), Err(DbArgError::OutOfRange));
        assert_eq!(parse_client_db(b"-1", 16), Err(DbArgError::OutOfRange));
        assert_eq!(parse_client_db(b"x", 16), Err(DbArgError::NotAnInteger));
        assert_eq!(parse_client_db(b"", 16), Err(DbArgError::NotAnInteger));
        assert_eq!(parse_client_db(b"1", 1), Err(DbArgError::OutOfRange));
    }
}
