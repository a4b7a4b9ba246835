//! Mistral Vibe's unified session store (2.26 by default, the only one 3.x
//! writes): `logs/session/unified/<session-id>/`, read as one whole store per
//! session through its `CURRENT` pointer.
//!
//! Layout (`mistral.vibe.unified-session-store/v1`):
//! - `CURRENT`: `{generation, snapshot_sequence, session_id, ...}`, replaced
//!   whenever Vibe publishes a generation (at the end of every turn, and
//!   when a long turn's journal grows past 32 MiB);
//! - `generations/<generation>/manifest.json`: names the generation's
//!   `projection-state.json` (`chunks`: content-addressed pieces under
//!   `chunks/<sha256>.json` whose concatenation is the history, or none and
//!   the history inline at `snapshot.history.entries`), and the journal
//!   segment written since (`recovery_journal_segment{path, first_sequence}`);
//! - `journal/<sequence>.jsonl`: append-only records; those of type
//!   `projection_delta` change the history with `append_entry`,
//!   `replace_entry`, `remove_entry` and `set_history_entries` ops;
//! - `meta.json`: `session_id`, `parent_session_id`,
//!   `environment.working_directory`, `start_time`.
//!
//! Vibe keeps only the two newest generations and journal segments, so a
//! session's full history is the published generation plus its journal,
//! never the journal alone: each change of `CURRENT` re-reads that whole
//! (a turn's records arrive when Vibe publishes it). History entries are
//! `message` (`role` user/assistant, `content` blocks, `createdAt` ms; the
//! host's injected prompts never reach this history), `effect` (a tool
//! call: `detail{toolName, input}`, then `state{status, outputText,
//! output{structured_content}}` once settled, at `updatedAt`), and
//! `reasoning`, `notice` and `checkpoint` entries, which are skipped, as
//! are messages still streaming or discarded.
//!
//! Reads only files inside the session folder, by names it validates (no
//! path from a file can lead outside); never writes.

use std::path::Path;

use serde_json::Value;

use super::super::blocks;
use super::super::common::{content_text, json_document};
use super::super::{ParseError, Parsed};
use super::Meta;
use crate::record::{Record, Role};

/// Whether `s` is a plain file name (no separator, not `.`/`..`).
fn plain_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\'])
}

/// Reads a JSON document inside the session folder, or records why not.
fn read_json(root: &Path, rel: &[&str], what: &'static str, parsed: &mut Parsed) -> Option<Value> {
    if !rel.iter().all(|p| plain_name(p)) {
        parsed.errors.push(ParseError::Shape { offset: 0, what });
        return None;
    }
    let path = rel.iter().fold(root.to_path_buf(), |p, r| p.join(r));
    match std::fs::read(&path) {
        Ok(bytes) => json_document(&bytes, parsed),
        Err(_) => {
            parsed.errors.push(ParseError::Shape { offset: 0, what });
            None
        }
    }
}

/// The history entries of a generation's projection: its chunks joined, or
/// the entries held inline.
fn projection_entries(
    root: &Path,
    generation: &str,
    manifest: &Value,
    parsed: &mut Parsed,
) -> Option<Vec<Value>> {
    let Some(ps) = manifest.get("projection_state") else {
        parsed.errors.push(ParseError::Shape {
            offset: 0,
            what: "manifest names no projection state",
        });
        return None;
    };
    let file = ps
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or("projection-state.json");
    if let Some(chunks) = ps.get("chunks").and_then(Value::as_array)
        && !chunks.is_empty()
    {
        let mut entries = Vec::new();
        for c in chunks {
            let name = c.as_str().map(|h| format!("{h}.json")).unwrap_or_default();
            let chunk = read_json(root, &["chunks", &name], "unreadable history chunk", parsed)?;
            match chunk {
                Value::Array(items) => entries.extend(items),
                _ => {
                    parsed.errors.push(ParseError::Shape {
                        offset: 0,
                        what: "history chunk is not a list",
                    });
                    return None;
                }
            }
        }
        return Some(entries);
    }
    let state = read_json(
        root,
        &["generations", generation, file],
        "unreadable projection state",
        parsed,
    )?;
    Some(
        state
            .pointer("/snapshot/history/entries")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    )
}

/// Applies one `projection_delta` record's ops to `entries`.
fn apply_delta(entries: &mut Vec<Value>, ops: &[Value]) {
    let id_of = |e: &Value| e.get("id").and_then(Value::as_str).map(str::to_owned);
    for op in ops {
        let id = op.get("id").and_then(Value::as_str);
        match op.get("op").and_then(Value::as_str) {
            Some("append_entry") => {
                if let Some(e) = op.get("entry") {
                    entries.push(e.clone());
                }
            }
            Some("replace_entry") => {
                let Some(e) = op.get("entry") else { continue };
                match entries.iter_mut().find(|x| id_of(x).as_deref() == id) {
                    Some(slot) => *slot = e.clone(),
                    None => entries.push(e.clone()),
                }
            }
            Some("remove_entry") => {
                if let Some(i) = entries.iter().position(|x| id_of(x).as_deref() == id) {
                    entries.remove(i);
                }
            }
            Some("set_history_entries") => {
                if let Some(all) = op.get("entries").and_then(Value::as_array) {
                    *entries = all.clone();
                }
            }
            _ => {}
        }
    }
}

/// Replays the journal segment written since the generation onto `entries`.
/// A torn last line (Vibe still writing it) is left for the next read.
fn replay_journal(root: &Path, manifest: &Value, entries: &mut Vec<Value>, parsed: &mut Parsed) {
    let Some(seg) = manifest.get("recovery_journal_segment") else {
        return;
    };
    let first = seg
        .get("first_sequence")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let Some(rel) = seg.get("path").and_then(Value::as_str) else {
        return;
    };
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.len() != 2 || parts[0] != "journal" || !plain_name(parts[1]) {
        parsed.errors.push(ParseError::Shape {
            offset: 0,
            what: "journal segment outside the session",
        });
        return;
    }
    let Ok(bytes) = std::fs::read(root.join("journal").join(parts[1])) else {
        return; // not written yet: nothing happened since the generation
    };
    let mut offset = 0usize;
    while let Some(len) = bytes[offset..].iter().position(|&b| b == b'\n') {
        let line = &bytes[offset..offset + len];
        let at = offset as u64;
        offset += len + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let rec: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(source) => {
                parsed.errors.push(ParseError::Json { offset: at, source });
                continue;
            }
        };
        let seq = rec
            .get("sequence")
            .and_then(Value::as_u64)
            .unwrap_or(u64::MAX);
        if rec.get("type").and_then(Value::as_str) == Some("projection_delta") && seq >= first {
            let ops = rec.pointer("/payload/delta").and_then(Value::as_array);
            apply_delta(entries, ops.map_or(&[][..], Vec::as_slice));
        }
    }
}

/// What a settled tool effect returned, as text: the text blocks Vibe
/// already joined, else a shell's stdout and stderr, else the structured
/// result; a failure's or a skip's reason when there is nothing else.
fn effect_output(state: &Value) -> String {
    let text = state
        .get("outputText")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !text.trim().is_empty() {
        return text.to_owned();
    }
    let output = state.get("output").unwrap_or(&Value::Null);
    if let Some(sc) = output.get("structured_content").filter(|v| !v.is_null()) {
        let s = |k: &str| sc.get(k).and_then(Value::as_str).unwrap_or_default();
        if sc.get("stdout").is_some() || sc.get("stderr").is_some() {
            return [s("stdout"), s("stderr")]
                .iter()
                .filter(|t| !t.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
        }
        let t = blocks::result_text(sc);
        return if t.trim().is_empty() {
            sc.to_string()
        } else {
            t
        };
    }
    let from_content = blocks::result_text(output.get("content").unwrap_or(&Value::Null));
    if !from_content.trim().is_empty() {
        return from_content;
    }
    state
        .pointer("/error/message")
        .or_else(|| state.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Records from the final history entries, in order.
fn records(entries: &[Value], meta: &Meta, out: &mut Vec<Record>) {
    for (i, e) in entries.iter().enumerate() {
        let at = |key: &str| e.get(key).and_then(Value::as_i64).or(meta.time);
        let mk_at = |time: Option<i64>| {
            move |role: Role, text: String| {
                let mut r = Record::new(super::AGENT, &meta.id, role, text);
                r.time_ms = time;
                r.project = meta.project.clone();
                r.parent_session = meta.parent.clone();
                r.offset = i as u64;
                r
            }
        };
        match e.get("type").and_then(Value::as_str) {
            Some("message") => {
                let streaming =
                    e.get("generationStatus").and_then(Value::as_str) == Some("in_progress");
                let discarded =
                    e.pointer("/outcome/type").and_then(Value::as_str) == Some("discarded");
                let role = match e.get("role").and_then(Value::as_str) {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    _ => continue,
                };
                if streaming || discarded {
                    continue;
                }
                let text = content_text(e.get("content").unwrap_or(&Value::Null));
                blocks::push_text(role, &text, &mk_at(at("createdAt")), out);
            }
            Some("effect") => {
                let detail = e.get("detail").unwrap_or(&Value::Null);
                let name = detail
                    .get("toolName")
                    .or_else(|| e.get("title"))
                    .and_then(Value::as_str)
                    .unwrap_or("tool");
                let input = detail.get("input").unwrap_or(&Value::Null);
                blocks::push_call(name, input, &mk_at(at("createdAt")), out);
                let state = e.get("state").unwrap_or(&Value::Null);
                if matches!(
                    state.get("status").and_then(Value::as_str),
                    Some("completed" | "failed" | "skipped")
                ) {
                    blocks::push_output(&effect_output(state), &mk_at(at("updatedAt")), out);
                }
            }
            _ => {}
        }
    }
}

/// Parses one unified session, given its `CURRENT` pointer.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(root) = path.parent() else {
        return parsed;
    };
    let Some(current) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let Some(generation) = current
        .get("generation")
        .and_then(Value::as_str)
        .filter(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
    else {
        parsed.errors.push(ParseError::Shape {
            offset: 0,
            what: "CURRENT names no generation",
        });
        return parsed;
    };
    let fallback = root
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let fallback = current
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or(fallback);
    let meta = std::fs::read(root.join("meta.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map_or_else(
            || Meta {
                id: fallback.to_owned(),
                ..Meta::default()
            },
            |v| super::meta_of(&v, fallback),
        );
    let Some(manifest) = read_json(
        root,
        &["generations", generation, "manifest.json"],
        "unreadable generation manifest",
        &mut parsed,
    ) else {
        return parsed;
    };
    let Some(mut entries) = projection_entries(root, generation, &manifest, &mut parsed) else {
        return parsed;
    };
    replay_journal(root, &manifest, &mut entries, &mut parsed);
    records(&entries, &meta, &mut parsed.records);
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    const FACT: &str = "I ran the command and it printed hello. Decision: we pinned the quokka library to 2.3 because 2.4 broke the parser.";

    fn got(p: &Parsed) -> Vec<(Role, &str, Option<i64>)> {
        p.records
            .iter()
            .map(|r| (r.role, r.text.as_str(), r.time_ms))
            .collect()
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    /// A session whose generation 3 holds one user entry inline, with a
    /// journal segment after it: a tool effect appended then settled, an
    /// answer, an entry appended then removed, a torn line.
    fn session(journal: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        write(
            r,
            "CURRENT",
            r#"{"generation":"0000000000000003","session_id":"s9"}"#,
        );
        write(
            r,
            "meta.json",
            r#"{"session_id":"s9","parent_session_id":"p1","start_time":"2026-01-01T00:00:00Z","environment":{"working_directory":"/w/p"}}"#,
        );
        write(
            r,
            "generations/0000000000000003/manifest.json",
            r#"{"projection_state":{"chunks":null,"path":"projection-state.json"},"recovery_journal_segment":{"first_sequence":4,"path":"journal/0000000000000004.jsonl"}}"#,
        );
        write(
            r,
            "generations/0000000000000003/projection-state.json",
            r#"{"snapshot":{"history":{"entries":[{"type":"message","id":"u1","role":"user","createdAt":1000,"content":[{"type":"text","text":"list files"}]}]}}}"#,
        );
        write(r, "journal/0000000000000004.jsonl", journal);
        dir
    }

    #[test]
    fn generation_then_journal_tail() {
        let effect = |status: &str, extra: &str| {
            format!(
                r#"{{"type":"effect","id":"e1","createdAt":2000,"updatedAt":2500,"detail":{{"kind":"tool","toolName":"file_system.bash","input":{{"command":"ls"}}}},"state":{{"status":"{status}"{extra}}}}}"#
            )
        };
        let delta = |seq: u64, ops: &str| {
            format!(
                r#"{{"type":"projection_delta","sequence":{seq},"payload":{{"delta":[{ops}]}}}}"#
            )
        };
        let journal = [
            // Before the generation: already in it, not applied again.
            delta(
                3,
                r#"{"op":"append_entry","entry":{"type":"message","id":"old","role":"user","createdAt":1,"content":[{"type":"text","text":"stale"}]}}"#,
            ),
            delta(
                4,
                &format!(
                    r#"{{"op":"append_entry","entry":{}}}"#,
                    effect("running", r#","outputText":"""#)
                ),
            ),
            r#"{"type":"action_intent","sequence":5,"payload":{}}"#.to_owned(),
            delta(
                6,
                &format!(
                    r#"{{"op":"replace_entry","id":"e1","entry":{}}},{{"op":"set_envelope","state":{{}}}}"#,
                    effect(
                        "completed",
                        r#","outputText":"","output":{"structured_content":{"stdout":"a.txt\n","stderr":"","returncode":0}}"#
                    )
                ),
            ),
            delta(
                7,
                r#"{"op":"append_entry","entry":{"type":"reasoning","id":"r1","createdAt":2600,"content":[{"type":"text","text":"thinking"}]}}"#,
            ),
            delta(
                8,
                r#"{"op":"append_entry","entry":{"type":"message","id":"x","role":"assistant","generationStatus":"in_progress","createdAt":2700,"content":[{"type":"text","text":"partial"}]}}"#,
            ),
            delta(9, r#"{"op":"remove_entry","id":"x"}"#),
            delta(
                10,
                r#"{"op":"append_entry","entry":{"type":"message","id":"a1","role":"assistant","createdAt":3000,"outcome":{"type":"committed"},"content":[{"type":"text","text":"one file"}]}}"#,
            ),
            "{not json".to_owned(),
            delta(
                11,
                r#"{"op":"append_entry","entry":{"type":"message","id":"a2","role":"assistant","createdAt":4000,"content":[{"type":"text","text":"torn"}]}}"#,
            ),
        ];
        // The last line has no newline yet: Vibe is still writing it.
        let text = format!("{}\n{}", journal[..9].join("\n"), journal[9]);
        let dir = session(&text);
        let current = dir.path().join("CURRENT");
        let p = parse(&current, &std::fs::read(&current).expect("read"));
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        assert_eq!(
            got(&p),
            vec![
                (Role::User, "list files", Some(1000)),
                (Role::ToolCall, "file_system.bash: ls", Some(2000)),
                (Role::ToolOutput, "a.txt\n", Some(2500)),
                (Role::Assistant, "one file", Some(3000)),
            ]
        );
        let r = &p.records[0];
        assert_eq!(
            (
                r.session_id.as_str(),
                r.parent_session.as_deref(),
                r.project.as_deref()
            ),
            ("s9", Some("p1"), Some("/w/p"))
        );
    }

    #[test]
    fn a_broken_store_is_counted_not_fatal() {
        let dir = session("");
        let current = dir.path().join("CURRENT");
        for bad in [
            &b"{"[..],
            br#"{"generation":"../../etc"}"#,
            br#"{"generation":"0000000000000009"}"#,
        ] {
            let p = parse(&current, bad);
            assert!(p.records.is_empty());
            assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
        }
        // A chunk name that would leave the session folder is refused.
        write(
            dir.path(),
            "generations/0000000000000003/manifest.json",
            r#"{"projection_state":{"chunks":["../../../x"]}}"#,
        );
        let p = parse(&current, br#"{"generation":"0000000000000003"}"#);
        assert!(p.records.is_empty());
        assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
    }

    /// What Vibe 3.0.2 and 2.26.1 wrote for the scripted session, from the
    /// committed recordings: the history comes from the generation's chunks.
    #[test]
    fn recorded_sessions() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/agents/vibe");
        for (release, id, proj, times) in [
            (
                "3.0.2",
                "f10ad50d-9c7e-68f0-df65-782fbf629dd7",
                "vibe",
                [
                    1_796_493_706_074,
                    1_796_493_706_246,
                    1_796_493_706_270,
                    1_796_493_706_302,
                ],
            ),
            (
                "2.26.1-unified",
                "e1847fc5-0b97-c0a0-7c12-993a8e862ab5",
                "vibe2",
                [
                    1_796_493_711_177,
                    1_796_493_711_352,
                    1_796_493_711_374,
                    1_796_493_711_404,
                ],
            ),
        ] {
            let current = base
                .join(release)
                .join("home/.vibe/logs/session/unified")
                .join(id)
                .join("CURRENT");
            let p = parse(&current, &std::fs::read(&current).expect("read CURRENT"));
            assert!(p.errors.is_empty(), "{release}: {:?}", p.errors);
            let prompt = format!(
                "Run the shell command `echo hello` in this project, then tell me what we decided about the quokka library. (see /home/dev/agent/home-{proj}/code/proj-{proj}/README.md)"
            );
            assert_eq!(
                got(&p),
                vec![
                    (Role::User, prompt.as_str(), Some(times[0])),
                    (
                        Role::ToolCall,
                        "file_system.bash: echo hello",
                        Some(times[1])
                    ),
                    (Role::ToolOutput, "hello\n", Some(times[2])),
                    (Role::Assistant, FACT, Some(times[3])),
                ],
                "{release}"
            );
            let want = format!("/home/dev/agent/home-{proj}/code/proj-{proj}");
            assert!(
                p.records
                    .iter()
                    .all(|r| r.session_id == id && r.project.as_deref() == Some(want.as_str()))
            );
        }
    }
}
