//! The one-time redaction of fields a database stored before every field
//! was redacted (session and parent ids, projects, titles, files, forget
//! targets), run from `Node::open` while `meta.fields_redacted` is `0`.
//! The result is what a fresh index would store: each record's hash is
//! recomputed and its row id kept; own-log slots follow the new hash,
//! other origins' slots keep theirs and serve `withheld` stubs; sessions
//! or records that now collide are merged; a changed forget is served as
//! a `forgotten` stub. Then the full-text index is merged and the file
//! rewritten. Never re-redacts record text, never touches the network.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::log::{hash32, own_log};
use super::{Store, StoreError, codec};
use crate::redact::{RedactionCounts, Redactor, fields};
use crate::text::index_form;

/// The meta key marking the upgrade done (`1`) or due (`0`).
pub(crate) const META_FIELDS_REDACTED: &str = "fields_redacted";

/// What the upgrade changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FieldsUpgrade {
    /// Sessions whose id, parent, project or title changed.
    pub sessions: u64,
    /// Of them, sessions merged into the stored session of their new id.
    pub sessions_merged: u64,
    /// Records whose hash or files changed.
    pub records: u64,
    /// Of them, records dropped for a stored record of the same new hash.
    pub records_merged: u64,
    /// Records whose text could not be read (kept as they were).
    pub unreadable: u64,
    /// Forgets whose target changed.
    pub tombstones: u64,
    /// Whether the old bytes were scrubbed from the files.
    pub scrubbed: bool,
}

impl FieldsUpgrade {
    fn changed(&self) -> bool {
        self.sessions + self.records + self.tombstones > 0
    }
}

impl Store {
    /// Redacts, once, the fields stored before every field was redacted
    /// (see the module docs). Returns `None` when it was done already.
    pub fn redact_stored_fields(
        &mut self,
        redactor: &Redactor,
    ) -> Result<Option<FieldsUpgrade>, StoreError> {
        if self.meta(META_FIELDS_REDACTED)?.as_deref() != Some("0") {
            return Ok(None);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if super::meta_get(&tx, META_FIELDS_REDACTED)?.as_deref() != Some("0") {
            return Ok(None);
        }
        // Records are looked up by hash below: a pass's deferral ends.
        super::hash_index::ensure(&tx)?;
        let mut report = upgrade(&tx, redactor)?;
        super::meta_set(&tx, META_FIELDS_REDACTED, "1")?;
        if report.changed() {
            super::fts::optimize(&tx)?;
        }
        tx.commit()?;
        if report.changed() {
            report.scrubbed = self.scrub()?;
            tracing::info!(
                sessions = report.sessions,
                records = report.records,
                tombstones = report.tombstones,
                "redacted the ids, projects, titles and files stored before every field was redacted"
            );
        }
        Ok(Some(report))
    }
}

/// A session row and what its fields become.
struct SessionChange {
    row: i64,
    agent: String,
    id: String,
    parent: Option<String>,
    project: Option<String>,
    title: Option<String>,
    id_changed: bool,
}

fn upgrade(conn: &Connection, redactor: &Redactor) -> Result<FieldsUpgrade, StoreError> {
    let mut report = FieldsUpgrade::default();
    let mut counts = RedactionCounts::new();
    // Records whose hash must be computed again (their session id changed).
    let mut rehash: BTreeSet<i64> = BTreeSet::new();
    for c in session_changes(conn, redactor, &mut counts)? {
        report.sessions += 1;
        if c.id_changed {
            let mut q = conn.prepare_cached("SELECT id FROM records WHERE session = ?1")?;
            let ids = q.query_map([c.row], |r| r.get::<_, i64>(0))?;
            for id in ids {
                rehash.insert(id?);
            }
        }
        let stored: Option<i64> = conn
            .prepare_cached("SELECT id FROM sessions WHERE agent = ?1 AND session_id = ?2")?
            .query_row(params![c.agent, c.id], |r| r.get(0))
            .optional()?;
        match stored {
            Some(other) if other != c.row => {
                // Indexed again under its redacted id since: one session.
                conn.prepare_cached("UPDATE records SET session = ?2 WHERE session = ?1")?
                    .execute(params![c.row, other])?;
                // Runs claim only what is true: these sessions' ids move,
                // so their runs go (a missing run costs speed, not answers).
                super::runs::forget_session(conn, c.row)?;
                super::runs::forget_session(conn, other)?;
                conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                    .execute([c.row])?;
                super::forget::refresh_sessions(conn, BTreeSet::from([other]))?;
                report.sessions_merged += 1;
            }
            _ => {
                conn.prepare_cached(
                    "UPDATE sessions SET session_id = ?2, parent_session = ?3, project = ?4,
                                         title = ?5
                     WHERE id = ?1",
                )?
                .execute(params![c.row, c.id, c.parent, c.project, c.title])?;
            }
        }
    }
    // Files: one scan of the column (the text is not read).
    let mut files: BTreeMap<i64, String> = BTreeMap::new();
    {
        let mut q = conn.prepare("SELECT id, files FROM records WHERE files != ''")?;
        let mut rows = q.query([])?;
        while let Some(r) = rows.next()? {
            let old: String = r.get(1)?;
            let new: Vec<String> = old
                .lines()
                .map(|f| fields::redact_path(redactor, f, &mut counts).into_owned())
                .collect();
            let new = new.join("\n");
            if new != old {
                files.insert(r.get(0)?, new);
            }
        }
    }
    rehash.extend(files.keys().copied());
    let own_logs = own_logs(conn)?;
    for id in rehash {
        rewrite_record(conn, id, files.get(&id), &own_logs, &mut report)?;
    }
    report.tombstones = redact_tombstones(conn, redactor, &mut counts)?;
    Ok(report)
}

/// The sessions whose fields the rules change, with the new values.
fn session_changes(
    conn: &Connection,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<Vec<SessionChange>, StoreError> {
    let mut q = conn.prepare(
        "SELECT id, agent, session_id, parent_session, project, title FROM sessions ORDER BY id",
    )?;
    let mut rows = q.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let (agent, id, parent, project, title): (
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
        ) = (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
        let new_id = fields::redact_id(redactor, &id, counts).into_owned();
        let new_parent = parent
            .as_deref()
            .map(|p| fields::redact_id(redactor, p, counts).into_owned());
        let new_project = project
            .as_deref()
            .map(|p| fields::redact_path(redactor, p, counts).into_owned());
        let new_title = title
            .as_deref()
            .map(|t| redactor.redact(t, counts).into_owned());
        if new_id == id && new_parent == parent && new_project == project && new_title == title {
            continue;
        }
        out.push(SessionChange {
            row: r.get(0)?,
            id_changed: new_id != id,
            agent,
            id: new_id,
            parent: new_parent,
            project: new_project,
            title: new_title,
        });
    }
    Ok(out)
}

/// The `origin_logs` ids of this node's own logs.
fn own_logs(conn: &Connection) -> Result<Vec<i64>, StoreError> {
    let Some(own) = own_log(conn)? else {
        return Ok(Vec::new());
    };
    let mut q = conn.prepare(
        "SELECT g.id FROM origin_logs g JOIN origins o ON o.id = g.origin WHERE o.node = ?1",
    )?;
    let rows = q.query_map([own.origin], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Gives record `id` its redacted files (when `files` is some) and the
/// hash of what it now holds; see the module docs for its log slots.
fn rewrite_record(
    conn: &Connection,
    id: i64,
    files: Option<&String>,
    own_logs: &[i64],
    report: &mut FieldsUpgrade,
) -> Result<(), StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT r.hash, s.agent, s.session_id, r.role, r.ts, r.files, r.text, r.flags,
                    r.session
             FROM records r JOIN sessions s ON s.id = r.session WHERE r.id = ?1",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                codec::role_at(r, 3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, Vec<u8>>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
            ))
        })
        .optional()?;
    let Some((old_hash, agent, session_id, role, ts, old_files, text, flags, session)) = row else {
        return Ok(());
    };
    let Ok(text) = codec::try_decode(conn, &text, flags) else {
        report.unreadable += 1;
        tracing::warn!(record = id, "unreadable record text; its hash is kept");
        return Ok(());
    };
    let new_files = files.cloned().unwrap_or(old_files);
    let file_list: Vec<String> = new_files.lines().map(str::to_owned).collect();
    let hash = cairn_protocol::record_content_hash(&cairn_protocol::HashInput {
        agent: &agent,
        session_id: &session_id,
        role: &role,
        time_ms: ts,
        text: &text,
        files: &file_list,
    });
    report.records += 1;
    if hash[..] != old_hash[..] {
        // Slots of other origins' logs keep the hash their origin signed.
        let own_list = own_list(own_logs);
        conn.execute(
            &format!(
                "UPDATE logs SET rec = NULL, hash = ?2
                 WHERE rec = ?1 AND log NOT IN ({own_list})"
            ),
            params![id, old_hash],
        )?;
        if let Some(dup) = super::log::record_id(conn, &hash32(&hash))? {
            // Stored already: this copy goes, its own slots name that one.
            conn.execute(
                &format!("UPDATE logs SET rec = ?2 WHERE rec = ?1 AND log IN ({own_list})"),
                params![id, dup],
            )?;
            let sessions = super::forget::delete_records(conn, &[(id, session, old_hash)], false)?;
            super::forget::refresh_sessions(conn, sessions)?;
            report.records_merged += 1;
            return Ok(());
        }
        conn.prepare_cached("UPDATE records SET hash = ?2 WHERE id = ?1")?
            .execute(params![id, &hash[..]])?;
    }
    if files.is_some() {
        conn.prepare_cached("UPDATE records SET files = ?2 WHERE id = ?1")?
            .execute(params![id, new_files])?;
        super::fts::delete(conn, id)?;
        super::fts::Inserts::prepare(conn)?.add(
            id,
            super::insert::stemmed_role(&role),
            &index_form(&text),
            &index_form(&new_files),
        )?;
    }
    Ok(())
}

/// `own_logs` as an SQL list (`-1` when empty, which names no log).
fn own_list(own_logs: &[i64]) -> String {
    if own_logs.is_empty() {
        return "-1".to_owned();
    }
    own_logs
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Redacts the targets of stored forgets; returns how many changed.
fn redact_tombstones(
    conn: &Connection,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<u64, StoreError> {
    let rows: Vec<(Vec<u8>, Option<String>, Option<String>)> = {
        let mut q = conn.prepare(
            "SELECT id, session_id, project FROM tombstones
             WHERE session_id IS NOT NULL OR project IS NOT NULL",
        )?;
        let rows = q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut changed = 0;
    for (id, session_id, project) in rows {
        let new_session = session_id
            .as_deref()
            .map(|s| fields::redact_id(redactor, s, counts).into_owned());
        let new_project = project
            .as_deref()
            .map(|p| fields::redact_path(redactor, p, counts).into_owned());
        if new_session != session_id || new_project != project {
            conn.prepare_cached(
                "UPDATE tombstones SET session_id = ?2, project = ?3 WHERE id = ?1",
            )?
            .execute(params![id, new_session, new_project])?;
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use cairn_protocol::ForgetTarget;

    use super::*;
    use crate::config::{Config, Env};
    use crate::node::Node;
    use crate::record::{Record, Role};

    const TOKEN: &str = "ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8";
    const OTHER: &str = "ghp_C3J27XDCG2LmlZGEONYlgCtjfIZ4SOcMz9CP";
    const THIRD: &str = "ghp_Xq7bWOjVPkCnQ87qdfa0X3ooj6XlxUDk1TOx";

    fn node_in(dir: &std::path::Path) -> Node {
        let env = Env {
            home: Some(dir.to_path_buf()),
            hostname: Some("alpha".to_owned()),
            ..Env::default()
        };
        Node::open(Config::resolve(&env, None).expect("config")).expect("open node")
    }

    /// The records an old build stored as they were read: secrets in the
    /// session id, the parent id, the project and the files.
    fn raw_records() -> Vec<Record> {
        let mut out = Vec::new();
        for (i, (sid, text)) in [
            (format!("deploy-{TOKEN}"), "pelican rollout plan"),
            (format!("deploy-{TOKEN}"), "pelican rollback drill"),
            (format!("nightly {OTHER} run"), "heron cache warmed"),
            (format!("gone-{THIRD}"), "albatross notes to forget"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = Record::new("claude-code", &sid, Role::User, text);
            r.parent_session = Some(format!("p-{OTHER}"));
            r.project = Some(format!("/home/dev/{TOKEN}/app"));
            r.files = vec![format!("/tmp/{OTHER}.txt"), "/src/main.rs".to_owned()];
            r.time_ms = Some(1_767_225_600_000 + i as i64);
            out.push(r);
        }
        out
    }

    fn redacted(mut r: Record) -> Record {
        fields::redact_record(&mut r, &Redactor::new(), &mut RedactionCounts::new());
        r
    }

    fn db_bytes(path: &std::path::Path) -> Vec<u8> {
        let mut hay = std::fs::read(path).expect("db");
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        hay.extend(std::fs::read(std::path::PathBuf::from(wal)).unwrap_or_default());
        hay
    }

    /// (agent, session id, parent, project, title) of every session, and
    /// (hash, files) of every record.
    #[allow(clippy::type_complexity)]
    fn contents(
        conn: &Connection,
    ) -> (
        BTreeSet<(String, String, Option<String>, Option<String>)>,
        BTreeSet<(Vec<u8>, String)>,
    ) {
        let mut q = conn
            .prepare("SELECT agent, session_id, parent_session, project FROM sessions")
            .expect("sessions");
        let sessions = q
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect();
        let mut q = conn
            .prepare("SELECT hash, files FROM records")
            .expect("records");
        let records = q
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect();
        (sessions, records)
    }

    /// A database an older build wrote (raw ids, projects, titles, files,
    /// a forget naming a raw id, a slot of another origin's log naming a
    /// record, and the same session indexed again since under its
    /// redacted id with one record in common) is upgraded at the next
    /// open into what a fresh index stores: same sessions and record
    /// hashes, no secret in the file, nothing lost, logs gap-free and
    /// still served. It runs once.
    #[test]
    fn an_old_database_s_ids_projects_titles_and_files_are_redacted_once_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, own) = {
            let node = node_in(dir.path());
            (
                node.config().db_path.clone(),
                node.identity().id().to_string(),
            )
        };
        let raw = raw_records();
        {
            let mut store = Store::open(&db).expect("store");
            let mut ing = store.ingest(&own).expect("ingest");
            for r in &raw {
                ing.insert(r, None).expect("insert raw");
            }
            // Indexed again since, under the redacted id: one record new,
            // one the same as a raw one once redacted.
            let mut again = redacted(raw[0].clone());
            again.text = "pelican canary notes".into();
            ing.insert(&again, None).expect("insert");
            ing.insert(&redacted(raw[1].clone()), None).expect("insert");
            ing.commit().expect("commit");
            store
                .forget(
                    &[ForgetTarget::Session {
                        agent: "claude-code".into(),
                        session_id: raw[3].session_id.clone(),
                    }],
                    1_767_225_700_000,
                )
                .expect("forget");
            let conn = store.conn();
            conn.execute(
                "UPDATE sessions SET title = ?1 WHERE session_id = ?2",
                params![format!("deploy with {THIRD}"), raw[2].session_id],
            )
            .expect("raw title");
            // Another origin's log names the heron record.
            conn.execute_batch(&format!(
                "INSERT INTO origins(node) VALUES ('peerpeerpeerpeerpeerpeerpeerpeer');
                 INSERT INTO origin_logs(origin, epoch) SELECT id, 5 FROM origins
                     WHERE node = 'peerpeerpeerpeerpeerpeerpeerpeer';
                 INSERT INTO logs(log, seq, kind, rec)
                     SELECT g.id, 1, 0, r.id FROM origin_logs g, records r
                     JOIN sessions s ON s.id = r.session
                     WHERE g.epoch = 5 AND s.session_id = '{}';",
                raw[2].session_id
            ))
            .expect("peer slot");
            // As the build before the upgrade left it: at the version
            // before the migration that marks the fields for redaction.
            let before = super::super::schema::MIGRATIONS
                .iter()
                .position(|m| m.contains("'fields_redacted'"))
                .expect("the migration");
            conn.execute_batch(&format!(
                "DROP TABLE refused_origins; DELETE FROM meta WHERE key = 'fields_redacted';
                 PRAGMA user_version = {before};"
            ))
            .expect("downgrade");
            store.truncate_wal().expect("checkpoint");
        }
        let before = db_bytes(&db);
        assert!(before.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()));
        let (slots_before, wm_before, peer_hash): (i64, Vec<_>, Vec<u8>) = {
            let store = Store::open_read_only(&db).expect("ro");
            let conn = store.conn();
            let n = conn
                .query_row("SELECT count(*) FROM logs", [], |r| r.get(0))
                .expect("slots");
            let h = conn
                .query_row(
                    "SELECT r.hash FROM logs l JOIN records r ON r.id = l.rec
                     JOIN origin_logs g ON g.id = l.log WHERE g.epoch = 5",
                    [],
                    |r| r.get(0),
                )
                .expect("peer slot");
            (n, store.watermarks().expect("wm"), h)
        };

        let node = node_in(dir.path());
        let conn = node.store().conn();
        // What a fresh index of the same records stores.
        let fresh_dir = tempfile::tempdir().expect("tempdir");
        let fresh = {
            let mut store = Store::open(&fresh_dir.path().join("f.db")).expect("fresh");
            let mut ing = store.ingest(&own).expect("ingest");
            for r in raw.iter().take(3) {
                ing.insert(&redacted(r.clone()), None).expect("insert");
            }
            let mut again = redacted(raw[0].clone());
            again.text = "pelican canary notes".into();
            ing.insert(&again, None).expect("insert");
            ing.commit().expect("commit");
            contents(store.conn())
        };
        assert_eq!(contents(conn), fresh);
        assert_eq!(
            conn.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))
                .expect("n"),
            4,
            "no record lost, the one in common kept once"
        );
        // No secret left in the file, titles included.
        let after = db_bytes(&db);
        for s in [TOKEN, OTHER, THIRD] {
            assert!(!after.windows(s.len()).any(|w| w == s.as_bytes()), "{s}");
        }
        // The forget still names the session, by its redacted id.
        let t: String = conn
            .query_row("SELECT session_id FROM tombstones", [], |r| r.get(0))
            .expect("tombstone");
        assert_eq!(t, redacted(raw[3].clone()).session_id);
        // Logs: gap-free, same watermarks; the own log serves every
        // record under its stored hash; the other origin's slot keeps
        // the hash that origin signed.
        assert_eq!(
            conn.query_row("SELECT count(*) FROM logs", [], |r| r.get::<_, i64>(0))
                .expect("slots"),
            slots_before
        );
        assert_eq!(node.watermarks().expect("wm"), wm_before);
        let (peer_rec, peer_slot): (Option<i64>, Vec<u8>) = conn
            .query_row(
                "SELECT l.rec, l.hash FROM logs l JOIN origin_logs g ON g.id = l.log
                 WHERE g.epoch = 5",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("peer slot");
        assert_eq!((peer_rec, peer_slot), (None, peer_hash));
        let own_wm = wm_before
            .iter()
            .find(|w| w.origin.to_string() == own)
            .expect("own");
        let pull = cairn_protocol::Pull {
            origin: own_wm.origin,
            epoch: own_wm.epoch,
            after_seq: 0,
            max_records: 100,
            max_bytes: 1 << 20,
        };
        let batch = node.serve_pull(&pull, None).expect("serve");
        assert_eq!(batch.last_seq, own_wm.seq);
        let stored: BTreeSet<Vec<u8>> = fresh.1.iter().map(|(h, _)| h.clone()).collect();
        assert!(batch.records.len() >= 4, "{batch:?}");
        for r in &batch.records {
            assert!(stored.contains(r.hash.as_slice()), "{r:?}");
            assert!(!r.session_id.contains("ghp_"), "{r:?}");
        }
        // Search still finds them; the files' new form is in the index.
        let opts = crate::search::SearchOptions::default();
        assert!(!node.search("pelican", &opts).expect("search").is_empty());
        assert!(!node.search("main.rs", &opts).expect("search").is_empty());
        drop(node);
        // Once only.
        let mut store = Store::open(&db).expect("store");
        assert_eq!(
            store.meta(META_FIELDS_REDACTED).expect("meta").as_deref(),
            Some("1")
        );
        assert_eq!(
            store.redact_stored_fields(&Redactor::new()).expect("again"),
            None
        );
    }
}
