//! The calling thread's CPU time: what a plugin call's budget is measured in (epochs are
//! wall-clock, and a descheduled worker must not kill a healthy call).

use std::time::Duration;

/// CPU time consumed by the calling thread so far.
#[allow(unsafe_code)]
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is supported by every Linux kernel Tessera runs on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_with_work_not_with_sleep() {
        let a = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(20));
        let b = thread_cpu_time();
        assert!(
            b - a < Duration::from_millis(15),
            "sleeping used {:?}",
            b - a
        );
        // Spin until 5 ms of CPU were used, with a wall-clock bound: on a loaded machine (2
        // shared cores) 20 ms of wall clock gave the thread only ~4 ms of CPU, which failed a
        // fixed-wall-time version of this test although the clock was right.
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while thread_cpu_time() - b < Duration::from_millis(5)
            && start.elapsed() < Duration::from_secs(10)
        {
            for _ in 0..10_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
        }
        let c = thread_cpu_time();
        assert!(
            c - b >= Duration::from_millis(5),
            "spinning for {:?} used {:?} of CPU ({x})",
            start.elapsed(),
            c - b
        );
    }
}
