//! The redactor in force on this thread, for code that shortens text.
//!
//! Text is redacted whole before anything cuts it: a cut can remove the
//! context a rule needs (the BEGIN line of a key, the `password=` before a
//! value) or split a token, and what is left would then be stored in clear.
//! The parsers cut long texts with `sources::common::cap_text`, which
//! redacts first through [`redact_whole`]. The indexer enters a [`Scope`]
//! with the node's redactor (built-in rules plus configured patterns) for
//! the length of a pass, and takes the counts of what was redacted there
//! with [`take_counts`]. Outside a scope the built-in rules apply and the
//! counts are dropped.

use std::borrow::Cow;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::OnceLock;

use super::{RedactionCounts, Redactor};

struct Active {
    redactor: Redactor,
    counts: RedactionCounts,
}

thread_local! {
    /// Entered scopes, innermost last.
    static ACTIVE: RefCell<Vec<Active>> = const { RefCell::new(Vec::new()) };
}

/// While alive, [`redact_whole`] on this thread uses the given redactor.
/// Not `Send`: it belongs to the thread that entered it.
#[must_use = "the scope ends when this guard is dropped"]
pub struct Scope {
    _thread_bound: PhantomData<*const ()>,
}

/// Enters a scope redacting with `redactor` on this thread.
pub fn enter(redactor: &Redactor) -> Scope {
    ACTIVE.with(|a| {
        a.borrow_mut().push(Active {
            redactor: redactor.clone(),
            counts: RedactionCounts::new(),
        })
    });
    Scope {
        _thread_bound: PhantomData,
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

fn builtin() -> &'static Redactor {
    static B: OnceLock<Redactor> = OnceLock::new();
    B.get_or_init(Redactor::new)
}

/// Redacts `text` with the innermost scope's redactor (counting what it
/// finds there), or with the built-in rules outside any scope.
pub fn redact_whole(text: &str) -> Cow<'_, str> {
    ACTIVE.with(|a| {
        let mut stack = a.borrow_mut();
        match stack.last_mut() {
            Some(active) => {
                let Active { redactor, counts } = active;
                redactor.redact(text, counts)
            }
            None => builtin().redact_str(text),
        }
    })
}

/// Takes the counts gathered by the innermost scope since the last call
/// (empty outside a scope).
pub fn take_counts() -> RedactionCounts {
    ACTIVE.with(|a| {
        a.borrow_mut()
            .last_mut()
            .map(|active| std::mem::take(&mut active.counts))
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_uses_its_redactor_and_counts() {
        let custom =
            Redactor::with_extra_patterns(&["ACME-[0-9]{6}".to_string()]).expect("pattern");
        // Outside a scope: built-in rules, nothing counted.
        assert_eq!(redact_whole("ticket ACME-123456"), "ticket ACME-123456");
        assert_eq!(
            redact_whole("password: hunter2"),
            "password: [REDACTED:password]"
        );
        assert!(take_counts().is_empty());
        {
            let _scope = enter(&custom);
            assert_eq!(
                redact_whole("ticket ACME-123456"),
                "ticket [REDACTED:custom]"
            );
            {
                let _inner = enter(&Redactor::new());
                assert_eq!(redact_whole("ACME-123456"), "ACME-123456");
            }
            assert_eq!(
                redact_whole("password: hunter2"),
                "password: [REDACTED:password]"
            );
            let counts = take_counts();
            assert_eq!(counts.get("custom"), Some(&1));
            assert_eq!(counts.get("password"), Some(&1));
            assert!(take_counts().is_empty());
        }
        assert_eq!(redact_whole("ACME-123456"), "ACME-123456");
    }
}
