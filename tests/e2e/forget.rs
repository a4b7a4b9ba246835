//! `cairn forget`: dry run, refusal without `--yes`, the real forget, no
//! resurrection on the next index pass, and no forgotten bytes left in the
//! database or its WAL.

use crate::util::TestHome;

fn db_bytes(home: &TestHome) -> Vec<u8> {
    let db = home.cairn_home().join("cairn.db");
    let mut bytes = std::fs::read(&db).expect("read database");
    if let Ok(wal) = std::fs::read(home.cairn_home().join("cairn.db-wal")) {
        bytes.extend(wal);
    }
    bytes
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn forget_session_needs_yes_and_stays_forgotten() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let hits = home.search("why did we pin hyper?", &["--no-refresh"]);
    let top = hits.first().expect("the hyper session is found");
    assert_eq!(top["agent"], "claude-code");
    let sid = top["session_id"].as_str().expect("session id").to_owned();
    let prefix = &sid[..8];
    // The session's distinctive phrase is in the database before.
    let phrase = "pinned hyper to 0.14";
    assert!(home.ok(&["show", "--no-pager", prefix]).contains(phrase));

    // Dry run lists and changes nothing.
    let dry = home.json(&["forget", "--session", prefix, "--dry-run", "--json"]);
    assert_eq!(dry["forgotten"], false);
    let n = dry["records"].as_array().expect("records").len();
    assert!(n > 0);
    assert!(
        dry["records"]
            .as_array()
            .expect("records")
            .iter()
            .all(|r| r["session_id"] == sid.as_str())
    );

    // Without --yes: refused, exit 2, nothing forgotten.
    let out = home.run(&["forget", "--session", prefix]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert!(
        !home
            .search("why did we pin hyper?", &["--no-refresh"])
            .is_empty()
    );

    // The real forget.
    let done = home.json(&["forget", "--session", prefix, "--yes", "--json"]);
    assert_eq!(done["forgotten"], true);
    assert_eq!(done["report"]["records"].as_u64(), Some(n as u64));
    assert_eq!(done["report"]["tombstones"].as_u64(), Some(1));

    // The transcript is still on disk, yet a new index pass does not bring it back.
    home.ok(&["index", "--quiet"]);
    let hits = home.search("why did we pin hyper?", &["--no-refresh"]);
    assert!(
        hits.iter().all(|h| h["session_id"] != sid.as_str()),
        "{hits:#?}"
    );
    let show = home.run(&["show", "--no-pager", prefix]);
    assert!(!String::from_utf8_lossy(&show.stdout).contains(phrase));
    let bytes = db_bytes(&home);
    if let Some(at) = bytes
        .windows(phrase.len())
        .position(|w| w == phrase.as_bytes())
    {
        let lo = at.saturating_sub(200);
        eprintln!(
            "context: {:?}",
            String::from_utf8_lossy(&bytes[lo..(at + 100).min(bytes.len())])
        );
    }
    assert!(
        !contains(&bytes, phrase),
        "forgotten text left in the database or WAL"
    );
    // Other sessions are untouched.
    assert!(!home.search("job queue redis", &["--no-refresh"]).is_empty());
}

#[test]
fn forget_query_and_errors() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    let dry = home.json(&[
        "forget",
        "--query",
        "tantivy meilisearch",
        "--dry-run",
        "--json",
    ]);
    let n = dry["records"].as_array().expect("records").len();
    assert!(n > 0);
    let done = home.json(&[
        "forget",
        "--query",
        "tantivy meilisearch",
        "--yes",
        "--json",
    ]);
    assert_eq!(done["report"]["records"].as_u64(), Some(n as u64));
    assert_eq!(done["report"]["tombstones"].as_u64(), Some(n as u64));
    let again = home.run(&["forget", "--query", "tantivy meilisearch", "--dry-run"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to forget"));

    // No selector, or two: a usage error.
    assert_eq!(home.run(&["forget", "--yes"]).status.code(), Some(2));
    assert_eq!(
        home.run(&["forget", "--session", "x", "--project", "/p"])
            .status
            .code(),
        Some(2)
    );
    let missing = home.run(&["forget", "--project", "/no/such/project", "--dry-run"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// Forgetting notes removes them from `notes.jsonl` too: afterwards no file
/// under the node's home holds a forgotten note's bytes, while the notes
/// that were not forgotten stay on disk and searchable.
#[test]
fn forget_removes_notes_from_every_file_in_the_home() {
    use crate::util::{all_bytes_under, contains};
    let home = TestHome::empty();
    let notes = [
        ("/p/alpha", "ploverine rotation uses the amber bucket"),
        ("/p/alpha", "ploverine caches expire after nine minutes"),
        ("/p/beta", "quillfeather deploys wait for the canary"),
        ("/p/gamma", "keep this gamma note about sandpipers"),
    ];
    for (project, text) in notes {
        home.ok(&["remember", "--project", project, text]);
    }
    home.ok(&["index", "--quiet"]);
    let find = |text: &str| {
        all_bytes_under(&home.cairn_home())
            .into_iter()
            .filter(|(_, b)| contains(b, text.as_bytes()))
            .map(|(p, _)| p.display().to_string())
            .collect::<Vec<_>>()
    };
    for (_, text) in notes {
        assert!(!find(text).is_empty(), "{text} not stored");
    }

    // By query: one note.
    let done = home.json(&[
        "forget",
        "--query",
        "quillfeather canary",
        "--yes",
        "--json",
    ]);
    assert_eq!(done["report"]["notes"], 1, "{done}");
    // By project: both alpha notes.
    let done = home.json(&["forget", "--project", "/p/alpha", "--yes", "--json"]);
    assert_eq!(done["report"]["notes"], 2, "{done}");
    let human = home.run(&["forget", "--project", "/p/alpha", "--yes"]);
    assert_eq!(human.status.code(), Some(2), "nothing left to forget");

    // A new index pass re-reads the rewritten file without bringing anything back.
    home.ok(&["index", "--quiet"]);
    for (_, text) in &notes[..3] {
        assert_eq!(find(text), Vec::<String>::new(), "{text} left on disk");
        assert!(home.search(text, &["--no-refresh"]).is_empty(), "{text}");
    }
    let kept = notes[3].1;
    let files = find(kept);
    assert!(
        files.iter().any(|f| f.ends_with("notes.jsonl")),
        "kept note gone from the notes file: {files:?}"
    );
    assert_eq!(home.search(kept, &["--no-refresh"]).len(), 1);
    // Later notes append to the rewritten file as usual.
    home.ok(&[
        "remember",
        "--project",
        "/p/delta",
        "a later note on godwits",
    ]);
    assert_eq!(home.search("godwits", &["--no-refresh"]).len(), 1);
}
