//! `cairn search` as people use it: word forms, the answer under the
//! question, aider's output, paging, exit statuses and plain output off a
//! terminal.

use serde_json::json;

use crate::util::TestHome;

/// Writes one Claude Code session of (role, RFC 3339 time, text) messages.
fn claude_session(home: &TestHome, id: &str, msgs: &[(&str, &str, &str)]) {
    let dir = home.path().join(".claude/projects/-home-dev-shop");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut lines = String::new();
    for (i, (role, time, text)) in msgs.iter().enumerate() {
        let message = if *role == "user" {
            json!({"role": "user", "content": text})
        } else {
            json!({"id": format!("m{i}"), "type": "message", "role": "assistant",
                   "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}]})
        };
        let v = json!({"parentUuid": null, "isSidechain": false, "userType": "external",
            "cwd": "/home/dev/shop", "sessionId": id, "version": "2.1.0", "type": role,
            "message": message, "uuid": format!("{id}-{i}"), "timestamp": time});
        lines.push_str(&v.to_string());
        lines.push('\n');
    }
    std::fs::write(dir.join(format!("{id}.jsonl")), lines).expect("write session");
}

fn home_with_history() -> TestHome {
    let home = TestHome::empty();
    claude_session(
        &home,
        "11111111-0000-4000-8000-000000000001",
        &[
            (
                "user",
                "2024-06-27T21:05:00Z",
                "Why did we pin hyper to 0.14?",
            ),
            (
                "assistant",
                "2024-06-27T21:06:00Z",
                "axum 0.6 is built on the old major version; upgrading means two Body types.",
            ),
            (
                "user",
                "2024-06-27T21:07:00Z",
                "I just signed up for a pottery class too.",
            ),
        ],
    );
    claude_session(
        &home,
        "22222222-0000-4000-8000-000000000002",
        &[(
            "user",
            "2025-11-20T10:00:00Z",
            "the sign on the door is crooked",
        )],
    );
    for i in 0..4 {
        claude_session(
            &home,
            &format!("33333333-0000-4000-8000-00000000000{i}"),
            &[(
                "user",
                "2025-10-01T10:00:00Z",
                "flamingo count for the survey",
            )],
        );
    }
    std::fs::write(
        home.path().join(".aider.chat.history.md"),
        "# aider chat started at 2025-09-01 10:00:00\n\n#### fix the build\n\n\
         > litellm.InternalServerError: AnthropicException - overloaded\n\n\
         The build passes again.\n",
    )
    .expect("write aider");
    home.ok(&["index", "--quiet"]);
    home
}

#[test]
fn word_forms_answers_aider_output_and_paging() {
    let home = home_with_history();
    // The inflected answer comes first for a question in other word forms.
    let hits = home.search(
        "when did she sign up for the pottery class",
        &["--no-refresh"],
    );
    assert_eq!(
        hits[0]["session_id"], "11111111-0000-4000-8000-000000000001",
        "{hits:#?}"
    );
    // The question is the best record; the answer comes with it.
    let hits = home.search("why did we pin hyper", &["--no-refresh"]);
    let h = &hits[0];
    assert_eq!(h["role"], "user", "{h:#}");
    assert!(
        h["answer_snippet"]
            .as_str()
            .is_some_and(|a| a.contains("axum 0.6")),
        "{h:#}"
    );
    assert_eq!(h["answer_role"], "assistant");
    let text = home.ok(&["search", "--no-refresh", "--", "why did we pin hyper"]);
    assert!(text.contains("assistant: axum 0.6"), "{text}");
    // aider's `> ` output is searchable.
    let hits = home.search("InternalServerError", &["--no-refresh"]);
    assert_eq!(hits[0]["agent"], "aider", "{hits:#?}");
    assert_eq!(hits[0]["role"], "tool_output");
    // Pages: a footer says there is more; --offset shows it.
    let text = home.ok(&["search", "--no-refresh", "-n", "2", "--", "flamingo"]);
    assert!(
        text.contains("2 of 4 sessions — --limit / --offset for more"),
        "{text}"
    );
    let page2 = home.json(&[
        "search",
        "--json",
        "--no-refresh",
        "-n",
        "2",
        "--offset",
        "2",
        "--",
        "flamingo",
    ]);
    assert_eq!(
        (page2["total"].clone(), page2["offset"].clone()),
        (json!(4), json!(2))
    );
    assert_eq!(page2["hits"].as_array().map(Vec::len), Some(2));
    let text = home.ok(&[
        "search",
        "--no-refresh",
        "-n",
        "2",
        "--offset",
        "2",
        "--",
        "flamingo",
    ]);
    assert!(text.contains("3–4 of 4 sessions"), "{text}");
}

#[test]
fn exit_statuses_and_validation() {
    let home = home_with_history();
    let found = home.run(&["search", "--no-refresh", "--", "flamingo"]);
    assert_eq!(found.status.code(), Some(0));
    let none = home.run(&["search", "--no-refresh", "--", "zyxwvutsrq"]);
    assert_eq!(none.status.code(), Some(1), "nothing matched");
    assert!(
        none.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
    let none_json = home.run(&["search", "--json", "--no-refresh", "--", "zyxwvutsrq"]);
    assert_eq!(none_json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&none_json.stdout).expect("json");
    assert_eq!(v["hits"], json!([]));
    let bad_agent = home.run(&["search", "--agent", "clippy", "--", "flamingo"]);
    assert_eq!(bad_agent.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_agent.stderr).contains("unknown --agent"));
    let empty = home.run(&["search", "--", "   "]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("query is empty"));
    let bad_since = home.run(&["search", "--since", "someday", "x"]);
    assert_eq!(bad_since.status.code(), Some(2));
}

#[test]
fn no_colour_when_piped_and_times_are_relative() {
    let home = home_with_history();
    // stdout is a pipe here: no escape sequences, whatever NO_COLOR says.
    let plain = home.ok(&["search", "--no-refresh", "--", "pin hyper"]);
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    assert!(plain.contains("ago)"), "relative time: {plain}");
    let out = home
        .cmd(&["search", "--no-refresh", "--", "pin hyper"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run");
    assert!(!out.stdout.contains(&0x1b));
}

#[test]
fn show_says_what_it_left_out() {
    let home = home_with_history();
    let id = "11111111-0000-4000-8000-000000000001";
    let text = home.ok(&["show", "--no-pager", "--limit", "1", id]);
    assert!(text.contains("records 1–1 of 3"), "{text}");
    assert!(
        text.contains(&format!("cairn show {id} --offset 1")),
        "{text}"
    );
    let v = home.json(&["show", "--json", "--limit", "2", id]);
    assert_eq!(
        (v["total"].clone(), v["next_offset"].clone()),
        (json!(3), json!(2))
    );
    let all = home.ok(&["show", "--no-pager", id]);
    assert!(!all.contains("--offset"), "nothing left out: {all}");
}

#[test]
fn a_search_right_after_an_append_finds_the_new_line() {
    let home = home_with_history();
    let file = home
        .path()
        .join(".claude/projects/-home-dev-shop/22222222-0000-4000-8000-000000000002.jsonl");
    // Searched once with nothing new: the answer from the index as it was.
    let before = home.json(&["search", "--json", "--", "crooked"]);
    assert_eq!(before["total"], 1, "{before}");
    // One line appended, no `cairn index`: the search's own refresh reads it
    // and the query runs again, so the first (stale) answer is not printed.
    let v = json!({"parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": "/home/dev/shop", "sessionId": "22222222-0000-4000-8000-000000000002",
        "version": "2.1.0", "type": "user",
        "message": {"role": "user", "content": "the marmalade jar is empty"},
        "uuid": "22222222-0000-4000-8000-000000000002-9", "timestamp": "2025-11-20T10:05:00Z"});
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open session");
    std::io::Write::write_all(&mut f, format!("{v}\n").as_bytes()).expect("append");
    drop(f);
    let after = home.json(&["search", "--json", "--", "marmalade"]);
    assert_eq!(after["total"], 1, "{after}");
    let snippet = after["hits"][0]["snippet"].as_str().expect("snippet");
    assert!(snippet.contains("marmalade"), "{after}");
    // Unchanged since: the same answer again.
    let again = home.json(&["search", "--json", "--", "marmalade"]);
    assert_eq!(again["hits"][0]["snippet"], after["hits"][0]["snippet"]);
}

/// With `cairn serve` running for the home, `cairn search` is answered by
/// the daemon over its search socket, with the page a search of its own
/// gives; once the daemon is gone it searches on its own again.
#[cfg(unix)]
#[test]
fn a_running_daemon_answers_searches_with_the_same_page() {
    use std::time::Duration;

    use crate::sync::{Reap, wait_for};

    let home = home_with_history();
    home.ok(&["index"]);
    // Everything but the score, which moves with the clock between runs.
    let page = |out: &str| -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(out).expect("search JSON");
        let mut hits = v["hits"].as_array().expect("hits").clone();
        for h in &mut hits {
            h.as_object_mut().expect("hit").remove("score");
        }
        hits.push(v["total"].clone());
        hits
    };
    let questions: [&[&str]; 3] = [
        &[
            "search",
            "--json",
            "--no-refresh",
            "--",
            "why did we pin hyper",
        ],
        &["search", "--json", "--lexical", "--", "crooked sign"],
        &[
            "search",
            "--json",
            "--role",
            "assistant",
            "--",
            "axum body types",
        ],
    ];
    let here: Vec<_> = questions.iter().map(|q| page(&home.ok(q))).collect();
    assert!(here.iter().all(|h| h.len() > 1), "{here:?}");

    let daemon = Reap(home.spawn_serve());
    let socket = home.cairn_home().join("search.sock");
    let state = home.cairn_home().join("serve.json");
    let deadline = Duration::from_secs(60);
    // The socket is bound before `serve.json` names the daemon, and the
    // CLI asks the daemon only once that file does.
    wait_for(deadline, || {
        (socket.exists() && state.exists()).then_some(())
    })
    .unwrap_or_else(|| panic!("the daemon never opened its search socket"));
    for (q, want) in questions.iter().zip(&here) {
        let out = home
            .cmd(q)
            .env("CAIRN_LOG", "cairn=debug")
            .output()
            .expect("run cairn");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{q:?}: {err}");
        assert!(err.contains("answered by the daemon"), "{q:?}: {err}");
        assert_eq!(&page(&String::from_utf8_lossy(&out.stdout)), want, "{q:?}");
    }
    // A token that does not match: refused, and the search runs here.
    std::fs::write(home.cairn_home().join("search.token"), "forged").expect("forge");
    let out = home
        .cmd(questions[0])
        .env("CAIRN_LOG", "cairn=debug")
        .output()
        .expect("run cairn");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("answered by the daemon"), "{err}");
    assert!(err.contains("wrong token"), "{err}");
    assert_eq!(page(&String::from_utf8_lossy(&out.stdout)), here[0]);

    // Killed (its socket file is left behind): searched here again.
    drop(daemon);
    let out = home
        .cmd(questions[0])
        .env("CAIRN_LOG", "cairn=debug")
        .output()
        .expect("run cairn");
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("answered by the daemon"));
    assert_eq!(page(&String::from_utf8_lossy(&out.stdout)), here[0]);
}
