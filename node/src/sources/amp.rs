//! Amp (Sourcegraph): `$XDG_DATA_HOME/amp/threads/T-<uuid>.json`, one JSON
//! document per thread, rewritten whole (re-read when it changes).
//!
//! `{v, id, created (ms), title, env.initial.trees[{uri: file://…}],
//! messages[{role, content[text|thinking|tool_use|tool_result{toolUseID,
//! run{status, result}}], meta.sentAt}]}`. Builds from 2026-03 on keep
//! threads on Amp's servers only; when Amp's data folder exists with no
//! thread files, `cairn sources` says so.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::blocks;
use super::common::{file_stem, has_suffix, json_document, parse_time, walk_stores};
use super::{Locations, ParseError, Parsed, Reader, Source, SourceFile, Unreadable};
use crate::record::{Record, Role};

const AGENT: &str = "amp";

/// The Amp source.
pub struct Amp;

fn data(loc: &Locations) -> PathBuf {
    loc.xdg_data_home.join("amp")
}

impl Source for Amp {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn roots(&self, loc: &Locations) -> Vec<PathBuf> {
        vec![data(loc).join("threads")]
    }

    fn discover(&self, loc: &Locations) -> Vec<SourceFile> {
        walk_stores(
            &data(loc).join("threads"),
            0,
            &|p| has_suffix(p, ".json"),
            Reader::Whole(parse),
        )
    }

    fn unreadable(&self, loc: &Locations) -> Vec<Unreadable> {
        let d = data(loc);
        if d.is_dir() && self.discover(loc).is_empty() {
            vec![Unreadable::closed(
                d,
                "Amp keeps threads on its server (builds since 2026-03 write none locally)",
            )]
        } else {
            Vec::new()
        }
    }
}

/// Parses one thread document.
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    let Some(doc) = json_document(bytes, &mut parsed) else {
        return parsed;
    };
    let stem = file_stem(path);
    let id = doc
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or(stem)
        .to_owned();
    let created = doc.get("created").and_then(parse_time);
    let project = doc
        .pointer("/env/initial/trees/0/uri")
        .and_then(Value::as_str)
        .map(|u| u.strip_prefix("file://").unwrap_or(u).to_owned());
    for (i, m) in doc
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let time = m
            .pointer("/meta/sentAt")
            .and_then(parse_time)
            .or_else(|| m.pointer("/usage/timestamp").and_then(parse_time))
            .or(created);
        let mk = |role: Role, text: String| {
            let mut r = Record::new(AGENT, &id, role, text);
            r.time_ms = time;
            r.project = project.clone();
            r.offset = i as u64;
            r
        };
        // Amp's tool results keep their output under run.result.
        let content = match m.get("content") {
            Some(Value::Array(items)) => Value::Array(
                items
                    .iter()
                    .map(|b| {
                        if b.get("type").and_then(Value::as_str) == Some("tool_result")
                            && b.get("content").is_none()
                        {
                            let r = b.pointer("/run/result").cloned().unwrap_or(Value::Null);
                            serde_json::json!({"type": "tool_result", "content": blocks::result_text(&r)})
                        } else {
                            b.clone()
                        }
                    })
                    .collect(),
            ),
            Some(other) => other.clone(),
            None => Value::Null,
        };
        match m.get("role").and_then(Value::as_str) {
            Some("user") => blocks::content(Role::User, &content, &mk, &mut parsed.records),
            Some("assistant") => {
                blocks::content(Role::Assistant, &content, &mk, &mut parsed.records)
            }
            Some(_) => {}
            None => parsed.errors.push(ParseError::Shape {
                offset: i as u64,
                what: "message without role",
            }),
        }
    }
    parsed
}
