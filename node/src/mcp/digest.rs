//! The session-start digest: a compact (≤ 2 KB) summary of what a project's
//! recent sessions decided, on any machine, for an agent's session-start
//! hook. Read-only and cheap (a handful of indexed queries); it never
//! indexes. The text is fenced as recalled memory.

use std::sync::LazyLock;

use regex::Regex;

use super::sanitize::{self, truncate};
use crate::config::Config;
use crate::store::{Store, StoreError};

/// Largest digest, fence included, in bytes.
pub const DIGEST_MAX: usize = 2048;
/// Sessions looked at, newest first.
const SESSIONS: i64 = 6;
/// Records of one session scanned for decisions, newest first.
const RECORDS_PER_SESSION: usize = 200;
/// Decision lines kept per session.
const LINES_PER_SESSION: usize = 2;
/// Longest decision line.
const LINE_MAX: usize = 220;

static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(decided|decision|we chose|chose|went with|settled on|pinned|pin it|switched|instead of|rather than|because|root cause|the fix|fixed by|caused by|trade-?off|agreed)\b",
    )
    .expect("static regex")
});

/// The digest for sessions whose project is `cwd` or a folder under it,
/// leaving out the session `exclude` (the one starting). `None` when there
/// is nothing worth saying.
pub fn project_digest(
    store: &Store,
    cwd: &str,
    exclude: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let cwd = cwd.trim_end_matches('/');
    if cwd.is_empty() {
        return Ok(None);
    }
    let recent = store.recent_project_sessions(cwd, exclude, SESSIONS)?;
    if recent.is_empty() {
        return Ok(None);
    }
    let budget = DIGEST_MAX - sanitize::wrap_overhead();
    let mut body = String::from(
        "Recent sessions in this project (from cairn; use its `search` tool for more):\n",
    );
    for s in &recent {
        let when = s
            .last_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "-".to_owned());
        let title = s
            .title
            .as_deref()
            .map(|t| {
                format!(
                    ": {}",
                    truncate(&sanitize::recalled(t).replace('\n', " "), 100)
                )
            })
            .unwrap_or_default();
        let mut entry =
            sanitize::recalled(&format!("- {when} {} on {}{title}\n", s.agent, s.machine));
        // The newest records, through the store's reader (it decodes the text).
        let from = (s.records as usize).saturating_sub(RECORDS_PER_SESSION);
        let rows = store.session_records(s.row, from, RECORDS_PER_SESSION)?;
        let mut kept = 0;
        for r in rows.iter().rev() {
            if kept == LINES_PER_SESSION {
                break;
            }
            if !matches!(r.role.as_str(), "user" | "assistant" | "note") {
                continue;
            }
            let text = sanitize::strip_recalled(&r.text);
            let line = if r.role == "note" {
                Some(text.trim().to_owned())
            } else {
                decision_sentence(&text)
            };
            if let Some(line) = line.filter(|l| !l.is_empty()) {
                let line = sanitize::recalled(&line).replace('\n', " ");
                entry.push_str(&format!("  · {}\n", truncate(&line, LINE_MAX)));
                kept += 1;
            }
        }
        if body.len() + entry.len() > budget {
            break;
        }
        body.push_str(&entry);
    }
    if body.len() > budget {
        return Ok(None);
    }
    Ok(Some(sanitize::wrap(&body)))
}

/// The first sentence of `text` that uses decision language.
fn decision_sentence(text: &str) -> Option<String> {
    let m = DECISION.find(text)?;
    // A sentence ends at a newline, or at . ! ? followed by white space.
    let ends_at = |i: usize, c: char| {
        c == '\n'
            || (matches!(c, '.' | '!' | '?')
                && text[i + 1..].chars().next().is_none_or(char::is_whitespace))
    };
    let start = text[..m.start()]
        .char_indices()
        .rev()
        .find(|&(i, c)| ends_at(i, c))
        .map_or(0, |(i, _)| i + 1);
    let end = text[m.end()..]
        .char_indices()
        .find(|&(i, c)| ends_at(m.end() + i, c))
        .map_or(text.len(), |(i, c)| m.end() + i + c.len_utf8());
    Some(text[start..end].trim().to_owned())
}

/// The digest for a session-start hook: opens the database of `config`
/// read-only (never creates, migrates or indexes). `Ok(None)` when there
/// is no index yet or nothing to say.
pub fn hook_digest(
    config: &Config,
    cwd: &str,
    session_id: Option<&str>,
) -> Result<Option<String>, StoreError> {
    if !config.db_path.is_file() {
        tracing::debug!(db = %config.db_path.display(), "no index yet");
        return Ok(None);
    }
    let store = Store::open_read_only(&config.db_path)?;
    project_digest(&store, cwd, session_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_sentence_picks_the_sentence_with_the_decision() {
        let t =
            "Looked at the logs. We pinned hyper to 0.14 because 1.0 broke the proxy. Then lunch.";
        assert_eq!(
            decision_sentence(t).as_deref(),
            Some("We pinned hyper to 0.14 because 1.0 broke the proxy.")
        );
        assert_eq!(
            decision_sentence("nothing decided here? no, nothing"),
            Some("nothing decided here?".to_owned())
        );
        assert_eq!(decision_sentence("just chatting"), None);
    }
}
