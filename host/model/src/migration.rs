//! The slot-migration protocol on stock Redis: what the proxies (which move a key they touch
//! first) and the dashboard's mover share — the scripts, the requests, and the names and
//! database of Tessera's internal keys. The mover itself is `tessera-control`'s `migrate`.
//!
//! Slot migration on stock Redis. The proxy half (a command on a migrating slot moves its
//! keys first) lives in `session::migrate`; the dashboard half (the per-slot state machine and
//! the background mover) in `migrate::{plan, mover}`. This module holds what both share: the
//! scripts of the protocol and the names of Tessera's internal keys.
//!
//! A key is in one of three places a client's command can find: on the source, **in
//! transit**, or on the target.
//!
//! - Proxies move a key they touch with `MIGRATE` (`move_keys_request`).
//! - The mover claims a batch with one script (`CLAIM_SCRIPT`): each key is moved, under its
//!   own name, into [`INTERNAL_DB`] and dumped; the dumps are RESTOREd on the target, then the
//!   batch is unlinked from the internal database. A key in transit is out of MIGRATE's
//!   reach, and a proxy that finds it there (`moving` in the scripts) waits and tries again.
//! - A key too big for one MIGRATE or RESTORE is moved by the staging protocol (DESIGN.md
//!   §4.3): on the source it is renamed to its staging key and a marker key is set,
//!   atomically; the mover copies it to a temp key on the target in chunks, renames temp →
//!   key, and only then deletes staging and marker. Proxies that see the marker wait too.
//!
//! Keys in transit, staging, marker and temp keys live in [`INTERNAL_DB`], not in the
//! database clients use: KEYS, SCAN, RANDOMKEY and DBSIZE never see them, and no client can
//! reach them (the proxy serves database 0 only, and its backend user may neither SELECT nor
//! name a key under [`INTERNAL_PREFIX`]). The scripts run on a source are flagged
//! `allow-oom`: a source over its `maxmemory` (the reason to move slots off it) must still
//! give its keys away.

use crate::redis_client::Credential;

/// The database of Tessera's internal keys on every backend (clients use database 0).
pub const INTERNAL_DB: u32 = 1;

/// A collection with more elements than this is moved in chunks, never by one MIGRATE.
pub const BIG_KEY_ELEMENTS: u64 = 5_000;
/// A string longer than this is moved in chunks.
pub const BIG_KEY_BYTES: u64 = 4 * 1024 * 1024;

/// The Lua the staging and claim scripts share: `too_big(k, t)` (more elements, or bytes for a
/// string, than one MIGRATE or RESTORE should carry), `stage(k)` (rename a big key to its
/// staging key in the internal database and set its marker to its absolute expire time in
/// ms, -1 for none, atomically) and `moving(k)` (a marker for it, or the key itself, is in
/// the internal database: a big key being copied in chunks, or a small key in transit).
/// ARGV[1] element limit, ARGV[2] byte limit, ARGV[3] the internal database.
macro_rules! big_key_lua {
    () => {
        r#"
local db = tonumber(ARGV[3])
local function too_big(k, t)
  if t == 'string' then return redis.call('STRLEN', k) > tonumber(ARGV[2]) end
  local n = 0
  if t == 'hash' then n = redis.call('HLEN', k)
  elseif t == 'set' then n = redis.call('SCARD', k)
  elseif t == 'zset' then n = redis.call('ZCARD', k)
  elseif t == 'list' then n = redis.call('LLEN', k)
  elseif t == 'stream' then n = redis.call('XLEN', k)
  end
  if n > tonumber(ARGV[1]) then return true end
  -- Few elements may still be big ones: past a compact encoding's size, ask (sampled).
  return n > 128 and (redis.call('MEMORY', 'USAGE', k) or 0) > tonumber(ARGV[2])
end
local function stage(k)
  local at = redis.call('PEXPIRETIME', k)
  local staging = '__tessera:staging:' .. k
  -- Renamed first (no client can hold that name), then moved; a staging key left by an
  -- interrupted run is replaced, as RENAME would.
  redis.call('RENAME', k, staging)
  redis.call('SELECT', db)
  redis.call('DEL', staging)
  redis.call('SELECT', 0)
  redis.call('MOVE', staging, db)
  redis.call('SELECT', db)
  redis.call('SET', '__tessera:marker:' .. k, at)
  redis.call('SELECT', 0)
end
local function moving(k)
  redis.call('SELECT', db)
  local m = redis.call('EXISTS', '__tessera:marker:' .. k, k)
  redis.call('SELECT', 0)
  return m > 0
end
"#
    };
}

/// Stages the big ones of KEYS on the source, atomically per call; run there by proxies
/// before their MIGRATE of the rest. ARGV: element limit, byte limit, the internal database.
/// Returns `{moving, 0, staged…}`: how many of KEYS are being moved by the mover (a marker:
/// a big key copied in chunks; or in transit: claimed by [`CLAIM_SCRIPT`], not yet on the
/// target), 0 (kept for the reply's shape), and the keys this call staged.
pub const STAGE_BIG_KEYS_SCRIPT: &str = concat!(
    "#!lua flags=allow-oom",
    big_key_lua!(),
    r#"
local staged, markers = {}, 0
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'none' then
    if too_big(k, t) then
      stage(k)
      staged[#staged + 1] = k
      markers = markers + 1
    end
  elseif moving(k) then
    markers = markers + 1
  end
end
local out = {markers, 0}
for _, k in ipairs(staged) do out[#out + 1] = k end
return out
"#
);

/// The mover's claim of a batch of keys on the source, atomic: each of KEYS that exists is
/// either staged (too big: copied in chunks after) or moved, under its own name, into the
/// internal database (in transit: out of the proxies' reach, which wait while it is there)
/// and dumped. ARGV as [`STAGE_BIG_KEYS_SCRIPT`]. Returns `{{staged…}, {conflicts…}, key,
/// payload, expire-at, …}`: expire-at is `PEXPIRETIME` (absolute ms, -1 for none), so a TTL
/// is not stretched by the copy's time; conflicts are keys found both in database 0 and in
/// transit, which the protocol never leaves (the mover stops and names them).
pub const CLAIM_SCRIPT: &str = concat!(
    "#!lua flags=allow-oom",
    big_key_lua!(),
    r#"
local staged, conflicts, claimed = {}, {}, {}
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'none' then
    if too_big(k, t) then
      stage(k)
      staged[#staged + 1] = k
    elseif redis.call('MOVE', k, db) == 1 then
      claimed[#claimed + 1] = k
    else
      conflicts[#conflicts + 1] = k
    end
  end
end
local out = {staged, conflicts}
redis.call('SELECT', db)
for _, k in ipairs(claimed) do
  local payload = redis.call('DUMP', k)
  if payload then
    out[#out + 1] = k
    out[#out + 1] = payload
    out[#out + 1] = redis.call('PEXPIRETIME', k)
  end
end
redis.call('SELECT', 0)
return out
"#
);

/// A copy round's read of a batch of keys on the source (migration v3): nothing is written
/// there. For each of KEYS, two values: `PEXPIRETIME` (absolute ms, -1 for none) and the
/// `DUMP` payload; `-2` and an empty string for a key that does not exist (the copy on the
/// target is deleted); `-3` and the key's type for a key too big for one RESTORE (copied in
/// chunks). ARGV as [`STAGE_BIG_KEYS_SCRIPT`].
pub const COPY_SCRIPT: &str = concat!(
    "#!lua flags=no-writes",
    big_key_lua!(),
    r#"
local out = {}
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' then
    out[#out + 1] = -2
    out[#out + 1] = ''
  elseif too_big(k, t) then
    out[#out + 1] = -3
    out[#out + 1] = t
  else
    out[#out + 1] = redis.call('PEXPIRETIME', k)
    out[#out + 1] = redis.call('DUMP', k)
  end
end
return out
"#
);

/// The `EVAL COPY_SCRIPT …` of a batch of keys.
pub fn copy_request<K: AsRef<[u8]>>(keys: &[K]) -> bytes::Bytes {
    big_key_script_request(COPY_SCRIPT, keys)
}

/// Dumps keys left in transit in the internal database (by a mover that stopped between its
/// claim and its cleanup), for the connection's database: `{key, payload, expire-at, …}` of
/// those of KEYS still there.
pub const DUMP_TRANSIT_SCRIPT: &str = r#"#!lua flags=no-writes
local out = {}
for _, k in ipairs(KEYS) do
  local payload = redis.call('DUMP', k)
  if payload then
    out[#out + 1] = k
    out[#out + 1] = payload
    out[#out + 1] = redis.call('PEXPIRETIME', k)
  end
end
return out
"#;

/// For an abort going back, on the forward move's source, in its internal database: puts
/// keys left in transit there back into database 0, unless a newer copy is there already
/// (then the transit copy is dropped). Returns how many went back.
pub const UNCLAIM_SCRIPT: &str = r#"#!lua flags=allow-oom
local back = 0
for _, k in ipairs(KEYS) do
  if redis.call('MOVE', k, 0) == 1 then back = back + 1 else redis.call('DEL', k) end
end
return back
"#;

/// The proxies' move of `keys` to `target` ("host:port"), one transaction on the source (so
/// as atomic there as one script): `MULTI`, the staging script, `MIGRATE … REPLACE [AUTH2 …]
/// KEYS …` of what is left, `EXEC`. MIGRATE runs outside the script so that its `AUTH2`
/// password, which Redis keeps out of SLOWLOG and MONITOR, never is a script argument. Four
/// requests: the reply that counts is the last (`send_block` with 3 skipped).
pub fn move_keys_request<K: AsRef<[u8]>>(
    target: &str,
    timeout_ms: u64,
    credential: Option<&Credential>,
    keys: &[K],
) -> bytes::Bytes {
    let mut out = bytes::BytesMut::new();
    out.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
    out.extend_from_slice(&script_request(keys));
    out.extend_from_slice(&migrate_request(target, timeout_ms, credential, keys));
    out.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
    out.freeze()
}

/// Requests `move_keys_request` writes before the reply that counts.
pub const MOVE_KEYS_SKIPPED: u32 = 3;

/// The mover's `EVAL CLAIM_SCRIPT …` of a batch of keys.
pub fn claim_request<K: AsRef<[u8]>>(keys: &[K]) -> bytes::Bytes {
    big_key_script_request(CLAIM_SCRIPT, keys)
}

fn script_request<K: AsRef<[u8]>>(keys: &[K]) -> bytes::Bytes {
    big_key_script_request(STAGE_BIG_KEYS_SCRIPT, keys)
}

fn big_key_script_request<K: AsRef<[u8]>>(script: &str, keys: &[K]) -> bytes::Bytes {
    let n = keys.len().to_string();
    let (elements, bytes) = (BIG_KEY_ELEMENTS.to_string(), BIG_KEY_BYTES.to_string());
    let db = INTERNAL_DB.to_string();
    let mut args: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
    args.extend(keys.iter().map(AsRef::as_ref));
    args.extend([elements.as_bytes(), bytes.as_bytes(), db.as_bytes()]);
    let size = args.iter().map(|a| a.len()).sum();
    tessera_resp::encode_request(args.len(), args.iter().copied(), size)
}

/// `MIGRATE host port "" 0 timeout REPLACE [AUTH2 user password] KEYS …` to `target`.
pub fn migrate_request<K: AsRef<[u8]>>(
    target: &str,
    timeout_ms: u64,
    credential: Option<&Credential>,
    keys: &[K],
) -> bytes::Bytes {
    let (host, port) = target.rsplit_once(':').unwrap_or((target, "6379"));
    let timeout = timeout_ms.to_string();
    let mut args: Vec<&[u8]> = vec![
        b"MIGRATE",
        host.as_bytes(),
        port.as_bytes(),
        b"",
        b"0",
        timeout.as_bytes(),
        b"REPLACE",
    ];
    if let Some(c) = credential {
        // Redis leaves AUTH2's arguments out of SLOWLOG and MONITOR.
        args.extend([&b"AUTH2"[..], c.user.as_bytes(), c.password.as_bytes()]);
    }
    args.push(b"KEYS");
    args.extend(keys.iter().map(AsRef::as_ref));
    let size = args.iter().map(|a| a.len()).sum();
    tessera_resp::encode_request(args.len(), args.iter().copied(), size)
}

/// The request that answers (an integer) how many of `keys` are being moved on a server: a
/// marker (a big key copied in chunks) or the key itself in transit, in the internal
/// database.
pub fn markers_exist_request<K: AsRef<[u8]>>(keys: &[K]) -> bytes::Bytes {
    const SCRIPT: &[u8] =
        b"#!lua flags=no-writes\nredis.call('SELECT', ARGV[1]) return redis.call('EXISTS', unpack(KEYS))";
    let mut names: Vec<Vec<u8>> = keys.iter().map(|k| marker_key(k.as_ref())).collect();
    names.extend(keys.iter().map(|k| k.as_ref().to_vec()));
    let (n, db) = (names.len().to_string(), INTERNAL_DB.to_string());
    let mut args: Vec<&[u8]> = vec![b"EVAL", SCRIPT, n.as_bytes()];
    args.extend(names.iter().map(|m| &m[..]));
    args.push(db.as_bytes());
    let size = args.iter().map(|a| a.len()).sum();
    tessera_resp::encode_request(args.len(), args.iter().copied(), size)
}

/// Puts a big key assembled in the internal database on the target into place, atomically:
/// KEYS[1] the temp key (internal database), KEYS[2] the key; ARGV[1] the internal database.
/// Returns 1, or 0 when the copy is not there (it expired while it was copied).
pub const PUBLISH_BIG_KEY_SCRIPT: &str = "\
redis.call('SELECT', ARGV[1]) \
if redis.call('MOVE', KEYS[1], 0) == 0 then \
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
  return redis.error_reply('ERR the copy of ' .. KEYS[2] .. ' could not leave the internal database') \
end \
redis.call('SELECT', 0) \
redis.call('RENAME', KEYS[1], KEYS[2]) \
return 1";

/// For an abort going back: puts a staged big key back in place (unless a newer key exists)
/// and removes its marker. KEYS[1] the key, KEYS[2] its staging key, KEYS[3] its marker (both
/// in the internal database); ARGV[1] the internal database.
pub const UNSTAGE_SCRIPT: &str = "#!lua flags=allow-oom
redis.call('SELECT', ARGV[1]) \
if redis.call('EXISTS', KEYS[2]) == 1 then \
  redis.call('SELECT', 0) \
  local newer = redis.call('EXISTS', KEYS[1]) == 1 \
  redis.call('SELECT', ARGV[1]) \
  if newer then redis.call('UNLINK', KEYS[2]) \
  else \
    redis.call('MOVE', KEYS[2], 0) \
    redis.call('SELECT', 0) \
    redis.call('RENAME', KEYS[2], KEYS[1]) \
    redis.call('SELECT', ARGV[1]) \
  end \
end \
redis.call('DEL', KEYS[3]) \
return 1";

/// What `STAGE_BIG_KEYS_SCRIPT` answered.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MoveOutcome {
    /// Keys being moved by the mover: a marker present (a big key copied in chunks), or in
    /// transit.
    pub markers: u64,
    /// Keys this call staged.
    pub staged: Vec<bytes::Bytes>,
}

impl MoveOutcome {
    /// Parses the script's reply (`*n :markers :0 $key…`); `None` for anything else.
    pub fn parse(reply: &[u8]) -> Option<MoveOutcome> {
        let parts = tessera_resp::split_aggregate(reply)?;
        let markers = tessera_resp::parse_integer(parts.first()?)? as u64;
        tessera_resp::parse_integer(parts.get(1)?)?;
        let staged = parts[2..]
            .iter()
            .map(|p| {
                let start = memchr::memchr(b'\n', p)? + 1;
                Some(bytes::Bytes::copy_from_slice(
                    p.get(start..p.len().checked_sub(2)?)?,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(MoveOutcome { markers, staged })
    }

    /// Parses the `EXEC` reply of a [`move_keys_request`]: the script's outcome, or what went
    /// wrong (the transaction or MIGRATE refused), as the server said it.
    ///
    /// # Errors
    /// The server's words when the move did not happen.
    pub fn parse_move(reply: &[u8]) -> Result<MoveOutcome, String> {
        let said = || {
            String::from_utf8_lossy(reply)
                .trim_start_matches(['-', '+'])
                .trim_end()
                .to_string()
        };
        let parts = tessera_resp::split_aggregate(reply).ok_or_else(said)?;
        let [script, migrate] = parts[..] else {
            return Err(said());
        };
        if migrate.first() == Some(&b'-') {
            return Err(String::from_utf8_lossy(&migrate[1..])
                .trim_end()
                .to_string());
        }
        MoveOutcome::parse(script).ok_or_else(|| String::from_utf8_lossy(script).trim().into())
    }
}

/// Every internal key starts with this; scans skip them.
pub const INTERNAL_PREFIX: &[u8] = b"__tessera:";

fn internal(kind: &str, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(INTERNAL_PREFIX.len() + kind.len() + 1 + key.len());
    k.extend_from_slice(INTERNAL_PREFIX);
    k.extend_from_slice(kind.as_bytes());
    k.push(b':');
    k.extend_from_slice(key);
    k
}

/// Present on the source while `key` is being copied as a big key.
pub fn marker_key(key: &[u8]) -> Vec<u8> {
    internal("marker", key)
}

/// Where a big key waits on the source while it is copied.
pub fn staging_key(key: &[u8]) -> Vec<u8> {
    internal("staging", key)
}

/// Where a big key is assembled on the target before it is renamed into place.
pub fn temp_key(key: &[u8]) -> Vec<u8> {
    internal("temp", key)
}

pub fn is_internal(key: &[u8]) -> bool {
    key.starts_with(INTERNAL_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_outcome_parses_the_script_reply() {
        let r = b"*4\r\n:1\r\n:300\r\n$3\r\nbig\r\n$1\r\nb\r\n";
        let o = MoveOutcome::parse(r).unwrap();
        assert_eq!(o.markers, 1);
        assert_eq!(
            o.staged,
            vec![
                bytes::Bytes::from_static(b"big"),
                bytes::Bytes::from_static(b"b")
            ]
        );
        assert_eq!(MoveOutcome::parse(b"-ERR x\r\n"), None);
    }

    #[test]
    fn a_move_is_its_transaction_and_fails_with_migrate() {
        let ok = b"*2\r\n*2\r\n:0\r\n:0\r\n+NOKEY\r\n";
        assert_eq!(MoveOutcome::parse_move(ok).unwrap(), MoveOutcome::default());
        let refused = b"*2\r\n*2\r\n:0\r\n:0\r\n-IOERR error or timeout\r\n";
        assert_eq!(
            MoveOutcome::parse_move(refused).unwrap_err(),
            "IOERR error or timeout"
        );
        assert_eq!(
            MoveOutcome::parse_move(b"-EXECABORT x\r\n").unwrap_err(),
            "EXECABORT x"
        );
        let cred = Credential {
            user: "u".into(),
            password: "p".into(),
        };
        let req = move_keys_request("127.0.0.1:7000", 5000, Some(&cred), &[b"k"]);
        let text = String::from_utf8_lossy(&req);
        assert!(text.starts_with("*1\r\n$5\r\nMULTI\r\n*7\r\n$4\r\nEVAL\r\n"));
        assert!(text.contains("$5\r\nAUTH2\r\n$1\r\nu\r\n$1\r\np\r\n$4\r\nKEYS\r\n$1\r\nk\r\n"));
        assert!(text.ends_with("*1\r\n$4\r\nEXEC\r\n"));
    }
}
