//! The fixture `fixtures/agents/vscode/source/` follows microsoft/vscode's
//! `ISerializableChatData` v3 (`chatModel.ts` @ 8c035459) and its mutation
//! log (`objectMutationLog.ts` @ 047238f9): a `.json` session of the
//! generation up to 1.108, a `.jsonl` log of 1.109+ (an edited request
//! truncated and replaced, a deleted property), and an empty window's
//! session.

use super::*;

const TREE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/agents/vscode/source/tree"
);

fn read(found: &[SourceFile], name: &str) -> Parsed {
    let f = found
        .iter()
        .find(|f| f.path.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("{name} not discovered: {found:?}"));
    parse(&f.path, &std::fs::read(&f.path).expect("fixture"))
}

fn rows(p: &Parsed) -> Vec<(Role, &str, Option<i64>)> {
    p.records
        .iter()
        .map(|r| (r.role, r.text.as_str(), r.time_ms))
        .collect()
}

#[test]
fn discovers_every_session_file_of_the_fixture() {
    let loc = Locations::under_home(Path::new(TREE));
    let found = VsCodeChat.discover(&loc);
    assert_eq!(found.len(), 3, "{found:?}");
    // A portable install keeps its User folder under VSCODE_PORTABLE.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut loc = Locations::under_home(tmp.path());
    let chats = tmp
        .path()
        .join("vsc/user-data/User/globalStorage/emptyWindowChatSessions");
    std::fs::create_dir_all(&chats).expect("mkdir");
    std::fs::write(chats.join("a.json"), "{}").expect("write");
    assert!(VsCodeChat.discover(&loc).is_empty());
    loc.vars
        .insert("VSCODE_PORTABLE".into(), tmp.path().join("vsc"));
    let found: Vec<PathBuf> = VsCodeChat
        .discover(&loc)
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(found, [chats.join("a.json")]);
}

#[test]
fn reads_a_json_session_with_a_terminal_call() {
    let loc = Locations::under_home(Path::new(TREE));
    let p = read(
        &VsCodeChat.discover(&loc),
        "6d1f3b52-8c0e-4a71-9f35-2b7c4e9a1d08.json",
    );
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let (asked, answered) = (Some(1_764_590_400_000), Some(1_764_590_409_870));
    assert_eq!(
        rows(&p),
        [
            (
                Role::User,
                "Why does the parser test fail with quokka 2.4?",
                asked
            ),
            (Role::Assistant, "Let me run the parser tests.", asked),
            (Role::ToolCall, "run_in_terminal: cargo test parser", asked),
            (
                Role::ToolOutput,
                "test parser::dates ... FAILED\nthread 'parser::dates' panicked: quokka::parse \
                 returned Err(Utf8)",
                asked
            ),
            (
                Role::Assistant,
                "quokka 2.4 rejects the non-UTF-8 dates the fixtures hold. Decision: pin quokka \
                 to 2.3 until the fixtures are re-encoded.",
                answered
            ),
        ]
    );
    let r = &p.records[0];
    assert_eq!(r.agent, "vscode");
    assert_eq!(r.session_id, "6d1f3b52-8c0e-4a71-9f35-2b7c4e9a1d08");
    // workspace.json's file URI, percent-decoded.
    assert_eq!(r.project.as_deref(), Some("/home/dev/quokka app"));
}

#[test]
fn replays_a_jsonl_mutation_log() {
    let loc = Locations::under_home(Path::new(TREE));
    let p = read(
        &VsCodeChat.discover(&loc),
        "0c4e7a19-5b2d-4f86-a3e1-7d9c8b6a5f42.jsonl",
    );
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let got = rows(&p);
    let texts: Vec<(Role, &str)> = got.iter().map(|g| (g.0, g.1)).collect();
    assert_eq!(
        texts,
        [
            (Role::User, "When does the nightly ledger export run?"),
            // The command as the tool edited it, and the terminal's output.
            (Role::ToolCall, "run_in_terminal: crontab -l 2>&1"),
            (
                Role::ToolOutput,
                "0 2 * * * GH_TOKEN=ghp_S0urceFixtureVsC0deLedger2026abcdEF12 \
                 /usr/local/bin/ledger-export"
            ),
            (
                Role::Assistant,
                "It runs at 02:00 UTC; we moved it from midnight because the bank's feed lands \
                 at 01:30."
            ),
            // The second request was edited and re-sent: the log truncated
            // it away and pushed the new one.
            (Role::User, "and the weekly export?"),
            (
                Role::ToolCall,
                "copilot_readFile /home/dev/ledger/ops/cron.md"
            ),
            (Role::ToolOutput, "weekly: Sunday 03:00 UTC"),
            (Role::Assistant, "Sundays at 03:00 UTC."),
        ]
    );
    assert_eq!(got[0].2, Some(1_764_594_005_000));
    assert_eq!(got[3].2, Some(1_764_594_012_000));
    // No modelState on the second request: the request's time.
    assert_eq!(got[7].2, Some(1_764_594_160_000));
    assert!(
        p.records
            .iter()
            .all(|r| r.project.as_deref() == Some("/home/dev/ledger"))
    );
    assert!(
        p.records
            .iter()
            .all(|r| r.session_id == "0c4e7a19-5b2d-4f86-a3e1-7d9c8b6a5f42")
    );
}

#[test]
fn an_empty_window_session_has_no_project() {
    let loc = Locations::under_home(Path::new(TREE));
    let p = read(
        &VsCodeChat.discover(&loc),
        "e5a4b3c2-d1e0-4f9a-8b7c-6d5e4f3a2b1c.json",
    );
    assert_eq!(p.records.len(), 2);
    assert!(p.records.iter().all(|r| r.project.is_none()));
}

#[test]
fn broken_logs_are_counted_not_fatal() {
    let path = Path::new("/u/workspaceStorage/x/chatSessions/s.jsonl");
    // No initial entry: nothing to replay onto.
    let p = parse(path, b"{\"kind\":1,\"k\":[\"customTitle\"],\"v\":\"t\"}\n");
    assert!(p.records.is_empty());
    assert!(!p.errors.is_empty());
    // A torn line and a mutation on a path that is not there are skipped;
    // the rest is read.
    let log = b"{\"kind\":0,\"v\":{\"sessionId\":\"s\",\"requests\":[]}}\n\
{\"kind\":2,\"k\":[\"requests\"],\"v\":[{\"message\":{\"text\":\"hi\"},\"timestamp\":1764594005000,\"response\":[{\"value\":\"hello\"}]}]}\n\
{\"kind\":2,\"k\":[\"requests\",0,\"message\",\"text\",\"x\"],\"v\":[1]}\n\
{\"kind\":1,\"k\":[\"requ";
    let p = parse(path, log);
    assert_eq!(p.errors.len(), 2, "{:?}", p.errors);
    let texts: Vec<&str> = p.records.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, ["hi", "hello"]);
    let p = parse(Path::new("/a/s.json"), b"{\"version\":3}");
    assert_eq!(p.errors.len(), 1);
    assert_eq!(percent_decode("/a%20b/%zz%2"), "/a b/%zz%2");
}
