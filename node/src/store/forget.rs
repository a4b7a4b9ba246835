//! Forgetting: tombstones and purging the records they cover. A forget
//! becomes a tombstone in this node's own log and travels like a record;
//! a received one is stored the same way (`store::apply`). The covered
//! records, their full-text rows and session summaries are deleted with
//! `secure_delete`, the full-text index merged, the file vacuumed and the
//! WAL truncated; the tombstone refuses the records from then on. A
//! tombstone names what to forget, never the text.

use std::collections::BTreeSet;

use cairn_protocol::{ForgetTarget, Hash32, Tombstone};
use rusqlite::{Connection, params};
use serde::Serialize;

use super::log::{Appender, LogKind, hash32, own_log};
use super::wire;
use super::{Store, StoreError, codec};

/// Marks the record slots of hash ?1 forgotten (?2) where they name a
/// record (?3); through `logs_hash8` (see `log::OWN_LOG_HAS`).
pub(super) const MARK_FORGOTTEN: &str = "UPDATE logs SET kind = ?2
     WHERE substr(hash, 1, 8) = substr(?1, 1, 8) AND hash = ?1 AND kind = ?3";

/// A tombstone as stored in `tombstones`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TombstoneRow {
    /// Its id (blake3 of its canonical content).
    pub id: Hash32,
    /// The issuer's node id (text form).
    pub origin: String,
    /// The issuer's log epoch.
    pub epoch: u64,
    /// Its slot in the issuer's log.
    pub seq: u64,
    /// When it was issued, Unix ms.
    pub created_ms: i64,
    /// Target kind: 1 session, 2 project, 3 record.
    pub target: i64,
    /// Session target: the agent.
    pub agent: Option<String>,
    /// Session target: the agent's session id.
    pub session_id: Option<String>,
    /// Project target: the project path.
    pub project: Option<String>,
    /// Record target: the content hash.
    pub hash: Option<Hash32>,
}

/// What a forget did on this node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ForgetReport {
    /// Tombstones written to this node's log.
    pub tombstones: u64,
    /// Notes removed from this node's notes file (set by `Node::forget`).
    pub notes: u64,
    /// Records deleted.
    pub records: u64,
    /// Sessions left with no record and deleted.
    pub sessions: u64,
    /// Whether the database was rewritten and its WAL truncated (false when
    /// another connection held it; the next forget finishes the job).
    pub wal_truncated: bool,
}

/// A record a forget would remove, for showing before doing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForgetCandidate {
    /// Content hash (hex in JSON).
    #[serde(serialize_with = "crate::hex::serialize")]
    pub hash: Hash32,
    /// Agent id.
    pub agent: String,
    /// The agent's session id.
    pub session_id: String,
    /// Working directory.
    pub project: Option<String>,
    /// Role name.
    pub role: String,
    /// Unix ms.
    pub time_ms: Option<i64>,
}

/// Failures of a forget.
#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    /// This node has no log yet to write the tombstone to.
    #[error("forget: this node has no sync log yet (open it through Node::open)")]
    NoLog,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ForgetError {
    fn from(e: rusqlite::Error) -> Self {
        ForgetError::Store(StoreError::from(e))
    }
}

/// Most records a query forget may name (one tombstone each).
pub const MAX_QUERY_FORGET: usize = 10_000;

impl Store {
    /// Forgets every record `targets` cover: writes one tombstone per
    /// target into this node's own log, deletes the records, and refuses
    /// them from then on. The freed bytes are zeroed, the FTS index merged
    /// and the WAL truncated before this returns.
    pub fn forget(
        &mut self,
        targets: &[ForgetTarget],
        now_ms: i64,
    ) -> Result<ForgetReport, ForgetError> {
        let own = own_log(&self.conn)?.ok_or(ForgetError::NoLog)?;
        let issuer = own.origin.parse().ok().ok_or(ForgetError::NoLog)?;
        self.conn.pragma_update(None, "secure_delete", "ON")?;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Records are looked up by hash below: a pass's deferral ends.
        super::hash_index::ensure(&tx)?;
        let mut report = ForgetReport::default();
        let mut app = Appender::open(&tx, &own.origin)?.ok_or(ForgetError::NoLog)?;
        let mut seen = BTreeSet::new();
        for target in targets {
            let probe = Tombstone::new(0, issuer, now_ms, target.clone());
            if !seen.insert(probe.id) {
                continue;
            }
            let seq = app.append(&tx, LogKind::Tombstone, &probe.id)?;
            let t = Tombstone { seq, ..probe };
            store_tombstone(&tx, &t, own.epoch)?;
            let (records, sessions) = purge_owned(&tx, target, None)?;
            report.records += records;
            report.sessions += sessions;
            report.tombstones += 1;
        }
        app.finish(&tx)?;
        if report.records > 0 {
            super::fts::optimize(&tx)?;
        }
        tx.commit()?;
        report.wal_truncated = self.scrub()?;
        tracing::info!(
            tombstones = report.tombstones,
            records = report.records,
            "forgot records"
        );
        Ok(report)
    }

    /// The records `target` covers now (at most `limit`), without changing anything.
    pub fn forget_candidates(
        &self,
        target: &ForgetTarget,
        limit: usize,
    ) -> Result<Vec<ForgetCandidate>, StoreError> {
        let (covered, arg1, arg2) = target_query(target);
        let sql = format!(
            "SELECT r.hash, s.agent, s.session_id, s.project, r.role, r.ts
             FROM ({covered}) d JOIN records r ON r.id = d.id JOIN sessions s ON s.id = r.session
             ORDER BY r.ts, r.id LIMIT ?3"
        );
        let mut q = self.conn.prepare(&sql)?;
        let rows = q.query_map(params![arg1, arg2, limit as i64], candidate)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The records an FTS5 MATCH expression finds, at most `limit`: what
    /// `cairn forget --query` forgets, given `Query::to_fts_all` (search
    /// owns the query language). An empty expression finds nothing.
    pub fn records_matching_all(
        &self,
        fts_expr: &str,
        limit: usize,
    ) -> Result<Vec<ForgetCandidate>, StoreError> {
        if fts_expr.trim().is_empty() {
            return Ok(Vec::new());
        }
        let expr = fts_expr;
        let mut q = self.conn.prepare(
            "SELECT r.hash, s.agent, s.session_id, s.project, r.role, r.ts
             FROM fts JOIN records r ON r.id = fts.rowid JOIN sessions s ON s.id = r.session
             WHERE fts MATCH ?1 ORDER BY r.ts, r.id LIMIT ?2",
        )?;
        let rows = q.query_map(params![expr, limit as i64], candidate)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stored tombstone, oldest first.
    pub fn tombstones(&self) -> Result<Vec<TombstoneRow>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT id, origin, epoch, seq, created_ms, target, agent, session_id, project, hash
             FROM tombstones ORDER BY created_ms, id",
        )?;
        let rows = q.query_map([], |r| {
            Ok(TombstoneRow {
                id: hash32(&r.get::<_, Vec<u8>>(0)?),
                origin: r.get(1)?,
                epoch: r.get::<_, i64>(2)? as u64,
                seq: r.get::<_, i64>(3)? as u64,
                created_ms: r.get(4)?,
                target: r.get(5)?,
                agent: r.get(6)?,
                session_id: r.get(7)?,
                project: r.get(8)?,
                hash: r.get::<_, Option<Vec<u8>>>(9)?.map(|h| hash32(&h)),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Makes deleted bytes unrecoverable from the files: rewrites the
    /// database (`VACUUM`: stale copies of rows left in free pages and page
    /// slack by earlier writes are dropped), then checkpoints and truncates
    /// the WAL. Returns false when another connection kept either from
    /// completing (the bytes go at the next successful scrub).
    pub(crate) fn scrub(&self) -> Result<bool, StoreError> {
        // The vector file still holds the vectors of what was forgotten
        // until the next vector pass: blanked now.
        super::vector_file::scrub(&self.conn, &self.path)?;
        match self.conn.execute_batch("VACUUM") {
            Ok(()) => {}
            Err(e) if super::is_busy(&e) => {
                tracing::warn!("database busy; forgotten bytes are scrubbed at the next forget");
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        self.truncate_wal()
    }

    /// Checkpoints the WAL into the database file and truncates it to zero
    /// bytes. Returns false when a reader kept it from completing.
    pub(crate) fn truncate_wal(&self) -> Result<bool, StoreError> {
        let busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        Ok(busy == 0)
    }
}

fn candidate(r: &rusqlite::Row<'_>) -> rusqlite::Result<ForgetCandidate> {
    let hash: Vec<u8> = r.get(0)?;
    Ok(ForgetCandidate {
        hash: hash32(&hash),
        agent: r.get(1)?,
        session_id: r.get(2)?,
        project: r.get(3)?,
        role: codec::role_at(r, 4)?,
        time_ms: r.get(5)?,
    })
}

/// Stores a tombstone (its log slot is written by the caller); a known id
/// is left as it is. Returns whether it was new.
pub(crate) fn store_tombstone(
    conn: &Connection,
    t: &Tombstone,
    epoch: u64,
) -> Result<bool, StoreError> {
    let row = wire::tombstone_to_row(t, epoch);
    let n = conn
        .prepare_cached(
            "INSERT INTO tombstones(id, origin, epoch, seq, created_ms, target, agent, session_id,
                                    project, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT(id) DO NOTHING",
        )?
        .execute(params![
            &row.id[..],
            row.origin,
            row.epoch as i64,
            row.seq as i64,
            row.created_ms,
            row.target,
            row.agent,
            row.session_id,
            row.project,
            row.hash.as_ref().map(|h| h.to_vec()),
        ])?;
    Ok(n == 1)
}

/// The record a record tombstone covers (`?2` unused), through
/// `records_hash8`.
pub(super) const PURGE_BY_HASH: &str = "SELECT id, session, hash FROM records
     WHERE substr(hash, 1, 8) = substr(?1, 1, 8) AND hash = ?1 AND ?2 IS NULL";

/// Records covered by `target` that `owner` owns: a slot of one of its
/// logs names them (it indexed them itself). With `None`, every covered
/// record (this node's own forget).
const OWNED_BY: &str = "EXISTS(SELECT 1 FROM logs l JOIN origin_logs g ON g.id = l.log
                               JOIN origins o ON o.id = g.origin
                               WHERE l.rec = d.id AND o.node = ?3)";

/// How many records `target` covers, and how many of them `owner` owns.
pub(crate) fn covered_counts(
    conn: &Connection,
    target: &ForgetTarget,
    owner: &str,
) -> Result<(u64, u64), StoreError> {
    let (sql, a, b) = target_query(target);
    let q = format!("SELECT count(*), coalesce(sum({OWNED_BY}), 0) FROM ({sql}) d");
    Ok(conn.query_row(&q, params![a, b, owner], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })?)
}

fn target_query(
    target: &ForgetTarget,
) -> (&'static str, rusqlite::types::Value, rusqlite::types::Value) {
    match target {
        ForgetTarget::Session { agent, session_id } => (
            "SELECT r.id, r.session, r.hash FROM records r JOIN sessions s ON s.id = r.session
             WHERE s.agent = ?1 AND s.session_id = ?2",
            agent.clone().into(),
            session_id.clone().into(),
        ),
        ForgetTarget::Project { project } => (
            "SELECT r.id, r.session, r.hash FROM records r JOIN sessions s ON s.id = r.session
             WHERE s.project = ?1 AND ?2 IS NULL",
            project.clone().into(),
            rusqlite::types::Value::Null,
        ),
        ForgetTarget::Record { hash } => (
            PURGE_BY_HASH,
            hash.to_vec().into(),
            rusqlite::types::Value::Null,
        ),
    }
}

/// Deletes every record `target` covers that `owner` owns (`None`: all
/// covered), with its FTS row; marks the log slots that held them as
/// forgotten; fixes or deletes the sessions they belonged to. Returns
/// (records deleted, sessions deleted).
pub(crate) fn purge_owned(
    conn: &Connection,
    target: &ForgetTarget,
    owner: Option<&str>,
) -> Result<(u64, u64), StoreError> {
    let doomed: Vec<(i64, i64, Vec<u8>)> = {
        let (sql, a, b) = target_query(target);
        let sql =
            format!("SELECT d.id, d.session, d.hash FROM ({sql}) d WHERE ?3 IS NULL OR {OWNED_BY}");
        let mut q = conn.prepare(&sql)?;
        let rows = q.query_map(params![a, b, owner], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    purge_rows(conn, target, doomed)
}

fn purge_rows(
    conn: &Connection,
    target: &ForgetTarget,
    doomed: Vec<(i64, i64, Vec<u8>)>,
) -> Result<(u64, u64), StoreError> {
    let mut sessions = delete_records(conn, &doomed, true)?;
    // A session forget also removes an empty session row.
    if let ForgetTarget::Session { agent, session_id } = target {
        let row: Option<i64> = {
            use rusqlite::OptionalExtension;
            conn.query_row(
                "SELECT id FROM sessions WHERE agent = ?1 AND session_id = ?2",
                (agent, session_id),
                |r| r.get(0),
            )
            .optional()?
        };
        sessions.extend(row);
    }
    Ok((doomed.len() as u64, refresh_sessions(conn, sessions)?))
}

/// Deletes the records `doomed` names (`(id, session, hash)`) with their
/// full-text rows and columns entries; with
/// `mark_forgotten`, the log slots that named them become forgotten
/// stubs. Returns the sessions they belonged to, for
/// [`refresh_sessions`].
pub(crate) fn delete_records(
    conn: &Connection,
    doomed: &[(i64, i64, Vec<u8>)],
    mark_forgotten: bool,
) -> Result<BTreeSet<i64>, StoreError> {
    let ids: Vec<i64> = doomed.iter().map(|d| d.0).collect();
    super::columns_file::zero(conn, &ids)?;
    let mut sessions = BTreeSet::new();
    for (id, session, hash) in doomed {
        super::fts::delete(conn, *id)?;
        conn.prepare_cached("DELETE FROM records WHERE id = ?1")?
            .execute([id])?;
        if mark_forgotten {
            conn.prepare_cached(MARK_FORGOTTEN)?.execute(params![
                hash,
                LogKind::Forgotten.code(),
                LogKind::Record.code()
            ])?;
        }
        sessions.insert(*session);
    }
    Ok(sessions)
}

/// [`refresh_session`] for each of `sessions`; returns how many were
/// deleted (left with no record).
pub(crate) fn refresh_sessions(
    conn: &Connection,
    sessions: BTreeSet<i64>,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    for session in sessions {
        deleted += u64::from(refresh_session(conn, session)?);
    }
    Ok(deleted)
}

/// Recomputes a session's counts, times and title from the records it has
/// left (the old title may quote a forgotten record), or deletes it when
/// none are left. Returns whether it was deleted.
fn refresh_session(conn: &Connection, session: i64) -> Result<bool, StoreError> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM records WHERE session = ?1",
        [session],
        |r| r.get(0),
    )?;
    if n == 0 {
        conn.execute("DELETE FROM sessions WHERE id = ?1", [session])?;
        super::runs::forget_session(conn, session)?;
        return Ok(true);
    }
    let title: Option<String> = {
        use rusqlite::OptionalExtension;
        conn.query_row(
            &format!(
                "SELECT text, flags FROM records WHERE session = ?1 AND role IN ({})
             ORDER BY ts IS NULL, ts, id LIMIT 1",
                codec::roles_sql(&[crate::record::Role::User])
            ),
            [session],
            |r| Ok(codec::decode(conn, &r.get::<_, Vec<u8>>(0)?, r.get(1)?)),
        )
        .optional()?
        .map(|t| super::ingest::session_title(&t))
    };
    conn.execute(
        "UPDATE sessions SET records = ?2, title = ?3,
            first_ms = (SELECT min(ts) FROM records WHERE session = ?1),
            last_ms = (SELECT max(ts) FROM records WHERE session = ?1)
         WHERE id = ?1",
        params![session, n, title],
    )?;
    Ok(false)
}
