//! Derived data beside the database: a small history keeps at most two
//! derived files; damage to any (random bytes over 5% of its body, or
//! every 8th 4 KiB page zeroed) never changes an answer without cairn
//! naming the file; and a derived file that cannot be written fails
//! `cairn index`, naming it. The sketch and its cells, written from
//! 100,000 and 400,000 vectors, are had here from a small history through
//! the tests-only `CAIRN_TEST_SKETCH_FROM` (see `store::sketch`).

use std::path::{Path, PathBuf};

use cairn_node::store::Component;

use crate::util::{TestHome, copy_tree};

/// The names of `components`' files beside `cairn.db`, sorted.
fn names_of(components: &[Component]) -> Vec<String> {
    let mut out: Vec<String> = components.iter().map(|c| c.file_name("cairn.db")).collect();
    out.sort();
    out
}

/// A seeded home whose commands sketch the vectors (and file the sketches
/// under cells) from 500 entries on, and score a quarter of them exactly.
fn sketched_home() -> TestHome {
    TestHome::seeded().with_env("CAIRN_TEST_SKETCH_FROM", "500")
}

/// One Claude Code session of `turns` alternating user and assistant
/// lines built from a small vocabulary, a day apart every 40 turns, so
/// the derived files span several pages.
fn long_session(home: &Path, id: &str, turns: usize) {
    const WORDS: [&str; 16] = [
        "deploy",
        "timeout",
        "error",
        "cache",
        "migration",
        "database",
        "retry",
        "build",
        "flaky",
        "test",
        "queue",
        "latency",
        "config",
        "rollback",
        "index",
        "shard",
    ];
    let dir = home.join(".claude/projects/-home-dev-fleet");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut body = String::new();
    for i in 0..turns {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let text = format!(
            "{} the {} {} after the {} step {i}",
            WORDS[i % 16],
            WORDS[(i * 7 + 3) % 16],
            WORDS[(i * 5 + 1) % 16],
            WORDS[(i / 16) % 16]
        );
        let content = match role {
            "user" => serde_json::json!(text),
            _ => serde_json::json!([{"type": "text", "text": text}]),
        };
        let day = 1 + (i / 40) % 28;
        body.push_str(
            &serde_json::json!({
                "type": role,
                "uuid": format!("{id}-{i}"),
                "parentUuid": null,
                "sessionId": id,
                "timestamp": format!("2025-10-{day:02}T10:{:02}:{:02}.000Z", (i / 60) % 60, i % 60),
                "cwd": "/home/dev/fleet",
                "message": {"role": role, "content": content}
            })
            .to_string(),
        );
        body.push('\n');
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), body).expect("write session");
}

/// The fixed questions: words, filters on role, agent and time, and one
/// in other words (the meaning tier).
const QUESTIONS: &[(&str, &[&str])] = &[
    ("deploy timeout", &[]),
    ("error", &["--role", "user"]),
    ("migration", &["--role", "assistant"]),
    ("flaky test", &["--agent", "claude-code"]),
    ("rollback", &["--since", "2025-10-15"]),
    ("shard latency", &["--lexical"]),
    ("why does the release take so long to ship", &[]),
    ("invoice rounding", &[]),
];

/// Every question's answer: its hits' sessions, records, roles, times and
/// match counts in order (the score's recency moves with the clock),
/// with what the searches printed on stderr.
fn answers(home: &TestHome) -> (Vec<serde_json::Value>, String) {
    let mut all = Vec::new();
    let mut stderr = String::new();
    for (q, extra) in QUESTIONS {
        let mut args = vec!["search", "--json", "--no-refresh", "--limit", "20"];
        args.extend_from_slice(extra);
        args.push("--");
        args.push(q);
        let out = home.run(&args);
        stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        let stdout = crate::util::search_output(&args, out);
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("search JSON");
        let hits: Vec<serde_json::Value> = v["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| {
                serde_json::json!([
                    h["session_id"],
                    h["record_id"],
                    h["role"],
                    h["time"],
                    h["matches"]
                ])
            })
            .collect();
        all.push(serde_json::json!({"q": q, "extra": extra, "hits": hits}));
    }
    (all, stderr)
}

/// The derived files beside the database: every `cairn.db-*` but
/// SQLite's own.
fn derived_files(cairn: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(cairn)
        .expect("cairn home")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with("cairn.db-") && !name.ends_with("-wal") && !name.ends_with("-shm")
        })
        .collect();
    out.sort();
    out
}

/// A small seeded generator (xorshift64*), so each damage is the same
/// on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The two kinds of damage, applied to the bytes of a file: random bytes
/// over 5% of its body (past the 32-byte header), or every 8th 4 KiB
/// page zeroed (pages 1, 9, 17, ...: the header's page is left, so the
/// file still claims to be the one the database vouches for).
fn damage(bytes: &mut [u8], kind: usize, seed: u64) {
    match kind {
        0 => {
            let mut rng = Rng(seed | 1);
            let body = bytes.len() - 32;
            for _ in 0..body.div_ceil(20) {
                let at = 32 + (rng.next() % body as u64) as usize;
                bytes[at] = rng.next() as u8;
            }
        }
        _ => {
            for page in bytes.chunks_mut(4096).skip(1).step_by(8) {
                page.fill(0);
            }
        }
    }
}

/// Indexes a long session in `home`, checks that the derived files are
/// `expected`, then damages each in both ways, from the same indexed
/// home each time: the answers stay or the search names the file, and
/// the next `cairn index` names it, writes it anew and answers as before.
fn damage_each_derived_file(home: &TestHome, expected: &[Component]) {
    long_session(home.path(), "fleet-ops", 2_400);
    home.ok(&["index", "--quiet"]);
    // A pass with nothing new leaves a survey for the next, which must
    // still run when a derived file is damaged.
    home.ok(&["index", "--quiet"]);
    let cairn = home.cairn_home();
    let files = derived_files(&cairn);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, names_of(expected), "derived files");
    // Nothing else beside the database but its own log and the node's
    // key: the survey is a row of the database, not a file.
    let mut home_files: Vec<String> = std::fs::read_dir(&cairn)
        .expect("cairn home")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("cairn.db-") && n != "projects.json")
        .collect();
    home_files.sort();
    assert_eq!(home_files, ["cairn.db", "identity.key"], "the home's files");
    let (want, quiet) = answers(home);
    assert!(quiet.is_empty(), "undamaged searches say nothing: {quiet}");
    assert!(
        want.iter()
            .filter(|a| !a["hits"].as_array().expect("hits").is_empty())
            .count()
            >= 6,
        "the questions find things: {want:#?}"
    );
    // The whole home as indexed, put back before each damage.
    let pristine = tempfile::tempdir().expect("tmp");
    copy_tree(&cairn, pristine.path());
    for (f, path) in files.iter().enumerate() {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let len = std::fs::metadata(path).expect("stat").len();
        assert!(
            len > 9 * 4096,
            "{name} spans the damaged pages ({len} bytes)"
        );
        for kind in 0..2 {
            std::fs::remove_dir_all(&cairn).expect("clear");
            copy_tree(pristine.path(), &cairn);
            let mut bytes = std::fs::read(path).expect("read");
            let before = bytes.clone();
            damage(&mut bytes, kind, 0x5eed + f as u64 * 2 + kind as u64);
            assert_ne!(bytes, before, "{name}: damaged");
            std::fs::write(path, &bytes).expect("damage");
            // Read at once: a damaged part is never read; the search
            // names the file when it met one.
            let (now, said) = answers(home);
            let named = said.contains(&name);
            assert!(
                now == want || named,
                "{name}, damage {kind}: answers changed and the file was not named\nstderr: {said}"
            );
            if name.ends_with("-columns") {
                assert_eq!(now, want, "{name}, damage {kind}: the rows answer instead");
            }
            // Random bytes reach the head of the sketch and of the cells,
            // which every meaning search reads: the check there names it.
            if kind == 0 && (name.ends_with("-sketch") || name.ends_with("-cells")) {
                assert!(named, "{name}: the search names it: {said}");
            }
            // The next `cairn index` finds it, names it and writes it anew:
            // every answer as before, and nothing more to say.
            let out = home.run(&["index"]);
            let printed = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{name}, damage {kind}: {printed}");
            assert!(
                printed.contains("damaged, written anew") && printed.contains(&name),
                "{name}, damage {kind}: index names it: {printed}"
            );
            assert_eq!(
                derived_files(&cairn),
                files,
                "{name}, damage {kind}: all there"
            );
            let (after, said) = answers(home);
            assert_eq!(after, want, "{name}, damage {kind}: after `cairn index`");
            assert!(said.is_empty(), "{name}, damage {kind}: {said}");
        }
    }
}

#[test]
fn damaged_derived_data_never_changes_an_answer_unnamed() {
    // A small history: the columns and the vectors, nothing else.
    damage_each_derived_file(
        &TestHome::seeded(),
        &[Component::Columns, Component::Vectors],
    );
}

#[test]
fn a_damaged_sketch_or_cells_never_changes_an_answer_unnamed() {
    // Every file the list names.
    damage_each_derived_file(&sketched_home(), &Component::ALL);
}

/// For each of `names`, with a folder in the way of that file: two
/// `cairn index` runs that must write it exit 2 naming it (the JSON report
/// lists it as unwritten), searches still answer, and once the way is
/// clear the next pass writes it.
fn unwritable_fails_index_naming_it(home: &TestHome, components: &[Component]) {
    let cairn = home.cairn_home();
    for name in names_of(components) {
        // The file cannot be put in place (a folder is in the way) and
        // must be written anew: new history to index.
        let path = cairn.join(&name);
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("a folder in the way");
        long_session(home.path(), &format!("more-{name}"), 30);
        for args in [&["index"][..], &["index", "--json"][..]] {
            let out = home.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?} {name}: {stderr}");
            // Named once, with the reason beside it.
            assert_eq!(
                stderr.matches(&*path.to_string_lossy()).count(),
                1,
                "{args:?}: names {name}: {stderr}"
            );
            if args.contains(&"--json") {
                let v: serde_json::Value =
                    serde_json::from_slice(&out.stdout).expect("the report still prints");
                assert!(
                    v["unwritten"].as_array().is_some_and(|u| !u.is_empty()),
                    "{v}"
                );
            }
        }
        // Searches still answer, from the database; once the way is
        // clear, the next pass writes the file and succeeds.
        assert!(!home.search("deploy", &["--no-refresh"]).is_empty());
        std::fs::remove_dir(&path).expect("clear the way");
        home.ok(&["index", "--quiet"]);
        assert!(path.is_file(), "{name} written");
    }
}

#[test]
fn a_derived_file_that_cannot_be_written_fails_index_naming_it() {
    let home = TestHome::seeded();
    home.ok(&["index", "--quiet"]);
    unwritable_fails_index_naming_it(&home, &[Component::Columns, Component::Vectors]);
}

#[test]
fn a_sketch_or_cells_that_cannot_be_written_fails_index_naming_it() {
    let home = sketched_home();
    long_session(home.path(), "fleet-ops", 700);
    home.ok(&["index", "--quiet"]);
    unwritable_fails_index_naming_it(&home, &[Component::Sketch, Component::Cells]);
}

/// Damage that leaves a derived file's size and time as they were (a
/// failing disk does not touch the time): a search that meets it names
/// the file and says the next `cairn index` writes it anew, and that
/// `cairn index` does, though its survey of the disk saw nothing change.
/// So does a search's own refresh pass, if one runs first: it leaves no
/// survey that would hide the damage from the next `cairn index`.
#[test]
fn damage_that_keeps_the_files_time_is_written_anew_by_the_next_index() {
    let home = TestHome::seeded();
    long_session(home.path(), "fleet-ops", 2_400);
    home.ok(&["index", "--quiet"]);
    // The second pass leaves the survey a third would take as it is.
    home.ok(&["index", "--quiet"]);
    let (want, quiet) = answers(&home);
    assert!(quiet.is_empty(), "{quiet}");
    let path = home
        .cairn_home()
        .join(Component::Vectors.file_name("cairn.db"));
    for refresh_first in [false, true] {
        let was = std::fs::metadata(&path).expect("stat");
        let mut bytes = std::fs::read(&path).expect("read");
        damage(&mut bytes, 0, 0xb17 + u64::from(refresh_first));
        std::fs::write(&path, &bytes).expect("damage");
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_modified(was.modified().expect("mtime"))
            .expect("time as it was");
        drop(file);
        let same = std::fs::metadata(&path).expect("stat");
        assert_eq!(
            (same.len(), same.modified().ok()),
            (was.len(), was.modified().ok())
        );
        let (_, said) = answers(&home);
        assert!(
            said.contains("cairn.db-vectors") && said.contains("the next `cairn index` writes"),
            "the search names it: {said}"
        );
        if refresh_first {
            // A search with its refresh pass, as typed by hand.
            home.run(&["search", "--", "deploy timeout"]);
        }
        let out = home.run(&["index"]);
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{printed}");
        if !refresh_first {
            assert!(
                printed.contains("damaged, written anew") && printed.contains("cairn.db-vectors"),
                "index names it: {printed}"
            );
        }
        let (after, said) = answers(&home);
        assert_eq!(
            after, want,
            "after `cairn index` (refresh first: {refresh_first})"
        );
        assert!(said.is_empty(), "{said}");
    }
}
