//! Secret redaction, and what else must not be indexed as said: the
//! [`recalled`] fences around memory cairn itself handed an agent.
//!
//! Every secret found in record text is replaced by `[REDACTED:<kind>]`,
//! where `<kind>` is one of [`KINDS`]. Keys, operators, URL schemes, users
//! and hosts, and header names stay in place so the surrounding text remains
//! searchable (`API_KEY=[REDACTED:generic-secret]`,
//! `postgres://app:[REDACTED:url-credentials]@db.internal:5432/app`).
//!
//! Redaction is idempotent (`redact(redact(x)) == redact(x)`): markers are
//! never matched again.
//!
//! Rules compile lazily: a built-in rule compiles the first time a text
//! holds one of the literals every match of it starts with (worked out
//! ahead of time in `starts`, checked against the regex engine by a test),
//! and is skipped for a text without them, where it cannot match. The
//! output is the same as running every rule. Text with no match is
//! returned borrowed. This module is pure: no I/O and no logging.
//!
//! Decisions (see `value.rs` for the heuristics):
//! - Placeholders (`changeme`, `xxxx`, `<your-api-key>`, `your-token-here`,
//!   `password`) and references (`$TOKEN`, `${API_KEY}`,
//!   `{{ secrets.TOKEN }}`, `process.env.X`) are kept.
//! - Git SHAs, UUIDs and hex digests in prose are kept: only values in
//!   secret-shaped positions (after a secret-ish key) are judged on entropy.
//! - Base64 in `data:image/...;base64,` URLs is kept: no rule looks at it
//!   (it is neither after a secret-ish key nor in a provider format).
//! - An AWS secret access key has no format of its own (40 characters of
//!   base64): it is found beside its key id (`AKIA…`/`ASIA…`, within 160
//!   bytes either side, whatever separates them) or after an AWS-named key,
//!   flag or phrase, and only in its exact shape (mixed case, a digit or
//!   symbol, a run of exactly 40), so git SHAs, hex checksums, UUIDs,
//!   longer base64 blobs and paths beside an id are kept.
//! - AWS's documentation example keys (`AKIAIOSFODNN7EXAMPLE`,
//!   `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`) are kept, paired or not:
//!   published placeholders that open nothing, searched for in notes about
//!   docs and fixtures; AWS never issues a key spelling EXAMPLE.
//! - Keys and tokens given in prose ("the API key is X", "X is my access
//!   token") are redacted when the value looks like a secret for what the
//!   words name: a secret-looking value after API/access/secret/GitHub...
//!   key or token, a random-looking one after a bare "key", nothing after
//!   public, cache, sort or primary keys.
//! - Ids are redacted as ids ([`fields`]): a redacted session id keeps a
//!   suffix that keeps it stable and distinct.

mod entropy;
pub mod fields;
pub mod recalled;
mod rules;
pub mod scope;
mod starts;
mod value;

#[cfg(test)]
mod aws_prose_tests;
#[cfg(test)]
mod format_tests;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use regex::Regex;
use regex_automata::util::prefilter::Prefilter;

pub use rules::KINDS;

/// Redaction counts per secret kind.
pub type RedactionCounts = BTreeMap<&'static str, u64>;

/// Errors building a [`Redactor`] with user-configured patterns.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// A user pattern is not a valid regex.
    #[error("redaction pattern #{index} is not a valid regex: {source}")]
    BadPattern {
        /// Position of the pattern in the list given.
        index: usize,
        /// The regex compiler's complaint.
        #[source]
        source: regex::Error,
    },
    /// A user pattern matches the empty string, which would redact nothing
    /// useful and insert markers everywhere.
    #[error("redaction pattern #{index} matches the empty string")]
    MatchesEmpty {
        /// Position of the pattern in the list given.
        index: usize,
    },
}

/// What to do with one match of a compiled rule.
enum Action {
    /// A built-in rule's handler.
    Builtin(rules::Handler),
    /// A user pattern: replace the `secret` group, else group 1, else the
    /// whole match, as kind `custom`.
    Custom,
}

struct Compiled {
    /// The pattern, compiled on first need ([`Compiled::regex`]).
    pattern: &'static str,
    re: OnceLock<Regex>,
    /// Where the rule's matches may start.
    starts: Starts,
    action: Action,
}

/// Where a rule's matches may start.
enum Starts {
    /// Anywhere: no literal every match starts with could be worked out.
    Anywhere,
    /// At one of these literals (from the table of `redact::starts`),
    /// looked for one by one in the first [`SHORT_SEARCHES`] short texts
    /// and else with the regex engine's prefilter, built on first need
    /// (the count of texts searched so far beside it): building the
    /// prefilters of every rule took about 2 ms, which a process that
    /// redacts only a few paths (a `cairn search` page) need not pay,
    /// while a process that redacts many texts is faster with them.
    Literals(
        &'static [&'static [u8]],
        OnceLock<Option<Prefilter>>,
        AtomicU32,
    ),
    /// At the literals the pattern's own prefix gives, worked out on first
    /// need: a rule the table was not written for.
    FromPattern(OnceLock<Option<Prefilter>>),
}

/// Texts up to this long are searched for a rule's literals one literal
/// at a time while the rule has seen fewer than [`SHORT_SEARCHES`].
const SHORT_TEXT: usize = 512;
/// Short texts a rule searches one literal at a time before it builds
/// its prefilter.
const SHORT_SEARCHES: u32 = 64;

impl Compiled {
    /// A built-in rule, to be compiled when first needed, with the
    /// literals its matches start with from the table worked out ahead of
    /// time (`redact::starts`), or from the pattern itself when the table
    /// was not written for this very pattern.
    fn lazy(pattern: &'static str, table: Option<&starts::Entry>, action: Action) -> Compiled {
        let starts = match table {
            Some(&(hash, Some(lits)))
                if hash == starts::pattern_hash(pattern) && !lits.is_empty() =>
            {
                Starts::Literals(lits, OnceLock::new(), AtomicU32::new(0))
            }
            Some(&(hash, _)) if hash == starts::pattern_hash(pattern) => Starts::Anywhere,
            _ => Starts::FromPattern(OnceLock::new()),
        };
        Compiled {
            pattern,
            re: OnceLock::new(),
            starts,
            action,
        }
    }

    /// The rule's regex, compiled now if it was not yet.
    fn regex(&self) -> &Regex {
        self.re.get_or_init(|| match Regex::new(self.pattern) {
            Ok(re) => re,
            // The built-in patterns are constants covered by tests (user
            // patterns are compiled when given); failing to compile one is
            // a programming error, not an input error.
            Err(e) => panic!("built-in redaction rule failed to compile: {e}"),
        })
    }

    /// Where in `text` the rule's search starts: `None` when the text
    /// holds none of the literals its matches start with (so no match),
    /// else at the first of them. Once compiled, the rule searches from the
    /// start: its regex skips to candidates as fast on its own.
    fn first_start(&self, text: &str) -> Option<usize> {
        if self.re.get().is_some() {
            return Some(0);
        }
        let hay = text.as_bytes();
        let prefilter = match &self.starts {
            Starts::Anywhere => return Some(0),
            Starts::Literals(lits, built, searched) => match built.get() {
                Some(p) => p,
                None if hay.len() <= SHORT_TEXT
                    && searched.fetch_add(1, Ordering::Relaxed) < SHORT_SEARCHES =>
                {
                    return lits
                        .iter()
                        .filter_map(|l| memchr::memmem::find(hay, l))
                        .min();
                }
                None => built
                    .get_or_init(|| Prefilter::new(regex_automata::MatchKind::LeftmostFirst, lits)),
            },
            Starts::FromPattern(built) => built.get_or_init(|| starts_of(self.pattern)),
        };
        match prefilter {
            Some(p) => p
                .find(hay, regex_automata::Span::from(0..hay.len()))
                .map(|m| m.start),
            None => Some(0),
        }
    }

    /// Whether the rule's matches may start anywhere (its search cannot
    /// skip to literals), working its literals out if need be.
    #[cfg(test)]
    fn starts_anywhere(&self) -> bool {
        match &self.starts {
            Starts::Anywhere => true,
            Starts::Literals(..) => false,
            Starts::FromPattern(built) => built.get_or_init(|| starts_of(self.pattern)).is_none(),
        }
    }
}

/// A search for the literals every match of `pattern` starts with, when
/// the regex parser can tell them (the prefilter the regex engine builds
/// from the same literals), worked out now: for a rule the table of
/// `redact::starts` was not written for.
fn starts_of(pattern: &str) -> Option<Prefilter> {
    // The parser's defaults are the regex crate's (Unicode, UTF-8).
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    Prefilter::from_hir_prefix(regex_automata::MatchKind::LeftmostFirst, &hir)
}

/// Replaces secrets in text with `[REDACTED:<kind>]` markers. Cloning is
/// cheap: the compiled rules are shared.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Rules,
}

/// The compiled rules of a [`Redactor`].
#[derive(Debug, Clone)]
enum Rules {
    /// The built-in rules, compiled on first use and shared by the process.
    Builtin,
    /// Built-in plus user patterns, compiled (and checked) when made, and
    /// their [`Redactor::rules_id`] once asked (shared by clones).
    Custom(Arc<[Compiled]>, Arc<OnceLock<String>>),
}

/// The built-in rules, each compiled when first needed.
fn builtin_rules() -> &'static [Compiled] {
    static B: OnceLock<Arc<[Compiled]>> = OnceLock::new();
    B.get_or_init(|| builtin().into())
}

/// The built-in rules, none compiled yet, with the literals their
/// matches start with from the table worked out ahead of time
/// (`redact::starts`).
fn builtin() -> Vec<Compiled> {
    rules::RULES
        .iter()
        .enumerate()
        .map(|(i, def)| {
            let table = starts::STARTS.get(i);
            Compiled::lazy(def.pattern, table, Action::Builtin(def.handler))
        })
        .collect()
}

/// The source of every module whose code decides what redaction
/// outputs (tests excluded), hashed into [`Redactor::rules_id`].
const RULES_SOURCE: [&str; 8] = [
    include_str!("mod.rs"),
    include_str!("rules.rs"),
    include_str!("fields.rs"),
    include_str!("value.rs"),
    include_str!("entropy.rs"),
    include_str!("starts.rs"),
    include_str!("scope.rs"),
    include_str!("recalled.rs"),
];

/// [`Redactor::rules_id`] of the built-in rules followed by `user`.
fn rules_id_of(user: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    for part in RULES_SOURCE.iter().chain(user) {
        // Length-prefixed: no two lists hash alike.
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().to_hex()[..32].to_owned()
}

/// The built-in rules followed by `patterns`, which are compiled (and
/// checked) now.
fn compile(patterns: &[String]) -> Result<Arc<[Compiled]>, RedactError> {
    let mut compiled = builtin();
    for (index, p) in patterns.iter().enumerate() {
        let re = Regex::new(p).map_err(|source| RedactError::BadPattern { index, source })?;
        if re.is_match("") {
            return Err(RedactError::MatchesEmpty { index });
        }
        compiled.push(Compiled {
            pattern: "",
            re: OnceLock::from(re),
            starts: Starts::Anywhere,
            action: Action::Custom,
        });
    }
    Ok(compiled.into())
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("re", &self.re.get().map_or(self.pattern, |re| re.as_str()))
            .finish_non_exhaustive()
    }
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new()
    }
}

impl Redactor {
    /// The built-in rules. Cheap: they are compiled when first used.
    pub fn new() -> Redactor {
        Redactor {
            rules: Rules::Builtin,
        }
    }

    /// The built-in rules plus user-configured regexes. A user pattern with
    /// a group named `secret` (or else a first capture group) has only that
    /// group replaced; otherwise the whole match is. User matches are
    /// reported as kind `custom`.
    pub fn with_extra_patterns(patterns: &[String]) -> Result<Redactor, RedactError> {
        if patterns.is_empty() {
            return Ok(Redactor::new());
        }
        Ok(Redactor {
            rules: Rules::Custom(compile(patterns)?, Arc::default()),
        })
    }

    /// Whether `other` applies the very same rules (the same compiled
    /// set, shared by clones).
    pub(crate) fn same_rules(&self, other: &Redactor) -> bool {
        match (&self.rules, &other.rules) {
            (Rules::Builtin, Rules::Builtin) => true,
            (Rules::Custom(a, _), Rules::Custom(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Names the rules this redactor applies, for knowing that text it
    /// redacted needs no redacting again (redaction is idempotent): equal
    /// ids, equal output. It covers the code of this module itself (the
    /// built-in patterns and every handler, whose source is hashed in at
    /// build time, so any change to them gives another id), the crate's
    /// version and the user patterns, in order. Worked out once per set
    /// of rules (it hashes the module's source).
    pub fn rules_id(&self) -> &str {
        static BUILTIN: OnceLock<String> = OnceLock::new();
        match &self.rules {
            Rules::Builtin => BUILTIN.get_or_init(|| rules_id_of(&[])),
            Rules::Custom(c, id) => id.get_or_init(|| {
                let user: Vec<&str> = c
                    .iter()
                    .filter(|r| matches!(r.action, Action::Custom))
                    .map(|r| r.regex().as_str())
                    .collect();
                rules_id_of(&user)
            }),
        }
    }

    fn rules(&self) -> &[Compiled] {
        match &self.rules {
            Rules::Builtin => builtin_rules(),
            Rules::Custom(c, _) => c,
        }
    }

    /// Returns `text` with every secret replaced, adding to `counts`.
    pub fn redact<'a>(&self, text: &'a str, counts: &mut RedactionCounts) -> Cow<'a, str> {
        let mut cur = redact_with(self.rules(), text, counts);
        // A marker can uncover another secret: a key glued to a word or
        // to its key id stands alone once the word is a marker, and a
        // value redacted where it repeats frees the run beside it. Again
        // until nothing changes (at most `PASSES`), so that what comes
        // out is redacted whole and a second redaction changes nothing.
        // Text with no secret (nearly all) takes one pass.
        for _ in 1..PASSES {
            let Cow::Owned(prev) = &cur else {
                break;
            };
            match redact_with(self.rules(), prev, counts) {
                Cow::Borrowed(_) => break,
                Cow::Owned(next) => cur = Cow::Owned(next),
            }
        }
        cur
    }

    /// Convenience: redacts `text` and discards the counts.
    pub fn redact_str<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut counts = RedactionCounts::new();
        self.redact(text, &mut counts)
    }

    /// Ad-hoc throughput probe (MB/s) over `sample`, repeated `rounds`
    /// times. For benchmarks and manual runs only; tests never assert on it.
    pub fn measure_throughput(&self, sample: &str, rounds: usize) -> f64 {
        let mut counts = RedactionCounts::new();
        let start = std::time::Instant::now();
        let mut total = 0usize;
        for _ in 0..rounds {
            total += self.redact(sample, &mut counts).len();
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        std::hint::black_box(total);
        (sample.len() * rounds) as f64 / secs / 1e6
    }
}

/// Passes of all the rules over one text at most (see [`Redactor::redact`]).
const PASSES: usize = 4;

/// `text` with every match of `rules` replaced, one rule after the other,
/// each over what the ones before left; adds to `counts`.
fn redact_with<'a>(
    rules: &[Compiled],
    text: &'a str,
    counts: &mut RedactionCounts,
) -> Cow<'a, str> {
    let mut cur: Cow<'a, str> = Cow::Borrowed(text);
    let mut found = Vec::new();
    for rule in rules {
        // None of the literals its matches start with: no match, and no
        // need to compile it.
        let Some(from) = rule.first_start(&cur) else {
            continue;
        };
        if let Some(next) = apply(rule, &cur, from, counts, &mut found) {
            cur = Cow::Owned(next);
        }
    }
    if found.is_empty() {
        return cur;
    }
    if let Some(next) = redact_repeats(&cur, found, counts) {
        cur = Cow::Owned(next);
    }
    cur
}

/// Shortest redacted value that is also redacted where it appears again
/// without the context that gave it away: shorter ones ("admin") are
/// too often ordinary words.
const REPEAT_MIN: usize = 12;

/// `text` with every other occurrence of a value a rule redacted (`found`:
/// kind and value) replaced by its marker too: a key written twice, once
/// beside what gave it away (`-u KEY:AKIA…`) and once alone, is the same
/// secret in both places. `None` when there was none.
fn redact_repeats(
    text: &str,
    mut found: Vec<(&'static str, String)>,
    counts: &mut RedactionCounts,
) -> Option<String> {
    // Longest first, so a value holding another is replaced whole.
    found.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.cmp(b)));
    found.dedup_by(|a, b| a.1 == b.1);
    let mut out: Option<String> = None;
    for (kind, value) in found {
        let cur = out.as_deref().unwrap_or(text);
        let mut next = String::new();
        let (mut last, mut replaced) = (0, false);
        for (at, _) in cur.match_indices(value.as_str()) {
            if at < last || inside_marker(cur, at) {
                continue;
            }
            next.push_str(&cur[last..at]);
            next.push_str(value::MARKER_PREFIX);
            next.push_str(kind);
            next.push(']');
            last = at + value.len();
            replaced = true;
            *counts.entry(kind).or_insert(0) += 1;
        }
        if replaced {
            next.push_str(&cur[last..]);
            out = Some(next);
        }
    }
    out
}

/// Applies one rule, whose matches start at `from` or later; `None` when
/// nothing was replaced.
///
/// Unlike `captures_iter`, a match the handler rejects does not consume its
/// text: the search resumes one character after the match start, so a
/// rejected candidate (`key= " API_KEY=... "`) cannot hide a secret inside it.
fn apply(
    rule: &Compiled,
    text: &str,
    from: usize,
    counts: &mut RedactionCounts,
    found: &mut Vec<(&'static str, String)>,
) -> Option<String> {
    let re = rule.regex();
    let mut out: Option<String> = None;
    let mut last = 0usize;
    let mut pos = from;
    while pos <= text.len() {
        // Most texts hold no candidate for most rules: asking first costs
        // no allocation, where `captures_at` makes room for the groups
        // before it searches (a few percent of a cold index).
        if !re.is_match_at(text, pos) {
            break;
        }
        let Some(caps) = re.captures_at(text, pos) else {
            break;
        };
        let Some(m) = caps.get(0) else {
            break;
        };
        let hit = match &rule.action {
            Action::Builtin(handler) => handler(text, &caps),
            Action::Custom => custom_hit(&caps),
        };
        let accepted = hit.filter(|hit| {
            let (start, end) = (hit.range.start, hit.range.end);
            start >= last
                && start < end
                && text.is_char_boundary(start)
                && text.is_char_boundary(end)
                && text
                    .get(start..end)
                    .is_some_and(|s| !s.starts_with(value::MARKER_PREFIX))
                && !inside_marker(text, start)
        });
        match accepted {
            Some(hit) => {
                let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
                buf.push_str(text.get(last..hit.range.start).unwrap_or(""));
                buf.push_str(value::MARKER_PREFIX);
                buf.push_str(hit.kind);
                buf.push(']');
                if hit.range.len() >= REPEAT_MIN {
                    found.push((hit.kind, text[hit.range.clone()].to_owned()));
                }
                last = hit.range.end;
                *counts.entry(hit.kind).or_insert(0) += 1;
                pos = m.end().max(hit.range.end);
                if m.end() == m.start() {
                    pos = next_char(text, pos);
                }
            }
            None => pos = next_char(text, m.start()),
        }
    }
    let mut buf = out?;
    buf.push_str(text.get(last..).unwrap_or(""));
    Some(buf)
}

/// The byte index of the character after the one starting at `i`
/// (`text.len() + 1` at the end, which stops the search loop).
fn next_char(text: &str, i: usize) -> usize {
    text.get(i..)
        .and_then(|rest| rest.chars().next())
        .map_or(text.len() + 1, |c| i + c.len_utf8())
}

/// True when `start` falls inside an existing `[REDACTED:kind]` marker.
fn inside_marker(text: &str, start: usize) -> bool {
    // Markers are short: look back a bounded window only.
    let from = start.saturating_sub(48);
    let bytes = text.as_bytes();
    let Some(window) = bytes.get(from..start) else {
        return false;
    };
    let prefix = value::MARKER_PREFIX.as_bytes();
    let Some(open) = window.windows(prefix.len()).rposition(|w| w == prefix) else {
        return false;
    };
    // Still inside when no `]` closes it before `start`.
    !window[open..].contains(&b']')
}

fn custom_hit(caps: &regex::Captures<'_>) -> Option<rules::Hit> {
    let m = caps
        .name("secret")
        .or_else(|| caps.get(1))
        .or_else(|| caps.get(0))?;
    if m.as_str().is_empty() {
        return None;
    }
    Some(rules::Hit {
        range: m.range(),
        kind: rules::CUSTOM,
    })
}
