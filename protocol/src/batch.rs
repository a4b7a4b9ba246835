//! Building a batch on the sending side and checking it on the receiving side.
//!
//! Owns the batch invariants: one origin log, entries in seq order, every seq
//! in `after_seq + 1 ..= last_seq` exactly once across records, tombstones and
//! stubs, records matching their hashes, tombstones matching their ids and
//! issued by the log's origin. The receiver runs [`check_batch`] before it
//! opens a store transaction. Never reads a store: the node streams entries
//! from a cursor into a [`BatchBuilder`].

use crate::limits::{MAX_BATCH_BYTES, MAX_BATCH_ENTRIES};
use crate::message::{Batch, Pull};
use crate::record::{LogStub, RecordError, Tombstone, WireRecord};

/// A batch that does not answer its pull correctly. The peer is at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// Another log than the one pulled.
    #[error("check batch: it is for another origin log than the one pulled")]
    WrongLog,
    /// Does not start where the pull asked.
    #[error("check batch: starts after seq {got}, the pull asked after {expected}")]
    WrongStart {
        /// The pull's `after_seq`.
        expected: u64,
        /// The batch's `after_seq`.
        got: u64,
    },
    /// More entries than the pull allowed.
    #[error("check batch: {count} entries, the pull allowed {max}")]
    TooMany {
        /// Entries in the batch.
        count: usize,
        /// The pull's limit.
        max: usize,
    },
    /// Entries do not cover `after_seq + 1 ..= last_seq` exactly once.
    #[error("check batch: expected seq {expected} next, found {found:?}")]
    Gap {
        /// The seq that should come next.
        expected: u64,
        /// What came instead (`None`: entries ran out before `last_seq`).
        found: Option<u64>,
    },
    /// A list is not in ascending seq order.
    #[error("check batch: entries are not in ascending seq order at seq {seq}")]
    Order {
        /// The first out-of-order seq.
        seq: u64,
    },
    /// `more` set on a batch that made no progress (would loop forever).
    #[error("check batch: empty batch claims there is more")]
    NoProgress,
    /// A tombstone in this log issued by someone else.
    #[error("check batch: tombstone {seq} was not issued by the log's origin")]
    ForeignTombstone {
        /// Its seq.
        seq: u64,
    },
    /// A record or tombstone failed verification.
    #[error("check batch")]
    Entry(#[from] RecordError),
}

/// Checks that `batch` correctly answers `pull`; see the module docs.
/// The same as [`check_batch_shape`] then [`check_entries`].
pub fn check_batch(pull: &Pull, batch: &Batch) -> Result<(), BatchError> {
    check_batch_shape(pull, batch)?;
    check_entries(batch)
}

/// Every check of [`check_batch`] but the entries' own: the log, the
/// start, the count, the seqs. Cheap; for a receiver that checked the
/// entries of this very batch ahead with [`check_entries`].
pub fn check_batch_shape(pull: &Pull, batch: &Batch) -> Result<(), BatchError> {
    if batch.origin != pull.origin || batch.epoch != pull.epoch {
        return Err(BatchError::WrongLog);
    }
    if batch.after_seq != pull.after_seq {
        return Err(BatchError::WrongStart {
            expected: pull.after_seq,
            got: batch.after_seq,
        });
    }
    let count = batch.records.len() + batch.tombstones.len() + batch.stubs.len();
    let max = (pull.max_records as usize).min(MAX_BATCH_ENTRIES);
    if count > max {
        return Err(BatchError::TooMany { count, max });
    }
    if count == 0 && batch.more {
        return Err(BatchError::NoProgress);
    }
    ascending(batch.records.iter().map(|r| r.seq))?;
    ascending(batch.tombstones.iter().map(|t| t.seq))?;
    ascending(batch.stubs.iter().map(|s| s.seq))?;
    let mut seqs: Vec<u64> = Vec::with_capacity(count);
    seqs.extend(batch.records.iter().map(|r| r.seq));
    seqs.extend(batch.tombstones.iter().map(|t| t.seq));
    seqs.extend(batch.stubs.iter().map(|s| s.seq));
    seqs.sort_unstable();
    let mut expected = batch.after_seq;
    for &seq in &seqs {
        expected = expected.checked_add(1).ok_or(BatchError::Gap {
            expected: u64::MAX,
            found: Some(seq),
        })?;
        if seq != expected {
            return Err(BatchError::Gap {
                expected,
                found: Some(seq),
            });
        }
    }
    if expected != batch.last_seq {
        return Err(BatchError::Gap {
            expected: expected.saturating_add(1),
            found: None,
        });
    }
    Ok(())
}

/// The entries' part of [`check_batch`]: every record matches its hash,
/// every tombstone its id, and the log's origin issued every tombstone.
/// Needs no pull: a receiver may run it ahead, off the thread that stores.
pub fn check_entries(batch: &Batch) -> Result<(), BatchError> {
    for r in &batch.records {
        r.verify()?;
    }
    for t in &batch.tombstones {
        t.verify()?;
        if t.origin != batch.origin {
            return Err(BatchError::ForeignTombstone { seq: t.seq });
        }
    }
    Ok(())
}

fn ascending(mut seqs: impl Iterator<Item = u64>) -> Result<(), BatchError> {
    let Some(mut prev) = seqs.next() else {
        return Ok(());
    };
    for seq in seqs {
        if seq <= prev {
            return Err(BatchError::Order { seq });
        }
        prev = seq;
    }
    Ok(())
}

/// The pull that continues after a checked batch, if the sender has more.
pub fn next_pull(pull: &Pull, batch: &Batch) -> Option<Pull> {
    batch.more.then_some(Pull {
        after_seq: batch.last_seq,
        ..*pull
    })
}

/// One log entry, as the sender reads it from its store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// A record.
    Record(WireRecord),
    /// A forget issued by the origin.
    Tombstone(Tombstone),
    /// A slot sent without content.
    Stub(LogStub),
}

impl LogEntry {
    /// The entry's seq.
    pub fn seq(&self) -> u64 {
        match self {
            LogEntry::Record(r) => r.seq,
            LogEntry::Tombstone(t) => t.seq,
            LogEntry::Stub(s) => s.seq,
        }
    }

    /// Its CBOR encoded size in bytes, as it will appear inside a batch.
    pub fn encoded_len(&self) -> usize {
        let mut w = CountingWriter(0);
        let r = match self {
            LogEntry::Record(r) => ciborium::into_writer(r, &mut w),
            LogEntry::Tombstone(t) => ciborium::into_writer(t, &mut w),
            LogEntry::Stub(s) => ciborium::into_writer(s, &mut w),
        };
        // Serializing these types into a counter cannot fail; if it ever did,
        // report a size no batch accepts.
        r.map_or(usize::MAX, |()| w.0)
    }
}

struct CountingWriter(usize);

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why the builder did not take an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Entries must be pushed with consecutive seqs starting at `after_seq + 1`.
    #[error("build batch: expected seq {expected}, got {got}")]
    NotNext {
        /// The next seq the batch needs.
        expected: u64,
        /// The seq pushed.
        got: u64,
    },
    /// This single entry can never fit in a frame: send it as a stub.
    #[error("build batch: entry {seq} encodes to {len} bytes, more than a batch may hold")]
    EntryTooLarge {
        /// Its seq.
        seq: u64,
        /// Its encoded size.
        len: usize,
    },
}

/// What [`BatchBuilder::push`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "a short-lived return value; boxing would allocate on every hand-back"
)]
pub enum Pushed {
    /// Taken.
    Added,
    /// The batch is full; the entry was not taken and is handed back.
    Full(LogEntry),
}

/// Fills a batch answering one pull, within its entry and byte budgets.
#[derive(Debug)]
pub struct BatchBuilder {
    batch: Batch,
    entries: usize,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl BatchBuilder {
    /// An empty batch for `pull`; its limits are clamped to the protocol's.
    pub fn new(pull: &Pull) -> BatchBuilder {
        BatchBuilder {
            batch: Batch {
                origin: pull.origin,
                epoch: pull.epoch,
                after_seq: pull.after_seq,
                last_seq: pull.after_seq,
                more: false,
                records: Vec::new(),
                tombstones: Vec::new(),
                stubs: Vec::new(),
                origin_key: Vec::new(),
                seals: Vec::new(),
            },
            entries: 0,
            bytes: 0,
            max_entries: (pull.max_records as usize).clamp(1, MAX_BATCH_ENTRIES),
            max_bytes: (pull.max_bytes as usize).clamp(1, MAX_BATCH_BYTES),
        }
    }

    /// Adds the next entry. The first entry is taken even if it exceeds the
    /// pull's byte budget (so every pull makes progress), as long as it fits
    /// [`MAX_BATCH_BYTES`].
    pub fn push(&mut self, entry: LogEntry) -> Result<Pushed, BuildError> {
        let expected = self.batch.last_seq.saturating_add(1);
        if entry.seq() != expected {
            return Err(BuildError::NotNext {
                expected,
                got: entry.seq(),
            });
        }
        let len = entry.encoded_len();
        if len > MAX_BATCH_BYTES {
            return Err(BuildError::EntryTooLarge {
                seq: entry.seq(),
                len,
            });
        }
        if self.entries >= self.max_entries
            || (self.entries > 0 && self.bytes.saturating_add(len) > self.max_bytes)
        {
            return Ok(Pushed::Full(entry));
        }
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(len);
        self.batch.last_seq = expected;
        match entry {
            LogEntry::Record(r) => self.batch.records.push(r),
            LogEntry::Tombstone(t) => self.batch.tombstones.push(t),
            LogEntry::Stub(s) => self.batch.stubs.push(s),
        }
        Ok(Pushed::Added)
    }

    /// Whether another entry could still be taken (by count).
    pub fn has_room(&self) -> bool {
        self.entries < self.max_entries && self.bytes < self.max_bytes
    }

    /// The finished batch; `sender_max_seq` is the highest seq the sender
    /// holds in this log, which decides `more`.
    pub fn finish(mut self, sender_max_seq: u64) -> Batch {
        self.batch.more = sender_max_seq > self.batch.last_seq;
        self.batch
    }
}
