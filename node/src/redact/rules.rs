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
pub(crate) const VAULT_TOKEN: &str = "vault-token";
pub(crate) const DATABRICKS_TOKEN: &str = "databricks-token";
pub(crate) const TWILIO_KEY: &str = "twilio-key";
pub(crate) const DISCORD_TOKEN: &str = "discord-token";
pub(crate) const TELEGRAM_TOKEN: &str = "telegram-token";
pub(crate) const AGE_SECRET_KEY: &str = "age-secret-key";
pub(crate) const PROVIDER_TOKEN: &str = "provider-token";

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
    VAULT_TOKEN,
    DATABRICKS_TOKEN,
    TWILIO_KEY,
    DISCORD_TOKEN,
    TELEGRAM_TOKEN,
    AGE_SECRET_KEY,
    PROVIDER_TOKEN,
];

/// The built-in rules, in application order.
pub(crate) const RULES: &[RuleDef] = &[
    // PEM private keys: the whole block, also JSON-escaped on one line
    // (`\n`, or `\\n` when escaped twice). Without an END line (output
    // cut by its producer), the BEGIN line plus the base64 and header
    // (`Proc-Type: ...`) lines that follow it.
    RuleDef {
        pattern: concat!(
            r"-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)-----END[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----",
            r"|-----BEGIN[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----",
            r"(?:(?:\r?\n|(?:\\+r)?\\+n)+(?:[A-Za-z][A-Za-z0-9-]*:[ \t][^\r\n\\]*|[A-Za-z0-9+/=]+))*",
        ),
        handler: private_key,
    },
    // The end of a key whose BEGIN line is gone (an older build cut the
    // text before redacting it, or the producer cut it): the END line and
    // the base64 lines before it. Any END still here has no BEGIN: whole
    // blocks were replaced by the rule above.
    RuleDef {
        pattern: r"-----END[ A-Z0-9_-]*PRIVATE KEY(?: BLOCK)?-----",
        handler: orphan_key_end,
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
        pattern: r"[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{24,}",
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
    // An AWS secret access key beside its key id in the same text,
    // whatever separates them (`AKIA… SECRET`, `AKIA…/SECRET`, a tab, the
    // console's CSV line `AKIA…,SECRET`, "access key AKIA… secret key
    // SECRET"). Starts at the marker the id's rule just left: a literal
    // found at memchr speed, where the id's own pattern starts with `A`,
    // so no second pass over every `A` of every text.
    RuleDef {
        pattern: r"\[REDACTED:aws-access-key\]",
        handler: aws_pair,
    },
    // Other well-known provider formats (facts from the providers' docs
    // and public scanner rule sets): every branch starts with a literal,
    // and the handler maps the branch to its kind.
    RuleDef {
        pattern: PROVIDER_PATTERNS[0],
        handler: provider,
    },
    RuleDef {
        pattern: PROVIDER_PATTERNS[1],
        handler: provider,
    },
    RuleDef {
        pattern: PROVIDER_PATTERNS[2],
        handler: provider,
    },
    // Formats whose fixed part is only two or three bytes get a pass each:
    // in the alternation above their short literals would make the
    // engine's prefilter useless for every branch.
    RuleDef {
        pattern: r"(?P<twilio>SK[0-9a-fA-F]{32})",
        handler: provider,
    },
    RuleDef {
        pattern: r"(?P<discord>[MNO][DTjz][A-Za-z0-9_-]{22,24}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40})",
        handler: provider,
    },
    RuleDef {
        pattern: r"(?P<telegram>:AA[A-Za-z0-9_-]{33})",
        handler: provider,
    },
    RuleDef {
        pattern: r"(?P<azure>Q~[A-Za-z0-9_~.-]{31,34})",
        handler: provider,
    },
    RuleDef {
        pattern: r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        handler: jwt,
    },
    // After an AWS-named key, flag or phrase, in any assignment form or
    // none: `aws_secret_access_key = S`, `aws configure set
    // aws_secret_access_key S`, `--aws-secret-access-key S`,
    // `"SecretAccessKey": "S"`, "secret (access) key S", "the AWS secret
    // is S". The value's exact shape (40 characters of base64 that mix
    // cases) is what keeps the loose separator honest.
    RuleDef {
        pattern: concat!(
            r#"(?:(?:aws|Aws|AWS)[_ -]?(?:secret|Secret|SECRET)(?:[_ -]?(?:access|Access|ACCESS))?(?:[_ -]?(?:key|Key|KEY))?"#,
            r#"|(?:secret|Secret|SECRET)[_ -]?(?:(?:access|Access|ACCESS)[_ -]?)?(?:key|Key|KEY))"#,
            r#"(?:[ \t"'`:=>,(){}\[\]]|\\+[nrt"]|is|was|now|set|to)+?(?P<v>[A-Za-z0-9/+]{40})"#,
        ),
        handler: aws_secret,
    },
    // Authorization / Proxy-Authorization headers, in HTTP, curl -H, JSON.
    RuleDef {
        pattern: r#"(?:authorization|Authorization|AUTHORIZATION)["']?[ \t]*[:=][ \t]*["']?(?:(?P<scheme>(?i-u:bearer|basic|token|digest|apikey))[ \t]+)?(?P<v>[^\s"',;\\]+)"#,
        handler: auth_header,
    },
    RuleDef {
        pattern: r"(?:bearer|Bearer|BEARER)[ \t]+(?P<v>[A-Za-z0-9._~+/\-]{16,}=*)",
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
    // mysql -pSECRET, -p"SECRET" (glued only; `-p` alone prompts); also
    // mysqldump, mysqladmin, mariadb-dump... Case variants are spelled out:
    // a case-insensitive literal set defeats the prefilter (measured 15x
    // slower).
    RuleDef {
        pattern: r#"(?:mysql|MYSQL|MySQL|mariadb|MARIADB|MariaDB)[^\n|;&]*?[ \t]-p(?P<v>"[^"\n]+"|'[^'\n]+'|[^\s"'\-][^\s"']*)"#,
        handler: mysql,
    },
    // sshpass -p SECRET (only among sshpass's own options).
    RuleDef {
        pattern: r#"sshpass(?P<opts>(?:[ \t]+[^\s|;&]+)*?)[ \t]+-p[ \t]*(?P<v>"[^"\n]*"|'[^'\n]*'|[^\s"']+)"#,
        handler: sshpass,
    },
    // docker login -p SECRET / --password SECRET, and the same for the
    // other registry clients.
    RuleDef {
        pattern: r#"login(?:[ \t][^\n|;&]*?)?[ \t](?:-p|--password)(?:[ \t]+|=)?(?P<v>"[^"\n]*"|'[^'\n]*'|[^\s"']+)"#,
        handler: registry_login,
    },
    // netrc: `machine host login user password SECRET`, on one line or
    // several (the handler looks for the `machine` entry).
    RuleDef {
        pattern: r#"password[ \t]+(?P<v>"[^"\n]*"|[^\s"]+)"#,
        handler: netrc,
    },
    // .pgpass lines: host:port:database:user:password (the handler checks
    // the host starts the line and the password ends it). Anchored on the
    // usual PostgreSQL and PgBouncer ports or `*`: a pattern starting at
    // any `:<digits>:` costs a regex start at every JSON number.
    RuleDef {
        pattern: r#":(?:5432|5433|5434|5435|6432|\*):[^:\s\\"'/]+:[^:\s\\"']+:(?P<v>[^\s"'\\]+)"#,
        handler: pgpass,
    },
    // Prose: "the password is X", "password for the admin user was X".
    RuleDef {
        pattern: r#"(?:password|Password|PASSWORD|passphrase|Passphrase|PASSPHRASE|passcode|Passcode)[ \t]+(?:for[ \t]+[^\n.,;:!?"'`]{1,40}?[ \t]+)?(?:is now|is set to|was set to|set to|changed to|reset to|will be|should be|would be|is|was)[ \t]*:?[ \t]+(?P<v>"[^"\n]{1,100}"|'[^'\n]{1,100}'|`[^`\n]{1,100}`|[^\s"'`]+)"#,
        handler: prose_password,
    },
    // Prose: "the API key is X", "my GitHub token was set to X", "the
    // access token for staging is X" (the phrasings of the password rule
    // above, after a key or token).
    RuleDef {
        pattern: r#"(?:key|Key|KEY|token|Token|TOKEN) (?:for[ \t]+[^\n.,;:!?"'`]{1,40}?[ \t]+)?(?:is now|is set to|was set to|set to|changed to|reset to|will be|should be|would be|is|was)[ \t]*:?[ \t]+(?P<v>"[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[^\s"'`]+)"#,
        handler: prose_key,
    },
    // Prose, the other way round: "X is the key", "X is my API token".
    // Starts at the keyword (a literal rarer than the phrase's `is `); the
    // handler reads the phrase and the word before it backwards.
    RuleDef {
        pattern: r"(?:key|Key|KEY|token|Token|TOKEN)",
        handler: prose_key_before,
    },
    // Generic key = value assignments (env, YAML, JSON, shell, code). The
    // pattern starts at the keyword (so the regex engine can use a literal
    // prefilter); the handler extends the key back over identifier bytes.
    // Keyword case variants are listed explicitly (lower, Capitalized,
    // UPPER) instead of `(?i)` for the same reason.
    RuleDef {
        pattern: r#"(?P<key>(?:pass|Pass|PASS|pwd|Pwd|PWD|secret|Secret|SECRET|token|Token|TOKEN|key|Key|KEY|auth|Auth|AUTH|cred|Cred|CRED)[A-Za-z0-9_.\-]*)(?:\\*["'])?[ \t]*(?P<op>:=|=>|=|:)[ \t]*(?:"(?P<dq>[^"\r\n]+)"|'(?P<sq>[^'\r\n]+)'|\\+"(?P<eq>[^"\\\r\n]+)\\+"|(?P<bare>[^\s"'`,;&()\[\]{}<>\\]+))"#,
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
/// meaning the match starts in the middle of a larger word. The letter of
/// a JSON escape (`\n`, `\t`, `\r` before a token in escaped text) ends
/// the word before instead.
fn glued_before(text: &str, i: usize) -> bool {
    let escaped = i >= 2
        && matches!(byte_before(text, i), Some(b'n' | b't' | b'r'))
        && byte_before(text, i - 1) == Some(b'\\');
    !escaped
        && matches!(byte_before(text, i), Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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
    // AWS documentation's example key ids (`AKIAIOSFODNN7EXAMPLE`,
    // `AKIAI44QH8DHBEXAMPLE`) are published placeholders that open nothing;
    // keeping them lets notes about docs and test fixtures stay searchable.
    // AWS never issues an id spelling EXAMPLE, so no real key is kept. (The
    // matching example secret keys end in EXAMPLEKEY and are kept as
    // placeholders by the assignment rules.)
    if m.as_str().ends_with("EXAMPLE") {
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
    // The value stands alone: not the middle of a longer run (a base64
    // blob, an identifier) nor glued to a word of the phrase
    // (`keyisABC…`).
    if matches!(byte_before(text, v.start()), Some(b) if b.is_ascii_alphanumeric())
        || matches!(byte_at(text, v.end()), Some(b'_' | b'-'))
    {
        return None;
    }
    // Followed by more of a run: a longer blob, unless the rest is the
    // words of a path (`SECRET/app`).
    if byte_at(text, v.end()).is_some_and(is_b64_byte) {
        let b = text.as_bytes();
        let mut end = v.end();
        while end < b.len() && is_b64_byte(b[end]) {
            end += 1;
        }
        if key_in_path(text, v.start()..end) != v.range() {
            return None;
        }
    }
    if !aws_secret_shaped(v.as_str()) {
        return None;
    }
    group(caps, "v", AWS_SECRET_KEY)
}

/// Bytes on each side of an AWS key id searched for its secret key.
const AWS_PAIR_WINDOW: usize = 160;

/// A byte of standard base64 (`=` included).
fn is_b64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// Does `v` look like an AWS secret access key: 40 characters of base64
/// without padding, upper and lower case letters and a digit or symbol
/// (a random key lacks one of those about once in 4,000; git SHAs, hex
/// digests and words never have them all), and not a placeholder (AWS's
/// documentation example `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY` is
/// one: it spells EXAMPLE, opens nothing, and is kept searchable).
fn aws_secret_shaped(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 40
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/'))
        && b.iter().any(u8::is_ascii_uppercase)
        && b.iter().any(u8::is_ascii_lowercase)
        && b.iter()
            .any(|&c| c.is_ascii_digit() || matches!(c, b'+' | b'/'))
        && !inert(v)
        && !v.split('/').all(word_shaped)
}

/// Is `s` made of words: lower or upper case letters, or capitalized
/// words run together (`VpcPeering`), digits only at the end. A path of
/// such words can be 40 characters long; a random key's pieces are not
/// shaped so.
fn word_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    let letters = b.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    if !b[letters..].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let word = &b[..letters];
    // Every capital but the last of a run of capitals starts a word and
    // is followed by a lower-case letter (`VpcPeering`), or they are all
    // capitals (`README`).
    word.iter().all(u8::is_ascii_uppercase)
        || word.iter().enumerate().all(|(i, c)| {
            !c.is_ascii_uppercase() || word.get(i + 1).is_some_and(u8::is_ascii_lowercase)
        })
}

/// The maximal base64 runs starting in `from..to` (a run may end past
/// `to`), with the letter of a JSON escape before one (`\n`, `\t`, `\r`)
/// left out of it. A run glued to a `_` or `-` is part of an identifier.
fn b64_runs(text: &str, from: usize, to: usize) -> impl Iterator<Item = Range<usize>> + '_ {
    let b = text.as_bytes();
    let mut i = from;
    std::iter::from_fn(move || {
        while i < to.min(b.len()) {
            if !is_b64_byte(b[i]) {
                i += 1;
                continue;
            }
            let mut start = i;
            let mut end = i;
            while end < b.len() && is_b64_byte(b[end]) {
                end += 1;
            }
            i = end;
            if start > 0 && b[start - 1] == b'\\' && matches!(b[start], b'n' | b't' | b'r') {
                start += 1;
            }
            let glued = matches!(byte_before(text, start), Some(b'_' | b'-'))
                || matches!(byte_at(text, end), Some(b'_' | b'-'));
            if !glued {
                return Some(start..end);
            }
        }
        None
    })
}

/// A base64 run that is a 40-character key and the words of a path
/// around it (`SECRET/app`, `dev/SECRET`, the key written into a
/// project's or a file's name): the key alone; any other run as it is.
fn key_in_path(text: &str, r: Range<usize>) -> Range<usize> {
    let words = |a: usize, b: usize| {
        text.get(a..b)
            .is_some_and(|s| s.split('/').all(word_shaped))
    };
    if r.len() > 41 && byte_at(text, r.start + 40) == Some(b'/') && words(r.start + 41, r.end) {
        r.start..r.start + 40
    } else if r.len() > 41 && byte_at(text, r.end - 41) == Some(b'/') && words(r.start, r.end - 41)
    {
        r.end - 40..r.end
    } else {
        r
    }
}

/// An AWS key id (redacted already: its marker): the secret key written
/// beside it, the first after it within [`AWS_PAIR_WINDOW`] bytes, else
/// the last before it. A secret key's marker met first on either side
/// is that secret, redacted already: nothing more is looked for past it
/// (else a second pass would take the next key-shaped run for the
/// secret).
fn aws_pair(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let shaped = |r: &Range<usize>| text.get(r.clone()).is_some_and(aws_secret_shaped);
    let b = text.as_bytes();
    let marker = [value::MARKER_PREFIX, AWS_SECRET_KEY, "]"].concat();
    let marker = marker.as_bytes();
    // `AKIA…/SECRET`: the slash separates.
    let after = m.end() + usize::from(byte_at(text, m.end()) == Some(b'/'));
    let window_end = (m.end() + AWS_PAIR_WINDOW).min(text.len());
    let marker_after = place_in(b, after..window_end, marker, false);
    let range = match b64_runs(text, after, marker_after.unwrap_or(window_end))
        .map(|r| key_in_path(text, r))
        .find(shaped)
    {
        Some(r) => r,
        None if marker_after.is_some() => return None,
        None => {
            let window_start = m.start().saturating_sub(AWS_PAIR_WINDOW);
            let marker_before =
                place_in(b, window_start..m.start(), marker, true).map(|i| i + marker.len());
            b64_runs(text, marker_before.unwrap_or(window_start), m.start())
                .map(|r| key_in_path(text, r))
                .filter(shaped)
                .last()?
        }
    };
    // Redacted by the keyed rule already, or inside a marker: nothing here.
    let s = text.get(range.clone())?;
    if value::is_marker(s) {
        return None;
    }
    Some(Hit {
        range,
        kind: AWS_SECRET_KEY,
    })
}

/// Where `needle` first (with `last`, last) stands in `hay[range]`, as an
/// offset into `hay`.
fn place_in(hay: &[u8], range: Range<usize>, needle: &[u8], last: bool) -> Option<usize> {
    let mut at = hay.get(range.clone())?.windows(needle.len());
    let i = match last {
        true => at.rposition(|w| w == needle),
        false => at.position(|w| w == needle),
    }?;
    Some(range.start + i)
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
    if glued_before(text, m.start()) {
        return None;
    }
    password_value(text, caps)
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
    } else if entropy::is_high_entropy(v) && !value::is_labelled_digest(v) {
        HIGH_ENTROPY
    } else {
        return None;
    };
    Some(Hit {
        range: vm.start()..vm.start() + v.len(),
        kind,
    })
}

/// The provider formats, in groups of alternations that keep the regex
/// engine's literal prefilter fast (one alternation of every format was
/// measured several times slower than these few passes). Every branch
/// starts with a literal; each named group is listed in [`BRANCHES`].
const PROVIDER_PATTERNS: &[&str] = &[
    concat!(
        r"(?P<vault>hv[sb]\.[A-Za-z0-9_-]{24,})",
        r"|(?P<databricks>dapi[a-f0-9]{32}(?:-[0-9])?)",
        r"|(?P<age>AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})",
        r"|(?P<slack>xapp-[0-9]-[A-Za-z0-9-]{20,}|xoxe(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{50,})",
        r"|(?P<gitlab>gl(?:cbt|ft|imt|agent|oas|soat|ffct)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20})",
        r"|(?P<huggingface>api_org_[A-Za-z]{34})",
        r"|(?P<google>GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[A-Za-z0-9_-]{30,}|1//0[A-Za-z0-9_-]{40,})",
        r"|(?P<atlas>\.atlasv1\.[A-Za-z0-9_=-]{60,70})",
        r"|(?P<token>do[opr]_v1_[a-f0-9]{64}",
        r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        r"|PMAK-[a-f0-9]{24}-[a-f0-9]{34}",
        r"|pul-[a-f0-9]{40}",
        r"|sbp_[a-f0-9]{40}",
        r"|bkua_[a-f0-9]{40}",
        r"|v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        r"|CCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}",
        r"|dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}",
        r"|glc_[A-Za-z0-9+/]{32,}={0,3}",
        r"|sntry[su]_[A-Za-z0-9+/=_]{40,}",
        r"|HRKU-[A-Za-z0-9_-]{58,}",
        r"|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}",
        r"|tskey-(?:auth|api|client|webhook|scim)-[A-Za-z0-9_-]{20,}",
        r"|secret_[A-Za-z0-9]{43}",
        r"|pplx-[A-Za-z0-9]{48}",
        r"|xai-[A-Za-z0-9]{80}",
        r"|LTAI[A-Za-z0-9]{20}",
        r"|AKCp[A-Za-z0-9]{69}",
        r"|pnu_[A-Za-z0-9]{36}",
        r"|fio-u-[A-Za-z0-9_=-]{64})",
    ),
    concat!(
        r"(?P<token>rubygems_[a-f0-9]{48}",
        r"|sk-(?:or-v1-)?[a-f0-9]{32,64}",
        r"|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        r"|shippo_(?:live|test)_[a-fA-F0-9]{40}",
        r"|FLWSECK(?:_TEST)?-[a-hA-H0-9]{32}-X",
        r"|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        r"|lin_api_[A-Za-z0-9]{40}",
        r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
        r"|fo1_[A-Za-z0-9_-]{43}",
        r"|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}",
        r"|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,60}",
        r"|gsk_[A-Za-z0-9]{52}",
        r"|ATATT3[A-Za-z0-9_=-]{50,}",
        r"|ATBB[A-Za-z0-9_=.-]{32}",
        r"|CLOJARS_[A-Za-z0-9]{60}",
        r"|dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,})",
    ),
    concat!(
        r"(?P<token>ntn_[0-9]{11}[A-Za-z0-9]{35}",
        r"|r8_[A-Za-z0-9]{37}",
        r"|dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}",
        r"|NRAK-[A-Z0-9]{27}",
        r"|ops_eyJ[A-Za-z0-9+/]{100,}={0,3}",
        r"|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        r"|sha256~[A-Za-z0-9_-]{43}",
        r"|rdme_[a-z0-9]{70}",
        r"|EZ[AT]K[A-Za-z0-9]{54}",
        r"|duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        r"|figd_[A-Za-z0-9_-]{40}",
        r"|nfp_[A-Za-z0-9]{36}",
        r"|sk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,})",
    ),
];

/// What a provider token must satisfy beyond its pattern.
#[derive(Clone, Copy)]
enum Check {
    /// Letters and digits both (random tokens; rejects words and runs).
    Mixed,
    /// Digits, upper- and lower-case letters (random base62).
    MixedCase,
    /// The pattern is specific enough.
    Any,
    /// The match is the fixed middle of the token: the function returns
    /// where the token starts, or `None` when the part before is wrong.
    Back(fn(&str, usize) -> Option<usize>),
}

/// One named group of the provider patterns.
struct Branch {
    group: &'static str,
    kind: &'static str,
    check: Check,
}

const BRANCHES: &[Branch] = &[
    Branch {
        group: "vault",
        kind: VAULT_TOKEN,
        check: Check::Mixed,
    },
    Branch {
        group: "databricks",
        kind: DATABRICKS_TOKEN,
        check: Check::Mixed,
    },
    Branch {
        group: "twilio",
        kind: TWILIO_KEY,
        check: Check::Mixed,
    },
    Branch {
        group: "discord",
        kind: DISCORD_TOKEN,
        check: Check::MixedCase,
    },
    Branch {
        group: "telegram",
        kind: TELEGRAM_TOKEN,
        check: Check::Back(telegram_start),
    },
    Branch {
        group: "age",
        kind: AGE_SECRET_KEY,
        check: Check::Any,
    },
    Branch {
        group: "slack",
        kind: SLACK_TOKEN,
        check: Check::Mixed,
    },
    Branch {
        group: "gitlab",
        kind: GITLAB_TOKEN,
        check: Check::Mixed,
    },
    Branch {
        group: "huggingface",
        kind: HUGGINGFACE_TOKEN,
        check: Check::Any,
    },
    Branch {
        group: "google",
        kind: PROVIDER_TOKEN,
        check: Check::Mixed,
    },
    Branch {
        group: "atlas",
        kind: PROVIDER_TOKEN,
        check: Check::Back(atlas_start),
    },
    Branch {
        group: "azure",
        kind: PROVIDER_TOKEN,
        check: Check::Back(azure_start),
    },
    Branch {
        group: "token",
        kind: PROVIDER_TOKEN,
        check: Check::Mixed,
    },
];

/// True when the byte before `i` continues a token or a base64 run
/// (`+`, `/` included), so a match there is the inside of something else.
fn glued_b64_before(text: &str, i: usize) -> bool {
    match byte_before(text, i) {
        // A `/` ends a directory of a path (`/home/dev/<token>`) as well as
        // it continues a base64 run: a path when what runs back from it is
        // words (`home/dev/`), a run when it is not.
        Some(b'/') => {
            let b = text.as_bytes();
            let from = i.saturating_sub(64);
            let mut j = i - 1;
            while j > from && is_b64_byte(b[j - 1]) {
                j -= 1;
            }
            let run = text.get(j..i - 1).unwrap_or("");
            !run.split('/').all(word_shaped)
        }
        Some(b) => b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+'),
        None => false,
    }
}

fn glued_b64_after(text: &str, i: usize) -> bool {
    matches!(byte_at(text, i), Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+'))
}

/// Telegram bot token `<bot id>:AA<33>`: 5 to 16 digits before the colon.
fn telegram_start(text: &str, colon: usize) -> Option<usize> {
    let digits = text
        .get(..colon)?
        .bytes()
        .rev()
        .take_while(u8::is_ascii_digit)
        .count();
    (5..=16).contains(&digits).then(|| colon - digits)
}

/// Terraform Cloud token `<14 alnum>.atlasv1.<60-70>`.
fn atlas_start(text: &str, dot: usize) -> Option<usize> {
    let start = dot.checked_sub(14)?;
    text.get(start..dot)?
        .bytes()
        .all(|b| b.is_ascii_alphanumeric())
        .then_some(start)
}

/// Entra ID (Azure AD) client secret `<3 chars><digit>Q~<31-34>`.
fn azure_start(text: &str, q: usize) -> Option<usize> {
    let start = q.checked_sub(4)?;
    let head = text.get(start..q)?.as_bytes();
    (head[..3]
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.'))
        && head[3].is_ascii_digit())
    .then_some(start)
}

fn provider(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let (branch, m) = BRANCHES
        .iter()
        .find_map(|b| caps.name(b.group).map(|m| (b, m)))?;
    let s = m.as_str();
    let start = match branch.check {
        Check::Back(f) => f(text, m.start())?,
        Check::Mixed if !(has_digit(s) && s.bytes().any(|b| b.is_ascii_alphabetic())) => {
            return None;
        }
        Check::MixedCase
            if !(has_digit(s)
                && s.bytes().any(|b| b.is_ascii_uppercase())
                && s.bytes().any(|b| b.is_ascii_lowercase())) =>
        {
            return None;
        }
        _ => m.start(),
    };
    // A Telegram token is used glued to `bot` in API URLs.
    let bot_url =
        branch.kind == TELEGRAM_TOKEN && text.get(..start).is_some_and(|h| h.ends_with("/bot"));
    if (glued_b64_before(text, start) && !bot_url) || glued_b64_after(text, m.end()) {
        return None;
    }
    Some(Hit {
        range: start..m.end(),
        kind: branch.kind,
    })
}

/// Walks back from `end` over one line separator: a newline (`\n`,
/// `\r\n`) or its JSON escape (`\n`, `\r\n`, escaped any number of times).
/// Returns where the separator starts, or `None` when there is none.
fn separator_before(text: &str, end: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = end;
    if i > 0 && b[i - 1] == b'\n' {
        i -= 1;
        if i > 0 && b[i - 1] == b'\r' {
            i -= 1;
        }
        return Some(i);
    }
    let escaped = |i: usize, letter: u8| -> Option<usize> {
        if i >= 2 && b[i - 1] == letter && b[i - 2] == b'\\' {
            let mut j = i - 1;
            while j > 0 && b[j - 1] == b'\\' {
                j -= 1;
            }
            Some(j)
        } else {
            None
        }
    };
    i = escaped(i, b'n')?;
    Some(escaped(i, b'r').unwrap_or(i))
}

/// `-----END ... PRIVATE KEY-----` without its BEGIN: the END line and the
/// base64 lines right before it.
fn orphan_key_end(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let b = text.as_bytes();
    let is_body = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
    let mut start = m.start();
    let mut body = 0usize;
    while let Some(sep) = separator_before(text, start) {
        let mut i = sep;
        while i > 0 && is_body(b[i - 1]) {
            i -= 1;
        }
        // The letter of an escaped line break (`\n`) is not key material.
        if i < sep && matches!(b[i], b'n' | b'r') && i > 0 && b[i - 1] == b'\\' {
            i += 1;
        }
        if i == sep {
            break;
        }
        body += sep - i;
        start = i;
    }
    // A bare END marker in prose ("files end with -----END ... -----") has
    // no key material: leave it.
    if body < 16 {
        return None;
    }
    Some(Hit {
        range: start..m.end(),
        kind: PRIVATE_KEY,
    })
}

/// The value group, without one pair of quotes (`"`, `'` or backticks).
fn unquoted_value(caps: &Captures<'_>) -> Option<(Range<usize>, bool)> {
    let vm = caps.name("v")?;
    let v = vm.as_str();
    let b = v.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'"' | b'\'' | b'`') && b[b.len() - 1] == b[0] {
        Some((vm.start() + 1..vm.end() - 1, true))
    } else {
        Some((vm.range(), false))
    }
}

/// A password value in a command or file position: anything but empty,
/// an option, a reference or a placeholder.
fn password_value(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let (mut range, quoted) = unquoted_value(caps)?;
    let mut v = text.get(range.clone())?;
    if !quoted {
        // In JSON-escaped text the value ends at the escaped line break or
        // quote that follows it.
        if let Some(i) = ["\\n", "\\r", "\\t", "\\\""]
            .iter()
            .filter_map(|e| v.find(e))
            .min()
        {
            v = &v[..i];
            range.end = range.start + i;
        }
    }
    if v.is_empty() || v.starts_with('-') || inert(v) {
        return None;
    }
    Some(Hit {
        range,
        kind: PASSWORD,
    })
}

fn sshpass(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    // Everything between `sshpass` and `-p` must be sshpass's own options
    // (`-v`, `-P prompt`, ...), not the wrapped command's (`ssh -p 2222`).
    let opts = caps.name("opts")?.as_str();
    let mut takes_value = false;
    for word in opts.split_whitespace() {
        if takes_value {
            takes_value = false;
        } else if word.starts_with('-') {
            takes_value = matches!(word, "-f" | "-d" | "-P");
        } else {
            return None;
        }
    }
    password_value(text, caps)
}

/// Commands whose `login` subcommand takes `-p`/`--password`.
const REGISTRY_CLIENTS: &[&str] = &[
    "docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "finch",
];

fn registry_login(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if !word_start(text, m.start()) {
        return None;
    }
    // `login` is a subcommand of a registry client in the same command.
    let cmd_start = text
        .get(..m.start())?
        .rfind(['\n', '|', ';', '&'])
        .map_or(0, |j| j + 1);
    let cmd = text.get(cmd_start..m.start())?;
    let client = cmd.split_whitespace().any(|w| {
        // `/usr/bin/docker`, `"docker` (inside a JSON string): the name.
        let name = w
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .next()
            .unwrap_or(w);
        REGISTRY_CLIENTS.contains(&name)
    });
    if !client {
        return None;
    }
    password_value(text, caps)
}

/// True when a word starts at `i`: at the start, after whitespace, a
/// quote, a `/` (a file named so), or an escaped line break (`\n`).
fn word_start(text: &str, i: usize) -> bool {
    match byte_before(text, i) {
        None => true,
        Some(b) if b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`' | b'(' | b'/') => {
            true
        }
        Some(b'n') => i >= 2 && byte_before(text, i - 1) == Some(b'\\'),
        Some(_) => false,
    }
}

/// Start of the last `limit` lines before `i` (real or JSON-escaped line
/// breaks), as a byte offset.
fn lines_back(text: &str, i: usize, limit: usize) -> usize {
    let b = text.as_bytes();
    let mut seen = 0;
    let mut j = i;
    let floor = i.saturating_sub(400);
    while j > floor {
        j -= 1;
        let escaped_n = b[j] == b'n' && j > 0 && b[j - 1] == b'\\';
        if b[j] == b'\n' || escaped_n {
            seen += 1;
            if seen > limit {
                return j + 1;
            }
        }
    }
    j
}

fn netrc(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    // `password` must be a whole word.
    if !word_start(text, m.start()) {
        return None;
    }
    // A `machine <host>` (or `default`) entry within the last few lines.
    let from = lines_back(text, m.start(), 4);
    let window = text.get(from..m.start())?;
    let entry = window
        .match_indices("machine")
        .chain(window.match_indices("default"))
        .any(|(i, w)| {
            let after = window.get(i + w.len()..).unwrap_or("");
            word_start(window, i) && (w == "default" || after.starts_with([' ', '\t']))
        });
    if !entry {
        return None;
    }
    password_value(text, caps)
}

fn pgpass(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    let b = text.as_bytes();
    // The host field runs back to the start of the line.
    let mut start = m.start();
    while start > 0
        && (b[start - 1].is_ascii_alphanumeric()
            || matches!(b[start - 1], b'.' | b'-' | b'_' | b'*'))
    {
        start -= 1;
    }
    let host = text.get(start..m.start())?;
    let line_start = start == 0
        || matches!(
            b[start - 1],
            b'\n' | b'"' | b'\'' | b' ' | b'\t' | b'>' | b'/'
        )
        || separator_before(text, start).is_some();
    let hostish =
        host == "*" || host.bytes().any(|c| c.is_ascii_alphabetic()) || host.contains('.');
    if host.is_empty() || !line_start || !hostish {
        return None;
    }
    // The password ends the line.
    let v = caps.name("v")?;
    let line_end = match byte_at(text, v.end()) {
        None | Some(b'\n' | b'\r' | b'"' | b'\'' | b' ' | b'\t') => true,
        Some(b'\\') => v.end() + 2 <= text.len() && separator_before(text, v.end() + 2).is_some(),
        _ => false,
    };
    let value = v.as_str();
    if !line_end || inert(value) || value::is_numeric(value) || value::looks_like_path(value) {
        return None;
    }
    group(caps, "v", PASSWORD)
}

/// Words that follow "the password is" in prose about a password rather
/// than in a sentence giving it.
const PROSE_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "not",
    "now",
    "no",
    "too",
    "very",
    "still",
    "also",
    "only",
    "just",
    "being",
    "incorrect",
    "wrong",
    "invalid",
    "valid",
    "correct",
    "required",
    "missing",
    "empty",
    "blank",
    "set",
    "unset",
    "stored",
    "saved",
    "kept",
    "sent",
    "used",
    "needed",
    "hashed",
    "encrypted",
    "salted",
    "masked",
    "hidden",
    "shown",
    "visible",
    "expired",
    "changed",
    "reset",
    "updated",
    "same",
    "different",
    "case",
    "weak",
    "strong",
    "long",
    "short",
    "ok",
    "fine",
    "good",
    "bad",
    "in",
    "on",
    "at",
    "for",
    "of",
    "to",
    "from",
    "by",
    "with",
    "what",
    "whatever",
    "there",
    "here",
    "generated",
    "random",
    "provided",
    "given",
    "known",
    "unknown",
    "optional",
    "mandatory",
    "read",
    "taken",
    "passed",
    "configured",
    "prompted",
    "asked",
    "typed",
    "entered",
    "accepted",
    "rejected",
    "ignored",
    "checked",
    "verified",
    "compared",
    "echoed",
    "printed",
    "logged",
    "leaked",
    "exposed",
    "secret",
    "secure",
    "insecure",
    "safe",
    "unsafe",
    "longer",
    "shorter",
    "it",
    "this",
    "that",
    "its",
    "your",
    "my",
    "our",
    "their",
    "his",
    "her",
    "something",
];

fn prose_password(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    if glued_before(text, m.start()) {
        return None;
    }
    let (mut range, quoted) = unquoted_value(caps)?;
    let mut v = text.get(range.clone())?;
    if quoted {
        if v.trim().len() < 3 || value::is_prose(v) || inert(v) {
            return None;
        }
    } else {
        v = v.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
        range.end = range.start + v.len();
        let lower = v.to_ascii_lowercase();
        if v.len() < 4
            || v.starts_with(['<', '[', '{', '('])
            || PROSE_WORDS.contains(&lower.as_str())
            || inert(v)
            || value::looks_like_path(v)
        {
            return None;
        }
    }
    Some(Hit {
        range,
        kind: PASSWORD,
    })
}

/// The class of the key or token named by the words ending at `end`:
/// the identifier there (`api_key`, `GITHUB_TOKEN`), with the word before
/// it when the identifier is the bare keyword ("API key", "GitHub
/// token", "cache key"), and up to two words for "the new API key".
fn named_key_class(text: &str, end: usize, words: usize) -> KeyClass {
    let start = ident_start(text, end);
    let ident = text.get(start..end).unwrap_or("");
    let mut name = ident.to_owned();
    let bare = ident.eq_ignore_ascii_case("key") || ident.eq_ignore_ascii_case("token");
    if bare {
        let head = text.get(..start).unwrap_or("");
        let before: Vec<&str> = head
            .split([' ', '\t'])
            .rev()
            .skip(1)
            .take(words)
            .take_while(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric()))
            .collect();
        for w in before {
            name = format!("{w}_{name}");
        }
    }
    value::classify_key(&name)
}

/// Whether `v`, said to be the key or token of this class in prose, is
/// the secret itself: a secret-looking value for a secret's name, a
/// random-looking one for a name that only holds `key`, nothing for
/// public keys, cache keys and counts.
fn prose_key_value(class: KeyClass, v: &str, quoted: bool) -> bool {
    if v.len() < 8 || inert(v) || value::looks_like_path(v) || value::is_labelled_digest(v) {
        return false;
    }
    match class {
        KeyClass::Password | KeyClass::Secret => {
            value::looks_secretish(v)
                || (quoted && !value::is_prose(v) && entropy::is_high_entropy(v))
        }
        KeyClass::Weak => entropy::is_high_entropy(v) && !entropy::is_hex(v),
        KeyClass::None => false,
    }
}

fn prose_key(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    // The keyword ends its word: `key` of `keyboard` never matches (the
    // pattern wants a space after it).
    let kw_end = m.start() + m.as_str().find(' ')?;
    let class = named_key_class(text, kw_end, 2);
    let (mut range, quoted) = unquoted_value(caps)?;
    let mut v = text.get(range.clone())?;
    if !quoted {
        v = v.trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
        range.end = range.start + v.len();
        if PROSE_WORDS.contains(&v.to_ascii_lowercase().as_str()) {
            return None;
        }
    }
    if !prose_key_value(class, v, quoted) {
        return None;
    }
    Some(Hit {
        range,
        kind: GENERIC_SECRET,
    })
}

fn prose_key_before(text: &str, caps: &Captures<'_>) -> Option<Hit> {
    let m = caps.get(0)?;
    // The keyword ends its word (`keyboard`, `tokens`, `key_id` are not it).
    if glued_after_alnum(text, m.end()) || matches!(byte_at(text, m.end()), Some(b'_' | b'-')) {
        return None;
    }
    // Backwards: " is the " (or my, our, your), up to two words, the keyword.
    let mut rest = text.get(..m.start())?.strip_suffix(' ')?;
    let mut phrase = false;
    for _ in 0..3 {
        let (before, word) = rest.rsplit_once(' ')?;
        if matches!(word, "the" | "my" | "our" | "your") {
            rest = before.strip_suffix("is")?.strip_suffix([' ', '\t'])?;
            phrase = true;
            break;
        }
        if word.is_empty() || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
            return None;
        }
        rest = before;
    }
    if !phrase {
        return None;
    }
    let class = named_key_class(text, m.end(), 2);
    // The value: the word before the phrase, back to a space or what
    // ends a word in JSON, code or a path (`"value":"X is the key"`),
    // without its quotes.
    let rest = rest.trim_end_matches(['"', '\'', '`', ',', ')']);
    let start = rest
        .rfind(|c: char| c.is_whitespace() || "\"'`(){}[]<>,;:=/\\".contains(c))
        .map_or(0, |i| i + 1);
    let v = rest.get(start..)?;
    let quoted = matches!(byte_before(text, start), Some(b'"' | b'\'' | b'`'));
    if v.is_empty() || !prose_key_value(class, v, quoted) {
        return None;
    }
    Some(Hit {
        range: start..start + v.len(),
        kind: GENERIC_SECRET,
    })
}

/// Every pattern whose matches go to the provider handler.
#[cfg(test)]
pub(crate) fn provider_patterns() -> Vec<&'static str> {
    RULES
        .iter()
        .map(|r| r.pattern)
        .filter(|p| {
            BRANCHES
                .iter()
                .any(|b| p.contains(&format!("(?P<{}>", b.group)))
        })
        .collect()
}

#[cfg(test)]
pub(crate) fn provider_branch_count() -> usize {
    BRANCHES.len()
}

#[cfg(test)]
pub(crate) fn provider_branch_kind(group: &str) -> Option<&'static str> {
    BRANCHES.iter().find(|b| b.group == group).map(|b| b.kind)
}
