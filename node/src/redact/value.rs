//! Heuristics about candidate keys and values: is this key name secret-ish,
//! is this value a reference (`$TOKEN`, `${{ secrets.X }}`), a placeholder
//! (`xxxx`, `changeme`, `<your-api-key>`), a code expression, or something
//! that looks like an actual secret?
//!
//! Decisions documented here (and table-tested in `tests.rs`):
//! - Well-known placeholder words (`changeme`, `password`, `secret`, `xxxx`,
//!   `your-...`, `<...>`, `none`, `true`, ...) are kept: they carry no secret
//!   and are useful to search for ("the default password changeme").
//! - Unquoted values in prose-like positions (`Token: the token expired`)
//!   must look like a secret (letters and digits, or symbols, or high
//!   entropy); plain words and CamelCase type names are kept.
//! - Env-file assignments (`DB_PASSWORD=letmein`, upper-case key, `=` with
//!   no spaces) are redacted even when the value is a plain word.

use super::entropy;

/// The marker prefix every redaction starts with.
pub(crate) const MARKER_PREFIX: &str = "[REDACTED:";

/// How secret-ish a key name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyClass {
    /// password, passwd, pwd, passphrase, pass (as the last word).
    Password,
    /// secret, token, api key, access key, private key, auth.
    Secret,
    /// Contains `key` or `credential`: only high-entropy values count.
    Weak,
    /// Not a secret-shaped key.
    None,
}

/// Words in a key name that mean the value is metadata about a secret, not
/// the secret itself (`max_tokens`, `token_count`, `password_hash`, ...).
const DENY_WORDS: &[&str] = &[
    "count",
    "counts",
    "limit",
    "limits",
    "usage",
    "tokens",
    "tokenizer",
    "tokenizers",
    "type",
    "types",
    "length",
    "len",
    "size",
    "max",
    "min",
    "budget",
    "expiry",
    "expires",
    "expiration",
    "expired",
    "ttl",
    "timeout",
    "url",
    "uri",
    "endpoint",
    "path",
    "file",
    "dir",
    "name",
    "prompt",
    "policy",
    "field",
    "header",
    "env",
    "var",
    "mode",
    "method",
    "format",
    "version",
    "enabled",
    "required",
    "hint",
    "label",
    "placeholder",
    "pattern",
    "provider",
    "hash",
    "index",
    "kind",
    "flag",
    "regex",
    "total",
    "num",
    "rotation",
    "ref",
    // Content addresses and public material named "key": cache keys, public
    // keys, fingerprints, checksums, idempotency keys.
    "cache",
    "public",
    "pubkey",
    "publishable",
    "fingerprint",
    "checksum",
    "digest",
    "integrity",
    "etag",
    "idempotency",
];

/// Splits a key into lowercase words: last `.`/`:` segment, camelCase and
/// `_`/`-` boundaries.
fn key_words(key: &str) -> Vec<String> {
    let last = key
        .rsplit(['.', ':', '/', '['])
        .find(|s| !s.is_empty())
        .unwrap_or(key);
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in last.chars() {
        if c == '_' || c == '-' || c == '"' || c == '\'' || c == ']' {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Classifies a key name.
pub(crate) fn classify_key(key: &str) -> KeyClass {
    let words = key_words(key);
    if words.is_empty() || words.iter().any(|w| DENY_WORDS.contains(&w.as_str())) {
        return KeyClass::None;
    }
    let joined: String = words.concat();
    let last = words.last().map(String::as_str).unwrap_or("");
    if ["password", "passwd", "passphrase", "pwd"]
        .iter()
        .any(|p| joined.contains(p))
        || matches!(last, "pass" | "pw")
    {
        return KeyClass::Password;
    }
    if joined.contains("secret")
        || joined.contains("token")
        || joined.contains("apikey")
        || joined.contains("accesskey")
        || joined.contains("privatekey")
        || words.iter().any(|w| w == "auth")
        || joined.starts_with("auth") && (joined.ends_with("key") || joined.ends_with("token"))
    {
        return KeyClass::Secret;
    }
    if joined.contains("key") || joined.contains("credential") {
        return KeyClass::Weak;
    }
    KeyClass::None
}

/// True when `v` contains an existing `[REDACTED:...]` marker: such spans
/// are never redacted again (redaction is idempotent).
pub(crate) fn is_marker(v: &str) -> bool {
    v.contains(MARKER_PREFIX)
}

/// True for a reference to a secret rather than the secret itself:
/// `$TOKEN`, `${API_KEY}`, `{{ secrets.TOKEN }}`, `%s`, `process.env.X`, ...
pub(crate) fn is_reference(v: &str) -> bool {
    let v = v.trim();
    const PREFIXES: &[&str] = &[
        "$",
        "%",
        "{",
        "<%",
        "#{",
        "process.env",
        "os.environ",
        "os.getenv",
        "env.",
        "env(",
        "env::",
        "ENV[",
        "ENV.",
        "secrets.",
        "vars.",
        "!Ref",
        "!Sub",
        "!GetAtt",
        "import.meta.env",
        "System.getenv",
        "std::env",
    ];
    PREFIXES.iter().any(|p| v.starts_with(p))
}

/// True for an obvious placeholder rather than a real value.
pub(crate) fn is_placeholder(v: &str) -> bool {
    let v = v.trim();
    if v.is_empty() {
        return true;
    }
    if v.starts_with('<') && v.ends_with('>') {
        return true;
    }
    if v.contains("...") || v.contains('\u{2026}') {
        return true;
    }
    let first = v.chars().next().unwrap_or(' ');
    // `xxxx`, `****`, `----`, `####`: one repeated character.
    if v.chars().count() >= 2 && v.chars().all(|c| c == first) {
        return true;
    }
    let lower = v.to_ascii_lowercase();
    if lower
        .chars()
        .all(|c| c == 'x' || c == '*' || c == '-' || c == '_')
    {
        return true;
    }
    const WORDS: &[&str] = &[
        "changeme",
        "change_me",
        "change-me",
        "changeit",
        "password",
        "passwd",
        "pass",
        "secret",
        "token",
        "apikey",
        "api_key",
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "required",
        "optional",
        "redacted",
        "hidden",
        "example",
        "placeholder",
        "dummy",
        "todo",
        "tbd",
        "n/a",
        "string",
        "str",
        "bytes",
        "bool",
        "int",
        "string?",
        "omitted",
        "masked",
        "empty",
    ];
    if WORDS.contains(&lower.as_str()) {
        return true;
    }
    ["your_", "your-", "your ", "insert", "replace", "my-", "my_"]
        .iter()
        .any(|p| lower.starts_with(p))
        || lower.contains("example")
        || lower.contains("placeholder")
}

/// True for numbers (with optional sign, `.`, `_`, `,`).
pub(crate) fn is_numeric(v: &str) -> bool {
    let v = v.trim_start_matches(['-', '+']);
    !v.is_empty()
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b','))
}

/// True for `a.b.c` identifier paths (`self.config.api_key`, `settings.TOKEN`).
pub(crate) fn is_dotted_path(v: &str) -> bool {
    v.contains('.')
        && v.split('.').all(|seg| {
            let mut b = seg.bytes();
            matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        })
        && !v.bytes().any(|b| b.is_ascii_digit())
}

/// True for words and identifiers: only letters and `_`/`-`/`.`/`:`/`&`,
/// with few capitals (so `SessionToken`, `token_value`, `String` qualify but
/// random base62 like `rwZbqcabUGJmGEp` does not).
pub(crate) fn is_word_like(v: &str) -> bool {
    let letters = v.bytes().filter(u8::is_ascii_alphabetic).count();
    let upper = v.bytes().filter(u8::is_ascii_uppercase).count();
    v.bytes()
        .all(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'-' | b'.' | b':' | b'&' | b'\''))
        && (upper * 4 <= letters || upper == letters)
}

/// Does an unquoted value in a prose-or-code position look like a secret?
/// Requires at least 6 characters and letters mixed with digits or symbols,
/// or high entropy; never a plain word, number, path or identifier.
pub(crate) fn looks_secretish(v: &str) -> bool {
    if v.len() < 6 || v.bytes().any(|b| b.is_ascii_whitespace()) {
        return false;
    }
    if is_numeric(v) || is_word_like(v) || is_dotted_path(v) || looks_like_path(v) {
        return false;
    }
    if entropy::is_uuid(v) {
        return false;
    }
    let has_alpha = v.bytes().any(|b| b.is_ascii_alphabetic());
    let has_digit = v.bytes().any(|b| b.is_ascii_digit());
    let has_symbol = v
        .bytes()
        .any(|b| b.is_ascii_punctuation() && !matches!(b, b'_' | b'-' | b'.' | b'/' | b':'));
    (has_alpha && (has_digit || has_symbol)) || entropy::is_high_entropy(v)
}

/// True for a content address with a readable label: words followed by a
/// hex digest of a usual length (`linux-cargo-<sha256>`, `sha256:<hex>`,
/// `deps-v2_<sha1>`). Cache keys and lockfile entries look like this; a
/// secret is not labelled that way.
pub(crate) fn is_labelled_digest(v: &str) -> bool {
    let Some(cut) = v.rfind(['-', '_', ':', '/', '.']) else {
        return false;
    };
    let (label, digest) = (&v[..cut], &v[cut + 1..]);
    matches!(digest.len(), 32 | 40 | 56 | 64 | 96 | 128)
        && entropy::is_hex(digest)
        && !label.is_empty()
        && label.bytes().any(|b| b.is_ascii_alphabetic())
        && label
            .split(['-', '_', ':', '/', '.'])
            .all(|w| w.len() <= 24 && !entropy::is_high_entropy(w))
}

/// True for file-system paths (`/run/secrets/db`, `~/.aws/credentials`, `./x`).
pub(crate) fn looks_like_path(v: &str) -> bool {
    v.starts_with('/') || v.starts_with("~/") || v.starts_with("./") || v.starts_with("../")
}

/// True for quoted values that read as prose (an error message or a
/// description) rather than a passphrase.
pub(crate) fn is_prose(v: &str) -> bool {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.len() < 2 {
        return false;
    }
    const STOP: &[&str] = &[
        "the", "a", "an", "is", "are", "be", "to", "of", "not", "must", "should", "for", "and",
        "or", "your", "this", "that", "with", "in", "on", "was", "has", "have", "please", "enter",
        "missing", "invalid",
    ];
    words.len() > 5
        || words.iter().any(|w| {
            STOP.contains(
                &w.to_ascii_lowercase()
                    .trim_matches(|c: char| !c.is_alphanumeric()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_classes() {
        let rows: &[(&str, KeyClass)] = &[
            ("password", KeyClass::Password),
            ("DB_PASSWORD", KeyClass::Password),
            ("dbPassword", KeyClass::Password),
            ("--password", KeyClass::Password),
            ("DB_PASS", KeyClass::Password),
            ("pwd", KeyClass::Password),
            ("API_KEY", KeyClass::Secret),
            ("apiKey", KeyClass::Secret),
            ("x-api-key", KeyClass::Secret),
            ("client_secret", KeyClass::Secret),
            ("GITHUB_TOKEN", KeyClass::Secret),
            ("accessToken", KeyClass::Secret),
            ("auth", KeyClass::Secret),
            ("self.config.api_key", KeyClass::Secret),
            ("SIGNING_KEY", KeyClass::Weak),
            ("credentials", KeyClass::Weak),
            ("max_tokens", KeyClass::None),
            ("token_count", KeyClass::None),
            ("tokenCount", KeyClass::None),
            ("password_hash", KeyClass::None),
            ("author", KeyClass::None),
            ("oauth_url", KeyClass::None),
            ("TOKENIZERS_PARALLELISM", KeyClass::None),
            ("token_type", KeyClass::None),
            ("monkey", KeyClass::Weak),
            ("name", KeyClass::None),
        ];
        for (key, class) in rows {
            assert_eq!(classify_key(key), *class, "{key}");
        }
    }

    #[test]
    fn value_predicates() {
        for v in [
            "$TOKEN",
            "${API_KEY}",
            "{{ secrets.TOKEN }}",
            "%s",
            "process.env.KEY",
        ] {
            assert!(is_reference(v), "{v}");
        }
        for v in [
            "xxxx",
            "changeme",
            "<your-api-key>",
            "****",
            "your-token-here",
            "...",
        ] {
            assert!(is_placeholder(v), "{v}");
        }
        assert!(!is_placeholder("hunter2"));
        assert!(is_numeric("4096") && is_numeric("-1.5") && !is_numeric("v1"));
        assert!(is_dotted_path("self.config.api_key") && !is_dotted_path("db.internal1"));
        assert!(
            is_word_like("SessionToken")
                && is_word_like("String")
                && !is_word_like("rwZbqcabUGJmGEp")
        );
        for v in ["hunter2", "S3cureCaqx9vJupc", "p@ss!word"] {
            assert!(looks_secretish(v), "{v}");
        }
        for v in [
            "the",
            "required",
            "Option",
            "4096",
            "/run/secrets/db",
            "next_token",
            "&str",
        ] {
            assert!(!looks_secretish(v), "{v}");
        }
        assert!(is_prose("must be at least 8 characters"));
        assert!(!is_prose("correct horse battery staple"));
    }
}
