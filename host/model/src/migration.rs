//! The slot-migration protocol on stock Redis that the dashboard's copier and its tests share:
//! the copy script a round reads a batch of keys with, the publish script a big key's
//! chunked copy ends with, and the names and database of Tessera's internal keys. The copier
//! is `tessera-control`'s `migrate`; docs/migration.md has the protocol.
//!
//! Migration v3 never writes on the source: a copy round reads keys there (`COPY_SCRIPT`:
//! their `DUMP` and absolute expire time, nothing else) and RESTOREs them on the target; a
//! key too big for one RESTORE is assembled on the target under its temp key in
//! [`INTERNAL_DB`], in chunks, and moved into place atomically (`PUBLISH_BIG_KEY_SCRIPT`).
//! The proxies route every command on a copying slot to its source until the handoff, so no
//! client waits on a copy.
//!
//! Temp keys live in [`INTERNAL_DB`], not in the database clients use: KEYS, SCAN, RANDOMKEY
//! and DBSIZE never see them, and no client can reach them (client databases are mapped
//! around it, `crate::databases`, and the proxies' backend user may neither SELECT nor name a
//! key under [`INTERNAL_PREFIX`]).

/// The database of Tessera's internal keys on every backend (no client's: `crate::databases`).
pub const INTERNAL_DB: u32 = 1;

/// A collection with more elements than this is copied in chunks, never by one RESTORE.
pub const BIG_KEY_ELEMENTS: u64 = 5_000;
/// A string longer than this is copied in chunks.
pub const BIG_KEY_BYTES: u64 = 4 * 1024 * 1024;

/// `too_big(k, t)`: more elements, or bytes for a string, than one RESTORE should carry.
/// ARGV[1] the element limit, ARGV[2] the byte limit.
macro_rules! too_big_lua {
    () => {
        r#"
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
"#
    };
}

/// A copy round's read of a batch of keys on the source (migration v3): nothing is written
/// there. For each of KEYS, two values: `PEXPIRETIME` (absolute ms, -1 for none) and the
/// `DUMP` payload; `-2` and an empty string for a key that does not exist (the copy on the
/// target is deleted); `-3` and the key's type for a key too big for one RESTORE (copied in
/// chunks). ARGV[1] the element limit, ARGV[2] the byte limit.
pub const COPY_SCRIPT: &str = concat!(
    "#!lua flags=no-writes",
    too_big_lua!(),
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
    let n = keys.len().to_string();
    let (elements, bytes) = (BIG_KEY_ELEMENTS.to_string(), BIG_KEY_BYTES.to_string());
    let mut args: Vec<&[u8]> = vec![b"EVAL", COPY_SCRIPT.as_bytes(), n.as_bytes()];
    args.extend(keys.iter().map(AsRef::as_ref));
    args.extend([elements.as_bytes(), bytes.as_bytes()]);
    let size = args.iter().map(|a| a.len()).sum();
    tessera_resp::encode_request(args.len(), args.iter().copied(), size)
}

/// Puts a big key assembled in the internal database on the target into place, atomically:
/// KEYS[1] the temp key (internal database), KEYS[2] the key; ARGV[1] the internal database,
/// ARGV[2] the key's database. Returns 1, or 0 when the copy is not there (it expired while
/// it was copied).
pub const PUBLISH_BIG_KEY_SCRIPT: &str = "\
redis.call('SELECT', ARGV[1]) \
if redis.call('MOVE', KEYS[1], ARGV[2]) == 0 then \
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
  return redis.error_reply('ERR the copy of ' .. KEYS[2] .. ' could not leave the internal database') \
end \
redis.call('SELECT', ARGV[2]) \
redis.call('RENAME', KEYS[1], KEYS[2]) \
return 1";

/// Every internal key starts with this; scans skip them.
pub const INTERNAL_PREFIX: &[u8] = b"__tessera:";

/// The temp keys of database 0's big keys: `__tessera:temp:<key>`.
const TEMP: &[u8] = b"temp:";
/// The temp keys of other databases' big keys: `__tessera:tempdb:<db>:<key>`.
const TEMP_DB: &[u8] = b"tempdb:";

/// Where a big key of backend database `db` is assembled on the target before it is moved
/// into place.
pub fn temp_key(db: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(INTERNAL_PREFIX.len() + 20 + key.len());
    k.extend_from_slice(INTERNAL_PREFIX);
    if db == 0 {
        k.extend_from_slice(TEMP);
    } else {
        k.extend_from_slice(TEMP_DB);
        k.extend_from_slice(db.to_string().as_bytes());
        k.push(b':');
    }
    k.extend_from_slice(key);
    k
}

/// The key a temp key is assembled for (the inverse of [`temp_key`]), without its database:
/// its slot is the slot the temp key belongs to. `None` for any other key.
pub fn temp_key_of(temp: &[u8]) -> Option<&[u8]> {
    let rest = temp.strip_prefix(INTERNAL_PREFIX)?;
    if let Some(key) = rest.strip_prefix(TEMP) {
        return Some(key);
    }
    let rest = rest.strip_prefix(TEMP_DB)?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let digits = &rest[..colon];
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then(|| &rest[colon + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_request_reads_its_keys_with_the_limits_as_arguments() {
        let req = copy_request(&[&b"a"[..], b"bb"]);
        let text = String::from_utf8_lossy(&req);
        assert!(text.starts_with("*7\r\n$4\r\nEVAL\r\n"));
        assert!(text.contains("flags=no-writes"));
        assert!(
            text.ends_with("$1\r\n2\r\n$1\r\na\r\n$2\r\nbb\r\n$4\r\n5000\r\n$7\r\n4194304\r\n")
        );
        assert_eq!(temp_key(0, b"k"), b"__tessera:temp:k");
    }

    #[test]
    fn a_temp_key_names_its_database_and_gives_back_its_key() {
        assert_eq!(temp_key(5, b"k:1"), b"__tessera:tempdb:5:k:1");
        for (db, key) in [(0, &b"{a}b"[..]), (0, b"7:x"), (12, b"{a}:b"), (3, b"")] {
            assert_eq!(temp_key_of(&temp_key(db, key)), Some(key), "db {db}");
        }
        assert_eq!(temp_key_of(b"__tessera:tempdb:x:k"), None);
        assert_eq!(temp_key_of(b"__tessera:script:k"), None);
        assert_eq!(temp_key_of(b"k"), None);
    }
}
