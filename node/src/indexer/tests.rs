//! Whole passes: walk, detect, read and write together over real files.

use super::*;
use crate::sources::notes;
use crate::store::bulk::tests::heron_hits;
use read::BATCH;
use std::path::Path;

fn ctx<'a>(
    loc: &'a Locations,
    redactor: &'a Redactor,
    deadline: Option<std::time::Instant>,
) -> IndexContext<'a> {
    IndexContext {
        locations: loc,
        disabled: &[],
        redactor,
        origin: "testnode",
        now_ms: 1_800_000_000_000,
        deadline,
    }
}

#[test]
fn a_pass_with_nothing_to_read_finishes_a_merge_a_killed_process_left_paused() {
    let (dir, loc) = home_with_notes(30, Some("/p"), "heron note ");
    let db = dir.path().join("db/cairn.db");
    let mut store = Store::open(&db).expect("open");
    let redactor = Redactor::new();
    // Several passes, a commit (a segment per index) each.
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!(r.added, 30);
    for round in 0..4 {
        for i in 0..5 {
            notes::append(
                &loc.notes_file,
                Some("/p"),
                &format!("heron note {round} {i}"),
                1_700_000_100_000 + i64::from(round * 5 + i),
            )
            .expect("append");
        }
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        assert_eq!(r.added, 5);
    }
    // A large pass paused FTS5's merging, stored everything, and was
    // killed inside the merge that ends it: the merge's transaction
    // is rolled back, so what is left is the pause and the mark, with
    // every store read.
    store.pause_text_merging().expect("pause");
    let segments = store.text_index_segments();
    assert!(segments.0 > 1 && segments.1 > 1, "{segments:?}");
    drop(store);
    let mut store = Store::open(&db).expect("reopen");
    assert!(!store.text_merging());
    assert!(store.merge_due().expect("due"));
    // The next pass has nothing to read; it restores merging and
    // finishes the merge.
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.changed, r.added), (0, 0));
    assert!(store.text_merging(), "automerge not restored");
    assert!(!store.merge_due().expect("due"), "merge mark left");
    assert_eq!(store.text_index_segments(), (1, 1));
    assert_eq!(heron_hits(&store), 50);
    let opts = crate::search::SearchOptions {
        limit: 5,
        now_ms: 1_800_000_000_000,
        ..crate::search::SearchOptions::default()
    };
    let hits = crate::search::search(
        &store,
        &crate::search::Query::parse("heron note 3 4"),
        &opts,
    )
    .expect("search");
    assert!(!hits.is_empty(), "search finds nothing after the merge");
    // With a deadline already past (a search's refresh), the merge
    // goes in steps and a later pass goes on with it.
    store.pause_text_merging().expect("pause");
    let past = Some(std::time::Instant::now());
    let mut passes = 0;
    while store.merge_due().expect("due") {
        index_all(&mut store, &ctx(&loc, &redactor, past), &mut |_| {}).expect("index");
        passes += 1;
        assert!(passes < 1_000, "the merge never ends");
    }
    assert!(store.text_merging());
    assert_eq!(heron_hits(&store), 50);
    // Nothing due: a pass with nothing to read writes nothing.
    let before = store.change_stamp().expect("stamp");
    index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!(store.change_stamp().expect("stamp"), before);
}

/// A home whose only store is a notes file of `n` notes, `prefix`
/// followed by the note's number, a millisecond apart.
fn home_with_notes(
    n: usize,
    project: Option<&str>,
    prefix: &str,
) -> (tempfile::TempDir, Locations) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut loc = Locations::under_home(dir.path());
    loc.notes_file = dir.path().join("notes.jsonl");
    for i in 0..n {
        notes::append(
            &loc.notes_file,
            project,
            &format!("{prefix}{i}"),
            1_700_000_000_000 + i as i64,
        )
        .expect("append");
    }
    (dir, loc)
}

#[test]
fn a_pass_cut_short_resumes_where_it_stopped() {
    let n = BATCH * 2 + 500;
    let (dir, loc) = home_with_notes(n, Some("/p"), "note number ");
    let mut store = Store::open(&dir.path().join("db/cairn.db")).expect("open");
    let redactor = Redactor::new();
    let past = Some(std::time::Instant::now());
    let mut passes = Vec::new();
    for _ in 0..3 {
        let r = index_all(&mut store, &ctx(&loc, &redactor, past), &mut |_| {}).expect("index");
        passes.push((r.added, r.deferred));
    }
    assert_eq!(passes, [(BATCH as u64, 1), (BATCH as u64, 1), (500, 0)]);
    assert_eq!(store.stats().expect("stats").records, n as u64);
    // Nothing left: a further pass reads nothing.
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.changed, r.added), (0, 0));
}

#[test]
fn a_pass_with_nothing_new_writes_nothing_and_missing_stores_are_marked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut loc = Locations::under_home(dir.path());
    loc.notes_file = dir.path().join("notes.jsonl");
    for i in 0..3 {
        notes::append(
            &loc.notes_file,
            None,
            &format!("fact {i}"),
            1_700_000_000_000 + i,
        )
        .expect("append");
    }
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let redactor = Redactor::new();
    let changes = |s: &Store| -> i64 {
        s.test_conn()
            .query_row("SELECT total_changes()", [], |r| r.get(0))
            .expect("total_changes")
    };
    let missing = |s: &Store| -> Vec<bool> {
        s.list_sources()
            .expect("sources")
            .into_iter()
            .map(|r| r.missing)
            .collect()
    };
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.stores, r.changed, r.added), (1, 1, 3));
    // Nothing new: the pass reads nothing and writes no row.
    let before = changes(&store);
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.stores, r.changed, r.added), (1, 0, 0));
    assert_eq!(changes(&store), before);
    // The file disappears: marked missing, its records kept.
    let moved = dir.path().join("notes.moved");
    std::fs::rename(&loc.notes_file, &moved).expect("move away");
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.stores, r.changed), (0, 0));
    assert_eq!(missing(&store), [true]);
    assert_eq!(store.stats().expect("stats").records, 3);
    // It comes back unchanged: the mark is cleared without a re-read.
    std::fs::rename(&moved, &loc.notes_file).expect("move back");
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((r.stores, r.changed, r.added), (1, 0, 0));
    assert_eq!(missing(&store), [false]);
    // The freshness check agrees: nothing pending.
    let f = freshness(&store, &loc, &[]).expect("freshness");
    assert_eq!((f.stores, f.pending), (1, 0));
}

#[test]
fn walked_stores_pick_up_appends_new_files_and_vanished_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loc = Locations::under_home(dir.path());
    let projects = loc.claude_dir.join("projects");
    let line = |session: &str, i: u32| {
        format!(
            concat!(
                r#"{{"type":"user","uuid":"{s}-{i}","sessionId":"{s}","#,
                r#""timestamp":"2025-11-24T10:00:{i:02}.000Z","cwd":"/p","#,
                r#""message":{{"role":"user","content":"line {i} of {s}"}}}}"#,
                "\n"
            ),
            s = session,
            i = i
        )
    };
    let write = |rel: &str, session: &str, lines: std::ops::Range<u32>| {
        let p = projects.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let text: String = lines.map(|i| line(session, i)).collect();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .expect("open");
        std::io::Write::write_all(&mut f, text.as_bytes()).expect("write");
    };
    // Enough project folders that the walk is shared between two threads.
    for p in 0..6 {
        for s in 0..3 {
            write(&format!("-p{p}/s{p}{s}.jsonl"), &format!("s{p}{s}"), 0..2);
        }
    }
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let redactor = Redactor::new();
    let mut pass = || {
        let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
        (r.stores, r.changed, r.added)
    };
    assert_eq!(pass(), (18, 18, 36));
    assert_eq!(pass(), (18, 0, 0));
    // A line appended to a file in a folder that gained no file.
    write("-p3/s31.jsonl", "s31", 2..3);
    assert_eq!(pass(), (18, 1, 1));
    // A new file in an old folder.
    write("-p5/s59.jsonl", "s59", 0..2);
    assert_eq!(pass(), (19, 1, 2));
    assert_eq!(pass(), (19, 0, 0));
    // A file that vanished is marked missing; its records stay.
    std::fs::remove_file(projects.join("-p0/s00.jsonl")).expect("rm");
    assert_eq!(pass(), (18, 0, 0));
    let missing: Vec<String> = store
        .list_sources()
        .expect("sources")
        .into_iter()
        .filter(|r| r.missing)
        .map(|r| r.path)
        .collect();
    assert_eq!(missing.len(), 1);
    assert!(missing[0].ends_with("s00.jsonl"), "{missing:?}");
    assert_eq!(store.stats().expect("stats").records, 39);
}

#[test]
fn a_pass_over_named_stores_reads_them_alone_and_marks_no_other_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let loc = Locations::under_home(dir.path());
    let projects = loc.claude_dir.join("projects");
    let append = |rel: &str, text: &str| {
        let p = projects.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let s = rel
            .trim_end_matches(".jsonl")
            .rsplit('/')
            .next()
            .expect("name");
        let line = format!(
            concat!(
                r#"{{"type":"user","uuid":"{s}-{t}","sessionId":"{s}","#,
                r#""timestamp":"2025-11-24T10:00:00.000Z","cwd":"/p","#,
                r#""message":{{"role":"user","content":"{t}"}}}}"#,
                "\n"
            ),
            s = s,
            t = text
        );
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .expect("open");
        std::io::Write::write_all(&mut f, line.as_bytes()).expect("write");
        p
    };
    let a = append("-p/a.jsonl", "alpha one");
    let b = append("-p/b.jsonl", "bravo one");
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let redactor = Redactor::new();
    let c = ctx(&loc, &redactor, None);
    // A whole walk lists every store it found.
    let whole = |store: &mut Store, known: &mut Stores| {
        let walk = Walk::start(&loc, &[], None);
        let r = index_walked_keeping(store, &c, walk, &mut |_| {}, &mut None, Some(known))
            .expect("index");
        (r.stores, r.added, known.len())
    };
    let named = |store: &mut Store, known: &Stores, paths: &[std::path::PathBuf]| {
        let walk = known.walk_of(paths).expect("every path is known");
        let r = index_walked(store, &c, walk, &mut |_| {}).expect("index");
        (r.stores, r.changed, r.added)
    };
    let mut known = Stores::default();
    assert_eq!(whole(&mut store, &mut known), (2, 2, 2));
    // A write to `a`: a pass over `a` alone reads its new line.
    append("-p/a.jsonl", "alpha two");
    assert_eq!(
        named(&mut store, &known, std::slice::from_ref(&a)),
        (1, 1, 1)
    );
    // Again: nothing new in it now.
    assert_eq!(
        named(&mut store, &known, &[a.clone(), a.clone()]),
        (1, 0, 0)
    );
    // `b`, not named, is neither read nor marked gone, though it grew.
    append("-p/b.jsonl", "bravo two");
    named(&mut store, &known, std::slice::from_ref(&a));
    let rows = store.list_sources().expect("sources");
    assert!(
        rows.iter().all(|r| !r.missing),
        "a store not named was marked gone"
    );
    assert_eq!(store.stats().expect("stats").records, 3);
    // A path that is no store, a new file and a store gone since: only
    // a whole walk can tell, so no pass over named stores is offered.
    let other = projects.join("-p/notes.txt");
    std::fs::write(&other, "x").expect("write");
    assert!(known.walk_of(&[a.clone(), other]).is_none());
    let new = append("-p/c.jsonl", "charlie one");
    assert!(known.walk_of(std::slice::from_ref(&new)).is_none());
    let away = dir.path().join("b.away");
    std::fs::rename(&b, &away).expect("move away");
    assert!(known.walk_of(std::slice::from_ref(&b)).is_none());
    std::fs::rename(&away, &b).expect("move back");
    // The whole walk reads what the named passes left (`b`'s line and
    // the new file), and the list follows the disk.
    assert_eq!(whole(&mut store, &mut known), (3, 2, 3));
    assert!(known.walk_of(std::slice::from_ref(&new)).is_some());
    assert_eq!(store.stats().expect("stats").records, 5);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

#[test]
fn stores_sharing_a_transaction_each_save_their_own_offset() {
    // Several stores are written by one transaction of the writer
    // thread: each still ends with its offset at its own end, and a
    // pass that lost every saved offset re-reads them all and adds
    // nothing twice.
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/home/.claude");
    copy_dir(&fixtures, &dir.path().join(".claude"));
    let loc = Locations::under_home(dir.path());
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let redactor = Redactor::new();
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert!(
        r.changed >= 3 && r.added > 0 && r.failed.is_empty(),
        "{r:?}"
    );
    let records = store.stats().expect("stats").records;
    let sources = store.source_states().expect("states");
    assert_eq!(sources.len() as u64, r.changed);
    for (path, s) in &sources {
        let bytes = std::fs::read(path).expect("read");
        // Up to the end of the last complete line.
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        assert_eq!(
            (s.offset, s.size),
            (end as u64, bytes.len() as u64),
            "{path}"
        );
    }
    store
        .test_conn()
        .execute(
            "UPDATE sources SET offset = 0, size = 0, head_hash = NULL, tail_hash = NULL",
            [],
        )
        .expect("reset");
    let again = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!((again.changed, again.added), (r.changed, 0));
    assert_eq!(store.stats().expect("stats").records, records);
}

#[test]
fn crash_between_batches_loses_and_duplicates_nothing() {
    // Simulate a crash after intermediate batches: the saved offset is
    // still the old one, so the next pass re-reads and dedupes.
    let (dir, loc) = home_with_notes(BATCH + 10, None, "fact ");
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    let redactor = Redactor::new();
    index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    // Forget the file state as if the last transaction never committed.
    store
        .test_conn()
        .execute(
            "UPDATE sources SET offset = 0, size = 0, head_hash = NULL, tail_hash = NULL",
            [],
        )
        .expect("reset");
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert_eq!(r.added, 0);
    assert_eq!(store.stats().expect("stats").records, (BATCH + 10) as u64);
}

#[test]
fn a_writer_that_fails_mid_pass_stops_the_reader_and_the_next_pass_stores_all() {
    // The database refuses records past the first batch: the pass ends
    // with the error (the reader, ahead of the writer, stops instead of
    // waiting for room), and the next pass, with the database healed,
    // stores every record once.
    let n = BATCH * 3 + 7;
    let (dir, loc) = home_with_notes(n, None, "fact ");
    let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
    store
        .test_conn()
        .execute_batch(&format!(
            "CREATE TRIGGER refuse BEFORE INSERT ON records
             WHEN (SELECT count(*) FROM records) >= {BATCH}
             BEGIN SELECT RAISE(ABORT, 'disk says no'); END;"
        ))
        .expect("trigger");
    let redactor = Redactor::new();
    let failed = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {});
    assert!(
        failed
            .as_ref()
            .is_err_and(|e| e.to_string().contains("disk says no")),
        "{failed:?}"
    );
    store
        .test_conn()
        .execute_batch("DROP TRIGGER refuse")
        .expect("heal");
    let r = index_all(&mut store, &ctx(&loc, &redactor, None), &mut |_| {}).expect("index");
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(store.stats().expect("stats").records, n as u64);
}
