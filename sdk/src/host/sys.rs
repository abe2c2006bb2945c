//! The raw host imports (module `tessera`, `sdk/ABI.md`), behind safe functions taking slices.
//! On wasm32 they are the real imports; natively they call the fake host of the `testing`
//! feature, or stubs (so a plugin crate still builds and links for `cargo check` / docs).

#[cfg(target_arch = "wasm32")]
pub(crate) use wasm::*;

#[cfg(all(not(target_arch = "wasm32"), feature = "testing"))]
pub(crate) use crate::testing::fake::sys::*;

#[cfg(all(not(target_arch = "wasm32"), not(feature = "testing")))]
pub(crate) use stub::*;

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod wasm {
    // Pointers and `usize` lengths are both `i32` on wasm32, which is what the ABI declares.
    #[link(wasm_import_module = "tessera")]
    unsafe extern "C" {
        #[link_name = "log"]
        fn tessera_log(level: i32, ptr: *const u8, len: usize);
        #[link_name = "log_enabled"]
        fn tessera_log_enabled(level: i32) -> i32;
        #[link_name = "metric_define"]
        fn tessera_metric_define(
            kind: i32,
            name_ptr: *const u8,
            name_len: usize,
            help_ptr: *const u8,
            help_len: usize,
            labels_ptr: *const u8,
            labels_len: usize,
            buckets_ptr: *const f64,
            nbuckets: usize,
        ) -> i64;
        #[link_name = "metric_series"]
        fn tessera_metric_series(metric: i32, values_ptr: *const u8, values_len: usize) -> i64;
        #[link_name = "counter_add"]
        fn tessera_counter_add(series: i32, delta: i64);
        #[link_name = "gauge_set"]
        fn tessera_gauge_set(series: i32, v: i64);
        #[link_name = "gauge_add"]
        fn tessera_gauge_add(series: i32, v: i64);
        #[link_name = "histogram_observe"]
        fn tessera_histogram_observe(series: i32, v: f64);
        #[link_name = "state_get"]
        fn tessera_state_get(kp: *const u8, kl: usize, dst: *mut u8, cap: usize) -> i64;
        #[link_name = "state_set"]
        fn tessera_state_set(kp: *const u8, kl: usize, vp: *const u8, vl: usize, ttl: i64) -> i32;
        #[link_name = "state_delete"]
        fn tessera_state_delete(kp: *const u8, kl: usize) -> i32;
        #[link_name = "state_incr"]
        fn tessera_state_incr(kp: *const u8, kl: usize, delta: i64, ttl: i64) -> i64;
        #[link_name = "state_get_versioned"]
        fn tessera_state_get_versioned(
            kp: *const u8,
            kl: usize,
            dst: *mut u8,
            cap: usize,
            version: *mut u64,
        ) -> i64;
        #[link_name = "state_set_if_version"]
        fn tessera_state_set_if_version(
            kp: *const u8,
            kl: usize,
            vp: *const u8,
            vl: usize,
            version: i64,
        ) -> i32;
        #[link_name = "ratelimit_acquire"]
        fn tessera_ratelimit_acquire(
            bp: *const u8,
            bl: usize,
            cost: u32,
            rate: u32,
            burst: u32,
        ) -> i32;
        #[link_name = "client_info"]
        fn tessera_client_info(conn: i64, dst: *mut u8, cap: usize) -> i32;
        #[link_name = "now_ms"]
        fn tessera_now_ms() -> i64;
        #[link_name = "now_us"]
        fn tessera_now_us() -> i64;
        #[link_name = "stage_us"]
        fn tessera_stage_us() -> i64;
    }

    // SAFETY (every function below): the imports only read `len` bytes at each `(ptr, len)`
    // pair and write at most `cap` bytes at each `(dst, cap)` pair (8 at `version`), all of
    // which come from live slices / references borrowed for the call; the host checks every
    // range against the guest's memory and answers -6 instead of touching anything outside.
    // No import calls back into the guest.

    pub(crate) fn log(level: i32, msg: &[u8]) {
        // SAFETY: see above.
        unsafe { tessera_log(level, msg.as_ptr(), msg.len()) }
    }

    pub(crate) fn log_enabled(level: i32) -> i32 {
        // SAFETY: no pointers.
        unsafe { tessera_log_enabled(level) }
    }

    pub(crate) fn metric_define(
        kind: i32,
        name: &[u8],
        help: &[u8],
        labels: &[u8],
        buckets: &[f64],
    ) -> i64 {
        // SAFETY: see above.
        unsafe {
            tessera_metric_define(
                kind,
                name.as_ptr(),
                name.len(),
                help.as_ptr(),
                help.len(),
                labels.as_ptr(),
                labels.len(),
                buckets.as_ptr(),
                buckets.len(),
            )
        }
    }

    pub(crate) fn metric_series(metric: i32, values: &[u8]) -> i64 {
        // SAFETY: see above.
        unsafe { tessera_metric_series(metric, values.as_ptr(), values.len()) }
    }

    pub(crate) fn counter_add(series: i32, delta: i64) {
        // SAFETY: no pointers.
        unsafe { tessera_counter_add(series, delta) }
    }

    pub(crate) fn gauge_set(series: i32, v: i64) {
        // SAFETY: no pointers.
        unsafe { tessera_gauge_set(series, v) }
    }

    pub(crate) fn gauge_add(series: i32, v: i64) {
        // SAFETY: no pointers.
        unsafe { tessera_gauge_add(series, v) }
    }

    pub(crate) fn histogram_observe(series: i32, v: f64) {
        // SAFETY: no pointers.
        unsafe { tessera_histogram_observe(series, v) }
    }

    pub(crate) fn state_get(key: &[u8], dst: &mut [u8]) -> i64 {
        // SAFETY: see above.
        unsafe { tessera_state_get(key.as_ptr(), key.len(), dst.as_mut_ptr(), dst.len()) }
    }

    pub(crate) fn state_set(key: &[u8], value: &[u8], ttl_ms: i64) -> i32 {
        // SAFETY: see above.
        unsafe { tessera_state_set(key.as_ptr(), key.len(), value.as_ptr(), value.len(), ttl_ms) }
    }

    pub(crate) fn state_delete(key: &[u8]) -> i32 {
        // SAFETY: see above.
        unsafe { tessera_state_delete(key.as_ptr(), key.len()) }
    }

    pub(crate) fn state_incr(key: &[u8], delta: i64, ttl_ms: i64) -> i64 {
        // SAFETY: see above.
        unsafe { tessera_state_incr(key.as_ptr(), key.len(), delta, ttl_ms) }
    }

    pub(crate) fn state_get_versioned(key: &[u8], dst: &mut [u8], version: &mut u64) -> i64 {
        // SAFETY: see above.
        unsafe {
            tessera_state_get_versioned(
                key.as_ptr(),
                key.len(),
                dst.as_mut_ptr(),
                dst.len(),
                version,
            )
        }
    }

    pub(crate) fn state_set_if_version(key: &[u8], value: &[u8], version: u64) -> i32 {
        // SAFETY: see above.
        unsafe {
            tessera_state_set_if_version(
                key.as_ptr(),
                key.len(),
                value.as_ptr(),
                value.len(),
                version as i64,
            )
        }
    }

    pub(crate) fn ratelimit_acquire(bucket: &[u8], cost: u32, per_second: u32, burst: u32) -> i32 {
        // SAFETY: see above.
        unsafe { tessera_ratelimit_acquire(bucket.as_ptr(), bucket.len(), cost, per_second, burst) }
    }

    pub(crate) fn client_info(conn: u64, dst: &mut [u8]) -> i32 {
        // SAFETY: see above.
        unsafe { tessera_client_info(conn as i64, dst.as_mut_ptr(), dst.len()) }
    }

    pub(crate) fn now_ms() -> i64 {
        // SAFETY: no pointers.
        unsafe { tessera_now_ms() }
    }

    pub(crate) fn now_us() -> i64 {
        // SAFETY: no pointers.
        unsafe { tessera_now_us() }
    }

    pub(crate) fn stage_us() -> i64 {
        // SAFETY: no pointers.
        unsafe { tessera_stage_us() }
    }
}

#[cfg(all(not(target_arch = "wasm32"), not(feature = "testing")))]
mod stub {
    //! Native builds without the fake host: nothing is stored, nothing is logged.
    use tessera_plugin_abi::status::UNIMPLEMENTED;

    pub(crate) fn log(_: i32, _: &[u8]) {}
    pub(crate) fn log_enabled(_: i32) -> i32 {
        0
    }
    pub(crate) fn metric_define(_: i32, _: &[u8], _: &[u8], _: &[u8], _: &[f64]) -> i64 {
        UNIMPLEMENTED
    }
    pub(crate) fn metric_series(_: i32, _: &[u8]) -> i64 {
        UNIMPLEMENTED
    }
    pub(crate) fn counter_add(_: i32, _: i64) {}
    pub(crate) fn gauge_set(_: i32, _: i64) {}
    pub(crate) fn gauge_add(_: i32, _: i64) {}
    pub(crate) fn histogram_observe(_: i32, _: f64) {}
    pub(crate) fn state_get(_: &[u8], _: &mut [u8]) -> i64 {
        UNIMPLEMENTED
    }
    pub(crate) fn state_set(_: &[u8], _: &[u8], _: i64) -> i32 {
        UNIMPLEMENTED as i32
    }
    pub(crate) fn state_delete(_: &[u8]) -> i32 {
        UNIMPLEMENTED as i32
    }
    pub(crate) fn state_incr(_: &[u8], _: i64, _: i64) -> i64 {
        UNIMPLEMENTED
    }
    pub(crate) fn state_get_versioned(_: &[u8], _: &mut [u8], _: &mut u64) -> i64 {
        UNIMPLEMENTED
    }
    pub(crate) fn state_set_if_version(_: &[u8], _: &[u8], _: u64) -> i32 {
        UNIMPLEMENTED as i32
    }
    pub(crate) fn ratelimit_acquire(_: &[u8], _: u32, _: u32, _: u32) -> i32 {
        UNIMPLEMENTED as i32
    }
    pub(crate) fn client_info(_: u64, _: &mut [u8]) -> i32 {
        UNIMPLEMENTED as i32
    }
    pub(crate) fn now_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
    pub(crate) fn now_us() -> i64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_micros() as i64
    }
    pub(crate) fn stage_us() -> i64 {
        now_us()
    }
}
