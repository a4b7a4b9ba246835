//! Cline and its forks Roo Code and Kilo Code: one folder per task, each
//! holding `api_conversation_history.json`, rewritten whole on every change
//! (so re-read when it changes).
//!
//! The task folders live in the extension's `globalStorage` of every VS
//! Code-family editor (`<User>/globalStorage/<extension id>/tasks/<task id>/`):
//! `saoudrizwan.claude-dev` (Cline), `rooveterinaryinc.roo-cline` (Roo) and
//! `kilocode.kilo-code` (Kilo). The extension id decides the agent, since the
//! file names are the same. Also read: Roo CLI's
//! `~/.vscode-mock/global-storage/tasks/`, and Kilo's newer opencode-style
//! `$XDG_DATA_HOME/kilo/kilo.db` (read with opencode's reader).
//!
//! The history is an array of Anthropic messages `{role, content, ts}`.
//! Users' text blocks carry the prompt in `<task>…</task>` (unwrapped) and an
//! `<environment_details>` block (dropped; its "Current Working Directory
//! (…)" line is the only record of the project). Older versions return tool
//! results as user text blocks that start `[tool for 'x'] Result:`; those
//! become tool outputs. `tool_use`/`tool_result` blocks are read as usual;
//! thinking and images are skipped.
//!
//! The Cline CLI (and the SDK-based extension) keeps its data in
//! `${CLINE_DATA_DIR:-${CLINE_DIR:-~/.cline}/data}`; the older CLI wrote the
//! extension's task folders under `tasks/`, today's writes
//! `${CLINE_SESSION_DATA_DIR:-<data>/sessions}/<id>/<id>.messages.json`:
//! `{messages: [...]}` in the same Anthropic shape, beside `<id>.json`, the
//! session's manifest (`cwd`, `workspace_root`, `started_at`,
//! `parent_session_id`), which names the project. The session id is the
//! file's (`1796493695129_i0f63`: not a time; the messages' `ts`, then the
//! manifest's `started_at`, are). User text comes wrapped in
//! `<user_input mode="act">…</user_input>` (unwrapped), and a
//! `run_commands` result is `[{query, result, success}]`, read as each
//! command and what it printed. `<data>/db/sessions.db` mirrors the
//! manifests and is not needed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{TEXT_CAP, cap_text, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile};
use crate::record::{Record, Role};

const HISTORY: &str = "api_conversation_history.json";

/// Cline.
pub struct Cline;
/// Roo Code.
pub struct Roo;
/// Kilo Code.
pub struct Kilo;

fn task_dirs(loc: &Locations, extension: &str) -> Vec<PathBuf> {
    loc.vscode_user_dirs()
        .into_iter()
        .map(|u| u.join("globalStorage").join(extension).join("tasks"))
        .collect()
}

fn history_files(dirs: &[PathBuf], parse: fn(&Path, &[u8]) -> Parsed) -> Vec<SourceFile> {
    dirs.iter()
        .flat_map(|d| {
            walk_stores(
                d,
                1,
                &|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n == HISTORY || n.ends_with(".messages.json"))
                },
                Reader::Whole(parse),
            )
        })
        .collect()
}

/// The Cline CLI's data folder: `$CLINE_DATA_DIR`, else `${CLINE_DIR:-~/.cline}/data`.
pub fn cline_data(loc: &Locations) -> PathBuf {
    match loc.var("CLINE_DATA_DIR") {
        Some(d) => d.to_path_buf(),
        None => loc
            .var_or("CLINE_DIR", loc.home.join(".cline"))
            .join("data"),
    }
}

fn cline_cli_sessions(loc: &Locations) -> PathBuf {
    loc.var_or("CLINE_SESSION_DATA_DIR", cline_data(loc).join("sessions"))
}

impl Source for Cline {
    fn agent(&self) -> &'static str {
        "cline"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["CLINE_SESSION_DATA_DIR", "CLINE_DATA_DIR", "CLINE_DIR"]
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = task_dirs(loc, "saoudrizwan.claude-dev");
        v.push(cline_cli_sessions(loc));
        // The older CLI kept the extension's task folders.
        v.push(cline_data(loc).join("tasks"));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        history_files(&self.roots(loc), parse_cline)
    }
}

impl Source for Roo {
    fn agent(&self) -> &'static str {
        "roo"
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = task_dirs(loc, "rooveterinaryinc.roo-cline");
        v.push(loc.home.join(".vscode-mock/global-storage/tasks"));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        history_files(&self.roots(loc), parse_roo)
    }
}

/// The Kilo CLI's database: `$KILO_DB` when it names a file (absolute, or
/// relative to the data folder; `:memory:` keeps nothing on disk), else
/// `$XDG_DATA_HOME/kilo/kilo.db`. Kilo is an opencode fork and resolves
/// it as opencode resolves `OPENCODE_DB` (anomalyco/opencode
/// `packages/core/src/database/database.ts`, `path()`).
fn kilo_db(loc: &Locations) -> Option<PathBuf> {
    let data = loc.xdg_data_home.join("kilo");
    match loc.var("KILO_DB") {
        Some(p) if p.as_os_str() == ":memory:" => None,
        Some(p) => Some(data.join(p)),
        None => Some(data.join("kilo.db")),
    }
}

impl Source for Kilo {
    fn agent(&self) -> &'static str {
        "kilo"
    }

    fn env_vars(&self) -> &'static [&'static str] {
        &["KILO_DB"]
    }

    /// The CLI's data folder holds logs and binaries beside its database,
    /// as opencode's does.
    fn not_history(&self) -> &'static [&'static str] {
        super::opencode::DATA_FOLDER_EXTRAS
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v = task_dirs(loc, "kilocode.kilo-code");
        v.push(loc.xdg_data_home.join("kilo"));
        v.extend(kilo_db(loc).filter(|db| !db.starts_with(loc.xdg_data_home.join("kilo"))));
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        let mut out = history_files(&task_dirs(loc, "kilocode.kilo-code"), parse_kilo);
        if let Some(db) = kilo_db(loc)
            && db.is_file()
        {
            out.push(SourceFile::new(
                db,
                Reader::Database(super::opencode::read_db),
            ));
        }
        out
    }
}

/// Parses a Cline task history.
pub fn parse_cline(path: &Path, bytes: &[u8]) -> Parsed {
    parse(path, bytes, "cline")
}

/// Parses a Roo Code task history.
pub fn parse_roo(path: &Path, bytes: &[u8]) -> Parsed {
    parse(path, bytes, "roo")
}

/// Parses a Kilo Code task history.
pub fn parse_kilo(path: &Path, bytes: &[u8]) -> Parsed {
    parse(path, bytes, "kilo")
}

/// The text between `<tag>` and `</tag>`, if both are there.
fn between<'a>(s: &'a str, tag: &str) -> Option<(usize, usize, &'a str)> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let a = s.find(&open)?;
    let b = s[a..].find(&close)? + a;
    Some((a, b + close.len(), &s[a + open.len()..b]))
}

/// The working directory named in an `<environment_details>` block.
fn cwd_of(details: &str) -> Option<String> {
    let marker = "Current Working Directory (";
    let i = details.find(marker)? + marker.len();
    let rest = &details[i..];
    let end = rest.find(')')?;
    Some(rest[..end].to_owned()).filter(|s| !s.is_empty())
}

/// What the Cline CLI's `<id>.json` manifest beside `<id>.messages.json` says.
#[derive(Default)]
struct Manifest {
    project: Option<String>,
    started_ms: Option<i64>,
    parent: Option<String>,
}

/// Reads the manifest of the session whose messages are at `path`, if any.
fn manifest(path: &Path, session_id: &str) -> Manifest {
    let Some(doc) = path
        .parent()
        .and_then(|d| std::fs::read(d.join(format!("{session_id}.json"))).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return Manifest::default();
    };
    let s = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| doc.get(*k).and_then(Value::as_str))
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    Manifest {
        project: s(&["cwd", "workspace_root", "workspaceRoot"]),
        started_ms: ["started_at", "startedAt"]
            .iter()
            .find_map(|k| doc.get(*k).and_then(parse_time)),
        parent: s(&["parent_session_id", "parentSessionId"]),
    }
}

/// The session a history file holds, and whether it is the Cline CLI's
/// `<id>.messages.json` (else a task folder's history, named by its folder).
fn session_of(path: &Path) -> (String, bool) {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if let Some(id) = name.strip_suffix(".messages.json") {
        return (id.to_owned(), true);
    }
    let folder = path
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    (folder.to_owned(), false)
}

/// `<user_input mode="…">text</user_input>` as `text`; other text as is.
fn unwrap_user_input(t: &str) -> &str {
    let trimmed = t.trim();
    let Some(rest) = trimmed.strip_prefix("<user_input") else {
        return t;
    };
    let Some(body) = rest
        .find('>')
        .map(|i| &rest[i + 1..])
        .and_then(|b| b.strip_suffix("</user_input>"))
    else {
        return t;
    };
    body
}

/// A tool result whose content is the Cline SDK's list of per-item results
/// (`run_commands`: `[{query, result, success}]`; a failed item may carry
/// `error`) as text: each query on its own line, then what it gave. `None`
/// for content of any other shape.
fn item_results(content: &Value) -> Option<String> {
    let items = content.as_array()?;
    let mut parts = Vec::new();
    for item in items {
        let o = item.as_object()?;
        if o.contains_key("text") || !(o.contains_key("result") || o.contains_key("error")) {
            return None;
        }
        let text = |k: &str| match o.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        };
        let mut part = text("query");
        for out in [text("result"), text("error")] {
            if !out.trim().is_empty() {
                if !part.is_empty() {
                    part.push('\n');
                }
                part.push_str(out.trim_end());
            }
        }
        if o.get("success") == Some(&Value::Bool(false)) {
            part.push_str("\n(failed)");
        }
        parts.push(part);
    }
    Some(parts.join("\n\n"))
}

/// Rewrites `tool_result` blocks holding [`item_results`] to plain text.
fn flatten_item_results(blocks: &mut [Value]) {
    for b in blocks {
        if b.get("type").and_then(Value::as_str) != Some("tool_result") {
            continue;
        }
        if let Some(text) = b.get("content").and_then(item_results)
            && let Some(o) = b.as_object_mut()
        {
            o.insert("content".to_owned(), Value::String(text));
        }
    }
}

fn parse(path: &Path, bytes: &[u8], agent: &'static str) -> Parsed {
    let mut parsed = Parsed::default();
    let task_dir = path.parent();
    let (task_id, is_cli) = session_of(path);
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    // The CLI's `<id>.messages.json` wraps the array in an object.
    let messages = match &doc {
        Value::Array(a) => a.as_slice(),
        Value::Object(o) => o
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
        _ => &[][..],
    };
    let manifest = if is_cli {
        manifest(path, &task_id)
    } else {
        Manifest::default()
    };
    // Roo writes the workspace beside the history; the CLI in its manifest.
    let mut project = manifest.project.clone().or_else(|| {
        task_dir
            .and_then(|d| std::fs::read(d.join("history_item.json")).ok())
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| {
                v.get("workspace")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
    });
    // An extension's task folder is named by the time it started (ms); the
    // CLI's ids are not times, and its manifest says when it started.
    let task_time = manifest.started_ms.or_else(|| {
        task_id
            .parse::<i64>()
            .ok()
            .and_then(super::common::epoch_to_ms)
    });
    for (i, m) in messages.iter().enumerate() {
        let time = m.get("ts").and_then(parse_time).or(task_time);
        let content = m.get("content").unwrap_or(&Value::Null);
        let role = m.get("role").and_then(Value::as_str);
        let mut out = Vec::new();
        let mk = |role: Role, text: String| {
            let mut r = Record::new(agent, &task_id, role, text);
            r.time_ms = time;
            r.project = project.clone();
            r.parent_session = manifest.parent.clone();
            r.offset = i as u64;
            r
        };
        if role == Some("user") {
            let items: Vec<Value> = match content {
                Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
                Value::Array(a) => a.clone(),
                _ => Vec::new(),
            };
            let mut texts = Vec::new();
            let mut outputs = Vec::new();
            let mut other = Vec::new();
            let mut found_project = None;
            for b in items {
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    other.push(b);
                    continue;
                }
                let mut t = b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                while let Some((a, e, inner)) = between(&t, "environment_details") {
                    if project.is_none() && found_project.is_none() {
                        found_project = cwd_of(inner);
                    }
                    t.replace_range(a..e, "");
                }
                if let Some((_, _, inner)) = between(&t, "task") {
                    t = inner.to_owned();
                }
                t = unwrap_user_input(&t).to_owned();
                let first = t.lines().next().unwrap_or_default();
                if first.starts_with('[') && first.contains("] Result:") {
                    outputs.push(t);
                } else if !t.trim().is_empty() {
                    texts.push(t.trim().to_owned());
                }
            }
            flatten_item_results(&mut other);
            blocks::content(Role::User, &Value::Array(other), &mk, &mut out);
            for o in outputs {
                blocks::push_output(&o, &mk, &mut out);
            }
            if !texts.is_empty() {
                out.push(mk(Role::User, cap_text(&texts.join("\n\n"), TEXT_CAP)));
            }
            if let Some(p) = found_project {
                for r in &mut out {
                    r.project = Some(p.clone());
                }
                project = Some(p);
            }
        } else if role == Some("assistant") {
            blocks::content(Role::Assistant, content, &mk, &mut out);
        } else {
            parsed.errors.push(ParseError::Shape {
                offset: i as u64,
                what: "message without a known role",
            });
        }
        parsed.records.extend(out);
    }
    // The first message names the project; give it to every record.
    if let Some(p) = &project {
        for r in &mut parsed.records {
            r.project.get_or_insert_with(|| p.clone());
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `KILO_DB` moves the CLI's database: an absolute path as is, a
    /// relative one under the data folder, `:memory:` to nowhere.
    #[test]
    fn kilo_db_names_the_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut loc = Locations::under_home(dir.path());
        let dbs = |loc: &Locations| -> Vec<PathBuf> {
            Kilo.discover(loc)
                .into_iter()
                .filter(|f| matches!(f.reader, Reader::Database(_)))
                .map(|f| f.path)
                .collect()
        };
        let default = loc.xdg_data_home.join("kilo/kilo.db");
        std::fs::create_dir_all(default.parent().expect("parent")).expect("mkdir");
        std::fs::write(&default, b"").expect("write");
        assert_eq!(dbs(&loc), [default]);
        let moved = dir.path().join("elsewhere/k.db");
        std::fs::create_dir_all(moved.parent().expect("parent")).expect("mkdir");
        std::fs::write(&moved, b"").expect("write");
        loc.vars.insert("KILO_DB".into(), moved.clone());
        assert_eq!(dbs(&loc), std::slice::from_ref(&moved));
        assert!(Kilo.roots(&loc).contains(&moved));
        loc.vars.insert("KILO_DB".into(), PathBuf::from("dev.db"));
        let relative = loc.xdg_data_home.join("kilo/dev.db");
        std::fs::write(&relative, b"").expect("write");
        assert_eq!(dbs(&loc), [relative]);
        loc.vars.insert("KILO_DB".into(), PathBuf::from(":memory:"));
        assert!(dbs(&loc).is_empty());
    }

    const HOME: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/home");

    #[test]
    fn the_extension_folder_decides_the_agent() {
        let loc = Locations::under_home(Path::new(HOME));
        for (src, n) in [
            (&Cline as &dyn Source, 1usize),
            (&Roo as &dyn Source, 1),
            (&Kilo as &dyn Source, 1),
        ] {
            let found = src.discover(&loc);
            assert_eq!(found.len(), n, "{}: {found:?}", src.agent());
        }
    }

    #[test]
    fn task_envelope_environment_and_tool_results() {
        let doc = serde_json::json!([
            {"role":"user","ts":1763000000000u64,"content":[
                {"type":"text","text":"<task>\nfix the login\n</task>"},
                {"type":"text","text":"<environment_details>\n# Current Working Directory (/home/dev/app) Files\nsrc/\n</environment_details>"}
            ]},
            {"role":"assistant","ts":1763000001000u64,"content":[{"type":"text","text":"Reading it."},{"type":"tool_use","name":"read_file","input":{"path":"src/a.ts"}}]},
            {"role":"user","ts":1763000002000u64,"content":[{"type":"text","text":"[read_file for 'src/a.ts'] Result:\nexport {}"}]},
            {"role":"system","content":"?"}
        ]);
        let bytes = serde_json::to_vec(&doc).expect("json");
        let p = parse_cline(
            Path::new("/t/tasks/1763000000000/api_conversation_history.json"),
            &bytes,
        );
        assert_eq!(p.errors.len(), 1);
        let got: Vec<(Role, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "fix the login"),
                (Role::ToolCall, "read_file src/a.ts"),
                (Role::Assistant, "Reading it."),
                (
                    Role::ToolOutput,
                    "[read_file for 'src/a.ts'] Result:\nexport {}"
                ),
            ]
        );
        assert!(
            p.records
                .iter()
                .all(|r| r.project.as_deref() == Some("/home/dev/app"))
        );
        assert!(p.records.iter().all(|r| r.session_id == "1763000000000"));
        assert!(
            parse_roo(Path::new("/x/api_conversation_history.json"), b"{")
                .errors
                .len()
                == 1
        );
    }

    const CLINE_3_0_65: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/agents/cline/3.0.65/home"
    );

    /// Reads every store `src` discovers under `loc` with its reader.
    fn read_all(src: &dyn Source, loc: &Locations) -> Parsed {
        let mut all = Parsed::default();
        for f in src.discover(loc) {
            let Reader::Whole(parse) = f.reader else {
                panic!("{}: not a whole-file store", f.path.display());
            };
            let bytes = std::fs::read(&f.path).expect("read");
            let p = parse(&f.path, &bytes);
            all.records.extend(p.records);
            all.errors.extend(p.errors);
        }
        all
    }

    #[test]
    fn cline_cli_3_0_65_recording_is_read_fully() {
        let home = Path::new(CLINE_3_0_65);
        let loc = Locations::under_home(home);
        let found: Vec<PathBuf> = Cline.discover(&loc).into_iter().map(|f| f.path).collect();
        assert_eq!(
            found,
            [home.join(
                ".cline/data/sessions/1796493695129_i0f63/1796493695129_i0f63.messages.json"
            )]
        );
        let p = read_all(&Cline, &loc);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let got: Vec<(Role, i64, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.time_ms.expect("time"), r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    Role::User,
                    1_796_493_695_477,
                    "Run the shell command `echo hello` in this project, then tell me what we \
                     decided about the quokka library. (see \
                     /home/dev/agent/home-cline/code/proj-cline/README.md)"
                ),
                (
                    Role::ToolCall,
                    1_796_493_695_801,
                    r#"run_commands {"commands":["echo hello"]}"#
                ),
                (Role::ToolOutput, 1_796_493_695_859, "echo hello\nhello"),
                (
                    Role::Assistant,
                    1_796_493_695_984,
                    "I ran the command and it printed hello. Decision: we pinned the quokka \
                     library to 2.3 because 2.4 broke the parser."
                ),
            ]
        );
        for r in &p.records {
            assert_eq!(r.agent, "cline");
            assert_eq!(r.session_id, "1796493695129_i0f63");
            assert_eq!(r.parent_session, None);
            assert_eq!(
                r.project.as_deref(),
                Some("/home/dev/agent/home-cline/code/proj-cline")
            );
            // The placeholder API key in settings/providers.json is never read.
            assert!(!r.text.contains("sk-fake"), "{r:?}");
        }
    }

    #[test]
    fn cline_cli_manifest_gives_project_start_time_and_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("cline-data");
        let s = data.join("sessions/1784094124598_rruoq");
        std::fs::create_dir_all(&s).expect("mkdir");
        std::fs::write(
            s.join("1784094124598_rruoq.json"),
            r#"{"session_id":"1784094124598_rruoq","started_at":"2026-03-01T10:00:00Z",
               "workspace_root":"/w/app","parent_session_id":"1784094000000_aaaaa"}"#,
        )
        .expect("write");
        let messages = serde_json::json!({"messages": [
            {"role":"user","content":[{"type":"text","text":"<user_input mode=\"plan\">\n  plan it\n</user_input>"}]},
            {"role":"user","ts":1772359200500i64,"content":[{"type":"tool_result","tool_use_id":"c1","content":[
                {"query":"make","result":"","error":"make: *** no rule","success":false},
                {"query":"ls","result":"a.txt\n","success":true}
            ]}]}
        ]});
        let path = s.join("1784094124598_rruoq.messages.json");
        std::fs::write(&path, serde_json::to_vec(&messages).expect("json")).expect("write");
        let mut loc = Locations::under_home(&dir.path().join("home"));
        loc.vars.insert("CLINE_DATA_DIR".into(), data.clone());
        let p = read_all(&Cline, &loc);
        let got: Vec<(Role, Option<i64>, &str)> = p
            .records
            .iter()
            .map(|r| (r.role, r.time_ms, r.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                // No `ts`: the manifest's start, not the id, is the time.
                (Role::User, Some(1_772_359_200_000), "plan it"),
                (
                    Role::ToolOutput,
                    Some(1_772_359_200_500),
                    "make\nmake: *** no rule\n(failed)\n\nls\na.txt"
                ),
            ]
        );
        assert!(p.records.iter().all(|r| {
            r.project.as_deref() == Some("/w/app")
                && r.parent_session.as_deref() == Some("1784094000000_aaaaa")
                && r.session_id == "1784094124598_rruoq"
        }));
    }

    #[test]
    fn older_cline_cli_task_folders_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let task = home.join(".cline/data/tasks/1763000000000");
        std::fs::create_dir_all(&task).expect("mkdir");
        std::fs::write(
            task.join(HISTORY),
            r#"[{"role":"user","content":[{"type":"text","text":"<task>\nhi\n</task>"}]}]"#,
        )
        .expect("write");
        let loc = Locations::under_home(home);
        assert!(Cline.roots(&loc).contains(&home.join(".cline/data/tasks")));
        let p = read_all(&Cline, &loc);
        assert_eq!(p.records.len(), 1, "{:?}", p.records);
        let r = &p.records[0];
        assert_eq!(
            (r.session_id.as_str(), r.text.as_str()),
            ("1763000000000", "hi")
        );
        // An extension task folder is named by its start in ms.
        assert_eq!(r.time_ms, Some(1_763_000_000_000));
    }
}
