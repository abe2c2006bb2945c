//! The migration status against the truth on the servers: a group drained of its last slots
//! while clients write, its done %, keys left and ETA compared at several points of the move
//! with what the target holds of the moving slots (counted by SCAN on it); a migration that
//! would move nothing is refused with its reason.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::json;
use tessera_wire::migration::{MigrationRun, MigrationStatus};

use crate::migration::{conn, idle, owners, status, wait_for};
use crate::support::{ControlPlane, slot};

/// The drained range: group 1's last slots.
const FROM: u32 = 400;
const TO: u32 = 511;
/// Keys in the drained slots, and in the target's own slots.
const MOVING_KEYS: usize = 10_000;
const OTHER_KEYS: usize = 2_000;
/// The copy's cap, so that the move lasts long enough to be looked at many times.
const CAP_KEYS_PER_SEC: u64 = 1_500;

/// `n` keys `p:<i>` whose slot is (or, `inside == false`, is not) in FROM..=TO.
fn keys(n: usize, inside: bool) -> Vec<String> {
    (0..)
        .map(|i| format!("p:{i}"))
        .filter(|k| (FROM..=TO).contains(&slot(k.as_bytes())) == inside)
        .take(n)
        .collect()
}

/// Overwrites keys of `keys` (one pipelined batch of 10 at a time, a short pause between)
/// until `stop`; returns the errors it got. Overwrites only: the moving slots' key count
/// stays what it was, so the target's count of them is the truth of what was copied.
fn writer(addr: SocketAddr, keys: Vec<String>, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut c = conn(addr);
    let mut errors = Vec::new();
    let mut next = 0;
    let until = Instant::now() + Duration::from_secs(300);
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        let mut p = redis::pipe();
        for _ in 0..10 {
            p.set(&keys[next % keys.len()], next).ignore();
            next += 7;
        }
        if let Err(e) = p.query::<()>(&mut c) {
            errors.push(e.to_string());
            if errors.len() > 20 {
                break;
            }
            c = conn(addr);
        }
        thread::sleep(Duration::from_millis(20));
    }
    errors
}

/// One look at the move: the status before and after counting the target.
struct Sample {
    at: Instant,
    before: MigrationRun,
    after: MigrationRun,
    eta_before: Option<f64>,
    truth_copied: u64,
}

fn run_of(st: &MigrationStatus) -> MigrationRun {
    st.run
        .clone()
        .unwrap_or_else(|| panic!("a migration runs but the status has no run: {st:?}"))
}

#[test]
fn draining_a_group_under_writes_reports_done_keys_left_and_eta_as_the_servers_show_them() {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, FROM - 1, 2);
    cp.assign(FROM, TO, 1);
    cp.assign(TO + 1, 1023, 2);
    let moving = keys(MOVING_KEYS, true);
    let other = keys(OTHER_KEYS, false);
    {
        let mut c = conn(cp.proxies[0].addr());
        for chunk in moving.chunks(1000).chain(other.chunks(1000)) {
            let pairs: Vec<(&String, &str)> = chunk.iter().map(|k| (k, "v")).collect();
            let _: () = c.mset(&pairs).expect("preload MSET");
        }
    }
    assert_eq!(cp.servers[0].dbsize() as usize, MOVING_KEYS);
    assert_eq!(cp.servers[1].keys_in_slots(FROM..=TO), 0);

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|i| {
            let (addr, stop) = (cp.proxies[i].addr(), stop.clone());
            let mine: Vec<String> = moving.iter().skip(i).step_by(2).cloned().collect();
            thread::spawn(move || writer(addr, mine, stop))
        })
        .collect();

    let started = Instant::now();
    cp.api()
        .post(
            "/api/migrations",
            &json!({"from": FROM, "to": TO, "group": 2, "max_keys_per_sec": CAP_KEYS_PER_SEC}),
        )
        .ok();
    let total = MOVING_KEYS as u64;
    let mut samples: Vec<Sample> = Vec::new();
    let mut all_copied_at = None;
    // Bounded: 10 000 keys at 1500 keys/s take about 7 s; 90 s is far past any machine.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "the drain did not finish: {:?}",
            status(&cp)
        );
        let before = status(&cp);
        if before.slots.is_empty() {
            break;
        }
        let truth_copied = cp.servers[1].keys_in_slots(FROM..=TO);
        let after = status(&cp);
        let at = Instant::now();
        if truth_copied == total && all_copied_at.is_none() {
            all_copied_at = Some(at);
        }
        if let (Some(b), Some(a)) = (before.run.as_ref(), after.run.as_ref())
            && b.running
            && a.running
        {
            samples.push(Sample {
                at,
                before: b.clone(),
                after: a.clone(),
                eta_before: before.eta_secs,
                truth_copied,
            });
        }
        thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let errors = w.join().expect("writer thread");
        assert!(errors.is_empty(), "the writers got errors: {errors:?}");
    }
    let all_copied_at = all_copied_at.unwrap_or_else(Instant::now);
    let copy_secs = all_copied_at.duration_since(started).as_secs_f64();

    // The truth at the end: every key of the drained slots is on the target, none left on
    // the source, and the status says so.
    assert_eq!(cp.servers[1].keys_in_slots(FROM..=TO), total);
    wait_for("the source's cleanup", Duration::from_secs(30), || {
        cp.servers[0].dbsize() == 0
    });
    assert!(
        owners(&cp)[FROM as usize..=TO as usize]
            .iter()
            .all(|g| *g == Some(2))
    );
    let end = status(&cp);
    let last = run_of(&end);
    assert!(!last.running, "{last:?}");
    assert_eq!(last.percent_done, 100.0, "{last:?}");
    assert_eq!((last.slots, last.slots_done), (112, 112), "{last:?}");
    assert_eq!(last.keys_total, Some(total), "{last:?}");
    assert_eq!(last.keys_copied, total, "{last:?}");
    assert_eq!(
        end.keys_per_sec, 0.0,
        "nothing moves once it ended: {end:?}"
    );
    assert_eq!(end.keys_left, None);

    // Along the way: within 10 % of the move (its keys, its copy time) of the truth, the
    // status read just before and just after the target was counted bracketing it.
    let tol_keys = total as f64 * 0.10;
    let tol_secs = copy_secs * 0.10;
    let mut mid_move = 0;
    let mut etas = 0;
    for s in &samples {
        let truth = s.truth_copied as f64;
        let (lo, hi) = (
            s.before.keys_copied.min(s.after.keys_copied) as f64,
            s.before.keys_copied.max(s.after.keys_copied) as f64,
        );
        let ctx = |what: &str| {
            format!(
                "{what}: truth {} of {total} copied, status before {:?} after {:?}",
                s.truth_copied, s.before, s.after
            )
        };
        assert!(
            truth >= lo - tol_keys && truth <= hi + tol_keys,
            "{}",
            ctx("keys copied")
        );
        for r in [&s.before, &s.after] {
            assert_eq!(r.keys_total, Some(total), "{}", ctx("keys total"));
            assert_eq!(r.slots, 112, "{}", ctx("slots"));
        }
        let left_truth = total as f64 - truth;
        let (left_lo, left_hi) = (
            s.after.keys_left.expect("keys left while running") as f64,
            s.before.keys_left.expect("keys left while running") as f64,
        );
        assert!(
            left_truth >= left_lo - tol_keys && left_truth <= left_hi + tol_keys,
            "{}",
            ctx("keys left")
        );
        let pct_truth = truth / total as f64 * 100.0;
        let (p_lo, p_hi) = (
            s.before.percent_done.min(s.after.percent_done),
            s.before.percent_done.max(s.after.percent_done),
        );
        assert!(
            pct_truth >= p_lo - 10.0 && pct_truth <= p_hi + 10.0,
            "{}",
            ctx("percent done")
        );
        if (5.0..95.0).contains(&pct_truth) {
            mid_move += 1;
            // The ETA: the time the copy of every key actually took from here.
            if let Some(eta) = s.eta_before
                && s.at.duration_since(started) > Duration::from_secs(2)
            {
                let truth_eta = all_copied_at.saturating_duration_since(s.at).as_secs_f64();
                assert!(
                    (eta - truth_eta).abs() <= tol_secs + 0.5,
                    "ETA {eta:.1} s, but every key was copied {truth_eta:.1} s later (the \
                     copy took {copy_secs:.1} s): {:?}",
                    s.before
                );
                etas += 1;
            }
        }
    }
    assert!(
        mid_move >= 3,
        "the move was looked at only {mid_move} times half-way; samples: {}",
        samples.len()
    );
    assert!(etas >= 2, "only {etas} ETAs were compared");

    // A finished slot stays counted as done, never as left again ("slots left 200/200" for
    // finished slots): the count of slots done never goes down along the move.
    let done: Vec<usize> = samples
        .iter()
        .flat_map(|s| [s.before.slots_done, s.after.slots_done])
        .collect();
    assert!(
        done.windows(2).all(|w| w[0] <= w[1]),
        "slots done went down: {done:?}"
    );

    // Moving the slots again moves nothing: refused with the reason, not a success.
    let msg = cp
        .api()
        .post(
            "/api/migrations",
            &json!({"from": FROM, "to": TO, "group": 2}),
        )
        .expect_error(409, "conflict");
    assert!(msg.contains("nothing to move"), "{msg}");
    assert!(idle(&cp));
}
