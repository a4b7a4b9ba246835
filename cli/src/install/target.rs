//! What one wiring is: an entry in one agent config file, and how to add,
//! check and remove it in that file's text. Pure: no file I/O.

use std::path::PathBuf;

use serde_json::Value;

use super::jsonc::{Doc, EditError};
use super::toml::{self as tomled, TomlError};
use super::yaml::{self as yamled, YamlError};

/// The name of cairn's entry in every agent config.
pub const NAME: &str = "cairn";
/// What the session-start hook runs after the binary.
pub const HOOK_ARGS: &str = "hook session-start";

/// What an entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// The MCP server entry.
    McpServer,
    /// The session-start hook.
    SessionStartHook,
}

impl What {
    /// Human words.
    pub fn label(self) -> &'static str {
        match self {
            What::McpServer => "MCP server",
            What::SessionStartHook => "SessionStart hook",
        }
    }
}

/// How the entry is written into the file.
#[derive(Debug, Clone)]
pub enum Edit {
    /// A JSON member at `path` (last part is the key) with `value`. When
    /// `prefer` names an object that exists, the entry goes under it instead
    /// (e.g. opencode v2's `mcp.servers`).
    JsonMember {
        /// Path to the entry.
        path: Vec<&'static str>,
        /// Alternative parent used when it already exists.
        prefer: Option<Vec<&'static str>>,
        /// The entry.
        value: Value,
    },
    /// An element of the JSON array at `path`, recognised as cairn's by a
    /// command running `cairn ... hook session-start`.
    JsonHook {
        /// Path to the array.
        path: Vec<&'static str>,
        /// The element.
        value: Value,
    },
    /// A config format cairn has no format-preserving editor for (YAML
    /// with comments): the exact `snippet` is printed with the file it
    /// belongs in, and the file is never written. The entry counts as there
    /// when a line of the file, trimmed, equals `marker`.
    Snippet {
        /// The text to add, ready to paste.
        snippet: String,
        /// A line that shows the entry is present (e.g. `cairn:`).
        marker: &'static str,
    },
    /// The item named `cairn` with `command` and `args` in the YAML block
    /// list under the top-level `key` (Continue's `mcpServers:`).
    YamlServer {
        /// The top-level key.
        key: &'static str,
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<&'static str>,
    },
    /// The item `name = "cairn"` (a stdio server running `command` with
    /// `args`) of the TOML array of tables `key` (Mistral Vibe's
    /// `[[mcp_servers]]`).
    TomlListedServer {
        /// The array's key.
        key: &'static str,
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<&'static str>,
    },
    /// `[parent.cairn]` in TOML with `command` and `args`.
    TomlServer {
        /// The parent table.
        parent: &'static str,
        /// The command.
        command: String,
        /// Its arguments.
        args: Vec<&'static str>,
    },
}

/// One entry in one agent's config file.
#[derive(Debug, Clone)]
pub struct Target {
    /// Agent id.
    pub agent: &'static str,
    /// What the entry is.
    pub what: What,
    /// The config file.
    pub path: PathBuf,
    /// How it is written.
    pub edit: Edit,
}

/// Why an entry could not be added or removed; the file is left untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// JSON.
    #[error(transparent)]
    Json(#[from] EditError),
    /// TOML.
    #[error(transparent)]
    Toml(#[from] TomlError),
    /// YAML.
    #[error(transparent)]
    Yaml(#[from] YamlError),
}

fn json_path<'p>(
    doc: &Doc<'_>,
    path: &'p [&'static str],
    prefer: Option<&'p [&'static str]>,
) -> Vec<&'static str> {
    if let Some(p) = prefer
        && doc
            .lookup(p)
            .is_some_and(|n| matches!(n.kind, super::jsonc::Kind::Object(_)))
    {
        let mut v = p.to_vec();
        v.push(NAME);
        return v;
    }
    path.to_vec()
}

/// True when a hook element runs cairn's session-start hook.
fn is_our_hook(v: &Value) -> bool {
    v.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
        hs.iter().any(|h| {
            h.get("command")
                .and_then(Value::as_str)
                .is_some_and(|c| c.ends_with(HOOK_ARGS) && c.contains(NAME))
        })
    })
}

fn our_hook_index(doc: &Doc<'_>, path: &[&str]) -> Option<usize> {
    match doc.value_at(path)? {
        Value::Array(items) => items.iter().position(is_our_hook),
        _ => None,
    }
}

/// True when a line of `text`, trimmed, is `marker`.
fn has_marker(text: &str, marker: &str) -> bool {
    text.lines().any(|l| l.trim() == marker)
}

impl Target {
    /// For a snippet target: the snippet, and whether the entry is already in `text`.
    pub fn snippet(&self, text: &str) -> Option<(&str, bool)> {
        match &self.edit {
            Edit::Snippet { snippet, marker } => Some((snippet, has_marker(text, marker))),
            _ => None,
        }
    }

    /// For a YAML list target whose file is missing or empty: the entry to
    /// add by hand. cairn does not create that file, since the agent would
    /// then load only it (Continue drops its hub config and models).
    pub fn needs_existing(&self, text: &str) -> Option<String> {
        match &self.edit {
            Edit::YamlServer { key, command, args } if text.trim().is_empty() => {
                let item = yamled::set_server("x: 1\n", key, NAME, command, args)
                    .ok()
                    .flatten()?;
                Some(item.trim_start_matches("x: 1\n").to_owned())
            }
            _ => None,
        }
    }

    /// The new text with the entry added or brought up to date; `None` when already there.
    pub fn install(&self, text: &str) -> Result<Option<String>, TargetError> {
        match &self.edit {
            // Never rewritten: see [`Target::snippet`].
            Edit::Snippet { .. } => Ok(None),
            Edit::JsonMember {
                path,
                prefer,
                value,
            } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                let p = json_path(&doc, path, prefer.as_deref());
                Ok(doc.set(&p, value)?)
            }
            Edit::JsonHook { path, value } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                match our_hook_index(&doc, path) {
                    Some(i) => {
                        let current = doc.value_at(path).and_then(|v| v.get(i).cloned());
                        if current.as_ref() == Some(value) {
                            Ok(None)
                        } else {
                            Ok(doc.replace_item(path, i, value))
                        }
                    }
                    None => Ok(Some(doc.push(path, value)?)),
                }
            }
            Edit::TomlServer {
                parent,
                command,
                args,
            } => Ok(tomled::set_server(text, parent, NAME, command, args)?),
            Edit::TomlListedServer { key, command, args } => {
                Ok(tomled::set_listed_server(text, key, NAME, command, args)?)
            }
            Edit::YamlServer { key, command, args } => {
                Ok(yamled::set_server(text, key, NAME, command, args)?)
            }
        }
    }

    /// The new text without the entry; `None` when it is not there.
    /// `original` is the file as it was before cairn first changed it (its
    /// backup), if known: objects and arrays it already had are kept even
    /// when removing the entry leaves them empty.
    pub fn uninstall(
        &self,
        text: &str,
        original: Option<&str>,
    ) -> Result<Option<String>, TargetError> {
        let before = original.and_then(|o| Doc::parse(o).ok());
        let keep = |p: &[&str]| before.as_ref().is_some_and(|d| d.lookup(p).is_some());
        match &self.edit {
            Edit::Snippet { .. } => Ok(None),
            Edit::JsonMember { path, prefer, .. } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                let p = json_path(&doc, path, prefer.as_deref());
                Ok(doc.remove(&p, &keep))
            }
            Edit::JsonHook { path, .. } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                Ok(our_hook_index(&doc, path).and_then(|i| doc.remove_item(path, i, &keep)))
            }
            Edit::TomlServer { parent, .. } => Ok(tomled::remove_server(text, parent, NAME)?),
            Edit::TomlListedServer { key, .. } => {
                Ok(tomled::remove_listed_server(text, key, NAME)?)
            }
            Edit::YamlServer { key, .. } => Ok(yamled::remove_server(text, key, NAME)?),
        }
    }

    /// The command the existing entry runs, if the entry is there.
    pub fn wired(&self, text: &str) -> Result<Option<String>, TargetError> {
        match &self.edit {
            Edit::Snippet { snippet, marker } => Ok(has_marker(text, marker).then(|| {
                snippet
                    .lines()
                    .find_map(|l| {
                        let l = l.trim();
                        l.strip_prefix("cmd:")
                            .or_else(|| l.strip_prefix("command:"))
                            .map(|c| format!("{} mcp", c.trim()))
                    })
                    .unwrap_or_default()
            })),
            Edit::JsonMember { path, prefer, .. } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                let p = json_path(&doc, path, prefer.as_deref());
                Ok(doc.value_at(&p).map(|v| command_of(&v)))
            }
            Edit::JsonHook { path, .. } => {
                let doc = Doc::parse(text).map_err(EditError::from)?;
                Ok(our_hook_index(&doc, path)
                    .and_then(|i| doc.value_at(path)?.get(i).cloned())
                    .map(|v| {
                        v["hooks"]
                            .as_array()
                            .and_then(|hs| hs.iter().find_map(|h| h["command"].as_str()))
                            .unwrap_or_default()
                            .to_owned()
                    }))
            }
            Edit::TomlServer { parent, .. } => Ok(
                tomled::server(text, parent, NAME)?.map(|(c, a)| format!("{c} {}", a.join(" ")))
            ),
            Edit::TomlListedServer { key, .. } => Ok(tomled::listed_server(text, key, NAME)?
                .map(|(c, a)| format!("{c} {}", a.join(" ")))),
            Edit::YamlServer { key, .. } => Ok(yamled::server(text, key, NAME)?),
        }
    }
}

/// A server entry's command line, whatever the agent's field names.
fn command_of(v: &Value) -> String {
    let mut parts: Vec<String> = match &v["command"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if let Some(args) = v["args"].as_array() {
        parts.extend(args.iter().filter_map(|x| x.as_str().map(str::to_owned)));
    }
    parts.join(" ")
}
