//! Google Antigravity: the transcript JSONL older builds write, and the
//! stores newer builds keep encrypted or as protobuf (listed, not read).
//!
//! Readable: `~/.gemini/antigravity*/brain/<session>/.system_generated/logs/transcript.jsonl`,
//! lines `{step_index, source: USER_EXPLICIT|MODEL|SYSTEM, type, status,
//! created_at, content, thinking, tool_calls}`. Re-read whole when it
//! changes (the IDE rewrites it). `USER_EXPLICIT` is the user (the text is
//! unwrapped from `<USER_REQUEST>` and the `<ADDITIONAL_METADATA>` /
//! `<USER_SETTINGS_CHANGE>` blocks dropped), `MODEL` the assistant; system
//! steps and thinking are skipped. No working directory is recorded.
//!
//! Not readable: `conversations/*.pb` (AES-encrypted) and
//! `conversations/*.db` (protobuf step payloads), listed by `cairn sources`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{has_suffix, parse_time, walk_files, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile, Unreadable};
use crate::record::{Record, Role};

const AGENT: &str = "antigravity";

/// The Antigravity source.
pub struct Antigravity;

/// `~/.gemini/antigravity`, `~/.gemini/antigravity-cli`, … that exist.
fn app_dirs(loc: &Locations) -> Vec<PathBuf> {
    let gemini = loc.gemini_home.join(".gemini");
    let Ok(rd) = std::fs::read_dir(&gemini) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with("antigravity")
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

impl Source for Antigravity {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = app_dirs(loc).iter().map(|d| d.join("brain")).collect();
        if v.is_empty() {
            v.push(loc.gemini_home.join(".gemini/antigravity/brain"));
        }
        v
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        app_dirs(loc)
            .iter()
            .flat_map(|d| {
                walk_stores(
                    &d.join("brain"),
                    4,
                    &|p| p.file_name().is_some_and(|n| n == "transcript.jsonl"),
                    Reader::Whole(parse),
                )
            })
            .collect()
    }

    /// The brain folders also hold each session's Markdown artifacts,
    /// which are not history; the newer stores are [`Source::unreadable`].
    fn history_dirs(&self, _loc: &Locations) -> Vec<PathBuf> {
        Vec::new()
    }

    fn unreadable(&self, loc: &Locations) -> Vec<Unreadable> {
        let mut out = Vec::new();
        for d in app_dirs(loc) {
            let conv = d.join("conversations");
            let files = walk_files(&conv, 0, &|p| has_suffix(p, ".pb") || has_suffix(p, ".db"));
            if !files.is_empty() {
                out.push(Unreadable::closed(
                    conv,
                    "newer Antigravity builds keep conversations encrypted (.pb) or as protobuf steps (.db)",
                ));
            }
        }
        out
    }
}

/// Drops `<tag>…</tag>` blocks.
fn drop_block(s: &mut String, tag: &str) {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    while let Some(a) = s.find(&open) {
        match s[a..].find(&close) {
            Some(b) => s.replace_range(a..a + b + close.len(), ""),
            None => s.truncate(a),
        }
    }
}

/// Parses one transcript.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    // .../brain/<session>/.system_generated/logs/transcript.jsonl
    let session = path
        .ancestors()
        .nth(3)
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut offset = 0u64;
    for line in bytes.split(|&b| b == b'\n') {
        let here = offset;
        offset += line.len() as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(source) => {
                parsed.errors.push(ParseError::Json {
                    offset: here,
                    source,
                });
                continue;
            }
        };
        let time = v.get("created_at").and_then(parse_time);
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &session, role, text);
            r.time_ms = time;
            r.offset = here;
            r
        };
        let content = v.get("content").and_then(Value::as_str).unwrap_or_default();
        match v.get("source").and_then(Value::as_str) {
            Some("USER_EXPLICIT") => {
                let mut t = content.to_owned();
                drop_block(&mut t, "ADDITIONAL_METADATA");
                drop_block(&mut t, "USER_SETTINGS_CHANGE");
                let t = t
                    .replace("<USER_REQUEST>", "")
                    .replace("</USER_REQUEST>", "");
                blocks::push_text(Role::User, &t, &mk, &mut parsed.records);
            }
            Some("MODEL") => {
                blocks::push_text(Role::Assistant, content, &mk, &mut parsed.records);
                for c in v
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or("tool");
                    let args = c
                        .get("args")
                        .or_else(|| c.get("arguments"))
                        .unwrap_or(&Value::Null);
                    blocks::push_call(name, args, &mk, &mut parsed.records);
                }
            }
            _ => {}
        }
    }
    parsed
}
