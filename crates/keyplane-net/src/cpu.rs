//! CPU-time readers for benchmarks (Linux `/proc`): the scheduler's exact
//! runtime of a thread, tick counts of a thread and of the machine's
//! softirq / kernel time, `ksoftirqd`, pinning and the load average.
//!
//! **Which one to use.** Without `CONFIG_IRQ_TIME_ACCOUNTING` (as on this
//! project's VMs) the kernel charges softirq work run on a thread's way out
//! of a system call (a veth delivers in the sender's softirq) both to that
//! thread (its `stime`, its `schedstat` runtime) and to the CPU's `softirq`
//! column of `/proc/stat`. So add a thread's time to `/proc/stat` softirq of
//! the same CPU only knowing that the two overlap; [`thread_runtime_ns`] plus
//! [`ksoftirqd_runtime_ns`] of its CPU counts that softirq work once.

use std::path::Path;

/// Clock ticks per second of `/proc` tick counts (`USER_HZ`, 100 on Linux).
pub const USER_HZ: f64 = 100.0;

/// Thread ids of this process whose name (`comm`) satisfies `pred`.
pub fn threads_named(pred: impl Fn(&str) -> bool) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    dir.flatten()
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| pred(c.trim())))
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The first thread of this process named exactly `name`.
pub fn thread_named(name: &str) -> Option<i32> {
    threads_named(|c| c == name).into_iter().next()
}

fn first_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// Runtime in ns of thread `tid` (any process) from `schedstat`: the
/// scheduler's exact count, including softirq work run in its context.
/// 0 when the thread is gone.
pub fn thread_runtime_ns(tid: i32) -> u64 {
    first_u64(Path::new(&format!("/proc/{tid}/schedstat")))
}

/// CPU time in ns the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`):
/// time it was preempted is not in it, so a timed loop on a loaded machine
/// reads what the loop itself cost.
pub fn this_thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `utime + stime` of thread `tid` in ticks ([`USER_HZ`]); 0 when gone.
pub fn thread_ticks(tid: i32) -> u64 {
    let Ok(st) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return 0 };
    let Some((_, rest)) = st.rsplit_once(')') else { return 0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Process id of `ksoftirqd/<cpu>`, if found.
pub fn ksoftirqd(cpu: usize) -> Option<i32> {
    let want = format!("ksoftirqd/{cpu}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == want))
        .and_then(|e| e.file_name().to_str()?.parse().ok())
}

/// Runtime in ns of `ksoftirqd/<cpu>` (softirq work the kernel deferred
/// to it); 0 when not found.
pub fn ksoftirqd_runtime_ns(cpu: usize) -> u64 {
    ksoftirqd(cpu).map_or(0, thread_runtime_ns)
}

/// Per-CPU columns of `/proc/stat` (`cpu0`, `cpu1`, …), in ticks:
/// `[user, nice, system, idle, iowait, irq, softirq, steal]`.
pub fn cpu_ticks() -> Vec<[u64; 8]> {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    s.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let mut c = [0u64; 8];
            for (d, x) in c.iter_mut().zip(l.split_whitespace().skip(1)) {
                *d = x.parse().unwrap_or(0);
            }
            c
        })
        .collect()
}

/// Softirq ticks per CPU.
pub fn softirq_ticks() -> Vec<u64> {
    cpu_ticks().iter().map(|c| c[6]).collect()
}

/// Machine-wide system + irq + softirq ticks.
pub fn kernel_ticks() -> u64 {
    cpu_ticks().iter().map(|c| c[2] + c[5] + c[6]).sum()
}

/// Pins thread `tid` (0: the calling thread) to `cpu`.
pub fn pin(tid: i32, cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no CPU {cpu}")));
    }
    // SAFETY: cpu_set_t is plain old data (all-zero is the empty set);
    // CPU_SET writes inside it (cpu checked above); sched_setaffinity reads it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The three load averages of `/proc/loadavg`, space-separated.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The readers see this thread and the machine: a named thread that
    /// spins is found by name and its runtime and ticks grow, the CPU table
    /// has a row per CPU, the load average has three numbers.
    #[test]
    fn readers_see_a_spinning_thread() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name("kp-cpu-test".into())
            .spawn(move || {
                let t = std::time::Instant::now();
                let mut x = 0u64;
                while rx.try_recv().is_err() && t.elapsed() < std::time::Duration::from_secs(5) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                std::hint::black_box(x);
            })
            .unwrap();
        let mut tid = None;
        for _ in 0..100 {
            tid = thread_named("kp-cpu-test");
            if tid.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let tid = tid.expect("the spinning thread by name");
        let r0 = thread_runtime_ns(tid);
        let t = std::time::Instant::now();
        while thread_runtime_ns(tid) <= r0 + 30_000_000 && t.elapsed() < std::time::Duration::from_secs(4) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(thread_runtime_ns(tid) > r0, "runtime of a spinning thread grows");
        let c0 = this_thread_cpu_ns();
        let mut x = 1u64;
        while this_thread_cpu_ns() == c0 {
            x = x.wrapping_mul(3).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(this_thread_cpu_ns() > c0);
        let _ = tx.send(());
        h.join().unwrap();
        assert_eq!(thread_runtime_ns(tid), 0, "a finished thread reads 0");
        assert!(!cpu_ticks().is_empty(), "a cpuN row per CPU");
        assert_eq!(softirq_ticks().len(), cpu_ticks().len());
        assert_eq!(loadavg().split(' ').filter(|x| x.parse::<f64>().is_ok()).count(), 3);
        assert!(pin(0, libc::CPU_SETSIZE as usize).is_err());
    }
}
