//! The one path by which a record enters the database, shared by indexing
//! ([`super::ingest`]) and applying a peer's batch ([`super::apply`]).
//!
//! [`NewRecord`] holds everything about a record that needs no database:
//! its content hash, stored (possibly compressed) text, flags, the text as
//! the full-text index sees it and the session title it may give. It is
//! built off the writer's thread while indexing, so the thread holding the
//! write transaction only runs SQL. [`insert`] then stores the row, its
//! full-text entries and its session's counters, idempotently by hash.

use std::borrow::Cow;
use std::collections::HashMap;

use cairn_protocol::Hash32;
use rusqlite::{Connection, Statement, params};

use super::codec::TextDict;
use super::dict::{self, Encoder};
use super::ingest::{SessionKey, session_row, session_title};
use super::{StoreError, codec};
use crate::record::{Record, Role};
use crate::text::index_form;
use crate::text::is_decision;

/// A record ready to be stored.
#[derive(Debug, Clone)]
pub struct NewRecord {
    pub(super) hash: Hash32,
    pub(super) agent: String,
    pub(super) session_id: String,
    pub(super) parent_session: Option<String>,
    pub(super) project: Option<String>,
    /// Role name as stored.
    role: String,
    time_ms: Option<i64>,
    /// Byte offset (or row id) in the source; `None` for received records.
    offset: Option<i64>,
    /// Files touched, one per line.
    files: String,
    /// The text, for the full-text index.
    text: String,
    /// The text and files as the full-text index sees them, when that is
    /// not as they are (CJK text: see `index_form`), worked out off the
    /// writer's thread.
    fts_form: (Option<String>, Option<String>),
    /// How the text is stored: `None` until encoded (then by [`insert`],
    /// with the database's dictionary), `Some(None)` as `text` itself,
    /// `Some(Some(bytes))` compressed.
    stored: Option<Option<Vec<u8>>>,
    /// Without the encoding bits until encoded.
    flags: i64,
    /// What the record adds to its session's title (a user's first line).
    title: Option<String>,
}

impl NewRecord {
    /// Prepares a record read by this node's indexer (already redacted),
    /// encoding its text with `enc`.
    pub fn from_record_with(rec: Record, enc: &mut Encoder) -> NewRecord {
        let mut new = Self::from_record(rec);
        enc.observe(&new.text);
        new.encode(enc.dict());
        new
    }

    /// Prepares a record (already redacted) whose text [`insert`] encodes.
    pub fn from_record(rec: Record) -> NewRecord {
        let hash = rec.content_hash();
        let offset = Some(rec.offset as i64);
        Self::build(
            hash,
            rec.agent,
            rec.session_id,
            rec.parent_session,
            rec.project,
            Some(rec.role),
            rec.role.as_str().to_owned(),
            rec.time_ms,
            offset,
            &rec.files,
            rec.text,
        )
    }

    /// Prepares a record received from a peer (already checked and
    /// redacted), encoding its text with `dict` (the database's, if any),
    /// so that [`insert`] copies nothing.
    pub(super) fn from_stored(rec: super::StoredRecord, dict: Option<&TextDict>) -> NewRecord {
        let kind = Role::parse(&rec.role);
        let mut new = Self::build(
            rec.hash,
            rec.agent,
            rec.session_id,
            rec.parent_session,
            rec.project,
            kind,
            rec.role,
            rec.time_ms,
            None,
            &rec.files,
            rec.text,
        );
        new.encode(dict);
        new
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        hash: Hash32,
        agent: String,
        session_id: String,
        parent_session: Option<String>,
        project: Option<String>,
        kind: Option<Role>,
        role: String,
        time_ms: Option<i64>,
        offset: Option<i64>,
        files: &[String],
        text: String,
    ) -> NewRecord {
        let mut flags = 0;
        if conversational(kind) && is_decision(&text) {
            flags |= codec::DECISION;
        }
        let title = (kind == Some(Role::User)).then(|| session_title(&text));
        let files = files.join("\n");
        let owned = |form: Cow<'_, str>| match form {
            Cow::Owned(s) => Some(s),
            Cow::Borrowed(_) => None,
        };
        let fts_form = (owned(index_form(&text)), owned(index_form(&files)));
        NewRecord {
            hash,
            agent,
            session_id,
            parent_session,
            project,
            role,
            time_ms,
            offset,
            files,
            text,
            fts_form,
            stored: None,
            flags,
            title,
        }
    }

    /// Encodes the text for storage, with `dict` if given.
    fn encode(&mut self, dict: Option<&TextDict>) {
        let (bytes, encoding) = codec::encode(&self.text, dict);
        self.flags = (self.flags & !codec::ENCODING) | encoding;
        self.stored = Some(match bytes {
            Cow::Owned(z) => Some(z),
            Cow::Borrowed(_) => None,
        });
    }

    /// The content hash.
    pub fn hash(&self) -> &Hash32 {
        &self.hash
    }

    /// Role name as stored.
    pub(super) fn role(&self) -> &str {
        &self.role
    }

    /// The text (before compression).
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// Bytes of text (before compression).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Heap bytes the record holds: every buffer's capacity (a string built
    /// by appending may hold twice its length), the compressed copy once
    /// encoded, and the record itself. What a reader handing records to a
    /// writer keeps in memory for it.
    pub fn held_bytes(&self) -> usize {
        let opt = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        std::mem::size_of::<NewRecord>()
            + self.agent.capacity()
            + self.session_id.capacity()
            + opt(&self.parent_session)
            + opt(&self.project)
            + self.role.capacity()
            + self.files.capacity()
            + self.text.capacity()
            + opt(&self.fts_form.0)
            + opt(&self.fts_form.1)
            + self
                .stored
                .as_ref()
                .and_then(Option::as_ref)
                .map_or(0, Vec::capacity)
            + opt(&self.title)
    }

    fn stemmed(&self) -> bool {
        conversational(Role::parse(&self.role))
    }
}

/// What people and models said (not what tools did or printed): these
/// records are checked for decision language and enter the stemmed index.
fn conversational(role: Option<Role>) -> bool {
    matches!(role, Some(Role::User | Role::Assistant | Role::Note))
}

/// Whether records of this role enter the stemmed index.
pub(crate) fn stemmed_role(role: &str) -> bool {
    conversational(Role::parse(role))
}

/// The statements [`insert`] runs for every record, prepared once for a
/// run of inserts on one connection (an indexing pass, a peer's batch).
/// Taking them from rusqlite's statement cache instead hashed their text
/// twice per use (rusqlite's cache was 0.8% of a cold pass's CPU samples,
/// now 0.1%).
pub(crate) struct RecordStatements<'c> {
    /// Finds a record by hash through `records_hash8` (`log::RECORD_ID`).
    has_hash: Statement<'c>,
    add_row: Statement<'c>,
    fts: super::fts::Inserts<'c>,
    /// Adds a run's counts to a session (see [`SessionCounts`]).
    add_counts: Statement<'c>,
}

impl<'c> RecordStatements<'c> {
    /// Prepares them on `conn`.
    pub(crate) fn prepare(conn: &'c Connection) -> Result<RecordStatements<'c>, StoreError> {
        Ok(RecordStatements {
            has_hash: conn.prepare(super::log::RECORD_ID)?,
            add_row: conn.prepare(
                "INSERT INTO records(hash, session, role, ts, flags, origin, source, offset, files, text)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?,
            fts: super::fts::Inserts::prepare(conn)?,
            add_counts: conn.prepare(
                "UPDATE sessions SET records = records + ?2,
                    first_ms = CASE WHEN ?3 IS NULL THEN first_ms
                                    WHEN first_ms IS NULL OR ?3 < first_ms THEN ?3 ELSE first_ms END,
                    last_ms = CASE WHEN ?4 IS NULL THEN last_ms
                                   WHEN last_ms IS NULL OR ?4 > last_ms THEN ?4 ELSE last_ms END,
                    title = COALESCE(title, ?5)
                 WHERE id = ?1",
            )?,
        })
    }

    /// Writes what the inserts so far leave to the end of the transaction
    /// (the runs of their sessions): to be called before it commits.
    /// Records whose run is never written are still found and ranked the
    /// same, only more slowly (see `store::runs`).
    pub(crate) fn finish(&mut self, conn: &Connection, ids: &mut RowIds) -> Result<(), StoreError> {
        for (session, c) in ids.counts.drain() {
            self.add_counts
                .execute(params![session, c.records, c.first_ms, c.last_ms, c.title])?;
        }
        super::runs::extend(conn)
    }
}

/// What a run of inserts adds to one session's row: its records, their
/// earliest and latest times, the first title one gives. Written once per
/// session when the run's transaction ends ([`RecordStatements::finish`])
/// instead of once per record; the sum is the same.
#[derive(Debug, Default)]
pub(crate) struct SessionCounts {
    records: i64,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    title: Option<String>,
}

impl SessionCounts {
    /// Counts one more record of the session.
    fn add(&mut self, time_ms: Option<i64>, title: Option<&String>) {
        self.records += 1;
        if let Some(t) = time_ms {
            self.first_ms = Some(self.first_ms.map_or(t, |f| f.min(t)));
            self.last_ms = Some(self.last_ms.map_or(t, |l| l.max(t)));
        }
        if self.title.is_none() {
            self.title = title.cloned();
        }
    }
}

/// Row ids a run of inserts looked up, valid for one transaction (another
/// writer may change the rows between transactions): every session met,
/// plus the last session and origin, which nearly every record repeats, so
/// they are compared in place instead of copied into a key and hashed.
#[derive(Debug, Default)]
pub(crate) struct RowIds {
    pub(super) sessions: HashMap<(String, String), i64>,
    /// The last session's (agent, session id, row id).
    pub(super) last_session: Option<(String, String, i64)>,
    /// The last origin's (node id, row id).
    last_origin: Option<(String, i64)>,
    /// What the inserts add to each session, by row id, until written.
    counts: HashMap<i64, SessionCounts>,
}

impl RowIds {
    /// Forgets every id (at the start of a transaction).
    pub(crate) fn clear(&mut self) {
        self.sessions.clear();
        self.last_session = None;
        self.last_origin = None;
        self.counts.clear();
    }
}

/// The `origins` row of node id `origin`, made if new.
fn origin_row(conn: &Connection, origin: &str, ids: &mut RowIds) -> Result<i64, StoreError> {
    if let Some((o, id)) = &ids.last_origin
        && o == origin
    {
        return Ok(*id);
    }
    conn.prepare_cached("INSERT OR IGNORE INTO origins(node) VALUES (?1)")?
        .execute([origin])?;
    let id: i64 = conn
        .prepare_cached("SELECT id FROM origins WHERE node = ?1")?
        .query_row([origin], |r| r.get(0))?;
    ids.last_origin = Some((origin.to_owned(), id));
    Ok(id)
}

/// Stores `rec` unless a record with its hash is already stored: the row,
/// its full-text entries and its session's counters, all or nothing within
/// the caller's transaction. `source` is the store it was read from (`None`
/// for received records). Whether the hash is stored is asked of `known`
/// while a pass defers the hash index (`store::hash_index`), of the index
/// otherwise. Returns the new row id, or `None` for a repeat.
pub(crate) fn insert(
    conn: &Connection,
    stmts: &mut RecordStatements<'_>,
    rec: &NewRecord,
    origin: &str,
    source: Option<i64>,
    ids: &mut RowIds,
    known: Option<&super::hash_index::HashIds>,
) -> Result<Option<i64>, StoreError> {
    let key = SessionKey {
        agent: &rec.agent,
        session_id: &rec.session_id,
        parent_session: rec.parent_session.as_deref(),
        project: rec.project.as_deref(),
    };
    let session = session_row(conn, &key, origin, ids)?;
    // A repeat (a record read before, or received from another peer) costs
    // one index probe: no encoding, no write.
    let repeat = match known {
        Some(k) => k.find(conn, &rec.hash)?.is_some(),
        None => stmts.has_hash.exists([&rec.hash[..]])?,
    };
    if repeat {
        return Ok(None);
    }
    let origin = origin_row(conn, origin, ids)?;
    let encoded;
    let rec = if rec.stored.is_none() {
        // Received or written directly: encoded here, with the database's
        // dictionary when it has a usable one.
        let mut r = rec.clone();
        r.encode(dict::load(conn).ok().flatten().as_deref());
        encoded = r;
        &encoded
    } else {
        rec
    };
    let text: &[u8] = match &rec.stored {
        Some(Some(z)) => z,
        _ => rec.text.as_bytes(),
    };
    let role_value = codec::role_value(&rec.role);
    stmts.add_row.execute(params![
        &rec.hash[..],
        session,
        role_value,
        rec.time_ms,
        rec.flags,
        origin,
        source,
        rec.offset,
        rec.files,
        text
    ])?;
    let rowid = conn.last_insert_rowid();
    stmts.fts.add(
        rowid,
        rec.stemmed(),
        rec.fts_form.0.as_deref().unwrap_or(&rec.text),
        rec.fts_form.1.as_deref().unwrap_or(&rec.files),
    )?;
    ids.counts
        .entry(session)
        .or_default()
        .add(rec.time_ms, rec.title.as_ref());
    Ok(Some(rowid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(role: Role, text: &str) -> Record {
        let mut r = Record::new("claude-code", "s1", role, text);
        r.time_ms = Some(1_700_000_000_000);
        r.files = vec!["src/a.rs".into(), "src/b.rs".into()];
        r
    }

    fn stored(r: &Record) -> super::super::StoredRecord {
        super::super::StoredRecord {
            hash: r.content_hash(),
            agent: r.agent.clone(),
            session_id: r.session_id.clone(),
            parent_session: r.parent_session.clone(),
            project: r.project.clone(),
            role: r.role.as_str().to_owned(),
            time_ms: r.time_ms,
            text: r.text.clone(),
            files: r.files.clone(),
        }
    }

    #[test]
    fn indexed_and_received_records_are_prepared_alike() {
        let long = "We decided to pin hyper because the proxy broke. ".repeat(20);
        for role in Role::ALL {
            for text in ["short text", long.as_str()] {
                let r = record(role, text);
                let mut a = NewRecord::from_record(r.clone());
                a.encode(None);
                let b = NewRecord::from_stored(stored(&r), None);
                assert_eq!(a.hash, b.hash);
                assert_eq!(
                    (&a.role, a.flags, &a.title, &a.files, &a.stored, a.stemmed()),
                    (&b.role, b.flags, &b.title, &b.files, &b.stored, b.stemmed()),
                    "{role:?}"
                );
                // Only the indexer knows where in the source a record was.
                assert_eq!((a.offset, b.offset), (Some(0), None));
            }
        }
        // Before the database has a dictionary, long texts get plain zstd.
        let mut enc = Encoder::with(None);
        let user = NewRecord::from_record_with(record(Role::User, &long), &mut enc);
        assert!(
            matches!(user.stored, Some(Some(_))),
            "long text is compressed"
        );
        assert_eq!(user.flags, codec::COMPRESSED | codec::DECISION);
        assert!(user.title.is_some() && user.stemmed());
        let short = NewRecord::from_record_with(record(Role::User, "short text"), &mut enc);
        assert_eq!((&short.stored, short.flags), (&Some(None), 0));
        let tool = NewRecord::from_record_with(record(Role::ToolOutput, &long), &mut enc);
        assert_eq!(
            tool.flags,
            codec::COMPRESSED,
            "tools carry no decision flag"
        );
        assert!(tool.title.is_none() && !tool.stemmed());
    }

    #[test]
    fn held_bytes_count_every_buffer_a_record_keeps() {
        let long = "We decided to pin hyper because the proxy broke. ".repeat(20);
        let mut enc = Encoder::with(None);
        let rec = NewRecord::from_record_with(record(Role::User, &long), &mut enc);
        let Some(Some(z)) = &rec.stored else {
            panic!("long text is compressed")
        };
        let title = rec.title.as_ref().map_or(0, String::len);
        let strings = rec.agent.len() + rec.session_id.len() + rec.role.len() + rec.files.len();
        let least = std::mem::size_of::<NewRecord>() + long.len() + z.len() + title + strings;
        assert!(rec.held_bytes() >= least, "{} < {least}", rec.held_bytes());
        // Spare capacity is held memory too: a text grown by appending.
        let mut grown = NewRecord::from_record(record(Role::ToolOutput, "x"));
        let before = grown.held_bytes();
        grown.text.reserve(1 << 20);
        assert!(grown.held_bytes() >= before + (1 << 20));
        assert_eq!(grown.text_len(), 1);
    }

    /// A new store holding `records`, each inserted as new from its origin
    /// in one run of inserts.
    fn store_all(
        records: impl IntoIterator<Item = (NewRecord, String)>,
    ) -> (tempfile::TempDir, super::super::Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = super::super::Store::open(&dir.path().join("c.db")).expect("open");
        {
            let conn = store.conn();
            let mut ids = RowIds::default();
            let mut stmts = RecordStatements::prepare(conn).expect("prepare");
            for (new, origin) in records {
                insert(conn, &mut stmts, &new, &origin, None, &mut ids, None)
                    .expect("insert")
                    .expect("new");
            }
            stmts.finish(conn, &mut ids).expect("finish");
        }
        (dir, store)
    }

    #[test]
    fn cjk_text_and_files_enter_the_index_in_the_form_worked_out_ahead() {
        let mut cjk = record(Role::User, "修复了登录错误 fixed");
        cjk.files = vec!["文档/说明.md".into()];
        let plain = record(Role::ToolOutput, "plain words only");
        let (new_cjk, new_plain) = (NewRecord::from_record(cjk), NewRecord::from_record(plain));
        // Worked out when prepared: spaced CJK, then the English words of
        // its character pairs; nothing kept for text the index takes as
        // it is.
        assert_eq!(
            new_cjk.fts_form.0.as_deref(),
            Some(" 修  复  了  登  录  错  误  fixed\nfix login error")
        );
        assert!(new_cjk.fts_form.1.is_some());
        assert_eq!(new_plain.fts_form, (None, None));
        let (_dir, store) = store_all([(new_cjk, "n1".into()), (new_plain, "n1".into())]);
        let found = |q: &str| -> i64 {
            store
                .conn()
                .query_row("SELECT count(*) FROM fts WHERE fts MATCH ?1", [q], |r| {
                    r.get(0)
                })
                .expect("match")
        };
        assert_eq!(found("录"), 1);
        assert_eq!(found("files : 档"), 1);
        assert_eq!(found("plain"), 1);
    }

    #[test]
    fn known_roles_are_stored_as_codes_and_any_other_name_as_written() {
        let records = ["assistant", "tool", "mystery", "note"]
            .into_iter()
            .enumerate()
            .map(|(i, role)| {
                let mut r = stored(&record(Role::User, &format!("text {i}")));
                r.role = role.into();
                (NewRecord::from_stored(r, None), "a".repeat(32))
            });
        let (_dir, store) = store_all(records);
        let conn = store.conn();
        let rows: Vec<(String, String)> = conn
            .prepare("SELECT typeof(role), role FROM records ORDER BY id")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, codec::role_at(r, 1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want = [
            ("blob", "assistant"),
            ("text", "tool"),
            ("text", "mystery"),
            ("blob", "note"),
        ];
        assert_eq!(
            rows,
            want.map(|(t, n)| (t.to_owned(), n.to_owned())).to_vec()
        );
    }

    #[test]
    fn records_of_interleaved_sessions_and_origins_land_in_their_own_rows() {
        // (agent, session, origin): back to a session and an origin after
        // another, and the same session id under another agent.
        let order = [
            ("claude-code", "s1", "a"),
            ("claude-code", "s2", "b"),
            ("claude-code", "s1", "a"),
            ("codex", "s1", "a"),
            ("claude-code", "s1", "b"),
        ];
        let records = order
            .iter()
            .enumerate()
            .map(|(i, (agent, session, origin))| {
                let mut r = Record::new(agent, session, Role::User, format!("text {i}"));
                r.time_ms = Some(1_700_000_000_000 + i as i64);
                (NewRecord::from_record(r), origin.repeat(32))
            });
        let (_dir, store) = store_all(records);
        let conn = store.conn();
        let sessions: Vec<(String, String, i64)> = conn
            .prepare("SELECT agent, session_id, records FROM sessions ORDER BY agent, session_id")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want = [
            ("claude-code", "s1", 3),
            ("claude-code", "s2", 1),
            ("codex", "s1", 1),
        ];
        assert_eq!(
            sessions,
            want.map(|(a, s, n)| (a.to_owned(), s.to_owned(), n))
                .to_vec()
        );
        // Each record names its own session and origin row.
        let rows: Vec<(String, String, String)> = conn
            .prepare(
                "SELECT s.agent, s.session_id, o.node FROM records r
                 JOIN sessions s ON s.id = r.session JOIN origins o ON o.id = r.origin
                 ORDER BY r.id",
            )
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let want: Vec<(String, String, String)> = order
            .iter()
            .map(|(a, s, o)| (a.to_string(), s.to_string(), o.repeat(32)))
            .collect();
        assert_eq!(rows, want);
    }

    #[test]
    fn session_counters_written_once_per_run_add_up_as_record_by_record() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = super::super::Store::open(&dir.path().join("c.db")).expect("open");
        let conn = store.conn();
        // (role, text, time): out of order, one without a time, titles
        // from the first user record only.
        let run = |records: &[(Role, &str, Option<i64>)]| {
            let mut ids = RowIds::default();
            let mut stmts = RecordStatements::prepare(conn).expect("prepare");
            for (role, text, time) in records {
                let mut r = Record::new("claude-code", "s1", *role, *text);
                r.time_ms = *time;
                let new = NewRecord::from_record(r);
                insert(
                    conn,
                    &mut stmts,
                    &new,
                    &"a".repeat(32),
                    None,
                    &mut ids,
                    None,
                )
                .expect("insert")
                .expect("new");
            }
            stmts.finish(conn, &mut ids).expect("finish");
            assert!(ids.counts.is_empty(), "every count written");
        };
        let session = || -> (i64, Option<i64>, Option<i64>, Option<String>) {
            conn.query_row(
                "SELECT records, first_ms, last_ms, title FROM sessions WHERE session_id = 's1'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("session")
        };
        run(&[
            (Role::Assistant, "an answer", Some(500)),
            (Role::User, "first prompt\nmore", Some(300)),
            (Role::ToolOutput, "output", None),
            (Role::User, "second prompt", Some(900)),
        ]);
        assert_eq!(
            session(),
            (4, Some(300), Some(900), Some("first prompt".into()))
        );
        // A later run adds to the row: earlier and later times widen it,
        // the title stays the first one.
        run(&[
            (Role::User, "third prompt", Some(100)),
            (Role::Assistant, "late", Some(2_000)),
        ]);
        assert_eq!(
            session(),
            (6, Some(100), Some(2_000), Some("first prompt".into()))
        );
        run(&[(Role::Note, "no time", None)]);
        assert_eq!(
            session(),
            (7, Some(100), Some(2_000), Some("first prompt".into()))
        );
    }
}
