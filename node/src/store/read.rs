//! Read queries for `status`, `sources` and `show`.

use std::collections::BTreeMap;

use rusqlite::params;
use serde::Serialize;

use super::{Store, StoreError, codec};

/// Counts for one agent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentCounts {
    /// Stores (files or databases) known.
    pub sources: u64,
    /// Of which no longer on disk (their records are kept).
    pub missing_sources: u64,
    /// Sessions stored.
    pub sessions: u64,
    /// Records stored.
    pub records: u64,
    /// Malformed lines or rows skipped.
    pub skipped: u64,
    /// Stores whose last pass failed.
    pub failing: u64,
    /// Secrets redacted, by kind.
    pub redactions: BTreeMap<String, u64>,
}

/// Totals for `cairn status`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreStats {
    /// Records stored.
    pub records: u64,
    /// Sessions stored.
    pub sessions: u64,
    /// Per agent.
    pub agents: BTreeMap<String, AgentCounts>,
    /// Bytes of the database file plus its WAL.
    pub db_bytes: u64,
    /// Newest indexing pass, Unix ms.
    pub last_indexed_ms: Option<i64>,
}

/// A session's summary.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// Internal row id.
    #[serde(skip)]
    pub row: i64,
    /// Agent id.
    pub agent: String,
    /// The agent's own session id.
    pub session_id: String,
    /// Parent session for sub-agents.
    pub parent_session: Option<String>,
    /// Working directory.
    pub project: Option<String>,
    /// Name of the machine the session was indexed on.
    pub machine: String,
    /// First record time, Unix ms.
    pub first_ms: Option<i64>,
    /// Last record time, Unix ms.
    pub last_ms: Option<i64>,
    /// First user prompt line.
    pub title: Option<String>,
    /// Records stored.
    pub records: u64,
}

/// One record of a session transcript.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    /// Role name.
    pub role: String,
    /// Unix ms.
    pub time_ms: Option<i64>,
    /// Text (redacted).
    pub text: String,
    /// Files touched.
    pub files: Vec<String>,
    /// Source file and offset, where local.
    pub source: Option<String>,
    /// Byte offset or row id in the source.
    pub offset: Option<i64>,
}

impl Store {
    /// The distinct working folders the indexed sessions name.
    pub fn session_projects(&self) -> Result<Vec<String>, StoreError> {
        let mut q = self
            .conn
            .prepare("SELECT DISTINCT project FROM sessions WHERE project IS NOT NULL")?;
        let rows = q.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Totals and per-agent counts.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let c = &self.conn;
        let mut st = StoreStats {
            records: c.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))?
                as u64,
            sessions: c.query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))?
                as u64,
            last_indexed_ms: c
                .query_row("SELECT max(indexed_ms) FROM sources", [], |r| r.get(0))?,
            ..StoreStats::default()
        };
        let mut q = c.prepare(
            "SELECT agent, count(*), sum(missing), sum(skipped), sum(last_error IS NOT NULL)
             FROM sources GROUP BY agent",
        )?;
        for row in q.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
            ))
        })? {
            let (agent, n, missing, skipped, failing) = row?;
            let a = st.agents.entry(agent).or_default();
            a.sources = n as u64;
            a.missing_sources = missing as u64;
            a.skipped = skipped as u64;
            a.failing = failing as u64;
        }
        let mut q =
            c.prepare("SELECT agent, count(*), sum(records) FROM sessions GROUP BY agent")?;
        for row in q.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })? {
            let (agent, sessions, records) = row?;
            let a = st.agents.entry(agent).or_default();
            a.sessions = sessions as u64;
            a.records = records as u64;
        }
        let mut q = c.prepare(
            "SELECT s.agent, r.kind, sum(r.count) FROM redactions r JOIN sources s ON s.id = r.source
             GROUP BY s.agent, r.kind",
        )?;
        for row in q.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })? {
            let (agent, kind, n) = row?;
            st.agents
                .entry(agent)
                .or_default()
                .redactions
                .insert(kind, n as u64);
        }
        let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        st.db_bytes = size(&self.path) + size(std::path::Path::new(&wal));
        Ok(st)
    }

    /// Sessions whose id starts with `prefix` (at most `limit`), newest first.
    pub fn find_sessions(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        let escaped = prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        // `+`: every row is read in table order and the few that match
        // sorted, not every row looked up in `sessions_last_ms`'s order.
        let mut q = self.conn.prepare(&format!(
            "{SESSION_INFO} WHERE s.session_id LIKE ?1 || '%' ESCAPE '\\'
             ORDER BY +s.last_ms DESC LIMIT ?2"
        ))?;
        let rows = q.query_map(params![escaped, limit as i64], session_info)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A window of a session's transcript in time order.
    pub fn session_records(
        &self,
        session_row: i64,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT r.role, r.ts, r.text, r.files, s.path, r.offset, r.flags
             FROM records r LEFT JOIN sources s ON s.id = r.source
             WHERE r.session = ?1
             ORDER BY r.ts IS NULL, r.ts, r.source, r.offset, r.id
             LIMIT ?2 OFFSET ?3",
        )?;
        let rows = q.query_map(params![session_row, limit as i64, offset as i64], |r| {
            let files: String = r.get(3)?;
            Ok(SessionRecord {
                role: codec::role_at(r, 0)?,
                time_ms: r.get(1)?,
                text: codec::decode(&self.conn, &r.get::<_, Vec<u8>>(2)?, r.get(6)?),
                files: files.lines().map(str::to_owned).collect(),
                // A file named after a session id holding a secret: shown
                // redacted, stored as it is (to be read again).
                source: r
                    .get::<_, Option<String>>(4)?
                    .map(|p| crate::redact::fields::shown_path(&p).into_owned()),
                offset: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// All known stores.
    pub fn list_sources(&self) -> Result<Vec<SourceRow>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT agent, path, missing, skipped, last_error,
                    (SELECT count(*) FROM records r WHERE r.source = sources.id)
             FROM sources ORDER BY agent, path",
        )?;
        let rows = q.query_map([], |r| {
            Ok(SourceRow {
                agent: r.get(0)?,
                path: r.get(1)?,
                missing: r.get(2)?,
                skipped: r.get::<_, i64>(3)? as u64,
                last_error: r.get(4)?,
                records: r.get::<_, i64>(5)? as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A known store, for `cairn sources`.
#[derive(Debug, Clone, Serialize)]
pub struct SourceRow {
    /// Agent id.
    pub agent: String,
    /// Path of the file or database.
    pub path: String,
    /// No longer on disk (its records are kept).
    pub missing: bool,
    /// Malformed lines or rows skipped.
    pub skipped: u64,
    /// The last pass's error, if it failed.
    pub last_error: Option<String>,
    /// Records stored from it.
    pub records: u64,
}

/// The columns [`session_info`] reads, from `sessions s` with the machine's
/// name (`nodes n`): a caller adds its `WHERE` and order.
pub(crate) const SESSION_INFO: &str =
    "SELECT s.id, s.agent, s.session_id, s.parent_session, s.project,
        COALESCE(n.name, s.origin), s.first_ms, s.last_ms, s.title, s.records
     FROM sessions s LEFT JOIN nodes n ON n.id = s.origin";

pub(crate) fn session_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        row: r.get(0)?,
        agent: r.get(1)?,
        session_id: r.get(2)?,
        parent_session: r.get(3)?,
        project: r.get(4)?,
        machine: r.get(5)?,
        first_ms: r.get(6)?,
        last_ms: r.get(7)?,
        title: r.get(8)?,
        records: r.get::<_, i64>(9)? as u64,
    })
}

impl Store {
    /// The `limit` sessions most recently active in project `cwd` or a
    /// folder under it, newest first, leaving out session id `exclude`.
    pub fn recent_project_sessions(
        &self,
        cwd: &str,
        exclude: Option<&str>,
        limit: i64,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        let mut q = self.conn.prepare(&format!(
            "{SESSION_INFO}
             WHERE (s.project = ?1 OR substr(s.project, 1, length(?1) + 1) = ?1 || '/')
               AND s.session_id != ?2
             ORDER BY s.last_ms IS NULL, s.last_ms DESC LIMIT ?3"
        ))?;
        let rows = q.query_map(params![cwd, exclude.unwrap_or(""), limit], session_info)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// At most `limit` sessions last written at or after `since_ms`, newest
    /// first (an index range: cheap however many sessions the store holds).
    pub fn sessions_written_since(
        &self,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        let mut q = self.conn.prepare_cached(&format!(
            "{SESSION_INFO} WHERE s.last_ms >= ?1 ORDER BY s.last_ms DESC LIMIT ?2"
        ))?;
        let rows = q.query_map(params![since_ms, limit], session_info)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The ids of the records of record `record_id`'s session, in the
    /// session's time order (undated last, then by source and offset).
    pub fn session_order_of(&self, record_id: i64) -> Result<Vec<i64>, StoreError> {
        let mut q = self.conn.prepare_cached(
            "SELECT id FROM records
             WHERE session = (SELECT session FROM records WHERE id = ?1)
             ORDER BY ts IS NULL, ts, source, offset, id",
        )?;
        let ids = q
            .query_map(params![record_id], |r| r.get::<_, i64>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ids)
    }
}
