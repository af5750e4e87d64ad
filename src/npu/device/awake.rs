//! Keeping a pool's threads awake through a burst of kernels: the device's compute cores,
//! and the helpers of a thread that computes its own kernels (`stream::own_pool`).
//!
//! A kernel handed to the compute cores (`Core::cores`) wakes a sleeping thread, and
//! the split halves of its parallel loops wake another: on a virtual machine a wake-up
//! is tens of microseconds, as long as the whole of many kernels. ONNX Runtime's
//! intra-op threads spin between kernels for the same reason. So the first kernel of a
//! burst puts all core threads but one into a polling loop ([`Awake::touch`]): each
//! runs the pool's work as it arrives (`rayon::yield_now`, which takes injected kernels
//! and stolen halves alike) and gives the CPU back to the scheduler when there is none
//! (`std::thread::yield_now`). A thread leaves the loop once no kernel has entered the
//! cores for [`GRACE`], and then sleeps as rayon's threads do.
//!
//! All but one: the host thread that issues the kernels (and computes the small ones
//! itself) is the other runnable thread. With every core thread polling, a two-core
//! machine ran three busy threads on two CPUs, and the host thread's share of a CPU
//! fell with it: the real-model medians got slower and twice as noisy. The thread left
//! out sleeps until rayon wakes it for a split half, which the polling thread, having
//! finished its own half, takes back if it is still waiting.
//!
//! In a thread's own pool the thread left out is that thread itself (index 0, which
//! runs no loop of rayon's): it computes the kernels, and every helper polls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the core threads keep polling after the last kernel entered the cores: the
/// gap between two large kernels of one execution (the small ones between them run on
/// the host's thread) or between two executions of a serving loop is well below it.
const GRACE: Duration = Duration::from_millis(2);

/// The polling state of one pool's threads.
#[derive(Debug)]
pub(crate) struct Awake {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    base: Instant,
    /// Nanoseconds after `base` until which the threads poll.
    until: AtomicU64,
    /// Core threads in the polling loop.
    polling: AtomicUsize,
}

impl Awake {
    pub(crate) fn new() -> Awake {
        Awake {
            shared: Arc::new(Shared {
                base: Instant::now(),
                until: AtomicU64::new(0),
                polling: AtomicUsize::new(0),
            }),
        }
    }

    /// Called as a kernel enters `cores`: extends the polling by [`GRACE`], and starts
    /// it on every core thread when none is polling.
    ///
    /// Two relaxed atomics per kernel when the threads are polling: the deadline is a
    /// hint (a thread that leaves a moment early just sleeps, and rayon wakes it for
    /// the next kernel as it would without polling), so no ordering is needed.
    pub(crate) fn touch(&self, cores: &rayon::ThreadPool) {
        let s = &self.shared;
        s.until
            .store(s.now() + GRACE.as_nanos() as u64, Ordering::Relaxed);
        let n = cores.current_num_threads();
        if n > 1
            && s.polling
                .compare_exchange(0, n - 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            let shared = self.shared.clone();
            cores.spawn_broadcast(move |ctx| {
                if ctx.index() > 0 {
                    shared.poll();
                }
            });
        }
    }
}

impl Shared {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// One core thread's polling loop (see the module).
    fn poll(&self) {
        loop {
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => {}
                Some(rayon::Yield::Idle) if self.now() < self.until.load(Ordering::Relaxed) => {
                    std::thread::yield_now();
                }
                _ => break,
            }
        }
        self.polling.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polling(a: &Awake) -> usize {
        a.shared.polling.load(Ordering::SeqCst)
    }

    /// A kernel entering the cores sets all their threads but one polling; work injected
    /// meanwhile runs; once nothing has entered for the grace period they leave the loop,
    /// and the next kernel starts them again. A pool of one thread never polls.
    #[test]
    fn core_threads_poll_through_a_burst_and_then_sleep() {
        let cores = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let awake = Awake::new();
        awake.touch(&cores);
        assert_eq!(polling(&awake), 2);
        let sum: u64 = cores.install(|| {
            use rayon::prelude::*;
            (0..10_000u64).into_par_iter().sum()
        });
        assert_eq!(sum, 49_995_000);
        let start = Instant::now();
        while polling(&awake) != 0 {
            assert!(start.elapsed() < Duration::from_secs(30), "still polling");
            std::thread::sleep(Duration::from_millis(1));
        }
        awake.touch(&cores);
        assert_eq!(polling(&awake), 2);
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let alone = Awake::new();
        alone.touch(&one);
        assert_eq!(polling(&alone), 0);
    }
}
