//! What the machine does with a thread started beside a busy one, printed
//! with the figures because it shapes them.
//!
//! A search runs its meaning tier on a thread of its own beside the word
//! tier, and splits its scans between two threads; a pass lists folders on
//! two threads and reads beside its writer. All of that assumes a new
//! thread runs on an idle CPU as soon as it is started. Some kernels keep a
//! new thread on its parent's CPU until the parent sleeps or the load is
//! balanced (the 2-core virtual machines these figures were first taken on
//! boot with `sched_vcpu_pack`, and a thread started beside a busy one
//! there waited a median of about 3 ms, as long as the parent stayed busy):
//! there the parallel parts of a question run one after the other, and its
//! times move with where the scheduler put each thread.

use std::time::{Duration, Instant};

/// How long the parent stays busy after starting its thread.
pub const BUSY: Duration = Duration::from_millis(3);

/// How long each of `reps` threads, started while their parent computes
/// for [`BUSY`], waited before it ran (ms), in the order taken.
pub fn spawn_waits(reps: usize) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let started = Instant::now();
            let child = std::thread::spawn(move || started.elapsed());
            spin_until(started + BUSY);
            let waited = child.join().unwrap_or_default();
            // Apart, so that one trial's thread has gone before the next.
            std::thread::sleep(Duration::from_millis(2));
            waited.as_secs_f64() * 1000.0
        })
        .collect()
}

/// Computes (without sleeping or yielding) until `until`.
fn spin_until(until: Instant) {
    let mut n = 0u64;
    while Instant::now() < until {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trial_gives_a_wait_no_longer_than_the_trial() {
        let started = Instant::now();
        let waits = spawn_waits(5);
        let took = started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(waits.len(), 5);
        // Each wait lies within its own trial, so together they fit in
        // the time all five took.
        assert!(waits.iter().all(|w| *w >= 0.0));
        assert!(waits.iter().sum::<f64>() <= took, "{waits:?} in {took} ms");
    }
}
