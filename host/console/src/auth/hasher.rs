//! The console's argon2 verifications, on a few threads of their own behind a short queue. A
//! verification takes tens of milliseconds of CPU and `m_cost` KiB of memory, so the number
//! run at once, not the number of callers, sets the console's CPU and memory under a login
//! flood. A call beyond the queue is refused at once ([`Busy`]) instead of waiting.
//!
//! Each thread hashes into one memory buffer of its own, grown to the largest `m_cost` it
//! has met and then reused, so the console holds at most threads × the largest `m_cost`.
//! Letting argon2 allocate per call was measured worse: glibc kept the freed 19 MiB blocks in
//! per-thread arenas and fragmented them, and the console grew to 400 MB with two threads.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use argon2::password_hash::phc::PasswordHash;
use argon2::{Algorithm, Argon2, Block, Params, Version};
use tokio::sync::oneshot;

/// Verification threads at most, whatever the core count: logins are rare, and each thread
/// holds up to `m_cost` of memory while it runs.
const MAX_THREADS: usize = 4;
/// Calls waiting for a thread, per thread.
const QUEUE_PER_THREAD: usize = 4;

/// Every thread is busy and the queue is full: try again shortly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Busy;

struct Job {
    password: String,
    hash: Arc<str>,
    reply: oneshot::Sender<bool>,
}

/// A handle to the verification threads; they exit when it is dropped.
pub(crate) struct Hasher {
    jobs: SyncSender<Job>,
    threads: usize,
    queue: usize,
}

impl Hasher {
    /// One thread per core, at most [`MAX_THREADS`], and a queue of [`QUEUE_PER_THREAD`] per
    /// thread.
    ///
    /// # Panics
    /// If the OS refuses to start a thread.
    pub(crate) fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let threads = cores.clamp(1, MAX_THREADS);
        Self::new(threads, threads * QUEUE_PER_THREAD)
    }

    /// `threads` verifying at once, `queue` more waiting (at least 1 each).
    ///
    /// # Panics
    /// If the OS refuses to start a thread.
    pub(crate) fn new(threads: usize, queue: usize) -> Self {
        let threads = threads.max(1);
        let queue = queue.max(1);
        let (jobs, rx) = mpsc::sync_channel::<Job>(queue);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("console-argon2-{i}"))
                .spawn(move || work(&rx))
                .expect("starting a password verification thread");
        }
        Self {
            jobs,
            threads,
            queue,
        }
    }

    /// (threads, queue length).
    pub(crate) fn capacity(&self) -> (usize, usize) {
        (self.threads, self.queue)
    }

    /// Whether `password` matches the PHC string `hash`, once a thread is free.
    ///
    /// # Errors
    /// [`Busy`] at once when every thread is busy and the queue is full.
    pub(crate) async fn verify(&self, password: String, hash: Arc<str>) -> Result<bool, Busy> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            password,
            hash,
            reply,
        };
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(Busy),
            Err(TrySendError::Disconnected(_)) => {
                unreachable!("the verification threads live as long as the Hasher")
            }
        }
        // A thread that panicked mid-verification drops the sender: that is no match.
        Ok(answer.await.unwrap_or(false))
    }
}

/// One verification thread: takes jobs until the `Hasher` is dropped.
fn work(rx: &Mutex<Receiver<Job>>) {
    let mut memory: Vec<Block> = Vec::new();
    loop {
        // The lock is held while waiting for a job, so the other threads wait on the lock
        // instead: one recv at a time, which is all a queue needs.
        let job = match rx.lock().expect("job queue lock poisoned").recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        if job.reply.is_closed() {
            // The caller gave up (its client went away): spend nothing on it.
            continue;
        }
        let matched = verify_into(&job.password, &job.hash, &mut memory);
        let _ = job.reply.send(matched);
    }
}

/// Whether `password` matches the PHC string `phc`, hashing into `memory` (grown as needed).
/// What `PasswordVerifier::verify_password` does, but without its allocation per call.
fn verify_into(password: &str, phc: &str, memory: &mut Vec<Block>) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&hash.salt, &hash.hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(params)) = (
        Algorithm::try_from(hash.algorithm.as_str()),
        Params::try_from(&hash),
    ) else {
        return false;
    };
    let version = match hash.version.map(Version::try_from) {
        None => Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let blocks = params.block_count();
    if memory.len() < blocks {
        // Once per thread and size: config.rs caps m_cost, so this is bounded.
        memory.resize(blocks, Block::new());
    }
    let mut out = vec![0u8; expected.len()];
    let ok = Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt.as_ref(),
            &mut out,
            &mut memory[..blocks],
        )
        .is_ok();
    ok && tessera_model::secret::same(&out, expected.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::hash_password;

    #[test]
    fn verifying_into_a_reused_buffer_agrees_with_argon2() {
        let mut memory = Vec::new();
        let small = {
            let params = Params::new(8 * 1024, 1, 1, None).unwrap();
            use argon2::password_hash::PasswordHasher;
            Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
                .hash_password(b"pw")
                .unwrap()
                .to_string()
        };
        let default = hash_password("pw").unwrap();
        for phc in [&default, &small, &default] {
            assert!(verify_into("pw", phc, &mut memory), "{phc}");
            assert!(!verify_into("pW", phc, &mut memory), "{phc}");
            assert_eq!(
                verify_into("pw", phc, &mut memory),
                crate::config::verify_password("pw", phc)
            );
        }
        assert!(!verify_into("pw", "not a hash", &mut memory));
        assert_eq!(memory.len(), 19 * 1024, "grown once, to the largest m_cost");
    }

    #[tokio::test]
    async fn verifies_and_refuses_beyond_the_queue_at_once() {
        let hash: Arc<str> = hash_password("pw").unwrap().into();
        let h = Hasher::new(1, 1);
        assert_eq!(h.verify("pw".into(), hash.clone()).await, Ok(true));
        assert_eq!(h.verify("no".into(), hash.clone()).await, Ok(false));
        // One running and one queued: a third call is refused. Start them all before any is
        // polled to completion, so the first two hold the thread and the queue slot.
        let calls: Vec<_> = (0..8)
            .map(|_| h.verify("pw".into(), hash.clone()))
            .collect();
        let answers = futures_util::future::join_all(calls).await;
        assert!(answers.contains(&Err(Busy)), "{answers:?}");
        assert!(answers.contains(&Ok(true)), "{answers:?}");
    }
}
