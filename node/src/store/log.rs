//! Origin logs: this node's own append-only log, the watermark of every log
//! held, and serving a peer's pull from a cursor.
//!
//! Every record this node indexes first gets the next slot in its own log
//! `(origin, epoch, seq)`, in the same transaction that stores it, so seqs
//! have no gaps. A slot is never removed: when its record is deleted (a
//! rewritten file lost it) it is served as a withheld stub, and when it is
//! forgotten as a forgotten stub. Serving streams rows from one SQL cursor
//! into a [`BatchBuilder`], so memory is bounded by the batch, never by how
//! far behind the peer is. Never touches the network.

use cairn_protocol::{
    Batch, BatchBuilder, BuildError, Hash32, LogEntry, NodeId, Pull, Pushed, StubKind, Watermark,
};
use rusqlite::{Connection, OptionalExtension, params};

use super::wire;
use super::{Store, StoreError, codec};
use crate::redact::Redactor;
use crate::store::TombstoneRow;

/// `meta` key: the origin (node id text) of this node's own log.
const META_LOG_ORIGIN: &str = "log_origin";
/// `meta` key: the epoch of this node's own log.
const META_LOG_EPOCH: &str = "log_epoch";

/// What a log slot holds (`logs.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// A record (`rec` = its row id while it is held, else `hash` = its
    /// content hash). Served as a withheld stub when the record is no
    /// longer stored.
    Record,
    /// A forget issued by the log's origin (`hash` = the tombstone id).
    Tombstone,
    /// A slot whose content this node never had (out of a sender's scope).
    Withheld,
    /// A slot whose record was forgotten.
    Forgotten,
}

impl LogKind {
    /// The `logs.kind` column value.
    pub(crate) fn code(self) -> i64 {
        match self {
            LogKind::Record => 0,
            LogKind::Tombstone => 1,
            LogKind::Withheld => 2,
            LogKind::Forgotten => 3,
        }
    }

    /// The kind for a `logs.kind` value.
    pub(crate) fn from_code(code: i64) -> Option<LogKind> {
        match code {
            0 => Some(LogKind::Record),
            1 => Some(LogKind::Tombstone),
            2 => Some(LogKind::Withheld),
            3 => Some(LogKind::Forgotten),
            _ => None,
        }
    }
}

/// A record as the store holds it (text decoded), for conversion to and
/// from the wire by [`super::wire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Content hash.
    pub hash: Hash32,
    /// Agent id.
    pub agent: String,
    /// The agent's session id.
    pub session_id: String,
    /// Parent session for sub-agents.
    pub parent_session: Option<String>,
    /// Working directory.
    pub project: Option<String>,
    /// Role name.
    pub role: String,
    /// Unix ms.
    pub time_ms: Option<i64>,
    /// Redacted text.
    pub text: String,
    /// Files touched.
    pub files: Vec<String>,
}

/// This node's own log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnLog {
    /// This node's id (text form, as in `origin` columns).
    pub origin: String,
    /// The epoch chosen when the log was started.
    pub epoch: u64,
}

/// One log's slots after a seq, with the record or tombstone each names
/// (a held record by its row id, see `put_slot`).
pub(super) const SERVE_PULL: &str = "SELECT l.seq, l.kind, coalesce(l.hash, r.hash),
        s.agent, s.session_id, s.parent_session, s.project,
        r.role, r.ts, r.flags, r.files, r.text,
        t.origin, t.created_ms, t.target, t.agent, t.session_id, t.project, t.hash
     FROM logs l
     LEFT JOIN records r ON l.kind = 0 AND r.id = l.rec
     LEFT JOIN sessions s ON s.id = r.session
     LEFT JOIN tombstones t ON l.kind = 1 AND t.id = l.hash
     WHERE l.log = (SELECT g.id FROM origin_logs g JOIN origins o ON o.id = g.origin
                    WHERE o.node = ?1 AND g.epoch = ?2)
       AND l.seq > ?3 AND l.seq <= ?4
     ORDER BY l.seq LIMIT ?5";

impl Store {
    /// Makes sure this node's own log exists for `origin` and returns it.
    ///
    /// The first call (or the first with a new node id) chooses the epoch:
    /// `now_ms`, or the next free value if a log of that origin and epoch
    /// is already known. Records stored before there was a log (a database
    /// from schema v1) are appended to it then, in id order.
    pub fn ensure_log(&mut self, origin: &str, now_ms: i64) -> Result<OwnLog, StoreError> {
        if let Some(log) = self.own_log()?
            && log.origin == origin
        {
            return Ok(log);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if let Some(log) = own_log(&tx)?
            && log.origin == origin
        {
            return Ok(log);
        }
        let mut epoch = u64::try_from(now_ms).unwrap_or(1).max(1);
        for _ in 0..1000 {
            if read_watermark_opt(&tx, origin, epoch)?.is_none() {
                break;
            }
            epoch += 1;
        }
        let log = log_id(&tx, origin, epoch)?;
        let backfilled = tx.execute(BACKFILL, [log])?;
        set_watermark(&tx, origin, epoch, backfilled as u64)?;
        for (k, v) in [
            (META_LOG_ORIGIN, origin.to_owned()),
            (META_LOG_EPOCH, epoch.to_string()),
        ] {
            super::meta_set(&tx, k, &v)?;
        }
        tx.commit()?;
        tracing::info!(epoch, backfilled, "started this node's sync log");
        Ok(OwnLog {
            origin: origin.to_owned(),
            epoch,
        })
    }

    /// This node's own log, if [`Store::ensure_log`] ran.
    pub fn own_log(&self) -> Result<Option<OwnLog>, StoreError> {
        own_log(&self.conn)
    }

    /// The watermark of every origin log held (this node's own included),
    /// ordered by origin and epoch. Logs whose origin is not a node id
    /// (test placeholders) are left out.
    pub fn watermarks(&self) -> Result<Vec<Watermark>, StoreError> {
        let mut q = self
            .conn
            .prepare("SELECT origin, epoch, seq FROM watermarks ORDER BY origin, epoch")?;
        let rows = q.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (origin, epoch, seq) = row?;
            if let Ok(origin) = origin.parse::<NodeId>() {
                out.push(Watermark {
                    origin,
                    epoch: epoch as u64,
                    seq: seq as u64,
                });
            }
        }
        Ok(out)
    }

    /// The watermark of one origin log (0 when nothing of it is held).
    #[cfg(test)]
    pub(crate) fn watermark(&self, origin: &NodeId, epoch: u64) -> Result<u64, StoreError> {
        read_watermark(&self.conn, &wire::node_text(origin), epoch)
    }

    /// Answers a peer's pull: the entries of one origin log after
    /// `pull.after_seq`, in seq order, within the pull's limits, streamed
    /// from a cursor.
    ///
    /// Records are redacted again with `redactor` on the way out (their
    /// text only when `redactor`'s rules may not have made every stored
    /// text: `store::redacted_with`). With a
    /// `scope` (project path prefixes), a record whose project is not under
    /// one of them, and a project forget for such a project, is sent as a
    /// withheld stub: its content never leaves. Session and record forgets
    /// name no content and always travel.
    pub fn serve_pull(
        &self,
        pull: &Pull,
        scope: Option<&[String]>,
        redactor: &Redactor,
    ) -> Result<Batch, StoreError> {
        let origin = wire::node_text(&pull.origin);
        let held = read_watermark(&self.conn, &origin, pull.epoch)?;
        let own = own_log(&self.conn)?.is_some_and(|l| l.origin == origin);
        // A relayed batch carries the hashes of sealed entries outside it
        // (at most two seals' worth): leave room for them in the frame.
        let budget = Pull {
            max_bytes: if own {
                pull.max_bytes
            } else {
                pull.max_bytes
                    .min((cairn_protocol::MAX_BATCH_BYTES - RELAY_HASH_ROOM) as u32)
            },
            ..*pull
        };
        let mut batch = self.build_batch(&budget, &origin, held, own, scope, redactor)?;
        if own {
            if let Some(signer) = &self.signer {
                signer.seal_own(&mut batch);
            }
        } else if let Some(log) = find_log(&self.conn, &origin, pull.epoch)? {
            super::trust::seal_relayed(&self.conn, log, &mut batch, held)?;
        } else {
            batch = BatchBuilder::new(pull).finish(pull.after_seq);
        }
        Ok(batch)
    }

    /// The entries of a pull's range, unsealed (see [`Store::serve_pull`]).
    fn build_batch(
        &self,
        pull: &Pull,
        origin: &str,
        held: u64,
        own: bool,
        scope: Option<&[String]>,
        redactor: &Redactor,
    ) -> Result<Batch, StoreError> {
        let mut builder = BatchBuilder::new(pull);
        if pull.after_seq >= held {
            return Ok(builder.finish(held));
        }
        let limit = (pull.max_records as usize).clamp(1, cairn_protocol::MAX_BATCH_ENTRIES);
        // Texts these very rules made go out as stored (see
        // `store::redacted_with`): redacting them again changes nothing.
        let text_redacted = super::redacted_with::holds(&self.conn, redactor.rules_id())?;
        let mut q = self.conn.prepare_cached(SERVE_PULL)?;
        let mut rows = q.query(params![
            origin,
            pull.epoch as i64,
            pull.after_seq as i64,
            held as i64,
            limit as i64
        ])?;
        while let Some(row) = rows.next()? {
            let seq = row.get::<_, i64>(0)? as u64;
            let hash = hash32(&row.get::<_, Option<Vec<u8>>>(2)?.unwrap_or_default());
            let kind = LogKind::from_code(row.get(1)?).unwrap_or(LogKind::Withheld);
            let entry = match kind {
                LogKind::Record => match row.get::<_, Option<String>>(3)? {
                    // The record is gone (a rewritten file lost it): keep the slot.
                    None => LogEntry::Stub(wire::stub(seq, hash, StubKind::Withheld)),
                    Some(agent) => {
                        let project: Option<String> = row.get(6)?;
                        if in_scope(scope, project.as_deref()) {
                            let files: String = row.get(10)?;
                            let rec = StoredRecord {
                                hash,
                                agent,
                                session_id: row.get(4)?,
                                parent_session: row.get(5)?,
                                project,
                                role: codec::role_at(row, 7)?,
                                time_ms: row.get(8)?,
                                text: codec::decode(
                                    &self.conn,
                                    &row.get::<_, Vec<u8>>(11)?,
                                    row.get(9)?,
                                ),
                                files: files.lines().map(str::to_owned).collect(),
                            };
                            let w = wire::record_to_wire(seq, rec, redactor, text_redacted);
                            if own || w.hash == hash {
                                // This node seals its own log as it
                                // serves it, redacted content included.
                                LogEntry::Record(w)
                            } else {
                                // Today's rules redact what another origin
                                // signed: a relay cannot sign for it, so the
                                // content stays here and the slot travels as
                                // a stub of the signed hash.
                                LogEntry::Stub(wire::stub(seq, hash, StubKind::Withheld))
                            }
                        } else {
                            LogEntry::Stub(wire::stub(seq, hash, StubKind::Withheld))
                        }
                    }
                },
                LogKind::Tombstone => {
                    let t = match row.get::<_, Option<String>>(12)? {
                        Some(t_origin) => {
                            let t_row = TombstoneRow {
                                id: hash,
                                origin: t_origin,
                                epoch: pull.epoch,
                                seq,
                                created_ms: row.get(13)?,
                                target: row.get(14)?,
                                agent: row.get(15)?,
                                session_id: row.get(16)?,
                                project: row.get(17)?,
                                hash: row.get::<_, Option<Vec<u8>>>(18)?.map(|h| hash32(&h)),
                            };
                            let scoped = t_row.project.is_none()
                                || in_scope(scope, t_row.project.as_deref());
                            wire::tombstone_to_wire(seq, &t_row).filter(|_| scoped)
                        }
                        None => None,
                    };
                    match t {
                        Some(t) => LogEntry::Tombstone(t),
                        None => LogEntry::Stub(wire::stub(seq, hash, StubKind::Withheld)),
                    }
                }
                LogKind::Withheld | LogKind::Forgotten => {
                    let k = wire::stub_kind(kind).unwrap_or(StubKind::Withheld);
                    LogEntry::Stub(wire::stub(seq, hash, k))
                }
            };
            let entry = match builder.push(entry) {
                Ok(Pushed::Added) => continue,
                Ok(Pushed::Full(_)) => break,
                // One record too large for any frame: its slot travels as a stub.
                Err(BuildError::EntryTooLarge { .. }) => {
                    LogEntry::Stub(wire::stub(seq, hash, StubKind::Withheld))
                }
                // The log has a hole (it never should): stop before it.
                Err(BuildError::NotNext { expected, got }) => {
                    tracing::warn!(%origin, expected, got, "log slot missing; batch cut short");
                    break;
                }
            };
            if !matches!(builder.push(entry), Ok(Pushed::Added)) {
                break;
            }
        }
        Ok(builder.finish(held))
    }
}

/// Bytes of a relayed batch's budget kept for the sealed hashes outside it.
const RELAY_HASH_ROOM: usize = 80 * 1024;

/// The number of log `(origin, epoch)` in `origin_logs`, if known (read only).
fn find_log(conn: &Connection, origin: &str, epoch: u64) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT g.id FROM origin_logs g JOIN origins o ON o.id = g.origin
             WHERE o.node = ?1 AND g.epoch = ?2",
        )?
        .query_row(params![origin, epoch as i64], |r| r.get(0))
        .optional()?)
}

/// Whether a record with this project may go to a peer with this scope.
/// A scope entry matches the project itself and every path below it.
pub(crate) fn in_scope(scope: Option<&[String]>, project: Option<&str>) -> bool {
    let Some(scope) = scope else {
        return true;
    };
    let Some(project) = project else {
        return false;
    };
    scope.iter().any(|prefix| {
        let prefix = prefix.trim_end_matches('/');
        project == prefix
            || project
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/') || prefix.is_empty())
    })
}

/// A 32-byte hash from a BLOB column (zero-padded or cut if the row is damaged).
pub(crate) fn hash32(bytes: &[u8]) -> Hash32 {
    let mut h = [0u8; 32];
    let n = bytes.len().min(32);
    h[..n].copy_from_slice(&bytes[..n]);
    h
}

/// This node's own log, read from `meta`.
pub(crate) fn own_log(conn: &Connection) -> Result<Option<OwnLog>, StoreError> {
    let get = |k: &str| super::meta_get(conn, k);
    let (Some(origin), Some(epoch)) = (get(META_LOG_ORIGIN)?, get(META_LOG_EPOCH)?) else {
        return Ok(None);
    };
    Ok(epoch
        .parse::<u64>()
        .ok()
        .map(|epoch| OwnLog { origin, epoch }))
}

/// The watermark of a log, if the log is known.
pub(crate) fn read_watermark_opt(
    conn: &Connection,
    origin: &str,
    epoch: u64,
) -> Result<Option<u64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT seq FROM watermarks WHERE origin = ?1 AND epoch = ?2")?
        .query_row(params![origin, epoch as i64], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|s| s as u64))
}

/// The watermark of a log (0 when unknown).
pub(crate) fn read_watermark(
    conn: &Connection,
    origin: &str,
    epoch: u64,
) -> Result<u64, StoreError> {
    Ok(read_watermark_opt(conn, origin, epoch)?.unwrap_or(0))
}

/// Sets the watermark of a log.
pub(crate) fn set_watermark(
    conn: &Connection,
    origin: &str,
    epoch: u64,
    seq: u64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO watermarks(origin, epoch, seq) VALUES (?1, ?2, ?3)
         ON CONFLICT(origin, epoch) DO UPDATE SET seq = excluded.seq",
    )?
    .execute(params![origin, epoch as i64, seq as i64])?;
    Ok(())
}

/// The row number of an origin node id in `origins`, added if new.
pub(crate) fn origin_id(conn: &Connection, origin: &str) -> Result<i64, StoreError> {
    let known = conn
        .prepare_cached("SELECT id FROM origins WHERE node = ?1")?
        .query_row([origin], |r| r.get(0))
        .optional()?;
    if let Some(id) = known {
        return Ok(id);
    }
    conn.prepare_cached("INSERT INTO origins(node) VALUES (?1)")?
        .execute([origin])?;
    Ok(conn.last_insert_rowid())
}

/// The number of the log `(origin, epoch)` in `origin_logs` (what slots
/// name it by), added if new.
pub(crate) fn log_id(conn: &Connection, origin: &str, epoch: u64) -> Result<i64, StoreError> {
    let origin = origin_id(conn, origin)?;
    let known = conn
        .prepare_cached("SELECT id FROM origin_logs WHERE origin = ?1 AND epoch = ?2")?
        .query_row(params![origin, epoch as i64], |r| r.get(0))
        .optional()?;
    if let Some(id) = known {
        return Ok(id);
    }
    conn.prepare_cached("INSERT INTO origin_logs(origin, epoch) VALUES (?1, ?2)")?
        .execute(params![origin, epoch as i64])?;
    Ok(conn.last_insert_rowid())
}

/// The row id of the record with hash ?1, through `records_hash8`.
pub(super) const RECORD_ID: &str =
    "SELECT id FROM records WHERE substr(hash, 1, 8) = substr(?1, 1, 8) AND hash = ?1";

/// The row id of the stored record with this hash.
pub(crate) fn record_id(conn: &Connection, hash: &Hash32) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached(RECORD_ID)?
        .query_row([&hash[..]], |r| r.get(0))
        .optional()?)
}

// How a slot is stored (v7): a record slot whose record is held names the
// record's row id (`rec`, `hash` NULL); every other slot names a hash
// (`rec` NULL). Deleting a record moves its hash back into its slots
// (trigger `logs_follow_records`); storing a record again takes such
// slots back ([`revive`]). So a record slot serves the record exactly
// when it is held, and a withheld stub with its hash otherwise.

/// Writes one log slot (of log number `log`, see [`log_id`]); a slot
/// already present is left as it is. A record slot names the record's row
/// id when the record is held, its hash otherwise.
pub(crate) fn put_slot(
    conn: &Connection,
    log: i64,
    seq: u64,
    kind: LogKind,
    hash: &Hash32,
) -> Result<bool, StoreError> {
    let rec = match kind {
        LogKind::Record => record_id(conn, hash)?,
        _ => None,
    };
    let n = conn
        .prepare_cached(
            "INSERT INTO logs(log, seq, kind, rec, hash) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(log, seq) DO NOTHING",
        )?
        .execute(params![
            log,
            seq as i64,
            kind.code(),
            rec,
            rec.is_none().then_some(&hash[..])
        ])?;
    Ok(n == 1)
}

/// Writes a record slot naming held record `rec` (its row id); a slot
/// already present is left as it is.
pub(crate) fn put_record_slot(
    conn: &Connection,
    log: i64,
    seq: u64,
    rec: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(RECORD_SLOT)?
        .execute(params![log, seq as i64, rec])?;
    Ok(())
}

/// Puts a record slot: log ?1, seq ?2, record row id ?3 (see
/// [`put_record_slot`]).
pub(crate) const RECORD_SLOT: &str = "INSERT INTO logs(log, seq, kind, rec) VALUES (?1, ?2, 0, ?3)
     ON CONFLICT(log, seq) DO NOTHING";

/// Record slots that name a hash: what was deleted and may be stored
/// again (through `logs_unheld`).
pub(super) const REVIVE: &str = "UPDATE logs SET rec = ?1, hash = NULL
     WHERE kind = 0 AND substr(hash, 1, 8) = substr(?2, 1, 8) AND hash = ?2";

/// Points the record slots naming `hash` at record `rec`, just stored:
/// a record deleted earlier (a rewritten file lost it) and stored again is
/// served again from every slot that named it, as before it was deleted.
pub(crate) fn revive(conn: &Connection, rec: i64, hash: &Hash32) -> Result<(), StoreError> {
    conn.prepare_cached(REVIVE)?
        .execute(params![rec, &hash[..]])?;
    Ok(())
}

/// Whether any record slot names a record that is not held (so a record
/// stored now may need [`revive`]).
pub(crate) fn any_unheld(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM logs WHERE kind = 0 AND hash IS NOT NULL)")?
        .query_row([], |r| r.get(0))?)
}

/// Appends every stored record without a slot to a new own log (number ?1).
pub(super) const BACKFILL: &str = "INSERT INTO logs(log, seq, kind, rec)
     SELECT ?1, row_number() OVER (ORDER BY id), 0, id FROM records r
     WHERE NOT EXISTS (SELECT 1 FROM logs l WHERE l.rec = r.id)";

/// Whether log ?3 has a slot for held record ?1 (hash ?2): a record slot
/// naming it, or a forgotten stub of its hash.
pub(super) const OWN_LOG_HAS: &str = "SELECT EXISTS(SELECT 1 FROM logs WHERE rec = ?1 AND log = ?3)
     OR EXISTS(SELECT 1 FROM logs WHERE kind = 3 AND substr(hash, 1, 8) = substr(?2, 1, 8)
                                  AND hash = ?2 AND log = ?3)";

/// Whether this node's own log already has a slot for held record `rec`.
pub(crate) fn own_log_has(
    conn: &Connection,
    app: &Appender,
    rec: i64,
    hash: &Hash32,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(OWN_LOG_HAS)?
        .query_row(params![rec, &hash[..], app.id], |r| r.get(0))?)
}

/// Appends slots to this node's own log inside a write transaction.
#[derive(Debug)]
pub(crate) struct Appender {
    pub(crate) log: OwnLog,
    /// The own log's number in `origin_logs`.
    pub(crate) id: i64,
    pub(crate) last: u64,
    pub(crate) dirty: bool,
}

impl Appender {
    /// The own log's appender for `origin`, if the own log is `origin`'s.
    pub(crate) fn open(conn: &Connection, origin: &str) -> Result<Option<Appender>, StoreError> {
        let Some(log) = own_log(conn)?.filter(|l| l.origin == origin) else {
            return Ok(None);
        };
        let last = read_watermark(conn, &log.origin, log.epoch)?;
        let id = log_id(conn, &log.origin, log.epoch)?;
        Ok(Some(Appender {
            log,
            id,
            last,
            dirty: false,
        }))
    }

    /// Appends a slot to the own log; returns its seq.
    pub(crate) fn append(
        &mut self,
        conn: &Connection,
        kind: LogKind,
        hash: &Hash32,
    ) -> Result<u64, StoreError> {
        let seq = self.last + 1;
        put_slot(conn, self.id, seq, kind, hash)?;
        self.last = seq;
        self.dirty = true;
        Ok(seq)
    }

    /// Appends a record slot naming held record `rec` (its row id).
    pub(crate) fn append_record(&mut self, conn: &Connection, rec: i64) -> Result<u64, StoreError> {
        let seq = self.last + 1;
        put_record_slot(conn, self.id, seq, rec)?;
        self.last = seq;
        self.dirty = true;
        Ok(seq)
    }

    /// Saves the watermark; call before committing.
    pub(crate) fn finish(&mut self, conn: &Connection) -> Result<(), StoreError> {
        if self.dirty {
            set_watermark(conn, &self.log.origin, self.log.epoch, self.last)?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Whether a known tombstone covers a record with these fields.
pub(crate) fn covered(
    conn: &Connection,
    hash: &Hash32,
    agent: &str,
    session_id: &str,
    project: Option<&str>,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM tombstones WHERE hash = ?1)
                 OR EXISTS(SELECT 1 FROM tombstones WHERE session_id = ?3 AND agent = ?2)
                 OR EXISTS(SELECT 1 FROM tombstones WHERE project = ?4)",
        )?
        .query_row(params![&hash[..], agent, session_id, project], |r| {
            r.get::<_, bool>(0)
        })?)
}

/// Whether a tombstone issued by `owner` (the log's origin the record
/// arrives in) or by `own` (this node) covers a record with these fields:
/// a forget reaches only records its issuer owns (see `store::forget`).
pub(crate) fn covered_by(
    conn: &Connection,
    hash: &Hash32,
    agent: &str,
    session_id: &str,
    project: Option<&str>,
    owner: &str,
    own: &str,
) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM tombstones WHERE hash = ?1 AND origin IN (?5, ?6))
                 OR EXISTS(SELECT 1 FROM tombstones WHERE session_id = ?3 AND agent = ?2
                                                      AND origin IN (?5, ?6))
                 OR EXISTS(SELECT 1 FROM tombstones WHERE project = ?4 AND origin IN (?5, ?6))",
        )?
        .query_row(
            params![&hash[..], agent, session_id, project, owner, own],
            |r| r.get::<_, bool>(0),
        )?)
}

/// Whether any tombstone is stored (lets inserts skip [`covered`]).
pub(crate) fn any_tombstones(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn.query_row("SELECT EXISTS(SELECT 1 FROM tombstones)", [], |r| r.get(0))?)
}
