//! Tests of the survey: what it holds, and what retires it.

use super::*;
use crate::record::{Record, Role};

fn known(
    agent: &'static str,
    path: &'static str,
    size: u64,
    failed: bool,
    missing: bool,
) -> Known<'static> {
    Known {
        agent,
        path,
        size,
        mtime_ns: 7,
        failed,
        missing,
    }
}

/// A new database in a temporary folder.
fn setup() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("cairn.db")).expect("open");
    (dir, store)
}

fn rows() -> Vec<Known<'static>> {
    vec![
        known("claude-code", "/a/one.jsonl", 10, false, false),
        known("codex", "/b/x.jsonl", 5, false, false),
        known("claude-code", "/a/three.jsonl", 30, false, false),
        known("claude-code", "/a/gone.jsonl", 40, false, true),
        known("gemini", "/c/failed.json", 50, true, false),
        known("aider", "/d/gone.md", 60, false, true),
    ]
}

/// Writes a survey of `sources` keyed `key`.
fn save(store: &Store, key: &[u8; 32], sources: Vec<Tallied>) {
    let written = store
        .write_survey(key, |_| Ok(Some(sources)))
        .expect("save");
    assert!(written, "written");
}

/// Writes a survey of [`rows`] keyed `key`.
fn saved(store: &Store, key: &[u8; 32]) {
    save(store, key, tallied(Keys::of(key), rows()));
}

/// The tally of stores found on disk, as a walk makes it.
fn found(s: &Survey, stores: &[(&str, u64, i64)]) -> Tally {
    let mut t = Tally::default();
    for (path, size, mtime) in stores {
        t.add(s.keys(), path.as_bytes(), *size, *mtime);
    }
    t
}

#[test]
fn a_saved_survey_matches_a_source_only_when_it_finds_the_same_stores() {
    let (_dir, store) = setup();
    let key = [1u8; 32];
    saved(&store, &key);
    let s = Survey::load(&store, &key).expect("holds");
    let claude = [("/a/one.jsonl", 10, 7), ("/a/three.jsonl", 30, 7)];
    // In any order: the walk's order is not the database's.
    assert!(s.same("claude-code", found(&s, &claude)));
    assert!(s.same("claude-code", found(&s, &[claude[1], claude[0]])));
    assert!(s.same("codex", found(&s, &[("/b/x.jsonl", 5, 7)])));
    // Another source's stores are not this one's.
    assert!(!s.same("codex", found(&s, &claude)));
    for (stores, why) in [
        (vec![("/a/one.jsonl", 11, 7), claude[1]], "grown"),
        (vec![("/a/one.jsonl", 10, 8), claude[1]], "touched"),
        (vec![claude[0]], "one is gone"),
        (
            vec![claude[0], claude[1], ("/a/new.jsonl", 1, 7)],
            "a new one",
        ),
        (
            vec![claude[0], claude[1], ("/a/gone.jsonl", 40, 7)],
            "the missing one is back",
        ),
        (
            vec![("/a/three.jsonl", 10, 7), ("/a/one.jsonl", 30, 7)],
            "sizes swapped",
        ),
        (vec![claude[0], claude[0]], "one found twice"),
    ] {
        assert!(!s.same("claude-code", found(&s, &stores)), "{why}");
    }
    // The store whose last read failed is found again: read it again.
    assert!(!s.same("gemini", found(&s, &[("/c/failed.json", 50, 7)])));
    // A source whose stores are all gone is not expected on disk.
    assert!(!s.same("aider", Tally::default()));
    assert_eq!(s.sources(), 3);
    // Another configuration does not use it.
    assert!(Survey::load(&store, &[2u8; 32]).is_none());
}

#[test]
fn a_survey_holds_the_stores_read_whole_and_counts_those_that_failed() {
    let (_dir, store) = setup();
    let key = [1u8; 32];
    saved(&store, &key);
    let s = Survey::load(&store, &key).expect("holds");
    let h = |path: &str, size: u64| store_hash(s.keys(), path.as_bytes(), size, 7);
    assert!(s.holds("claude-code", h("/a/one.jsonl", 10)));
    assert!(s.holds("claude-code", h("/a/three.jsonl", 30)));
    assert!(s.holds("codex", h("/b/x.jsonl", 5)));
    // Grown, another source's, gone, failed.
    assert!(!s.holds("claude-code", h("/a/one.jsonl", 11)));
    assert!(!s.holds("codex", h("/a/one.jsonl", 10)));
    assert!(!s.holds("claude-code", h("/a/gone.jsonl", 40)));
    assert!(!s.holds("gemini", h("/c/failed.json", 50)));
    assert_eq!(
        [
            s.count("claude-code"),
            s.count("codex"),
            s.count("gemini"),
            s.count("aider")
        ],
        [2, 1, 1, 0]
    );
    let mut agents: Vec<&str> = s.agents().collect();
    agents.sort_unstable();
    assert_eq!(agents, ["claude-code", "codex", "gemini"]);
}

#[test]
fn a_source_with_many_stores_finds_each_of_them_and_no_other() {
    let (_dir, store) = setup();
    let key = [1u8; 32];
    for n in [1usize, 2, 3, 5, 64, 1000, 5000] {
        let paths: Vec<&'static str> = (0..n)
            .map(|i| &*Box::leak(format!("/s/{i}").into_boxed_str()))
            .collect();
        let rows = paths.iter().map(|p| known("codex", p, 1, false, false));
        save(&store, &key, tallied(Keys::of(&key), rows));
        let s = Survey::load(&store, &key).expect("holds");
        let h = |path: &str, size: u64| store_hash(s.keys(), path.as_bytes(), size, 7);
        assert!(paths.iter().all(|p| s.holds("codex", h(p, 1))), "{n}");
        // The same paths at another size, and paths it never had.
        let others = (0..n.max(50)).filter(|i| {
            s.holds("codex", h(&format!("/s/{i}"), 2)) || s.holds("codex", h(&format!("/t/{i}"), 1))
        });
        assert_eq!(others.count(), 0, "{n}");
        assert!(!s.holds("codex", 0) && !s.holds("codex", u128::MAX));
        assert_eq!(s.count("codex"), n as u64);
    }
}

#[test]
fn a_survey_made_from_another_and_the_rows_read_is_the_survey_of_all_rows() {
    let (_dir, store) = setup();
    let key = [1u8; 32];
    saved(&store, &key);
    let s = Survey::load(&store, &key).expect("holds");
    let keys = s.keys();
    let was = |path: &str, size: u64| Was::Read(store_hash(keys, path.as_bytes(), size, 7));
    let now = |agent, path, size, failed| Some(known(agent, path, size, failed, false));
    let read = [
        // Grown.
        (
            "claude-code",
            was("/a/one.jsonl", 10),
            now("claude-code", "/a/one.jsonl", 12, false),
        ),
        // Failed before, read now.
        (
            "gemini",
            Was::Failed,
            now("gemini", "/c/failed.json", 51, false),
        ),
        // Read before, failed now.
        (
            "codex",
            was("/b/x.jsonl", 5),
            now("codex", "/b/x.jsonl", 6, true),
        ),
        // New, in a source the survey did not have.
        ("aider", Was::Absent, now("aider", "/d/new.md", 3, false)),
        // Back after being gone.
        (
            "claude-code",
            Was::Absent,
            now("claude-code", "/a/gone.jsonl", 41, false),
        ),
    ];
    let mut after = s.after(read).expect("made");
    let rows = [
        known("claude-code", "/a/one.jsonl", 12, false, false),
        known("codex", "/b/x.jsonl", 6, true, false),
        known("claude-code", "/a/three.jsonl", 30, false, false),
        known("claude-code", "/a/gone.jsonl", 41, false, false),
        known("gemini", "/c/failed.json", 51, false, false),
        known("aider", "/d/gone.md", 60, false, true),
        known("aider", "/d/new.md", 3, false, false),
    ];
    let mut all = tallied(keys, rows);
    for v in [&mut after, &mut all] {
        v.sort_by(|a, b| a.agent.cmp(&b.agent));
        v.iter_mut().for_each(|t| t.hashes.sort_unstable());
    }
    assert_eq!(after, all);

    // A row gone or marked gone, a hash the survey does not have, or
    // a row of another source: no survey this way.
    for bad in [
        ("claude-code", was("/a/one.jsonl", 10), None),
        (
            "claude-code",
            was("/a/one.jsonl", 10),
            Some(known("claude-code", "/a/one.jsonl", 12, false, true)),
        ),
        (
            "claude-code",
            was("/a/one.jsonl", 99),
            now("claude-code", "/a/one.jsonl", 12, false),
        ),
        (
            "claude-code",
            was("/a/one.jsonl", 10),
            now("codex", "/a/one.jsonl", 12, false),
        ),
    ] {
        assert_eq!(s.after([bad]), None, "{bad:?}");
    }
}

#[test]
fn a_survey_whose_hashes_do_not_add_up_is_not_used() {
    let (_dir, store) = setup();
    let key = [1u8; 32];
    let one = |count: u64, hashes: Vec<u128>| {
        vec![Tallied {
            agent: "claude-code".into(),
            count,
            hashes,
        }]
    };
    // More hashes than stores.
    save(&store, &key, one(1, vec![1, 2]));
    assert!(Survey::load(&store, &key).is_none());
    save(&store, &key, one(2, vec![2, 1]));
    let s = Survey::load(&store, &key).expect("sorted when written");
    assert!(s.holds("claude-code", 1) && s.holds("claude-code", 2));
    // Hashes out of order, cut short, or trailing bytes: not a body.
    let body: Vec<u8> = store
        .conn
        .query_row("SELECT body FROM survey", [], |r| r.get(0))
        .expect("body");
    let end = body.len();
    let mut swapped = body.clone();
    swapped[end - 32..].rotate_left(16);
    let mut longer = body.clone();
    longer.push(0);
    for bad in [swapped, body[..end - 1].to_vec(), longer, vec![0xff; 40]] {
        store
            .conn
            .execute("UPDATE survey SET body = ?1", [&bad])
            .expect("damage");
        assert!(Survey::load(&store, &key).is_none(), "{bad:?}");
    }
}

#[test]
fn writes_to_the_stores_rows_new_records_and_derived_files_retire_the_survey() {
    let (dir, mut store) = setup();
    let key = [1u8; 32];
    let holds = |store: &Store| Survey::load(store, &key).is_some();
    saved(&store, &key);
    assert!(holds(&store));
    // What a survey does not describe: a node row, a checkpoint.
    store.upsert_node("n1", "laptop").expect("node");
    let _: (i64, i64, i64) = store
        .conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("checkpoint");
    assert!(holds(&store));

    // A write to the stores' rows moves their generation.
    let mut ing = store.ingest("n1").expect("ingest");
    ing.source("claude-code", "/a/new.jsonl", "jsonl")
        .expect("source");
    ing.commit().expect("commit");
    assert!(!holds(&store));
    saved(&store, &key);
    assert!(holds(&store));

    // A record stored with no store read (a peer's batch) leaves work for
    // a pass (its vector, the columns file).
    let mut ing = store.ingest("n1").expect("ingest");
    let mut r = Record::new("claude-code", "s1", Role::User, "a heron");
    r.time_ms = Some(1_700_000_000_000);
    assert!(ing.insert(&r, None).expect("insert"));
    ing.commit().expect("commit");
    assert!(!holds(&store));
    saved(&store, &key);
    assert!(holds(&store));

    // A derived file written, changed or removed.
    let columns = super::super::Component::Columns.path(store.path());
    std::fs::write(&columns, b"pages").expect("write");
    assert!(!holds(&store), "written");
    saved(&store, &key);
    assert!(holds(&store));
    std::fs::write(&columns, b"pages, longer").expect("write");
    assert!(!holds(&store), "changed");
    saved(&store, &key);
    std::fs::remove_file(&columns).expect("rm");
    assert!(!holds(&store), "removed");

    // A file a reader marked damaged: no survey holds or is written
    // until a check has run, which clears the mark.
    std::fs::write(&columns, b"pages").expect("write");
    saved(&store, &key);
    assert!(holds(&store));
    super::super::derived::note_damage(&columns);
    assert!(store.derived_marked());
    assert!(!holds(&store), "marked");
    let written = store
        .write_survey(&key, |_| Ok(Some(tallied(Keys::of(&key), rows()))))
        .expect("save");
    assert!(!written, "no survey left while marked");
    store.check_derived(true).expect("check");
    assert!(!store.derived_marked(), "the check clears the mark");
    saved(&store, &key);
    assert!(holds(&store));

    // No survey at all, and one for another configuration.
    saved(&store, &key);
    store.drop_survey().expect("drop");
    assert!(!holds(&store));
    saved(&store, &[2u8; 32]);
    assert!(!holds(&store));
    drop(dir);
}

#[test]
fn no_survey_is_written_while_another_process_writes() {
    let (dir, store) = setup();
    let key = [1u8; 32];
    let other = rusqlite::Connection::open(dir.path().join("cairn.db")).expect("other");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("hold the write lock");
    // Busy is no error: the survey is only left for a later pass.
    let written = store
        .write_survey(&key, |_| Ok(Some(tallied(Keys::of(&key), rows()))))
        .expect("not an error");
    assert!(!written);
    other.execute_batch("ROLLBACK").expect("release");
    saved(&store, &key);
    assert!(Survey::load(&store, &key).is_some());
}
