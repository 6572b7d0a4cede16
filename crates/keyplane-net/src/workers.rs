//! One worker thread per queue, each with its own state, a shared stop flag, and the workers'
//! final results (counters) returned on join.
//!
//! The closure runs once per thread with a [`WorkerCtx`]; it builds its own per-thread state
//! (opens its queue's [`crate::Port`], takes its own table `reader()`), loops until
//! [`WorkerCtx::is_stopped`], and returns its counters.
//!
//! ```
//! use keyplane_net::{Shutdown, workers::spawn_workers};
//! let stop = Shutdown::new();
//! let pool = spawn_workers(2, &stop, |ctx| {
//!     let mut loops = 0u64;
//!     while !ctx.is_stopped() && loops < 10 { loops += 1; }
//!     Ok(ctx.queue as u64 * 100 + loops)
//! }).unwrap();
//! let results: Vec<u64> = pool.join().into_iter().map(|r| r.unwrap()).collect();
//! assert_eq!(results, vec![10, 110]);
//! ```

use crate::{Error, Result, Shutdown};
use std::thread::JoinHandle;

/// What a worker closure gets.
#[derive(Debug, Clone)]
pub struct WorkerCtx {
    /// This worker's queue (0-based).
    pub queue: u32,
    /// Total number of workers.
    pub workers: u32,
    /// The shared stop flag.
    pub shutdown: Shutdown,
}

impl WorkerCtx {
    /// Stop requested?
    pub fn is_stopped(&self) -> bool {
        self.shutdown.is_stopped()
    }
}

/// Running workers.
pub struct WorkerPool<T> {
    handles: Vec<JoinHandle<Result<T>>>,
    shutdown: Shutdown,
}

/// Start `workers` threads named `kp-q{queue}`, each running `f(ctx)`. If a worker returns an
/// error, the others are asked to stop.
pub fn spawn_workers<T, F>(workers: usize, shutdown: &Shutdown, f: F) -> Result<WorkerPool<T>>
where
    T: Send + 'static,
    F: Fn(WorkerCtx) -> Result<T> + Send + Sync + 'static,
{
    if workers == 0 || workers > 1024 {
        return Err(Error::InvalidParameter(format!("{workers} workers: use 1 to 1024")));
    }
    let f = std::sync::Arc::new(f);
    let mut handles = Vec::with_capacity(workers);
    for q in 0..workers {
        let ctx = WorkerCtx { queue: q as u32, workers: workers as u32, shutdown: shutdown.clone() };
        let f = f.clone();
        let h = std::thread::Builder::new().name(format!("kp-q{q}")).spawn(move || {
            let stop = ctx.shutdown.clone();
            let r = f(ctx);
            if let Err(e) = &r {
                log::error!("worker {q} failed: {e}; stopping the others");
                stop.stop();
            }
            r
        });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                shutdown.stop();
                for h in handles {
                    let _ = h.join();
                }
                return Err(Error::Sys { what: format!("spawn worker {q}"), source: e });
            }
        }
    }
    Ok(WorkerPool { handles, shutdown: shutdown.clone() })
}

impl<T> WorkerPool<T> {
    /// Ask every worker to stop (they notice at their next check).
    pub fn stop(&self) {
        self.shutdown.stop();
    }
    /// Wait for every worker; their results in queue order. A panicked worker gives
    /// [`Error::WorkerPanicked`].
    pub fn join(self) -> Vec<Result<T>> {
        self.handles.into_iter().enumerate().map(|(i, h)| h.join().unwrap_or(Err(Error::WorkerPanicked(i)))).collect()
    }
    /// Number of workers.
    pub fn len(&self) -> usize {
        self.handles.len()
    }
    /// Never true (a pool has at least one worker); for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }
}
