//! The normalized record every source produces and the store keeps.
//!
//! A record is one thing said or done in one agent session: a user turn, an
//! assistant answer, a tool call (with the files it touched) or a tool's
//! output. Sources build records; redaction rewrites their text; the store
//! hashes and keeps them. Nothing here does I/O.

use serde::{Deserialize, Serialize};

/// Who produced a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Something the user typed.
    User,
    /// Prose the model answered with.
    Assistant,
    /// A tool the agent invoked: the command run, the file edited, the query made.
    ToolCall,
    /// What a tool returned.
    ToolOutput,
    /// A durable note stored with `cairn remember`.
    Note,
}

impl Role {
    /// All roles, in display order.
    pub const ALL: [Role; 5] = [
        Role::User,
        Role::Assistant,
        Role::ToolCall,
        Role::ToolOutput,
        Role::Note,
    ];

    /// The stable lowercase name used in the database, in `--json` and on the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolCall => "tool_call",
            Role::ToolOutput => "tool_output",
            Role::Note => "note",
        }
    }

    /// Parses the stable name (also accepts `tool-call` style and `tool`/`output` shorthands).
    pub fn parse(s: &str) -> Option<Role> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool_call" | "tool" => Some(Role::ToolCall),
            "tool_output" | "output" => Some(Role::ToolOutput),
            "note" => Some(Role::Note),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One normalized record as a source emits it, before redaction and hashing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Agent id from the source registry, e.g. `claude-code`.
    pub agent: String,
    /// The agent's own session id.
    pub session_id: String,
    /// For a sub-agent (sidechain) session: the session that spawned it.
    pub parent_session: Option<String>,
    /// The working directory the agent ran in, as the agent recorded it.
    pub project: Option<String>,
    /// Who produced this record.
    pub role: Role,
    /// When it happened, in Unix milliseconds UTC, if the source says.
    pub time_ms: Option<i64>,
    /// The text: prose, a command line, a tool's output.
    pub text: String,
    /// Files this record touched or named (tool calls), as given by the agent.
    pub files: Vec<String>,
    /// Where in the source it came from: a byte offset for files, a row id for databases.
    pub offset: u64,
}

impl Record {
    /// A record with the given identity and text; other fields empty.
    pub fn new(agent: &str, session_id: &str, role: Role, text: impl Into<String>) -> Record {
        Record {
            agent: agent.to_owned(),
            session_id: session_id.to_owned(),
            parent_session: None,
            project: None,
            role,
            time_ms: None,
            text: text.into(),
            files: Vec::new(),
            offset: 0,
        }
    }

    /// The blake3 content hash over the record's semantic fields.
    ///
    /// Where the record was read from (path, offset) is deliberately left
    /// out, so the same session indexed on two machines hashes the same.
    /// The encoding is length-prefixed and versioned; changing it is a
    /// format change (see ARCHITECTURE.md).
    pub fn content_hash(&self) -> [u8; 32] {
        // One definition of the encoding, shared with the wire protocol.
        cairn_protocol::record_content_hash(&cairn_protocol::HashInput {
            agent: &self.agent,
            session_id: &self.session_id,
            role: self.role.as_str(),
            time_ms: self.time_ms,
            text: &self.text,
            files: &self.files,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_round_trip() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("tool-output"), Some(Role::ToolOutput));
        assert_eq!(Role::parse("bogus"), None);
    }

    #[test]
    fn hash_ignores_location_but_not_content() {
        let mut a = Record::new("claude-code", "s1", Role::User, "pin hyper to 0.14");
        let mut b = a.clone();
        b.offset = 999;
        b.project = Some("/elsewhere".into());
        assert_eq!(a.content_hash(), b.content_hash());
        a.text.push('!');
        assert_ne!(a.content_hash(), b.content_hash());
        // Field boundaries matter: moving bytes between fields changes the hash.
        let c = Record::new("claude-code", "s1x", Role::User, "y");
        let d = Record::new("claude-code", "s1", Role::User, "xy");
        assert_ne!(c.content_hash(), d.content_hash());
    }
}
