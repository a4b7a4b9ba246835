//! Running unattended: how fresh `cairn status` says the index is.

use std::io::Write;

use crate::util::TestHome;

fn append_line(home: &TestHome, text: &str) {
    let sid = "d2a7c4e1-8f3b-4c6d-a5e9-7b1f0c3d2e44";
    let path = home
        .path()
        .join(format!(".claude/projects/-home-dev-widgets/{sid}.jsonl"));
    let line = serde_json::json!({
        "type": "user", "uuid": "u-fresh-1", "parentUuid": null, "sessionId": sid,
        "timestamp": "2026-01-04T10:00:00.000Z", "cwd": "/home/dev/widgets",
        "message": {"role": "user", "content": text}
    });
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open transcript");
    writeln!(f, "{line}").expect("append");
}

#[test]
fn status_tells_how_far_the_index_is_behind_the_agents_stores() {
    let home = TestHome::seeded();
    let before = home.json(&["status", "--json"]);
    let stores = before["freshness"]["stores"].as_u64().expect("stores");
    assert!(stores > 3, "{before}");
    assert_eq!(
        before["freshness"]["pending"], stores,
        "nothing indexed yet: {before}"
    );
    home.ok(&["index", "--quiet"]);
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["freshness"]["pending"], 0, "{st}");
    assert!(st["freshness"]["newest_indexed_ms"].is_i64(), "{st}");
    assert!(home.ok(&["status"]).contains("all"), "text status");
    append_line(&home, "the ibis renderer is frozen");
    let st = home.json(&["status", "--json"]);
    assert_eq!(st["freshness"]["pending"], 1, "{st}");
    let text = home.ok(&["status"]);
    assert!(
        text.contains("1 of") && text.contains("changed since indexed"),
        "{text}"
    );
}
