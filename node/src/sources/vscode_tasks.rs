//! Cline and its forks Roo Code and Kilo Code: one folder per task, each
//! holding `api_conversation_history.json`, rewritten whole on every change
//! (so re-read when it changes).
//!
//! The task folders live in the extension's `globalStorage` of every VS
//! Code-family editor (`<User>/globalStorage/<extension id>/tasks/<task id>/`):
//! `saoudrizwan.claude-dev` (Cline), `rooveterinaryinc.roo-cline` (Roo) and
//! `kilocode.kilo-code` (Kilo). The extension id decides the agent, since the
//! file names are the same. Also read: the Cline CLI's
//! `${CLINE_SESSION_DATA_DIR:-${CLINE_DATA_DIR:-${CLINE_DIR:-~/.cline}/data}/sessions}/<id>/<id>.messages.json`,
//! Roo CLI's `~/.vscode-mock/global-storage/tasks/`, and Kilo's newer
//! opencode-style `$XDG_DATA_HOME/kilo/kilo.db` (read with opencode's reader).
//!
//! The history is an array of Anthropic messages `{role, content, ts}`.
//! Users' text blocks carry the prompt in `<task>…</task>` (unwrapped) and an
//! `<environment_details>` block (dropped; its "Current Working Directory
//! (…)" line is the only record of the project). Older versions return tool
//! results as user text blocks that start `[tool for 'x'] Result:`; those
//! become tool outputs. `tool_use`/`tool_result` blocks are read as usual;
//! thinking and images are skipped.

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

fn cline_cli_sessions(loc: &Locations) -> PathBuf {
    if let Some(d) = loc.var("CLINE_SESSION_DATA_DIR") {
        return d.to_path_buf();
    }
    let data = match loc.var("CLINE_DATA_DIR") {
        Some(d) => d.to_path_buf(),
        None => loc
            .var_or("CLINE_DIR", loc.home.join(".cline"))
            .join("data"),
    };
    data.join("sessions")
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

    /// The CLI's data folder holds logs and binaries beside its database.
    fn not_history(&self) -> &'static [&'static str] {
        &[
            "log",
            "bin",
            "snapshot",
            "tool-output",
            "auth.json",
            "mcp-auth.json",
        ]
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

fn parse(path: &Path, bytes: &[u8], agent: &'static str) -> Parsed {
    let mut parsed = Parsed::default();
    let task_dir = path.parent();
    let task_id = task_dir
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    // The CLI's `<id>.messages.json` may wrap the array in an object.
    let messages = match &doc {
        Value::Array(a) => a.as_slice(),
        Value::Object(o) => o
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice),
        _ => &[][..],
    };
    // Roo writes the workspace beside the history.
    let mut project = task_dir
        .and_then(|d| std::fs::read(d.join("history_item.json")).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| {
            v.get("workspace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    let task_time = task_id
        .parse::<i64>()
        .ok()
        .and_then(super::common::epoch_to_ms);
    for (i, m) in messages.iter().enumerate() {
        let time = m.get("ts").and_then(parse_time).or(task_time);
        let content = m.get("content").unwrap_or(&Value::Null);
        let role = m.get("role").and_then(Value::as_str);
        let mut out = Vec::new();
        if role == Some("user") {
            let items: Vec<Value> = match content {
                Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
                Value::Array(a) => a.clone(),
                _ => Vec::new(),
            };
            let mut texts = Vec::new();
            let mut outputs = Vec::new();
            let mut other = Vec::new();
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
                    if project.is_none() {
                        project = cwd_of(inner);
                    }
                    t.replace_range(a..e, "");
                }
                if let Some((_, _, inner)) = between(&t, "task") {
                    t = inner.to_owned();
                }
                let first = t.lines().next().unwrap_or_default();
                if first.starts_with('[') && first.contains("] Result:") {
                    outputs.push(t);
                } else if !t.trim().is_empty() {
                    texts.push(t.trim().to_owned());
                }
            }
            let mk = |role: Role, text: String| {
                let mut r = Record::new(agent, &task_id, role, text);
                r.time_ms = time;
                r.project = project.clone();
                r.offset = i as u64;
                r
            };
            blocks::content(Role::User, &Value::Array(other), &mk, &mut out);
            for o in outputs {
                blocks::push_output(&o, &mk, &mut out);
            }
            if !texts.is_empty() {
                out.push(mk(Role::User, cap_text(&texts.join("\n\n"), TEXT_CAP)));
            }
        } else if role == Some("assistant") {
            let mk = |role: Role, text: String| {
                let mut r = Record::new(agent, &task_id, role, text);
                r.time_ms = time;
                r.project = project.clone();
                r.offset = i as u64;
                r
            };
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
}
