//! Slot migration on stock Redis. The proxy half (a command on a migrating slot moves its
//! keys first) lives in `session::migrate`; the dashboard half (the per-slot state machine and
//! the background mover) in `migrate::{plan, mover}`. This module holds what both share: the
//! names of Tessera's internal keys.
//!
//! A key too big for one `MIGRATE` is moved by the staging protocol (DESIGN.md §4.3): on the
//! source it is renamed to its staging key and a marker key is set, atomically; the mover
//! copies it to a temp key on the target in chunks, renames temp → key, and only then
//! deletes staging and marker. A proxy whose MIGRATE finds no key but sees the marker waits.

pub mod mover;
pub mod plan;

/// A collection with more elements than this is moved in chunks, never by one MIGRATE.
pub const BIG_KEY_ELEMENTS: u64 = 5_000;
/// A string longer than this is moved in chunks.
pub const BIG_KEY_BYTES: u64 = 4 * 1024 * 1024;

/// Run on the source by a proxy before its MIGRATE: each of KEYS that is big is renamed to
/// its staging key with its marker set (holding its TTL), atomically, so the MIGRATE that
/// follows never moves a big key whole; the mover copies staged keys in chunks.
/// ARGV: element limit, byte limit. Returns how many keys are staged.
pub const STAGE_BIG_KEYS_SCRIPT: &str = r#"
local staged = 0
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  local n, limit = 0, tonumber(ARGV[1])
  if t == 'hash' then n = redis.call('HLEN', k)
  elseif t == 'set' then n = redis.call('SCARD', k)
  elseif t == 'zset' then n = redis.call('ZCARD', k)
  elseif t == 'list' then n = redis.call('LLEN', k)
  elseif t == 'string' then n, limit = redis.call('STRLEN', k), tonumber(ARGV[2])
  end
  if n > limit then
    local sk, mk = '__tessera:staging:' .. k, '__tessera:marker:' .. k
    if redis.call('EXISTS', sk) == 0 then
      local ttl = redis.call('PTTL', k)
      redis.call('RENAME', k, sk)
      redis.call('SET', mk, ttl)
    end
    staged = staged + 1
  end
end
return staged
"#;

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
