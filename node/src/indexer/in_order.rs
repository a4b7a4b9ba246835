//! Runs numbered jobs on a few threads at once and hands their results on
//! in job order.
//!
//! A pass with nothing new is mostly the walk of the agents' folders. One
//! source after another, the two large stores of a home (Claude Code's and
//! Codex's) were walked in turn, each by its own small pool whose second
//! thread idles while the first lists the top folders, and then some sixty
//! folders of agents that are not installed were probed one by one.
//! Walking the sources side by side overlaps all of that. The results
//! still arrive in the sources' order, so a pass sees the same list
//! whatever thread finished first.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};

/// Runs `work(0)` .. `work(jobs - 1)` on up to `threads` threads, each
/// taking the next job not yet taken, and calls `out` with the results in
/// job order, each as soon as every earlier one has been handed on. When
/// `out` returns false no further job is started and nothing more is
/// handed on. With no thread to be had the jobs run on the caller's.
pub(super) fn in_order<T: Send>(
    jobs: usize,
    threads: usize,
    work: &(dyn Fn(usize) -> T + Sync),
    out: &mut dyn FnMut(T) -> bool,
) {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let take = || {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let i = next.fetch_add(1, Ordering::Relaxed);
        (i < jobs).then_some(i)
    };
    std::thread::scope(|s| {
        let (tx, rx) = channel::<(usize, T)>();
        let run = |tx: Sender<(usize, T)>| {
            while let Some(i) = take() {
                if tx.send((i, work(i))).is_err() {
                    return;
                }
            }
        };
        let mut started = 0;
        for _ in 0..threads.min(jobs) {
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name("cairn-discover".into())
                .spawn_scoped(s, move || run(tx));
            if spawned.is_err() {
                break;
            }
            started += 1;
        }
        if started == 0 {
            // No thread to be had: every job runs here, in order.
            while let Some(i) = take() {
                if !out(work(i)) {
                    return;
                }
            }
            return;
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut due = 0;
        for (i, result) in rx {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&due) {
                due += 1;
                if !out(result) {
                    stop.store(true, Ordering::Relaxed);
                    // Leaving drops the receiver: a thread's next send fails
                    // and it stops; the scope waits for the job it is on.
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// Jobs that finish in reverse order (each waits until every later job
    /// is done) still come out in job order, all of them, once each.
    #[test]
    fn results_come_out_in_job_order_whatever_order_they_finish_in() {
        let jobs = 6;
        let done = Mutex::new(vec![false; jobs]);
        let finished = Condvar::new();
        let order = Mutex::new(Vec::new());
        let work = |i: usize| {
            // With as many threads as jobs every job runs at once; job i
            // ends only after every job above it has ended.
            let mut d = done.lock().unwrap();
            while !d[i + 1..].iter().all(|&x| x) {
                d = finished.wait(d).unwrap();
            }
            d[i] = true;
            order.lock().unwrap().push(i);
            finished.notify_all();
            i * 10
        };
        let mut seen = Vec::new();
        in_order(jobs, jobs, &work, &mut |r| {
            seen.push(r);
            true
        });
        assert_eq!(seen, vec![0, 10, 20, 30, 40, 50]);
        assert_eq!(*order.lock().unwrap(), vec![5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn a_stop_hands_on_nothing_more() {
        // Job i waits until result i - 1 was handed on, or the consumer
        // stopped, so the thread stays just behind the consumer.
        let handed = Mutex::new((0usize, false));
        let moved = Condvar::new();
        let work = |i: usize| {
            let mut h = handed.lock().unwrap();
            while h.0 < i && !h.1 {
                h = moved.wait(h).unwrap();
            }
            i
        };
        let mut seen = Vec::new();
        in_order(100, 1, &work, &mut |r| {
            seen.push(r);
            let mut h = handed.lock().unwrap();
            h.0 += 1;
            h.1 = r == 2;
            moved.notify_all();
            r != 2
        });
        assert_eq!(seen, vec![0, 1, 2]);
    }

    #[test]
    fn no_jobs_hand_on_nothing_and_one_thread_does_them_all() {
        let mut seen = Vec::new();
        in_order(0, 2, &|i| i, &mut |r| {
            seen.push(r);
            true
        });
        assert!(seen.is_empty());
        in_order(50, 1, &|i| i * 2, &mut |r| {
            seen.push(r);
            true
        });
        assert_eq!(seen, (0..50).map(|i| i * 2).collect::<Vec<_>>());
    }
}
