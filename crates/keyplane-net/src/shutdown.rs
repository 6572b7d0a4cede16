//! Stop and reload flags: SIGINT / SIGTERM request a stop, SIGHUP a reload.
//!
//! The signal handlers only store into static atomics (async-signal-safe); [`Shutdown`] reads
//! them together with its own flag, so a program (or a test) can also stop itself with
//! [`Shutdown::stop`].
//!
//! ```
//! use keyplane_net::Shutdown;
//! let s = Shutdown::new();
//! let worker_view = s.clone();
//! assert!(!worker_view.is_stopped());
//! s.stop();
//! assert!(worker_view.is_stopped());
//! ```

use crate::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static SIG_STOP: AtomicBool = AtomicBool::new(false);
static SIG_HUP: AtomicU64 = AtomicU64::new(0);
static SIG_LAST: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIG_LAST.store(sig as u64, Ordering::Relaxed);
    if sig == libc::SIGHUP {
        SIG_HUP.fetch_add(1, Ordering::Relaxed);
    } else {
        SIG_STOP.store(true, Ordering::Relaxed);
    }
}

/// A shared stop flag (and reload counter when signals are installed). Cheap to clone; every
/// clone sees the same state.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    flag: Arc<AtomicBool>,
    signals: bool,
    hup_seen: Arc<AtomicU64>,
}

impl Shutdown {
    /// A flag that only [`stop`](Shutdown::stop) sets.
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag that SIGINT and SIGTERM also set, and whose [`take_reload`](Shutdown::take_reload)
    /// reports SIGHUP. Installs process-wide handlers (`SA_RESTART`).
    pub fn with_signals() -> Result<Self> {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; we set the
            // handler to an extern "C" fn that only touches atomics (async-signal-safe).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(Error::last_os(format!("sigaction({sig})")));
                }
            }
        }
        let s = Shutdown { flag: Arc::new(AtomicBool::new(false)), signals: true, hup_seen: Arc::default() };
        s.hup_seen.store(SIG_HUP.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(s)
    }

    /// Has a stop been requested (by [`stop`](Shutdown::stop) or a signal)?
    pub fn is_stopped(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || (self.signals && SIG_STOP.load(Ordering::Relaxed))
    }

    /// Request a stop.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// `true` once per batch of SIGHUPs received since the last call (always `false` without
    /// signals). Meant for one control thread.
    pub fn take_reload(&self) -> bool {
        if !self.signals {
            return false;
        }
        let now = SIG_HUP.load(Ordering::Relaxed);
        self.hup_seen.swap(now, Ordering::Relaxed) != now
    }

    /// The last signal number received (0: none), for the exit message.
    pub fn last_signal() -> i32 {
        SIG_LAST.load(Ordering::Relaxed) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sighup_is_a_reload_and_sigterm_a_stop() {
        let s = Shutdown::with_signals().unwrap();
        assert!(!s.take_reload());
        // SAFETY: raising a signal whose handler we installed above.
        unsafe { libc::raise(libc::SIGHUP) };
        assert!(s.take_reload());
        assert!(!s.take_reload());
        assert!(!s.is_stopped());
        // SAFETY: as above.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(s.is_stopped());
        assert_eq!(Shutdown::last_signal(), libc::SIGTERM);
        assert!(!Shutdown::new().is_stopped(), "a flag without signals ignores them");
    }
}
