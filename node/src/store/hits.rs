//! What a search hit shows of a record: its text (decoded), time, role,
//! session, machine and source, and the reply that answers a user's
//! record. Snippets and ranking stay with `search`.
//!
//! Only reads; text is decoded through `codec` and returned as stored
//! (redacted when it was stored), cleaned for the terminal by the caller.

use rusqlite::OptionalExtension;

use super::{Store, StoreError, codec};
use crate::record::Role;

/// A hit's record as stored, with its session and origin.
#[derive(Debug, Clone)]
pub(crate) struct HitRow {
    pub(crate) role: String,
    pub(crate) ts: Option<i64>,
    /// Decoded text.
    pub(crate) text: String,
    pub(crate) offset: Option<i64>,
    pub(crate) session_id: String,
    pub(crate) agent: String,
    pub(crate) project: Option<String>,
    pub(crate) title: Option<String>,
    /// The machine's name, else its node id.
    pub(crate) machine: String,
    /// The source file's path as stored.
    pub(crate) source: Option<String>,
}

/// A record's role, time and decoded text.
#[derive(Debug, Clone)]
pub(crate) struct TextRow {
    pub(crate) role: String,
    pub(crate) ts: Option<i64>,
    pub(crate) text: String,
}

impl Store {
    /// The first reply (assistant or note) after record `record_id` in
    /// session row `session_row`.
    pub(crate) fn reply_after(
        &self,
        session_row: i64,
        record_id: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.first_after(session_row, record_id, &[Role::Assistant, Role::Note])
    }

    /// The first user record after record `record_id` of session
    /// `session_row`: where the replies to that record end.
    pub(crate) fn user_turn_after(
        &self,
        session_row: i64,
        record_id: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.first_after(session_row, record_id, &[Role::User])
    }

    /// The first record of one of `roles` after record `record_id` of
    /// session `session_row`.
    fn first_after(
        &self,
        session_row: i64,
        record_id: i64,
        roles: &[Role],
    ) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(&format!(
                // The session's later ids come from its index alone, and
                // rows are read in id order only until one has the role:
                // not every later row of a long session, then sorted.
                "SELECT id FROM records
                 WHERE id IN (SELECT id FROM records WHERE session = ?1 AND id > ?2)
                   AND role IN ({})
                 ORDER BY id LIMIT 1",
                codec::roles_sql(roles)
            ))?
            .query_row([session_row, record_id], |r| r.get(0))
            .optional()?)
    }

    /// Record `id`'s role, time and text; `None` when it is gone.
    pub(crate) fn record_text(&self, id: i64) -> Result<Option<TextRow>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .prepare_cached("SELECT role, ts, flags, text FROM records WHERE id = ?1")?
            .query_row([id], |r| {
                Ok(TextRow {
                    role: codec::role_at(r, 0)?,
                    ts: r.get(1)?,
                    text: codec::decode(conn, &r.get::<_, Vec<u8>>(3)?, r.get(2)?),
                })
            })
            .optional()?)
    }

    /// What a hit shows of record `id`; `None` when it is gone.
    pub(crate) fn hit_row(&self, id: i64) -> Result<Option<HitRow>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .prepare_cached(
                "SELECT r.role, r.ts, r.flags, r.text, r.offset, se.session_id, se.agent, se.project, se.title,
                        COALESCE(n.name, og.node), src.path
                 FROM records r
                 JOIN sessions se ON se.id = r.session
                 JOIN origins og ON og.id = r.origin
                 LEFT JOIN nodes n ON n.id = og.node
                 LEFT JOIN sources src ON src.id = r.source
                 WHERE r.id = ?1",
            )?
            .query_row([id], |r| {
                Ok(HitRow {
                    role: codec::role_at(r, 0)?,
                    ts: r.get(1)?,
                    text: codec::decode(conn, &r.get::<_, Vec<u8>>(3)?, r.get(2)?),
                    offset: r.get(4)?,
                    session_id: r.get(5)?,
                    agent: r.get(6)?,
                    project: r.get(7)?,
                    title: r.get(8)?,
                    machine: r.get(9)?,
                    source: r.get(10)?,
                })
            })
            .optional()?)
    }
}
