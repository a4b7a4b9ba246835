//! Tests of the survey (Unix only, as the survey is).

use super::*;

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

/// A database file and a clock reading well after its last change.
fn setup() -> (tempfile::TempDir, std::path::PathBuf, Reading) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("cairn.db");
    std::fs::write(&db, b"pages").expect("write");
    let later = Reading {
        now_ns: DbFiles::of(&db).expect("stat").newest_ns() + 1,
        margin_ns: 0,
    };
    (dir, db, later)
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

/// What a survey of `db` is taken with, at `reading`.
fn taken(reading: Reading, db: &Path, generation: Option<i64>) -> Taken {
    Taken {
        reading,
        files: DbFiles::of(db),
        generation,
    }
}

/// Saves a survey of [`rows`] for `db` with `key`; returns its path.
fn saved(dir: &Path, db: &Path, later: Reading, key: &[u8; 32]) -> std::path::PathBuf {
    save(dir, key, taken(later, db, None), rows())
        .expect("save")
        .expect("saved");
    dir.join(FILE)
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
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    let saved = save(dir.path(), &key, taken(later, &db, None), rows()).expect("save");
    assert_eq!(saved, Ok(Trust::Files));
    let s = Survey::load(dir.path(), &key, &db).expect("trusted");
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
    assert!(Survey::load(dir.path(), &[2u8; 32], &db).is_none());
}

#[test]
fn a_survey_holds_the_stores_read_whole_and_counts_those_that_failed() {
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    saved(dir.path(), &db, later, &key);
    let s = Survey::load(dir.path(), &key, &db).expect("trusted");
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
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    for n in [1usize, 2, 3, 5, 64, 1000, 5000] {
        let paths: Vec<&'static str> = (0..n)
            .map(|i| &*Box::leak(format!("/s/{i}").into_boxed_str()))
            .collect();
        let rows = paths.iter().map(|p| known("codex", p, 1, false, false));
        save(dir.path(), &key, taken(later, &db, None), rows)
            .expect("save")
            .expect("saved");
        let s = Survey::load(dir.path(), &key, &db).expect("trusted");
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
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    saved(dir.path(), &db, later, &key);
    let s = Survey::load(dir.path(), &key, &db).expect("trusted");
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
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    // One source with `count` stores and `hashes`, saved.
    let save_one = |count: u64, hashes: Vec<u128>| {
        let one = Tallied {
            agent: "claude-code".into(),
            count,
            hashes,
        };
        save_tallied(dir.path(), &key, taken(later, &db, None), vec![one])
            .expect("save")
            .expect("saved");
    };
    // More hashes than stores.
    save_one(1, vec![1, 2]);
    assert!(Survey::load(dir.path(), &key, &db).is_none());
    save_one(2, vec![2, 1]);
    let s = Survey::load(dir.path(), &key, &db).expect("sorted when written");
    assert!(s.holds("claude-code", 1) && s.holds("claude-code", 2));
    // Hashes out of order, with a sum that checks out.
    let path = dir.path().join(FILE);
    let mut bytes = std::fs::read(&path).expect("read");
    let end = bytes.len() - 32;
    let (a, b) = (end - 32, end - 16);
    let first: Vec<u8> = bytes[a..b].to_vec();
    bytes.copy_within(b..end, a);
    bytes[b..end].copy_from_slice(&first);
    let sum = *blake3::hash(&bytes[..end]).as_bytes();
    bytes[end..].copy_from_slice(&sum);
    std::fs::write(&path, &bytes).expect("write");
    assert!(Survey::load(dir.path(), &key, &db).is_none());
}

#[test]
fn any_write_to_the_database_or_its_log_retires_the_survey() {
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    let wal = dir.path().join("cairn.db-wal");
    // An empty log holds no commit: the same as none.
    std::fs::write(&wal, b"").expect("wal");
    saved(dir.path(), &db, later, &key);
    assert!(Survey::load(dir.path(), &key, &db).is_some());
    std::fs::remove_file(&wal).expect("rm");
    assert!(Survey::load(dir.path(), &key, &db).is_some());
    // A commit lands in the log.
    std::fs::write(&wal, b"frame").expect("wal");
    assert!(Survey::load(dir.path(), &key, &db).is_none());
    std::fs::remove_file(&wal).expect("rm");
    assert!(Survey::load(dir.path(), &key, &db).is_some());
    // A checkpoint writes the database file itself.
    std::fs::write(&db, b"more pages").expect("write");
    assert!(Survey::load(dir.path(), &key, &db).is_none());
    // A database replaced by another file.
    std::fs::remove_file(&db).expect("rm");
    assert!(Survey::load(dir.path(), &key, &db).is_none());
}

#[test]
fn files_changed_at_or_after_the_clock_reading_are_not_trusted() {
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    let newest = DbFiles::of(&db).expect("stat").newest_ns();
    // The reading does not come after the last change: a write in the
    // same clock tick would leave the times as they are.
    for reading in [
        Reading {
            now_ns: newest,
            margin_ns: 0,
        },
        Reading {
            now_ns: later.now_ns,
            margin_ns: SLOW_CLOCK_MARGIN_NS,
        },
    ] {
        let saved = save(dir.path(), &key, taken(reading, &db, None), rows()).expect("save");
        assert_eq!(saved, Err(NotSaved::Unsettled));
        assert!(!dir.path().join(FILE).exists());
    }
    let mut no_database = taken(later, &db, Some(5));
    no_database.files = None;
    let none = save(dir.path(), &key, no_database, rows()).expect("save");
    assert_eq!(none, Err(NotSaved::NoDatabase));
}

#[test]
fn a_torn_or_damaged_survey_is_ignored() {
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    let path = saved(dir.path(), &db, later, &key);
    let good = std::fs::read(&path).expect("read");
    for cut in [
        0,
        8,
        40,
        HEADER_LEN,
        HEADER_LEN + 10,
        good.len() / 2,
        good.len() - 1,
    ] {
        std::fs::write(&path, &good[..cut]).expect("write");
        assert!(
            Survey::load(dir.path(), &key, &db).is_none(),
            "cut at {cut}"
        );
    }
    for at in [0, 45, good.len() / 2, good.len() - 40] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&path, &bad).expect("write");
        assert!(Survey::load(dir.path(), &key, &db).is_none(), "byte {at}");
    }
    std::fs::write(&path, &good).expect("write");
    assert!(Survey::load(dir.path(), &key, &db).is_some());
}

#[test]
fn a_survey_of_the_older_format_is_not_used() {
    let (dir, db, later) = setup();
    let key = [1u8; 32];
    let path = saved(dir.path(), &db, later, &key);
    let mut old = std::fs::read(&path).expect("read");
    // The same file with an older cairn's magic and a sum that checks
    // out: the magic alone retires it.
    old[..8].copy_from_slice(b"cairnsv1");
    let body = old.len() - 32;
    let sum = *blake3::hash(&old[..body]).as_bytes();
    old[body..].copy_from_slice(&sum);
    std::fs::write(&path, &old).expect("write");
    assert!(Survey::load(dir.path(), &key, &db).is_none());
}

#[cfg(target_os = "linux")]
#[test]
fn only_file_systems_stamped_by_this_kernel_need_no_margin() {
    // procfs is not a place a database lives: the two-second margin.
    assert!(!local_fine_clock(Path::new("/proc")));
    assert_eq!(
        Reading::take(Path::new("/proc")).margin_ns,
        SLOW_CLOCK_MARGIN_NS
    );
    // A tmpfs is stamped by this kernel's clock.
    let shm = Path::new("/dev/shm");
    #[allow(clippy::unnecessary_cast)]
    let tmpfs = rustix::fs::statfs(shm).is_ok_and(|s| s.f_type as i64 == 0x0102_1994);
    if tmpfs {
        assert!(local_fine_clock(shm));
        assert_eq!(Reading::take(shm).margin_ns, 0);
    }
}
