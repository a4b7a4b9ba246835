//! Per-project stores found without configuration: a plain `cairn index`
//! on a home holding the recorded aider 0.86.2 project
//! (`fixtures/agents/aider/0.86.2/home`) and Cline CLI 3.0.65 session
//! finds both decisions, with their projects; an aider history in a folder
//! outside the usual code folders is found through the working folder of
//! another agent's session, in the same pass.

use std::path::Path;

use crate::util::{TestHome, copy_tree};

fn recording(agent: &str, release: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/agents")
        .join(agent)
        .join(release)
        .join("home")
}

const QUERY: &str = "what did we decide about the quokka library";

#[test]
fn a_plain_index_reads_the_recorded_aider_project_and_cline_session() {
    let home = TestHome::empty();
    copy_tree(&recording("aider", "0.86.2"), home.path());
    copy_tree(&recording("cline", "3.0.65"), home.path());
    home.ok(&["index"]);
    let hits = home.search(QUERY, &["--no-refresh"]);
    let of = |agent: &str| {
        hits.iter()
            .find(|h| h["agent"] == agent)
            .unwrap_or_else(|| panic!("no {agent} hit: {hits:#?}"))
    };
    let project = home.path().join("code/proj-aider");
    assert_eq!(of("aider")["project"], project.to_str().expect("utf-8"));
    assert_eq!(
        of("cline")["project"],
        "/home/dev/agent/home-cline/code/proj-cline"
    );
    // Remembered for the next passes, in the node's home.
    let remembered =
        std::fs::read_to_string(home.cairn_home().join("projects.json")).expect("projects.json");
    assert!(remembered.contains("proj-aider"), "{remembered}");
    // A second pass finds nothing new.
    let again = home.json(&["index", "--json"]);
    assert_eq!(again["added"], 0, "{again}");
}

#[test]
fn a_folder_another_agent_ran_in_is_searched_for_project_stores() {
    let home = TestHome::empty();
    let h = home.path();
    // Outside every usual code folder, and deeper than the home's own.
    let project = h.join("clients/acme/site");
    copy_tree(
        &recording("aider", "0.86.2").join("code/proj-aider"),
        &project,
    );
    let p = project.to_str().expect("utf-8");
    let claude = h.join(".claude/projects/-clients-acme-site");
    std::fs::create_dir_all(&claude).expect("mkdir");
    let line = serde_json::json!({
        "type": "user", "sessionId": "c1", "uuid": "u1", "cwd": p,
        "timestamp": "2026-12-05T18:00:00Z",
        "message": {"role": "user", "content": "set up the acme site build"}
    });
    std::fs::write(claude.join("c1.jsonl"), format!("{line}\n")).expect("write");

    home.ok(&["index"]);
    let hits = home.search(QUERY, &["--no-refresh"]);
    let aider = hits
        .iter()
        .find(|h| h["agent"] == "aider")
        .unwrap_or_else(|| panic!("aider's history not found: {hits:#?}"));
    assert_eq!(aider["project"], p);
}
