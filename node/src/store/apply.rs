//! Applying a batch received from a peer: in one transaction with the
//! watermark advance, so a crash loses nothing and duplicates nothing (the
//! same range is simply pulled again). One entry point:
//! [`Store::apply_batch`], asked with an [`ApplyRequest`].
//!
//! Owns the receiver's rules:
//! - the whole batch is checked against the pull that asked for it
//!   (`cairn_protocol::check_batch`: one log, seqs gap-free from the pull's
//!   start, every record matching its hash, tombstones matching their ids
//!   and issued by the log's origin); any problem rejects the whole batch
//!   and stores nothing, and the error blames the peer;
//! - slots this node already holds (at or below its watermark) are skipped;
//! - tombstones are stored and purge what they cover; a record covered by a
//!   known tombstone is not stored and its slot becomes a forgotten stub, so
//!   a stale peer cannot resurrect forgotten records;
//! - every record is redacted again with this node's rules before it is
//!   stored. If that changes it, the record is stored redacted under its
//!   recomputed hash and the log slot records that hash (what this node
//!   holds at that position, and what it serves onward), so the record stays
//!   self-verifying on every later hop;
//! - records are inserted idempotently by content hash: a record that
//!   arrives twice, or through two origins' logs, is stored once, and each
//!   log slot that names it is its provenance;
//! - the records are redacted again and prepared (hashed, encoded) on a
//!   second thread, in chunks handed over as they are ready, while the
//!   transaction's thread stores them, as an indexing pass's reader feeds
//!   its writer; their vectors are computed there too and stored in the
//!   same transaction when no earlier record still waits for its vector
//!   (else the next vector pass computes them); a session may instead
//!   prepare a batch's records and check its entries (their hashes) while
//!   the batch before it is stored ([`Preparer`]), used only for the very
//!   batch they were prepared from (the records prepared only with the
//!   dictionary as it stands and when no vector is computed), so that the
//!   thread holding the write lock only checks the batch's shape;
//! - the batches of a large catch-up (`store::catch_up`) look hashes up in
//!   the catch-up's map while it holds the records' hash index deferred;
//!   every other batch builds the index first (`hash_index::ensure`).
//!
//! Never touches the network; never trusts a field it did not check.

use cairn_protocol::{
    Batch, BatchError, NodeId, Pull, check_batch, check_batch_shape, check_entries,
};
use rusqlite::Connection;
use serde::Serialize;

use super::catch_up::CatchUp;
use super::forget::{covered_counts, purge_owned, store_tombstone};
use super::insert::{NewRecord, insert};
use super::log::{
    LogKind, any_tombstones, any_unheld, covered_by, log_id, own_log, put_slot, read_watermark,
    revive, set_watermark,
};
use super::wire;
use super::{Store, StoreError};
use crate::embed::{Embedder, quantize};
use crate::redact::Redactor;

/// What applying one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// Records stored that this node did not have.
    pub stored: u64,
    /// Records already stored under the same hash (a second provenance).
    pub duplicates: u64,
    /// Records refused because a tombstone covers them.
    pub refused: u64,
    /// Records that local redaction changed before storing.
    pub redacted: u64,
    /// Tombstones stored.
    pub tombstones: u64,
    /// Records deleted by those tombstones.
    pub purged: u64,
    /// Tombstones that cover records here their issuer does not own: those
    /// records stay until their owner forgets them too.
    pub forgets_deferred: u64,
    /// Targets of received forgets that cover records this node owns: this
    /// node adopts them (its own forget, see `store::forget`).
    #[serde(skip)]
    pub adopt: Vec<cairn_protocol::ForgetTarget>,
    /// Slots received as stubs.
    pub stubs: u64,
    /// Slots skipped because this node already held them.
    pub already_held: u64,
    /// The log's watermark after the batch.
    pub watermark: u64,
}

/// Who is at fault for a failed apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The peer sent a bad batch: drop it.
    Peer,
    /// This node (its database, or a pull that went stale): back off and retry.
    Local,
}

/// Why a batch was not applied. Nothing of it was stored.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The batch does not correctly answer the pull; the peer is at fault.
    #[error("reject batch from peer")]
    Peer(#[from] BatchError),
    /// The batch starts past what this node holds (another pull advanced
    /// or the pull was planned from a stale watermark); pull again.
    #[error(
        "apply batch: it starts after seq {after_seq} of {origin}'s log but this node holds it only up to {watermark}"
    )]
    Stale {
        /// The log's origin.
        origin: NodeId,
        /// The log's epoch.
        epoch: u64,
        /// This node's watermark for it.
        watermark: u64,
        /// Where the batch starts.
        after_seq: u64,
    },
    /// The batch's origin or seals do not check out (forged, altered,
    /// unsigned, or claiming this node's own origin); the peer is at fault
    /// for this log, not for the session.
    #[error(transparent)]
    Refused(#[from] super::trust::TrustError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ApplyError {
    /// Whether the peer or this node is at fault.
    pub fn blame(&self) -> Blame {
        match self {
            ApplyError::Peer(_) | ApplyError::Refused(_) => Blame::Peer,
            ApplyError::Stale { .. } | ApplyError::Store(_) => Blame::Local,
        }
    }
}

impl From<rusqlite::Error> for ApplyError {
    fn from(e: rusqlite::Error) -> Self {
        ApplyError::Store(StoreError::from(e))
    }
}

/// What applying one batch is asked to do ([`Store::apply_batch`]): the
/// batch received in answer to a pull, redacted again with a redactor
/// before it is stored. By default no peer vouches for an origin key seen
/// for the first time, no vectors are computed, the batch is no part of a
/// large catch-up and nothing was prepared ahead.
pub struct ApplyRequest<'a, 'e> {
    pull: &'a Pull,
    batch: &'a Batch,
    redactor: &'a Redactor,
    peer: Option<&'a NodeId>,
    embedder: Option<&'a Embedder<'e>>,
    catch_up: Option<&'a mut CatchUp>,
    ahead: Option<PreparedBatch>,
}

impl<'a, 'e> ApplyRequest<'a, 'e> {
    /// Applies `batch`, received in answer to `pull`; its records are
    /// redacted again with `redactor` before they are stored.
    pub fn new(pull: &'a Pull, batch: &'a Batch, redactor: &'a Redactor) -> Self {
        ApplyRequest {
            pull,
            batch,
            redactor,
            peer: None,
            embedder: None,
            catch_up: None,
            ahead: None,
        }
    }

    /// The batch came from `peer`: the one vouching for an origin key seen
    /// for the first time.
    pub fn from_peer(mut self, peer: Option<&'a NodeId>) -> Self {
        self.peer = peer;
        self
    }

    /// With an `embedder`, the new records' vectors are computed on a
    /// second thread while the batch is stored, and stored with it when
    /// every earlier record has its own (else a vector pass computes them).
    pub fn embedding(mut self, embedder: Option<&'a Embedder<'e>>) -> Self {
        self.embedder = embedder;
        self
    }

    /// The batch is part of a large `catch_up` (`store::catch_up`): while
    /// it holds the records' hash index deferred, its map stands in for
    /// the index.
    pub fn catching_up(mut self, catch_up: Option<&'a mut CatchUp>) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// The batch's records prepared `ahead` ([`Preparer::prepare`]) while
    /// an earlier batch was stored. They are used only when they match the
    /// batch, were prepared with the database's dictionary as it stands
    /// and no vector is computed with the records; else they are prepared
    /// during the apply.
    pub fn prepared(mut self, ahead: Option<PreparedBatch>) -> Self {
        self.ahead = ahead;
        self
    }
}

impl Store {
    /// Applies a batch as `req` asks, in one transaction together with the
    /// watermark advance. See the module docs for the rules.
    pub fn apply_batch(&mut self, req: ApplyRequest<'_, '_>) -> Result<ApplyReport, ApplyError> {
        let ApplyRequest {
            pull,
            batch,
            redactor,
            peer,
            embedder,
            catch_up,
            ahead,
        } = req;
        // Prepared from this very batch (every field equal; not only the
        // hashes: the batch applied is the one checked, and a peer could
        // send another under its seqs), or not used at all. Its entries
        // checked ahead leave only its shape against the pull.
        let ahead = ahead.filter(|a| a.batch == *batch);
        let entries_checked = ahead.as_ref().is_some_and(|a| a.entries_ok);
        self.check_before_apply(pull, batch, redactor, entries_checked)?;
        self.apply_checked_batch(batch, redactor, peer, embedder, catch_up, ahead)
    }

    /// What preparing batches ahead of their apply needs from this store
    /// (its text dictionary), with `redactor`.
    pub fn preparer(&self, redactor: &Redactor) -> Preparer {
        Preparer {
            redactor: redactor.clone(),
            dict: super::dict::load(&self.conn).ok().flatten(),
        }
    }

    /// Everything about a batch that can be judged before taking the
    /// write lock: its shape against the pull, its entries (unless
    /// `entries_checked` ahead by a [`Preparer`]), its origin
    /// and seals and its forgets.
    fn check_before_apply(
        &self,
        pull: &Pull,
        batch: &Batch,
        redactor: &Redactor,
        entries_checked: bool,
    ) -> Result<(), ApplyError> {
        if entries_checked {
            check_batch_shape(pull, batch)?;
        } else {
            check_batch(pull, batch)?;
        }
        super::trust::check(&self.conn, batch)??;
        if let Some(refusal) = super::trust::forget_names_a_secret(batch, redactor) {
            return Err(refusal.into());
        }
        Ok(())
    }

    /// Stores a batch [`Store::check_before_apply`] passed. Inside the
    /// write transaction the origin is judged again (refused meanwhile,
    /// or its key learned from another batch), since another connection
    /// may have changed that after the check.
    fn apply_checked_batch(
        &mut self,
        batch: &Batch,
        redactor: &Redactor,
        peer: Option<&NodeId>,
        embedder: Option<&Embedder<'_>>,
        mut catch_up: Option<&mut CatchUp>,
        ahead: Option<PreparedBatch>,
    ) -> Result<ApplyReport, ApplyError> {
        if !batch.tombstones.is_empty() {
            self.conn.pragma_update(None, "secure_delete", "ON")?;
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        super::trust::recheck(&tx, batch)??;
        let rules = redactor.rules_id();
        super::redacted_with::hold(&tx, Some(rules))?;
        let deferred = match catch_up.as_deref_mut() {
            Some(c) => c.hold(&tx, !batch.tombstones.is_empty())?,
            None => false,
        };
        if !deferred {
            // Records are looked up by hash below: a pass's deferral ends.
            super::hash_index::ensure(&tx)?;
        }
        let mut report = apply_checked(
            &tx,
            batch,
            redactor,
            embedder,
            catch_up.as_deref_mut(),
            ahead,
        )?;
        let log = log_id(&tx, &wire::node_text(&batch.origin), batch.epoch)?;
        super::trust::record(&tx, log, batch, peer, crate::clock::now_ms())?;
        super::redacted_with::stamp(&tx, Some(rules))?;
        tx.commit()?;
        if let Some(c) = catch_up {
            c.stored(report.stored);
        }
        if !report.adopt.is_empty() {
            // The user's "forget this everywhere" from another machine:
            // this node forgets what it owns in its own name, so the
            // forget reaches its copies everywhere.
            let adopted = match self.forget(&report.adopt, crate::clock::now_ms()) {
                Ok(r) => r.records,
                // Owned records imply an own log; without one there is
                // nothing this node owns to forget.
                Err(super::ForgetError::NoLog) => 0,
                Err(super::ForgetError::Store(e)) => return Err(e.into()),
            };
            report.purged += adopted;
            tracing::info!(
                origin = %batch.origin,
                forgets = report.adopt.len(),
                records = adopted,
                "adopted a peer's forget of records this node owns"
            );
        } else if report.purged > 0 {
            self.scrub()?;
        }
        tracing::debug!(
            origin = %batch.origin,
            last_seq = batch.last_seq,
            stored = report.stored,
            duplicates = report.duplicates,
            refused = report.refused,
            "applied batch"
        );
        Ok(report)
    }

    /// Test hook: the check, then `between` (another connection's change,
    /// say), then the store, as a concurrent apply would interleave.
    #[cfg(test)]
    pub(crate) fn apply_batch_with_change_between(
        &mut self,
        pull: &Pull,
        batch: &Batch,
        redactor: &Redactor,
        between: impl FnOnce(),
    ) -> Result<ApplyReport, ApplyError> {
        self.check_before_apply(pull, batch, redactor, false)?;
        between();
        self.apply_checked_batch(batch, redactor, None, None, None, None)
    }

    /// Test hook: runs the whole apply, then drops the transaction instead
    /// of committing, as a crash before commit would.
    #[cfg(test)]
    pub(crate) fn apply_batch_then_crash(
        &mut self,
        pull: &Pull,
        batch: &Batch,
        redactor: &Redactor,
    ) -> Result<ApplyReport, ApplyError> {
        check_batch(pull, batch)?;
        let tx = self.conn.transaction()?;
        let report = apply_checked(&tx, batch, redactor, None, None, None)?;
        drop(tx);
        Ok(report)
    }
}

/// Applies a checked batch inside `conn`'s open transaction; a catch-up's
/// map stands in for the records' hash index while it defers it.
fn apply_checked(
    conn: &Connection,
    batch: &Batch,
    redactor: &Redactor,
    embedder: Option<&Embedder<'_>>,
    catch_up: Option<&mut CatchUp>,
    ahead: Option<PreparedBatch>,
) -> Result<ApplyReport, ApplyError> {
    let origin = wire::node_text(&batch.origin);
    let epoch = batch.epoch;
    let held = read_watermark(conn, &origin, epoch)?;
    if batch.after_seq > held {
        return Err(ApplyError::Stale {
            origin: batch.origin,
            epoch,
            watermark: held,
            after_seq: batch.after_seq,
        });
    }
    let mut report = ApplyReport::default();
    let own = own_log(conn)?.map(|l| l.origin).unwrap_or_default();
    let log = log_id(conn, &origin, epoch)?;
    let new = |seq: u64| seq > held;
    // Tombstones first: a record earlier in the same batch that one covers
    // ends up not stored, exactly as if it had been stored and purged.
    let mut purged_any = false;
    for t in &batch.tombstones {
        if !new(t.seq) {
            report.already_held += 1;
            continue;
        }
        put_slot(conn, log, t.seq, LogKind::Tombstone, &t.id)?;
        if store_tombstone(conn, t, epoch)? {
            report.tombstones += 1;
        }
        // A forget reaches the records its issuer owns; those this node
        // owns it adopts (after this transaction); others' stay.
        let (records, _) = purge_owned(conn, &t.target, Some(&origin))?;
        report.purged += records;
        purged_any |= records > 0;
        let (left, mine) = covered_counts(conn, &t.target, &own)?;
        if mine > 0 {
            report.adopt.push(t.target.clone());
        }
        if left > mine {
            report.forgets_deferred += 1;
        }
    }
    for s in &batch.stubs {
        if !new(s.seq) {
            report.already_held += 1;
            continue;
        }
        put_slot(conn, log, s.seq, wire::stub_log_kind(s.kind), &s.hash)?;
        report.stubs += 1;
    }
    let check_tombstones = any_tombstones(conn)?;
    // Once per batch, not per record: whether a stored record may have to
    // take back slots naming its hash, and the text dictionary.
    let unheld = any_unheld(conn)?;
    let dict = super::dict::load(conn).ok().flatten();
    // Vectors need no database: computed beside the inserts, and kept when
    // this batch's records are the only ones waiting for theirs.
    let embedder = match embedder {
        Some(e) if super::vectors::none_pending(conn)? => Some(e),
        _ => None,
    };
    let cx = Context {
        log,
        origin: &origin,
        own: &own,
        check_tombstones,
        unheld,
    };
    let prep = Prep {
        batch,
        held,
        redactor,
        dict: dict.as_deref(),
        embedder,
    };
    // Records prepared ahead, while an earlier batch was stored, when
    // they are what would be prepared here now.
    let ahead = ahead.filter(|a| {
        embedder.is_none() && a.dict == dict.is_some() && a.redactor.same_rules(redactor)
    });
    if let Some(a) = ahead {
        let chunks = a.records.into_iter().zip(&batch.records).map(|(p, r)| {
            (r.seq > held).then_some(Prepared {
                new: p.0,
                redacted: p.1,
                vector: None,
            })
        });
        let stored = store_prepared(
            conn,
            batch,
            [chunks.collect::<Vec<_>>()],
            cx,
            catch_up,
            &mut report,
        )?;
        return finish_batch(conn, batch, &origin, held, purged_any, None, stored, report);
    }
    // Every new record is redacted again and prepared (and given its
    // vector) on a second thread, in chunks handed over as they are
    // ready, while this one stores them: as an indexing pass's reader
    // prepares records for its writer.
    let stored = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel(CHUNKS_IN_FLIGHT);
        let spawned = std::thread::Builder::new()
            .name("cairn-prepare".into())
            .spawn_scoped(s, move || prep.chunks(|c| tx.send(c).is_ok()));
        match spawned {
            Ok(handle) => {
                let stored = store_prepared(conn, batch, rx.iter(), cx, catch_up, &mut report);
                // However the inserts ended, the preparing thread stops.
                drop(rx);
                if let Err(p) = handle.join() {
                    std::panic::resume_unwind(p);
                }
                stored
            }
            Err(e) => {
                // No thread to be had: prepared here first.
                tracing::debug!(error = %e, "records prepared on the applying thread");
                let mut chunks = Vec::new();
                prep.chunks(|c| {
                    chunks.push(c);
                    true
                });
                store_prepared(conn, batch, chunks, cx, catch_up, &mut report)
            }
        }
    })?;
    finish_batch(
        conn, batch, &origin, held, purged_any, embedder, stored, report,
    )
}

/// The end of a batch's apply: the vectors computed with its records, the
/// watermark, the merge after a purge.
#[allow(clippy::too_many_arguments)]
fn finish_batch(
    conn: &Connection,
    batch: &Batch,
    origin: &str,
    held: u64,
    purged_any: bool,
    embedder: Option<&Embedder<'_>>,
    stored: Stored,
    mut report: ApplyReport,
) -> Result<ApplyReport, ApplyError> {
    if embedder.is_some()
        && let Some(last) = stored.last
    {
        super::vectors::put_examined(conn, &stored.vectors, last)?;
    }
    report.watermark = held.max(batch.last_seq);
    set_watermark(conn, origin, batch.epoch, report.watermark)?;
    if purged_any {
        super::fts::optimize(conn)?;
    }
    Ok(report)
}

/// Prepares a peer's batches off the database, ahead of their apply
/// ([`Store::preparer`]): redacted again with this node's rules, hashed
/// and encoded with the database's dictionary, as the apply would.
#[derive(Clone)]
pub struct Preparer {
    redactor: Redactor,
    dict: Option<std::sync::Arc<super::codec::TextDict>>,
}

/// A batch's records prepared by a [`Preparer`], each with whether
/// redaction here changed it, and whether its entries check out.
pub struct PreparedBatch {
    /// The batch as received: what it must equal, records and all, to
    /// stand for a batch's records (the one checked and applied).
    batch: Batch,
    records: Vec<(NewRecord, bool)>,
    /// Whether it was encoded with the database's dictionary.
    dict: bool,
    /// Whether its entries passed `check_entries` (every record's hash
    /// computed again: the costly part of checking a batch).
    entries_ok: bool,
    /// What redacted its records.
    redactor: Redactor,
}

impl Preparer {
    /// Whether it encodes with the database's text dictionary (it had one
    /// when the preparer was made).
    pub fn has_dict(&self) -> bool {
        self.dict.is_some()
    }

    /// Checks the entries of `batch` ([`check_entries`]) and prepares
    /// every record (slots the node may already hold included: the apply
    /// leaves those out).
    pub fn prepare(&self, batch: Batch) -> PreparedBatch {
        let entries_ok = check_entries(&batch).is_ok();
        let records = batch
            .records
            .iter()
            .map(|r| {
                let (row, redacted) = wire::record_from_wire(r, &self.redactor);
                (NewRecord::from_stored(row, self.dict.as_deref()), redacted)
            })
            .collect();
        PreparedBatch {
            batch,
            records,
            dict: self.dict.is_some(),
            entries_ok,
            redactor: self.redactor.clone(),
        }
    }
}

/// Records prepared per chunk handed to the inserts.
const CHUNK: usize = 64;
/// Chunks prepared ahead of the inserts (a batch holds at most 1,000
/// records, so this bounds nothing but a slow insert's backlog).
const CHUNKS_IN_FLIGHT: usize = 4;

/// A new record of the batch, ready to store: redacted again (and whether
/// that changed it), hashed and encoded, with its quantized vector when
/// one is computed.
struct Prepared {
    new: NewRecord,
    redacted: bool,
    vector: Option<Vec<u8>>,
}

/// What preparing a batch's records needs.
#[derive(Clone, Copy)]
struct Prep<'a, 'e> {
    batch: &'a Batch,
    /// This node's watermark for the log: slots up to it are not prepared.
    held: u64,
    redactor: &'a Redactor,
    dict: Option<&'a super::codec::TextDict>,
    embedder: Option<&'a Embedder<'e>>,
}

impl Prep<'_, '_> {
    /// Prepares the batch's records in order, in chunks of [`CHUNK`]
    /// (`None`: a slot this node already holds), handing each to `each`
    /// until it returns false.
    fn chunks(&self, mut each: impl FnMut(Vec<Option<Prepared>>) -> bool) {
        for chunk in self.batch.records.chunks(CHUNK) {
            let prepared = chunk
                .iter()
                .map(|r| (r.seq > self.held).then(|| self.prepare(r)))
                .collect();
            if !each(prepared) {
                return;
            }
        }
    }

    fn prepare(&self, r: &cairn_protocol::WireRecord) -> Prepared {
        let (row, redacted) = wire::record_from_wire(r, self.redactor);
        let new = NewRecord::from_stored(row, self.dict);
        let vector = self.embedder.and_then(|e| {
            super::vectors::embeds_role(new.role())
                .then(|| e.embed(new.text()).map(|v| quantize(&v)))
                .flatten()
        });
        Prepared {
            new,
            redacted,
            vector,
        }
    }
}

/// What storing a batch's records needs to know besides them.
struct Context<'a> {
    /// The log's number in `origin_logs`.
    log: i64,
    /// The log's origin, as stored.
    origin: &'a str,
    /// This node's own origin ("" without an own log).
    own: &'a str,
    /// Whether any tombstone may refuse a record.
    check_tombstones: bool,
    /// Whether a record slot names a record not held (see `log::revive`).
    unheld: bool,
}

/// What storing a batch's records left: the vectors of the new records
/// that got one, and the highest new row id.
#[derive(Default)]
struct Stored {
    vectors: Vec<(i64, Vec<u8>)>,
    last: Option<i64>,
}

/// Stores the batch's records, prepared in order in `chunks` (`None`: a
/// slot this node already held), and their log slots.
fn store_prepared(
    conn: &Connection,
    batch: &Batch,
    chunks: impl IntoIterator<Item = Vec<Option<Prepared>>>,
    cx: Context<'_>,
    mut catch_up: Option<&mut CatchUp>,
    report: &mut ApplyReport,
) -> Result<Stored, ApplyError> {
    let covered = |hash: &_, agent: &str, session_id: &str, project: Option<&str>| {
        if !cx.check_tombstones {
            return Ok(false);
        }
        covered_by(conn, hash, agent, session_id, project, cx.origin, cx.own)
    };
    let mut ids = super::insert::RowIds::default();
    let mut stmts = super::insert::RecordStatements::prepare(conn)?;
    // Prepared once for the batch: nearly every record puts one.
    let mut record_slot = conn.prepare(super::log::RECORD_SLOT)?;
    let mut put_record_slot = |seq: u64, id: i64| {
        record_slot
            .execute(rusqlite::params![cx.log, seq as i64, id])
            .map(drop)
    };
    let mut out = Stored::default();
    // In the batch's order; a preparing thread that stopped early (it
    // panicked) leaves records out, and the caller resumes its panic
    // before anything commits.
    for (r, prep) in batch.records.iter().zip(chunks.into_iter().flatten()) {
        let Some(Prepared {
            new,
            redacted,
            vector,
        }) = prep
        else {
            report.already_held += 1;
            continue;
        };
        let forgotten = |report: &mut ApplyReport| {
            report.refused += 1;
            put_slot(conn, cx.log, r.seq, LogKind::Forgotten, &r.hash)
        };
        if covered(&r.hash, &r.agent, &r.session_id, r.project.as_deref())? {
            forgotten(report)?;
            continue;
        }
        if redacted {
            report.redacted += 1;
            // Covered once redacted here.
            if covered(
                &new.hash,
                &new.agent,
                &new.session_id,
                new.project.as_deref(),
            )? {
                forgotten(report)?;
                continue;
            }
        }
        let map = catch_up.as_deref_mut().and_then(CatchUp::map);
        let known = map.as_deref();
        let stored = insert(conn, &mut stmts, &new, cx.origin, None, &mut ids, known)?;
        match stored {
            Some(id) => {
                if let Some(m) = map
                    && !m.add(&new.hash, id)
                    && let Some(c) = catch_up.as_deref_mut()
                {
                    // A row id past what the map holds: the index again.
                    c.give_up(conn)?;
                }
                // A record slot of this hash left by an earlier delete
                // names the record again.
                if cx.unheld {
                    revive(conn, id, &new.hash)?;
                }
                report.stored += 1;
                out.last = Some(id);
                if let Some(v) = vector {
                    out.vectors.push((id, v));
                }
            }
            None => report.duplicates += 1,
        }
        match (redacted, stored) {
            // The redacted record is kept here under its own hash; the slot
            // keeps the hash its origin signed and is relayed as a stub.
            (true, _) => put_slot(conn, cx.log, r.seq, LogKind::Withheld, &r.hash).map(drop)?,
            // Names the record's row id: just stored, or found by hash.
            (false, Some(id)) => put_record_slot(r.seq, id)?,
            (false, None) => {
                let map = catch_up.as_deref_mut().and_then(CatchUp::map);
                match super::catch_up::record_id(conn, map.as_deref(), &new.hash)? {
                    Some(id) => put_record_slot(r.seq, id)?,
                    None => put_slot(conn, cx.log, r.seq, LogKind::Record, &new.hash).map(drop)?,
                }
            }
        }
    }
    stmts.finish(conn, &mut ids)?;
    Ok(out)
}
