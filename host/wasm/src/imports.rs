//! The host functions a plugin imports (module `tessera`, see `sdk/ABI.md`).

use std::sync::LazyLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tessera_plugin_abi::{self as abi, import, status};
use wasmtime::{Caller, Linker};

use crate::host_state::HostState;
use crate::metrics::{Kind, MAX_HELP, MAX_LABEL_VALUE, MAX_LABELS, MetricError, Series};

static START: LazyLock<Instant> = LazyLock::new(Instant::now);

fn range(data: &[u8], ptr: i32, len: i32) -> Option<std::ops::Range<usize>> {
    let (p, l) = (usize::try_from(ptr).ok()?, usize::try_from(len).ok()?);
    let end = p.checked_add(l)?;
    (end <= data.len()).then_some(p..end)
}

/// Guest memory and the host state, both mutable.
fn split<'a>(caller: &'a mut Caller<'_, HostState>) -> Option<(&'a mut [u8], &'a mut HostState)> {
    let mem = caller.data().memory?;
    Some(mem.data_and_store_mut(caller))
}

fn strings(buf: &[u8]) -> Option<Vec<String>> {
    abi::string_list(buf)
        .map(|s| s.map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}

fn metric_err(e: MetricError) -> i64 {
    match e {
        MetricError::BadArgument => status::BAD_ARGUMENT,
        MetricError::TooMany => status::NOT_ALLOWED,
    }
}

/// Copies `value` to the guest if it fits; returns its length either way.
fn copy_out(data: &mut [u8], dst: i32, cap: i32, value: &[u8]) -> i64 {
    if value.len() <= cap.max(0) as usize {
        match range(data, dst, value.len() as i32) {
            Some(r) => data[r].copy_from_slice(value),
            None => return status::INVALID_MEMORY,
        }
    }
    value.len() as i64
}

pub(crate) fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let m = abi::IMPORT_MODULE;
    linker.func_wrap(
        m,
        import::LOG,
        |mut c: Caller<'_, HostState>, level: i32, ptr: i32, len: i32| {
            let Some((data, st)) = split(&mut c) else {
                return;
            };
            let Some(r) = range(data, ptr, len) else {
                return;
            };
            if !st.plugin.log_allowed() {
                return;
            }
            let msg = String::from_utf8_lossy(&data[r]);
            let plugin = st.plugin.name.as_str();
            match level {
                abi::level::TRACE => tracing::trace!(plugin, "{msg}"),
                abi::level::DEBUG => tracing::debug!(plugin, "{msg}"),
                abi::level::INFO => tracing::info!(plugin, "{msg}"),
                abi::level::WARN => tracing::warn!(plugin, "{msg}"),
                _ => tracing::error!(plugin, "{msg}"),
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::LOG_ENABLED,
        |_c: Caller<'_, HostState>, level: i32| -> i32 {
            let enabled = match level {
                abi::level::TRACE => tracing::enabled!(tracing::Level::TRACE),
                abi::level::DEBUG => tracing::enabled!(tracing::Level::DEBUG),
                abi::level::INFO => tracing::enabled!(tracing::Level::INFO),
                abi::level::WARN => tracing::enabled!(tracing::Level::WARN),
                _ => tracing::enabled!(tracing::Level::ERROR),
            };
            enabled as i32
        },
    )?;
    linker.func_wrap(
        m,
        import::METRIC_DEFINE,
        |mut c: Caller<'_, HostState>,
         kind: i32,
         name_ptr: i32,
         name_len: i32,
         help_ptr: i32,
         help_len: i32,
         labels_ptr: i32,
         labels_len: i32,
         buckets_ptr: i32,
         nbuckets: i32|
         -> i64 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY;
            };
            if !st.in_init {
                return status::NOT_ALLOWED;
            }
            let kind = match kind {
                abi::metric_kind::COUNTER => Kind::Counter,
                abi::metric_kind::GAUGE => Kind::Gauge,
                abi::metric_kind::HISTOGRAM => Kind::Histogram,
                _ => return status::BAD_ARGUMENT,
            };
            let (Some(n), Some(h), Some(l)) = (
                range(data, name_ptr, name_len),
                range(data, help_ptr, help_len),
                range(data, labels_ptr, labels_len),
            ) else {
                return status::INVALID_MEMORY;
            };
            let Some(b) = range(data, buckets_ptr, nbuckets.max(0).saturating_mul(8)) else {
                return status::INVALID_MEMORY;
            };
            // Bounded before anything is copied out of the guest (names are at most 100).
            if n.len() > 100
                || h.len() > MAX_HELP
                || l.len() > MAX_LABELS * 104
                || b.len() > 8 * 256
            {
                return status::BAD_ARGUMENT;
            }
            let Some(labels) = strings(&data[l]) else {
                return status::BAD_ARGUMENT;
            };
            let buckets = data[b]
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect();
            let name = String::from_utf8_lossy(&data[n]).into_owned();
            let help = String::from_utf8_lossy(&data[h]).into_owned();
            match st
                .plugin
                .metrics
                .define(kind, &name, &help, labels, buckets)
            {
                Ok(id) => id as i64,
                Err(e) => metric_err(e),
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::METRIC_SERIES,
        |mut c: Caller<'_, HostState>, metric: i32, ptr: i32, len: i32| -> i64 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY;
            };
            let Some(r) = range(data, ptr, len) else {
                return status::INVALID_MEMORY;
            };
            // Bounded before anything is copied out of the guest.
            let max = MAX_LABELS * (MAX_LABEL_VALUE + 4);
            if r.len() > max {
                return status::BAD_ARGUMENT;
            }
            let Some(values) = strings(&data[r]) else {
                return status::BAD_ARGUMENT;
            };
            match st.plugin.metrics.series(metric.max(0) as u32, values) {
                Ok(id) => id as i64,
                Err(e) => metric_err(e),
            }
        },
    )?;
    fn series(st: &mut HostState, id: i32) -> Option<(std::sync::Arc<Series>, Kind)> {
        let i = usize::try_from(id).ok()?;
        if let Some(Some(cached)) = st.series.get(i) {
            return Some(cached.clone());
        }
        let found = st.plugin.metrics.get(i as u32)?;
        if st.series.len() <= i {
            st.series.resize(i + 1, None);
        }
        st.series[i] = Some(found.clone());
        Some(found)
    }
    linker.func_wrap(
        m,
        import::COUNTER_ADD,
        |mut c: Caller<'_, HostState>, id: i32, v: i64| {
            if let Some((s, Kind::Counter)) = series(c.data_mut(), id) {
                s.counter_add(v.max(0) as u64);
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::GAUGE_SET,
        |mut c: Caller<'_, HostState>, id: i32, v: i64| {
            if let Some((s, Kind::Gauge)) = series(c.data_mut(), id) {
                s.gauge_set(v);
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::GAUGE_ADD,
        |mut c: Caller<'_, HostState>, id: i32, v: i64| {
            if let Some((s, Kind::Gauge)) = series(c.data_mut(), id) {
                s.gauge_add(v);
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::HISTOGRAM_OBSERVE,
        |mut c: Caller<'_, HostState>, id: i32, v: f64| {
            if let Some((s, Kind::Histogram)) = series(c.data_mut(), id) {
                s.observe(v);
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_GET,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32, dst: i32, cap: i32| -> i64 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY;
            };
            let Some(k) = range(data, kp, kl) else {
                return status::INVALID_MEMORY;
            };
            let key = data[k].to_vec();
            let mut result = status::NOT_FOUND;
            st.plugin
                .state
                .get_versioned(&key, |v, _| result = copy_out(data, dst, cap, v));
            result
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_GET_VERSIONED,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32, dst: i32, cap: i32, vp: i32| -> i64 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY;
            };
            let (Some(k), Some(vr)) = (range(data, kp, kl), range(data, vp, 8)) else {
                return status::INVALID_MEMORY;
            };
            let key = data[k].to_vec();
            let mut result = status::NOT_FOUND;
            let mut version = 0u64;
            st.plugin.state.get_versioned(&key, |v, ver| {
                result = copy_out(data, dst, cap, v);
                version = ver;
            });
            data[vr].copy_from_slice(&version.to_le_bytes());
            result
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_SET,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32, vp: i32, vl: i32, ttl: i64| -> i32 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY as i32;
            };
            let (Some(k), Some(v)) = (range(data, kp, kl), range(data, vp, vl)) else {
                return status::INVALID_MEMORY as i32;
            };
            if st.plugin.state.set(&data[k], &data[v], ttl) {
                0
            } else {
                status::NOT_ALLOWED as i32
            }
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_DELETE,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32| -> i32 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY as i32;
            };
            let Some(k) = range(data, kp, kl) else {
                return status::INVALID_MEMORY as i32;
            };
            st.plugin.state.delete(&data[k]) as i32
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_INCR,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32, delta: i64, ttl: i64| -> i64 {
            let Some((data, st)) = split(&mut c) else {
                return 0;
            };
            let Some(k) = range(data, kp, kl) else {
                return 0;
            };
            st.plugin.state.incr(&data[k], delta, ttl)
        },
    )?;
    linker.func_wrap(
        m,
        import::STATE_SET_IF_VERSION,
        |mut c: Caller<'_, HostState>, kp: i32, kl: i32, vp: i32, vl: i32, version: i64| -> i32 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY as i32;
            };
            let (Some(k), Some(v)) = (range(data, kp, kl), range(data, vp, vl)) else {
                return status::INVALID_MEMORY as i32;
            };
            st.plugin
                .state
                .set_if_version(&data[k], &data[v], version as u64) as i32
        },
    )?;
    linker.func_wrap(
        m,
        import::RATELIMIT_ACQUIRE,
        |mut c: Caller<'_, HostState>,
         bp: i32,
         bl: i32,
         cost: i32,
         per_sec: i32,
         burst: i32|
         -> i32 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY as i32;
            };
            let Some(b) = range(data, bp, bl) else {
                return status::INVALID_MEMORY as i32;
            };
            if cost < 0 || per_sec < 0 || burst <= 0 {
                return status::BAD_ARGUMENT as i32;
            }
            st.plugin
                .state
                .acquire(&data[b], cost as u32, per_sec as u32, burst as u32) as i32
        },
    )?;
    linker.func_wrap(
        m,
        import::CLIENT_INFO,
        |mut c: Caller<'_, HostState>, conn: i64, dst: i32, cap: i32| -> i32 {
            let Some((data, st)) = split(&mut c) else {
                return status::INVALID_MEMORY as i32;
            };
            let Some(f) = st.clients.client(conn as u64) else {
                return status::NOT_FOUND as i32;
            };
            let mut buf = Vec::with_capacity(64);
            let flags = ((f.user.is_some() as u32) * abi::client_info::HAS_USER)
                | ((f.name.is_some() as u32) * abi::client_info::HAS_NAME);
            buf.extend_from_slice(&f.db.to_le_bytes());
            buf.extend_from_slice(&flags.to_le_bytes());
            for s in [Some(&f.addr), f.user.as_ref(), f.name.as_ref()] {
                let s = s.map_or(&b""[..], |s| s.as_bytes());
                buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
                buf.extend_from_slice(s);
            }
            copy_out(data, dst, cap, &buf) as i32
        },
    )?;
    linker.func_wrap(m, import::NOW_MS, |_c: Caller<'_, HostState>| -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    })?;
    linker.func_wrap(m, import::NOW_US, |_c: Caller<'_, HostState>| -> i64 {
        START.elapsed().as_micros() as i64
    })?;
    linker.func_wrap(m, import::STAGE_US, |_c: Caller<'_, HostState>| -> i64 {
        crate::clock::stage()
            .saturating_duration_since(*START)
            .as_micros() as i64
    })?;
    Ok(())
}
