//! The catalogue of built-in redaction rules.
//!
//! Each rule is a regex and a handler that looks at one match and decides
//! which span, if any, to replace and with which kind. Patterns use ASCII
//! classes only (so the lazy DFA never has to give up on non-ASCII text)
//! and start with a literal (so the engine's literal prefilter skips text
//! without candidates at memchr speed); context checks that would need
//! look-around (word boundaries, "inside a curl command") live in handlers.
//!
//! Rules run in order: specific provider formats first, then header/flag
//! shapes, then generic `key = value` assignments. Later rules never touch
//! an earlier rule's `[REDACTED:...]` marker.

use std::ops::Range;

use regex::Captures;

use super::entropy;
use super::value::{self, KeyClass};

/// One span to replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub range: Range<usize>,
    pub kind: &'static str,
}

/// Decides what to do with one match of a rule's pattern.
pub(crate) type Handler = fn(&str, &Captures<'_>) -> Option<Hit>;

/// A built-in rule.
pub(crate) struct RuleDef {
    /// The full pattern.
    pub pattern: &'static str,
    /// Decides the span and kind for one match.
    pub handler: Handler,
}

pub(crate) const PRIVATE_KEY: &str = "private-key";
pub(crate) const URL_CREDENTIALS: &str = "url-credentials";
pub(crate) const SLACK_WEBHOOK: &str = "slack-webhook";
pub(crate) const ANTHROPIC_KEY: &str = "anthropic-key";
pub(crate) const OPENAI_KEY: &str = "openai-key";
pub(crate) const GITHUB_TOKEN: &str = "github-token";
pub(crate) const GITLAB_TOKEN: &str = "gitlab-token";
pub(crate) const SLACK_TOKEN: &str = "slack-token";
pub(crate) const GOOGLE_API_KEY: &str = "google-api-key";
pub(crate) const STRIPE_KEY: &str = "stripe-key";
pub(crate) const NPM_TOKEN: &str = "npm-token";
pub(crate) const HUGGINGFACE_TOKEN: &str = "huggingface-token";
pub(crate) const AWS_ACCESS_KEY: &str = "aws-access-key";
pub(crate) const JWT: &str = "jwt";
pub(crate) const AWS_SECRET_KEY: &str = "aws-secret-key";
pub(crate) const BEARER_TOKEN: &str = "bearer-token";
pub(crate) const BASIC_AUTH: &str = "basic-auth";
pub(crate) const PASSWORD: &str = "password";
pub(crate) const GENERIC_SECRET: &str = "generic-secret";
pub(crate) const HIGH_ENTROPY: &str = "high-entropy";
pub(crate) const CUSTOM: &str = "custom";

/// Every kind a built-in or custom rule can report.
pub const KINDS: &[&str] = &[
    PRIVATE_KEY,
    URL_CREDENTIALS,
    SLACK_WEBHOOK,
    ANTHROPIC_KEY,
    OPENAI_KEY,
    GITHUB_TOKEN,
    GITLAB_TOKEN,
    SLACK_TOKEN,
    GOOGLE_API_KEY,
    STRIPE_KEY,
    NPM_TOKEN,
    HUGGINGFACE_TOKEN,
    AWS_ACCESS_KEY,
    JWT,
    AWS_SECRET_KEY,
    BEARER_TOKEN,
    BASIC_AUTH,
    PASSWORD,
    GENERIC_SECRET,
    HIGH_ENTROPY,
    CUSTOM,
];

/// The built-in rules, in application order.
pub(crate) const RULES: &[RuleDef] = &[
    // PEM private keys: the whole block, also JSON-escaped on one line
    // (`\n` sequences). Without an END line (truncated output), the BEGIN
    // line plus the base64-only lines that follow it.
    RuleDef {
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\r?\n|\\r?\\n)[A-Za-z0-9+/=]+)*",
        handler: private_key,
    },
    // scheme://user:password@host — keep scheme, user and host. Starts at
    // the `://` literal; the handler checks a scheme precedes it.
    RuleDef {
        pattern: r#"://[A-Za-z0-9._~%!$&*+=\-]*:(?P<pw>[^\s/?#@"'<>]+)@[A-Za-z0-9\[]"#,
        handler: url_credentials,
    },
    RuleDef {
        pattern: r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{8,})",
        handler: slack_webhook,
    },
    RuleDef {
        pattern: r"sk-ant-[A-Za-z0-9_\-]{20,}",
        handler: anthropic,
    },
    RuleDef {
        pattern: r"sk-(?P<pre>(?:proj|svcacct|admin)-)?(?P<body>[A-Za-z0-9_\-]{20,})",
        handler: openai,
    },
    RuleDef {
        pattern: r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}",
        handler: github,
    },
    RuleDef {
        pattern: r"gl(?:pat|ptt|dt|rt)-[A-Za-z0-9_\-]{20,}",
        handler: gitlab,
    },
    RuleDef {
        pattern: r"xox[abposr]-[A-Za-z0-9\-]{10,}",
        handler: slack_token,
    },
    RuleDef {
        pattern: r"AIza[0-9A-Za-z_\-]{35}",
        handler: google,
    },
    RuleDef {
        pattern: r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{24,}",
        handler: stripe,
    },
    RuleDef {
        pattern: r"npm_[A-Za-z0-9]{36}",
        handler: npm,
    },
    RuleDef {
        pattern: r"hf_[A-Za-z0-9]{30,}",
        handler: huggingface,
    },
    RuleDef {
        pattern: r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}",
        handler: aws_access_key,
    },
    RuleDef {
        pattern: r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        handler: jwt,
    },
    RuleDef {
        pattern: r#"(?i-u:aws_?secret_?access_?key)["']?[ \t]*(?::=|=>|=|:)[ \t]*["']?(?P<v>[A-Za-z0-9/+=]{40})"#,
        handler: aws_secret,
    },
    // Authorization / Proxy-Authorization headers, in HTTP, curl -H, JSON.
    RuleDef {
        pattern: r#"(?i-u:authorization)["']?[ \t]*[:=][ \t]*["']?(?:(?P<scheme>(?i-u:bearer|basic|token|digest|apikey))[ \t]+)?(?P<v>[^\s"',;\\]+)"#,
        handler: auth_header,
    },
    RuleDef {
        pattern: r"(?i-u:bearer)[ \t]+(?P<v>[A-Za-z0-9._~+/\-]{16,}=*)",
        handler: bearer,
    },
    // curl -u user:password / --user user:password
    RuleDef {
        pattern: r#"[ \t](?:-u|--user)[ \t]*["']?[^\s:"'\-][^\s:"']*:(?P<v>[^\s"'@]+)"#,
        handler: curl_user,
    },
    // --password VALUE, --password=VALUE, --token, --api-key, --secret ...
    RuleDef {
        pattern: r#"--(?P<flag>(?i-u:password|passwd|pass|db-password|auth-token|access-token|api-token|token|api-key|apikey|client-secret|secret-key|secret))(?P<sep>=|[ \t]+)(?P<v>"[^"\n]*"|'[^'\n]*'|[^\s"']+)"#,
        handler: flag,
    },
    // mysql -pSECRET (glued only; `-p` alone is not a password flag).
    RuleDef {
        pattern: r#"(?i-u:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)[^\n|;&]*?[ \t]-p(?P<v>[^\s"'\-][^\s"']*)"#,
        handler: mysql,
    },
    // Generic key = value assignments (env, YAML, JSON, shell, code). The
    // pattern starts at the keyword (so the regex engine can use a literal
    // prefilter); the handler extends the key back over identifier bytes.
    // Keyword case variants are listed explicitly (lower, Capitalized,
    // UPPER) instead of `(?i)` for the same reason.
    RuleDef {
        pattern: r#"(?P<key>(?:pass|Pass|PASS|pwd|Pwd|PWD|secret|Secret|SECRET|token|Token|TOKEN|key|Key|KEY|auth|Auth|AUTH|cred|Cred|CRED)[A-Za-z0-9_.\-]*)(?:\\?["'])?[ \t]*(?P<op>:=|=>|=|:)[ \t]*(?:"(?P<dq>[^"\r\n]+)"|'(?P<sq>[^'\r\n]+)'|\\"(?P<eq>[^"\\\r\n]+)\\"|(?P<bare>[^\s"'`,;&()\[\]{}<>\\]+))"#,
        handler: generic,
    },
];

fn byte_before(text: &str, i: usize) -> Option<u8> {
    i.checked_sub(1)
        .and_then(|j| text.as_bytes().get(j).copied())
}

fn byte_at(text: &str, i: usize) -> Option<u8> {
    text.as_bytes().get(i).copied()
}

/// True when the byte before `i` continues a token (letter, digit, `_`, `-`),
/// meaning the match starts in the middle of a larger word.
fn glued_before(text: &str, i: usize) -> bool {
    matches!(byte_before(text, i), Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn glued_after_alnum(text: &str, i: usize) -> bool {
    matches!(byte_at(text, i), Some(b) if b.is_ascii_alphanumeric())
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

fn whole(caps: &Captures<'_>, kind: &'static str) -> Option<Hit> {
    let m = caps.get(0)?;
    Some(Hit {
        range: m.range(),
        kind,
    })
}

fn group(caps: &Captures<'_>, name: &str, kind: &'static str) -> Option<Hit> {
    let m = caps.name(name)?;
    Some(Hit {
        range: m.range(),
        kind,
    })
}

/// A value that must not be redacted: a marker, a reference or a placeholder.
fn inert(v: &str) -> bool {
    value::is_marker(v) || value::is_reference(v) || value::is_placeholder(v)
}

fn private_key(_text: &str, caps: &Captures<'_>) -> Option<Hit> {
    whole(caps, PRIVATE_KEY)
}

fn url_credentials(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let pw = caps.name("pw")?;
    // A scheme must precede `://` (the pattern starts at the literal so the
    // engine can skip to it; the scheme is checked here).
    if !matches!(byte_before(text, m.start()), Some(b) if b.is_ascii_alphanumeric()) {
        return None;
    }
    if inert(pw.as_str()) {
        return None;
    }
    group(caps, "pw", URL_CREDENTIALS)
}

fn slack_webhook(_text: &str, caps: &Captures<'_>) -> Option<Hit> {
    group(caps, "v", SLACK_WEBHOOK)
}

fn anthropic(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    whole(caps, ANTHROPIC_KEY)
}

fn openai(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let body = caps.name("body")?.as_str();
    // `task-sk-...`, kebab-case words: real keys are random base62 and mix
    // cases and digits.
    if glued_before(text, m.start())
        || !has_digit(body)
        || !body.bytes().any(|b| b.is_ascii_uppercase())
        || !body.bytes().any(|b| b.is_ascii_lowercase())
    {
        return None;
    }
    whole(caps, OPENAI_KEY)
}

fn github(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    whole(caps, GITHUB_TOKEN)
}

fn gitlab(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    whole(caps, GITLAB_TOKEN)
}

fn slack_token(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) || !has_digit(m.as_str()) {
        return None;
    }
    whole(caps, SLACK_TOKEN)
}

fn google(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start())
        || matches!(byte_at(text, m.end()), Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return None;
    }
    whole(caps, GOOGLE_API_KEY)
}

fn stripe(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    whole(caps, STRIPE_KEY)
}

fn npm(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) || glued_after_alnum(text, m.end()) {
        return None;
    }
    whole(caps, NPM_TOKEN)
}

fn huggingface(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let s = m.as_str();
    if glued_before(text, m.start()) || !(has_digit(s) || s.bytes().any(|b| b.is_ascii_uppercase()))
    {
        return None;
    }
    whole(caps, HUGGINGFACE_TOKEN)
}

fn aws_access_key(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) || glued_after_alnum(text, m.end()) {
        return None;
    }
    whole(caps, AWS_ACCESS_KEY)
}

fn jwt(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) || byte_before(text, m.start()) == Some(b'.') {
        return None;
    }
    whole(caps, JWT)
}

fn aws_secret(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let v = caps.name("v")?;
    if matches!(byte_at(text, v.end()), Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'+' | b'='))
    {
        return None;
    }
    if inert(v.as_str()) || !value::looks_secretish(v.as_str()) {
        return None;
    }
    group(caps, "v", AWS_SECRET_KEY)
}

fn auth_header(_text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let v = caps.name("v")?.as_str();
    if inert(v) || v.len() < 8 {
        return None;
    }
    let scheme = caps.name("scheme").map(|m| m.as_str().to_ascii_lowercase());
    match scheme.as_deref() {
        Some("basic") => group(caps, "v", BASIC_AUTH),
        Some(_) => group(caps, "v", BEARER_TOKEN),
        // `Authorization: required` in prose: only token-looking values.
        None if value::looks_secretish(v) => group(caps, "v", BEARER_TOKEN),
        None => None,
    }
}

fn bearer(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let v = caps.name("v")?.as_str();
    if glued_before(text, m.start()) || inert(v) || !value::looks_secretish(v) {
        return None;
    }
    group(caps, "v", BEARER_TOKEN)
}

fn curl_user(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let v = caps.name("v")?.as_str();
    if inert(v) || value::is_numeric(v) {
        return None;
    }
    // Only within a curl command: look back to the start of the command.
    let head = text.get(..m.start())?;
    let cmd_start = head
        .rfind(['\n', '|', ';', '&'])
        .map(|i| i + 1)
        .unwrap_or(0);
    let cmd = head.get(cmd_start..)?;
    let is_curl = cmd.match_indices("curl").any(|(i, _)| {
        !glued_before(cmd, i)
            && !matches!(cmd.as_bytes().get(i + 4), Some(b) if b.is_ascii_alphanumeric())
    });
    if !is_curl {
        return None;
    }
    group(caps, "v", BASIC_AUTH)
}

/// Strips one pair of matching quotes; returns the inner range offset.
fn unquote(v: &str) -> (usize, &str, bool) {
    let b = v.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        (1, &v[1..v.len() - 1], true)
    } else {
        (0, v, false)
    }
}

fn flag(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    // `--password` must start a word (not `x--password`).
    if matches!(byte_before(text, m.start()), Some(b) if !(b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'(' | b'[' | b'`')))
    {
        return None;
    }
    let flag = caps.name("flag")?.as_str().to_ascii_lowercase();
    let sep = caps.name("sep")?.as_str();
    let vm = caps.name("v")?;
    let (off, inner, quoted) = unquote(vm.as_str());
    if inner.is_empty() || inert(inner) || inner.starts_with('-') {
        return None;
    }
    // With a space separator the next word may be prose ("pass --token and
    // it works"): require a secret-looking value unless quoted.
    if sep != "=" && !quoted && !value::looks_secretish(inner) {
        return None;
    }
    let kind = if flag.contains("pass") {
        PASSWORD
    } else {
        GENERIC_SECRET
    };
    let start = vm.start() + off;
    Some(Hit {
        range: start..start + inner.len(),
        kind,
    })
}

fn mysql(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let v = caps.name("v")?.as_str();
    if glued_before(text, m.start()) || inert(v) {
        return None;
    }
    group(caps, "v", PASSWORD)
}

/// Start of the identifier ending at `end`: walks back over `[A-Za-z0-9_.-]`.
fn ident_start(text: &str, end: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = end;
    while i > 0 {
        match bytes.get(i - 1) {
            Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') => i -= 1,
            _ => break,
        }
    }
    i
}

fn generic(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let kw = caps.name("key")?;
    let key_start = ident_start(text, kw.start());
    let key_str = text.get(key_start..kw.end())?;
    let op = caps.name("op")?;
    // Comparisons and paths: `token == x`, `token::Token`, `key =~ /re/`.
    if matches!(byte_at(text, op.end()), Some(b'=' | b':' | b'~')) {
        return None;
    }
    if op.as_str() == ":" && byte_before(text, key_start) == Some(b':') {
        return None;
    }
    let (vm, quoted) = if let Some(m) = caps.name("dq") {
        (m, true)
    } else if let Some(m) = caps.name("sq") {
        (m, true)
    } else if let Some(m) = caps.name("eq") {
        (m, true)
    } else {
        (caps.name("bare")?, false)
    };
    let mut v = vm.as_str();
    if !quoted {
        // Calls, indexing, generics: `next_token()`, `os.environ[..]`,
        // `Option<String>`.
        if matches!(byte_at(text, vm.end()), Some(b'(' | b'[' | b'<' | b'{')) {
            return None;
        }
        // `sk-ant-...`: an elided example, judged before trimming the dots.
        if value::is_placeholder(v) {
            return None;
        }
        v = v.trim_end_matches(['.', ':', '!', '?']);
        if v.is_empty() || value::is_dotted_path(v) || value::looks_like_path(v) {
            return None;
        }
    } else if v.trim().len() < 3 || value::is_prose(v) {
        return None;
    }
    let class = value::classify_key(key_str);
    if class == KeyClass::None || inert(v) {
        return None;
    }
    let env_style = !quoted
        && op.as_str() == "="
        && kw.end() == op.start()
        && op.end() == vm.start()
        && key_str.bytes().any(|b| b.is_ascii_uppercase())
        && !key_str.bytes().any(|b| b.is_ascii_lowercase());
    let numeric = value::is_numeric(v);
    let strong = match class {
        KeyClass::Password => {
            if numeric {
                v.len() >= 4 && (quoted || env_style)
            } else {
                quoted || (env_style && v.len() >= 3) || value::looks_secretish(v)
            }
        }
        KeyClass::Secret => {
            !numeric && (quoted || (env_style && v.len() >= 3) || value::looks_secretish(v))
        }
        KeyClass::Weak | KeyClass::None => false,
    };
    let kind = if strong {
        if class == KeyClass::Password {
            PASSWORD
        } else {
            GENERIC_SECRET
        }
    } else if entropy::is_high_entropy(v) {
        HIGH_ENTROPY
    } else {
        return None;
    };
    Some(Hit {
        range: vm.start()..vm.start() + v.len(),
        kind,
    })
}
