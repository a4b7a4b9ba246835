//! How far the reading thread may run ahead of the writer, in bytes of
//! memory the records on their way hold.
//!
//! A channel bounded by a count of messages is either too short or
//! unbounded in memory: the writer stalls for a second or more while
//! SQLite flushes the full-text buffer or commits, and with only a few
//! chunks allowed on the way the reader stopped too (both threads waited
//! on each other about 40% of a cold pass). Bounding the bytes instead lets
//! the reader work through the writer's stalls with memory that stays
//! bounded whatever the size of the chunks.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The writer is gone: nothing more will be taken.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Closed;

/// Bytes handed to the writer and not yet written, with a cap.
#[derive(Debug)]
pub(super) struct Backlog {
    cap: u64,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    held: u64,
    closed: bool,
}

impl Backlog {
    pub(super) fn new(cap: u64) -> Backlog {
        Backlog {
            cap,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is two plain numbers: a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `n` more bytes fit, then holds them. A chunk larger than
    /// the cap waits for an empty backlog and then goes alone, so nothing
    /// is ever refused.
    pub(super) fn hold(&self, n: u64) -> Result<(), Closed> {
        let mut s = self.lock();
        while !s.closed && s.held > 0 && s.held.saturating_add(n) > self.cap {
            s = self.freed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.closed {
            return Err(Closed);
        }
        s.held += n;
        Ok(())
    }

    /// The writer is done with `n` bytes.
    pub(super) fn release(&self, n: u64) {
        let mut s = self.lock();
        s.held = s.held.saturating_sub(n);
        self.freed.notify_all();
    }

    /// The writer stopped: wakes a waiting reader, and every later
    /// [`hold`](Self::hold) fails.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.freed.notify_all();
    }

    /// Bytes held now.
    #[cfg(test)]
    fn held(&self) -> u64 {
        self.lock().held
    }
}

/// Closes the backlog when the writer returns, by any path.
pub(super) struct CloseOnDrop<'a>(pub(super) &'a Backlog);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// How long a test waits for something that should happen at once.
    const SOON: Duration = Duration::from_secs(10);

    #[test]
    fn holds_up_to_the_cap_and_a_large_chunk_goes_alone() {
        let b = Backlog::new(100);
        b.hold(60).expect("fits");
        b.hold(40).expect("fits exactly");
        assert_eq!(b.held(), 100);
        b.release(100);
        // Larger than the cap, on an empty backlog: taken.
        b.hold(500).expect("alone");
        assert_eq!(b.held(), 500);
    }

    /// Runs `b.hold(n)` on another thread while `meanwhile` runs on this
    /// one (with the channel its result arrives on), then waits for that
    /// result, boundedly.
    fn hold_elsewhere(
        b: &Backlog,
        n: u64,
        meanwhile: impl FnOnce(&mpsc::Receiver<Result<(), Closed>>),
    ) -> Result<(), Closed> {
        let (done, waited) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| done.send(b.hold(n)).expect("send"));
            meanwhile(&waited);
            waited.recv_timeout(SOON).expect("woken")
        })
    }

    #[test]
    fn a_full_backlog_waits_for_the_writer() {
        let b = Backlog::new(100);
        b.hold(80).expect("fits");
        let held = hold_elsewhere(&b, 30, |waited| {
            // The second hold cannot fit until the writer releases.
            assert!(waited.recv_timeout(Duration::from_millis(200)).is_err());
            b.release(80);
        });
        assert_eq!(held, Ok(()));
        assert_eq!(b.held(), 30);
    }

    #[test]
    fn a_writer_that_stops_wakes_the_reader_with_an_error() {
        let b = Backlog::new(10);
        b.hold(10).expect("fits");
        let held = hold_elsewhere(&b, 5, |_| {
            let _writer = CloseOnDrop(&b);
        });
        assert_eq!(held, Err(Closed));
        assert_eq!(b.hold(1), Err(Closed));
    }
}
