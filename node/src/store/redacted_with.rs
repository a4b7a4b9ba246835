//! Which redaction rules made the text of every stored record: a mark in
//! `meta`, so that serving a pull can send a record's text as stored
//! instead of redacting it again, when the rules are the very same
//! (`Redactor::rules_id`; redaction is idempotent, so the output is too).
//!
//! Owns the mark's invariant: it names rules R only while every stored
//! record's text is R's output. It holds R and the highest record id when
//! a writer naming R last stored records, and counts only while that id is
//! still the highest: a writer that does not keep the mark (an older
//! cairn, after a downgrade) stores records past it, and the mark no
//! longer counts. It is set only on a database without records; every
//! transaction that stores records calls [`hold`] first and [`stamp`]
//! before it commits, and [`hold`] lowers it for good as soon as other
//! rules (or unknown ones) store text beside it: after an upgrade that
//! changes the rules, or another process configured otherwise. Deleting
//! the newest records lowers it too (it fails safe). Must never set it on
//! a database that holds records, whose rules it cannot know.

use rusqlite::Connection;

use super::{Store, StoreError};

/// The meta key of the mark.
const KEY: &str = "text_redacted_with";

impl Store {
    /// Names the rules that redacted the records this store's indexing
    /// passes store: `redactor`'s (its `rules_id` is worked out when a
    /// pass first stores records, not here on every open).
    pub fn set_redaction_rules(&mut self, redactor: &crate::redact::Redactor) {
        self.redaction_rules = Some(redactor.clone());
    }
}

/// Keeps the mark true for a transaction about to store records whose
/// text the rules `rules` made (`None`: rules not known): kept when it
/// names them and still counts, set when the database holds no record
/// yet, else lowered.
pub(crate) fn hold(conn: &Connection, rules: Option<&str>) -> Result<(), StoreError> {
    let mark = read(conn)?;
    let last = last_id(conn)?;
    if let Some(r) = rules
        && mark.as_ref().is_some_and(|m| counts(m, r, last))
    {
        return Ok(());
    }
    match rules {
        Some(r) if last.is_none() => write(conn, r, 0)?,
        _ if mark.is_some() => super::meta_drop(conn, KEY)?,
        _ => {}
    }
    Ok(())
}

/// Before a transaction that called [`hold`] with `rules` commits: the
/// records it stored are counted in the mark, if it names them.
pub(crate) fn stamp(conn: &Connection, rules: Option<&str>) -> Result<(), StoreError> {
    if let Some(r) = rules
        && read(conn)?.is_some_and(|(m, _)| m == r)
    {
        write(conn, r, last_id(conn)?.unwrap_or(0))?;
    }
    Ok(())
}

/// Whether the rules `rules` made every stored record's text.
pub(crate) fn holds(conn: &Connection, rules: &str) -> Result<bool, StoreError> {
    let last = last_id(conn)?;
    Ok(read(conn)?.is_some_and(|m| counts(&m, rules, last)))
}

/// Whether mark `m` names `rules` and the highest record id is `last`.
fn counts(m: &(String, i64), rules: &str, last: Option<i64>) -> bool {
    m.0 == rules && m.1 == last.unwrap_or(0)
}

fn last_id(conn: &Connection) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT max(id) FROM records")?
        .query_row([], |r| r.get(0))?)
}

/// The mark: rules and the highest record id they stored (`rules id`).
fn read(conn: &Connection) -> Result<Option<(String, i64)>, StoreError> {
    Ok(super::meta_get(conn, KEY)?.and_then(|v| {
        let (rules, id) = v.split_once(' ')?;
        Some((rules.to_owned(), id.parse().ok()?))
    }))
}

fn write(conn: &Connection, rules: &str, last: i64) -> Result<(), StoreError> {
    Ok(super::meta_set(conn, KEY, &format!("{rules} {last}"))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_set_on_an_empty_database_and_lowered_by_other_rules_or_records_past_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = crate::store::Store::open(&dir.path().join("cairn.db")).expect("open");
        let conn = store.test_conn();
        conn.pragma_update(None, "foreign_keys", "OFF")
            .expect("pragma");
        let add = || {
            conn.execute(
                "INSERT INTO records(hash, session, role, origin, text)
                 VALUES (randomblob(32), 1, 0, 1, 'x')",
                [],
            )
            .expect("record");
        };
        let store_with = |rules: &str| {
            hold(conn, Some(rules)).expect("hold");
            add();
            stamp(conn, Some(rules)).expect("stamp");
        };
        // Rules not known never set it.
        hold(conn, None).expect("hold");
        assert!(!holds(conn, "r1").expect("holds"));
        store_with("r1");
        store_with("r1");
        assert!(holds(conn, "r1").expect("holds"));
        assert!(!holds(conn, "r2").expect("holds"));
        // A writer that does not keep the mark stores past it: it no
        // longer counts, and the next hold lowers it for good.
        add();
        assert!(!holds(conn, "r1").expect("holds"));
        store_with("r1");
        assert!(!holds(conn, "r1").expect("holds"));
        // Other rules beside records made by r1: lowered, and neither
        // rules get it back while records are held.
        conn.execute("DELETE FROM records", []).expect("empty");
        store_with("r1");
        store_with("r2");
        for rules in ["r1", "r2"] {
            store_with(rules);
            assert!(!holds(conn, rules).expect("holds"), "{rules}");
        }
        // Unknown rules lower it too.
        conn.execute("DELETE FROM records", []).expect("empty");
        store_with("r3");
        assert!(holds(conn, "r3").expect("holds"));
        hold(conn, None).expect("hold");
        assert!(!holds(conn, "r3").expect("holds"));
    }
}
