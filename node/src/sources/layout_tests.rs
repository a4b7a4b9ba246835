use super::*;
use crate::sources::{Locations, UnreadableKind, registry};

/// Agents with no history folder to check, and why: their stores are
/// single files named in full, or stores no reader reads at all (listed
/// by their own [`Source::unreadable`]).
const NO_HISTORY_FOLDER: [(&str, &str); 7] = [
    ("aider", "a Markdown file per project, named in full"),
    ("notes", "cairn's own notes file"),
    (
        "antigravity",
        "brain folders hold Markdown artifacts; the newer stores are listed as unreadable",
    ),
    ("windsurf", "encrypted: listed as unreadable"),
    ("trae", "encrypted: listed as unreadable"),
    ("plandex", "kept on a server: listed as unreadable"),
    ("claude-desktop", "checked below its app folders only"),
];

/// Puts a folder of a layout no reader knows in `dir`: a session folder
/// of a future release, with its version in a small JSON file.
fn plant_unknown(dir: &Path) -> PathBuf {
    let entry = dir.join("zz-future-layout");
    std::fs::create_dir_all(entry.join("v9/parts")).expect("mkdir");
    std::fs::write(entry.join("v9/parts/0001.bin"), b"\x00\x01").expect("write");
    std::fs::write(entry.join("v9/header.json"), br#"{"version": "9.9.9"}"#).expect("write");
    entry
}

/// One row per agent (table-driven): each history folder gets a folder in
/// a layout no reader knows; every agent reports each one as found, not
/// understood, with the release its JSON names, and nothing else.
#[test]
fn every_agent_reports_a_folder_in_an_unknown_layout() {
    let mut checked = Vec::new();
    for source in registry() {
        let agent = source.agent();
        let tmp = tempfile::tempdir().expect("tempdir");
        let loc = Locations::under_home(tmp.path());
        let dirs: Vec<PathBuf> = source
            .history_dirs(&loc)
            .into_iter()
            .filter(|d| d.extension().is_none() || d.is_dir())
            .collect();
        let exempt = NO_HISTORY_FOLDER.iter().any(|(a, _)| *a == agent);
        if exempt {
            continue;
        }
        assert!(
            !dirs.is_empty(),
            "{agent} names no history folder and is not exempt"
        );
        // Nothing on disk: nothing reported.
        assert!(unread(source.as_ref(), &loc, &[]).is_empty(), "{agent}");
        let mut planted = Vec::new();
        for d in &dirs {
            plant_unknown(d);
            planted.push(d.clone());
        }
        let found = source.discover(&loc);
        let got = unread(source.as_ref(), &loc, &found);
        let reported: Vec<&PathBuf> = got.iter().map(|u| &u.path).collect();
        for d in &planted {
            let u = got.iter().find(|u| &u.path == d).unwrap_or_else(|| {
                panic!("{agent}: {} not reported; got {reported:?}", d.display())
            });
            assert_eq!(u.kind, UnreadableKind::NotUnderstood, "{agent}");
            assert_eq!(
                u.reason, "1 entry in a layout this cairn does not read: zz-future-layout/",
                "{agent}"
            );
            assert_eq!(u.release.as_deref(), Some("9.9.9"), "{agent}");
        }
        checked.push(agent);
    }
    assert!(checked.len() >= 20, "{checked:?}");
}

/// Beside the stores a reader reads, an unknown folder is still reported;
/// the agent's bookkeeping, hidden entries, empty skeletons and an index
/// file beside read sessions are not.
#[test]
fn only_entries_holding_unread_files_are_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let loc = Locations::under_home(tmp.path());
    let projects = loc.claude_dir.join("projects");
    let proj = projects.join("-home-me-app");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::write(proj.join("0b6c.jsonl"), "{}\n").expect("write");
    std::fs::create_dir_all(projects.join("empty/skeleton")).expect("mkdir");
    std::fs::create_dir_all(projects.join(".cache")).expect("mkdir");
    std::fs::write(projects.join(".cache/x"), "x").expect("write");
    std::fs::write(projects.join("index.json"), "{}").expect("write");
    let source = crate::sources::claude::ClaudeCode;
    let found = source.discover(&loc);
    assert_eq!(found.len(), 1);
    assert!(not_understood(&source, &loc, &found).is_empty());
    plant_unknown(&projects);
    std::fs::create_dir_all(projects.join("other/deep")).expect("mkdir");
    std::fs::write(projects.join("other/deep/s.db"), "x").expect("write");
    let got = not_understood(&source, &loc, &source.discover(&loc));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].reason,
        "2 entries in a layout this cairn does not read: other/, zz-future-layout/"
    );
    // A loose file counts when nothing beside it is read.
    let tmp2 = tempfile::tempdir().expect("tempdir");
    let loc2 = Locations::under_home(tmp2.path());
    let projects2 = loc2.claude_dir.join("projects");
    std::fs::create_dir_all(&projects2).expect("mkdir");
    std::fs::write(projects2.join("sessions.pack"), "x").expect("write");
    let got = not_understood(&source, &loc2, &source.discover(&loc2));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].release, None);
}

/// A database whose reader queries a table it lacks is reported as not
/// understood, with its schema version; other failures stay as they are.
#[test]
fn a_database_without_the_known_tables_is_not_understood() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("sessions.db");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch("CREATE TABLE conversations_v9 (id TEXT); PRAGMA user_version = 9;")
        .expect("schema");
    drop(conn);
    let err = crate::sources::goose::read_db(&path, &None).expect_err("foreign schema");
    let e = classify(err);
    assert!(matches!(e, SourceError::NotUnderstood { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with(NOT_UNDERSTOOD), "{msg}");
    assert!(msg.contains("schema version 9"), "{msg}");
    assert_eq!(
        store_not_understood(0, 0, Some(&msg)).as_deref(),
        Some(msg.as_str())
    );
    // A locked or missing database is a passing failure, not a layout.
    let gone = classify(SourceError::Io {
        path: path.clone(),
        source: std::io::Error::other("busy"),
    });
    assert!(matches!(gone, SourceError::Io { .. }));
    assert_eq!(
        store_not_understood(0, 0, Some("failed to read x: busy")),
        None
    );
}

#[test]
fn a_store_of_which_nothing_was_read_but_parts_were_skipped_is_not_understood() {
    assert!(store_not_understood(0, 3, None).is_some_and(|s| s.contains("3 line(s)")));
    assert_eq!(store_not_understood(5, 3, None), None);
    assert_eq!(store_not_understood(0, 0, None), None);
}
