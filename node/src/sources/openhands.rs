//! OpenHands: one JSON file per event, each written once.
//!
//! CLI v1: `${OPENHANDS_CONVERSATIONS_DIR:-~/.openhands/conversations}/<id>/events/event-<n>-<uuid>.json`
//! beside `base_state.json` (`workspace.working_dir` is the project).
//! V0: `<persistence>/sessions/<id>/events/<n>.json`.
//! V1 local web app (OpenHands/OpenHands `openhands/app_server/event/`):
//! `<persistence>/v1/events/<conversation uuid>/<YYYYMMDDHHMMSS>_<Kind>_<event hex>`,
//! no extension (`filesystem_event_service.py` at 2f7a3feda84b), and in
//! later releases `<persistence>/[<user id>/]v1_conversations/<conversation
//! hex>/<event hex>.json` (`event_service_base.py` at 1eec5880a1b0); the
//! conversation is the event's folder, and no project is kept beside it.
//! `<persistence>` is `$OH_PERSISTENCE_DIR`, else the V0 `$FILE_STORE_PATH`,
//! else `~/.openhands` (`app_server/config.py`, `get_default_persistence_dir`).
//! Every event file is a store of its own, read once (events are never
//! rewritten).
//!
//! v1 events: `{id, timestamp, source: user|agent|environment, kind}`;
//! `MessageEvent` carries `llm_message{role, content[{type: text, text}]}`,
//! `ActionEvent` a `tool_name` and `action` (its `command`/`path`),
//! `ObservationEvent` an `observation{content[], command, exit_code}`.
//! V0 events: `{source, message, action|observation, args, content}`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const AGENT: &str = "openhands";

/// The OpenHands source.
pub struct OpenHands;

/// The app server's persistence folder.
fn persistence(loc: &Locations) -> PathBuf {
    loc.var("OH_PERSISTENCE_DIR")
        .or_else(|| loc.var("FILE_STORE_PATH"))
        .map_or_else(|| loc.home.join(".openhands"), Path::to_path_buf)
}

/// `<YYYYMMDDHHMMSS>_<Kind>_<32 hex>`: an event file of the first V1 app layout.
fn is_v1_event_name(p: &Path) -> bool {
    let Some(name) = super::common::file_name(p) else {
        return false;
    };
    let (Some((stamp, rest)), Some((_, hex))) = (name.split_once('_'), name.rsplit_once('_'))
    else {
        return false;
    };
    stamp.len() == 14
        && stamp.bytes().all(|b| b.is_ascii_digit())
        && rest.len() > hex.len() + 1
        && hex.len() == 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The V1 app's `v1_conversations` folders: at the persistence folder's
/// top, and one per user id below it.
fn v1_conversation_dirs(loc: &Locations) -> Vec<PathBuf> {
    let root = persistence(loc);
    let mut v = vec![root.join("v1_conversations")];
    if let Ok(rd) = std::fs::read_dir(&root) {
        let mut users: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path().join("v1_conversations"))
            .filter(|p| p.is_dir())
            .collect();
        users.sort();
        v.extend(users);
    }
    v
}

fn conversations(loc: &Locations) -> PathBuf {
    loc.var_or(
        "OPENHANDS_CONVERSATIONS_DIR",
        loc.home.join(".openhands/conversations"),
    )
}

impl Source for OpenHands {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &[
            "OPENHANDS_CONVERSATIONS_DIR",
            "OH_PERSISTENCE_DIR",
            "FILE_STORE_PATH",
        ]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let p = persistence(loc);
        let mut v = vec![conversations(loc), p.join("sessions"), p.join("v1/events")];
        v.extend(v1_conversation_dirs(loc));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let p = persistence(loc);
        let mut out: Vec<SourceFile> = [conversations(loc), p.join("sessions")]
            .iter()
            .flat_map(|d| {
                walk_stores(
                    d,
                    2,
                    &|p| {
                        has_suffix(p, ".json")
                            && p.parent().and_then(|e| e.file_name()) == Some("events".as_ref())
                    },
                    Reader::Whole(parse_event),
                )
            })
            .collect();
        out.extend(walk_stores(
            &p.join("v1/events"),
            1,
            &is_v1_event_name,
            Reader::Whole(parse_event),
        ));
        for d in v1_conversation_dirs(loc) {
            out.extend(walk_stores(
                &d,
                1,
                &|p| has_suffix(p, ".json"),
                Reader::Whole(parse_event),
            ));
        }
        out
    }
}

/// Parses one event file.
pub fn parse_event(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(v) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    // `<conversation>/events/<event>` (CLI, V0), else `<conversation>/<event>` (V1 app).
    let conv = match path.parent() {
        Some(d) if d.file_name() == Some("events".as_ref()) => d.parent(),
        d => d,
    };
    let session = conv
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let project = conv
        .and_then(|d| std::fs::read(d.join("base_state.json")).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|s| {
            s.pointer("/workspace/working_dir")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    let time = v.get("timestamp").and_then(parse_time);
    let mk = |role: Role, text: String| {
        let mut r = Record::new(AGENT, &session, role, text);
        r.time_ms = time;
        r.project = project.clone();
        r
    };
    let out = &mut parsed.records;
    let source = v.get("source").and_then(Value::as_str).unwrap_or_default();
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if let Some(m) = v.get("llm_message") {
        let role = if m.get("role").and_then(Value::as_str) == Some("user") {
            Role::User
        } else {
            Role::Assistant
        };
        blocks::content(role, m.get("content").unwrap_or(&Value::Null), &mk, out);
    } else if kind == "ActionEvent" || v.get("action").is_some_and(Value::is_string) {
        let name = v
            .get("tool_name")
            .or_else(|| v.get("action"))
            .and_then(Value::as_str)
            .unwrap_or("action");
        let args = v
            .get("action")
            .filter(|a| a.is_object())
            .or_else(|| v.get("args"))
            .unwrap_or(&Value::Null);
        if name == "message" {
            let text = args
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = if source == "user" {
                Role::User
            } else {
                Role::Assistant
            };
            blocks::push_text(role, text, &mk, out);
        } else {
            blocks::push_call(name, args, &mk, out);
        }
    } else if kind == "ObservationEvent" || v.get("observation").is_some() {
        let obs = v.get("observation").unwrap_or(&Value::Null);
        let text = match obs {
            Value::Object(_) => blocks::result_text(obs.get("content").unwrap_or(obs)),
            _ => v
                .get("content")
                .map(blocks::result_text)
                .unwrap_or_default(),
        };
        blocks::push_output(&text, &mk, out);
    } else if let Some(text) = v.get("message").and_then(Value::as_str) {
        let role = if source == "user" {
            Role::User
        } else {
            Role::Assistant
        };
        blocks::push_text(role, text, &mk, out);
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events as the SDK dumps them (the shapes of the recorded 1.16 CLI's).
    fn events() -> [(&'static str, &'static str, Value); 3] {
        [
            (
                "20261205180226",
                "MessageEvent",
                serde_json::json!({
                    "id": "868dd2dd-cfaa-4ca8-8290-a86c43b68088",
                    "timestamp": "2026-12-05T18:02:26.038368",
                    "source": "user",
                    "llm_message": {"role": "user", "content": [
                        {"type": "text", "text": "which queue did we pick?"}]},
                    "kind": "MessageEvent"
                }),
            ),
            (
                "20261205180227",
                "ActionEvent",
                serde_json::json!({
                    "id": "47b00f35-dcd2-4da5-a405-1b5afd2fad51",
                    "timestamp": "2026-12-05T18:02:27.415480",
                    "source": "agent",
                    "action": {"command": "echo hello", "kind": "TerminalAction"},
                    "tool_name": "terminal",
                    "kind": "ActionEvent"
                }),
            ),
            (
                "20261205180228",
                "ObservationEvent",
                serde_json::json!({
                    "id": "693634fd-1770-4b92-bd97-4399fc5fbb11",
                    "timestamp": "2026-12-05T18:02:28.820469",
                    "source": "environment",
                    "tool_name": "terminal",
                    "observation": {"content": [{"type": "text", "text": "hello"}],
                        "exit_code": 0, "kind": "TerminalObservation"},
                    "kind": "ObservationEvent"
                }),
            ),
        ]
    }

    fn read_all(found: &[SourceFile]) -> Vec<Record> {
        let mut out = Vec::new();
        for f in found {
            let Reader::Whole(parse) = f.reader else {
                panic!("{:?}", f.reader)
            };
            let p = parse(&f.path, &std::fs::read(&f.path).expect("read"));
            assert!(p.errors.is_empty(), "{:?}", p.errors);
            out.extend(p.records);
        }
        out
    }

    /// The V1 local web app's `v1/events/<conversation>/<stamp>_<Kind>_<hex>`
    /// files (no extension) are found under `$OH_PERSISTENCE_DIR`, each read
    /// as one record of the conversation named by its folder; files of
    /// other names there are not events.
    #[test]
    fn v1_app_events_are_read_from_the_persistence_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(&dir.path().join("home"));
        let persist = dir.path().join("oh-data");
        let conv = "0c2b7a5e-33a1-4b8e-9d6f-5e4c3b2a1f00";
        let folder = persist.join("v1/events").join(conv);
        std::fs::create_dir_all(&folder).expect("mkdir");
        for (stamp, kind, v) in events() {
            let hex = v["id"].as_str().expect("id").replace('-', "");
            let body = serde_json::to_string_pretty(&v).expect("json");
            std::fs::write(folder.join(format!("{stamp}_{kind}_{hex}")), body).expect("write");
        }
        std::fs::write(folder.join("notes.txt"), "x").expect("write");
        std::fs::write(folder.join("2026_Kind_xyz"), "{}").expect("write");
        // Without the override the default folder is looked in, and is empty.
        assert!(OpenHands.discover(&loc).is_empty());
        loc.vars
            .insert("OH_PERSISTENCE_DIR".into(), persist.clone());
        let found = OpenHands.discover(&loc);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(OpenHands.roots(&loc).contains(&persist.join("v1/events")));
        let records = read_all(&found);
        let got: Vec<(Role, &str, &str)> = records
            .iter()
            .map(|r| (r.role, r.session_id.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], (Role::User, conv, "which queue did we pick?"));
        assert_eq!(got[1].0, Role::ToolCall);
        assert!(got[1].2.contains("echo hello"), "{got:?}");
        assert_eq!((got[2].0, got[2].2), (Role::ToolOutput, "hello"));
        assert!(records.iter().all(|r| r.time_ms.is_some()));
    }

    /// Later releases: `[<user id>/]v1_conversations/<conversation hex>/<event hex>.json`,
    /// in the default `~/.openhands`.
    #[test]
    fn v1_conversations_are_read_with_and_without_a_user_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let loc = Locations::under_home(dir.path());
        let conv = "0c2b7a5e33a14b8e9d6f5e4c3b2a1f00";
        for base in [
            dir.path().join(".openhands/v1_conversations"),
            dir.path().join(".openhands/user-7/v1_conversations"),
        ] {
            let folder = base.join(conv);
            std::fs::create_dir_all(&folder).expect("mkdir");
            let (_, _, v) = &events()[0];
            let hex = v["id"].as_str().expect("id").replace('-', "");
            std::fs::write(folder.join(format!("{hex}.json")), v.to_string()).expect("write");
        }
        let records = read_all(&OpenHands.discover(&loc));
        assert_eq!(records.len(), 2);
        assert!(
            records
                .iter()
                .all(|r| r.session_id == conv && r.role == Role::User)
        );
    }

    #[test]
    fn only_v1_event_names_match() {
        let ok = "20261205180226_MessageEvent_868dd2ddcfaa4c3d82f4ab1c9e7f8a00";
        assert!(is_v1_event_name(Path::new(ok)));
        assert!(is_v1_event_name(Path::new(
            "20261205180226_Condensation_Summary_868dd2ddcfaa4c3d82f4ab1c9e7f8a00"
        )));
        for bad in [
            "2026120518022_MessageEvent_868dd2ddcfaa4c3d82f4ab1c9e7f8a00",
            "20261205180226_868dd2ddcfaa4c3d82f4ab1c9e7f8a00",
            "20261205180226_MessageEvent_868dd2dd",
            "20261205180226_MessageEvent_868dd2ddcfaa4c3d82f4ab1c9e7f8a00.tmp",
        ] {
            assert!(!is_v1_event_name(Path::new(bad)), "{bad}");
        }
    }
}
