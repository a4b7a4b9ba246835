//! Text cairn itself put into a session: the fence around recalled memory.
//!
//! What `cairn mcp` and the session-start hook hand an agent is fenced
//! between [`OPEN`] and [`CLOSE`] (the MCP side builds the fence). When the
//! agent's transcript is read back, [`strip_recalled`] cuts those blocks
//! out before the record is stored, so cairn never indexes its own
//! injected text as if the agent or the user had said it. Pure: no I/O.

use std::borrow::Cow;

/// Opening marker of a block of recalled text. Exact, so it can be found again.
pub const OPEN: &str = r#"<recalled_memory source="cairn" untrusted="true">"#;
/// Closing marker of a block of recalled text.
pub const CLOSE: &str = "</recalled_memory>";

/// Removes every fenced block of recalled text (markers included) from a
/// transcript record. An opening marker with no closing marker drops the
/// rest of the text (a cut-off block is still recalled text).
///
/// The indexer calls this on every record's text before storing it.
pub fn strip_recalled(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(OPEN) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut at = Some(first);
    while let Some(i) = at {
        out.push_str(&rest[..i]);
        let after = &rest[i + OPEN.len()..];
        match after.find(CLOSE) {
            Some(j) => {
                rest = &after[j + CLOSE.len()..];
                at = rest.find(OPEN);
            }
            None => {
                rest = "";
                at = None;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_blocks_are_removed() {
        let block = format!("{OPEN}\nwe pinned hyper to 0.14\n{CLOSE}");
        let text = format!("before {block} middle {block}after");
        assert_eq!(strip_recalled(&text), "before  middle after");
        assert_eq!(strip_recalled(&block), "");
    }

    #[test]
    fn an_unclosed_block_is_dropped_to_the_end() {
        let text = format!("keep this {OPEN}\nrecalled text cut off");
        assert_eq!(strip_recalled(&text), "keep this ");
    }

    #[test]
    fn other_text_is_left_alone_and_borrowed() {
        for s in [
            "",
            "no markers at all",
            "mentions </recalled_memory> without an opening marker",
            "a look-alike <recalled_memory source=\"other\"> is not ours",
        ] {
            assert!(
                matches!(strip_recalled(s), Cow::Borrowed(t) if t == s),
                "{s}"
            );
        }
    }
}
