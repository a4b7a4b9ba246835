//! Redaction of every field of a record, not only its text: the session
//! id, the parent session's id, the project path, the files, and (from a
//! peer) the agent and role names. Called where records enter the store
//! (the indexer, a peer's batch) and where they leave it (a pull served),
//! and for paths shown to people. Owns how a redacted id stays an
//! identity; must not touch the database, the network or the clock.
//!
//! A secret in an id (`deploy-ghp_…`) cannot just give way to its marker:
//! two sessions whose ids differ only by the secret would then merge into
//! one, and one session must not split either. So an id the rules change
//! keeps its markers and gains `~` and 12 hex digits: the first 6 bytes
//! of a BLAKE3 hash (key derived from [`ID_CONTEXT`]) of the id as it was
//! written (`deploy-[REDACTED:github-token]~9c1f04e2b7a3`). So:
//! - stable: the same id gives the same redacted id in every pass and on
//!   every machine, so the records of a session indexed on two machines
//!   hash the same and meet in sync;
//! - distinct: two ids that differ anywhere give different suffixes (a
//!   collision wants two secret-bearing ids alike but for the secret
//!   among 2^48 values);
//! - idempotent: a redacted id holds nothing more to redact and is kept
//!   as is, so a peer redacting it again agrees with the node that did.
//!
//! An id with nothing to redact is kept byte for byte. The suffix is a
//! public function of the original id: it reveals nothing of a random
//! token (what the rules find in ids), but whoever holds a redacted id
//! could confirm a guess of an id holding a guessable password; no key
//! shared by all of a user's machines exists to prevent that.

use std::borrow::Cow;

use cairn_protocol::{ForgetTarget, WireRecord};

use super::{RedactionCounts, Redactor, entropy};
use crate::record::Record;

/// The BLAKE3 key-derivation context of the suffix of a redacted id.
/// Changing it changes every redacted id: a format change.
pub const ID_CONTEXT: &str = "cairn 2026 redacted identifier v1";

/// Hex digits of the suffix of a redacted id.
const SUFFIX_HEX: usize = 12;

/// `id` with every secret replaced and, when something was, the suffix
/// that keeps it distinct (see the module docs); borrowed when nothing
/// was. Adds to `counts` (once for a run of the same id: the records of
/// a session come one after the other, and the last ids redacted on this
/// thread are remembered).
pub fn redact_id<'a>(
    redactor: &Redactor,
    id: &'a str,
    counts: &mut RedactionCounts,
) -> Cow<'a, str> {
    // Most agents name sessions by UUID, where no rule can match: skip
    // the rules' literal search for those.
    if entropy::is_uuid(id) {
        return Cow::Borrowed(id);
    }
    remembered(Memo::Id, redactor, id, counts, |counts| {
        redact_parts(redactor, id, SEPARATORS, counts).map(|mut out| {
            out.push('~');
            out.push_str(&id_suffix(id));
            out
        })
    })
    .map_or(Cow::Borrowed(id), Cow::Owned)
}

/// A project path redacted as [`redact_path`] does, remembered as ids
/// are: every record of a session names the same one.
fn redact_project<'a>(
    redactor: &Redactor,
    path: &'a str,
    counts: &mut RedactionCounts,
) -> Cow<'a, str> {
    remembered(Memo::Project, redactor, path, counts, |counts| {
        redact_path(redactor, path, counts).into_owned_if_changed()
    })
    .map_or(Cow::Borrowed(path), Cow::Owned)
}

/// What a remembered value was redacted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memo {
    Id,
    Project,
}

/// Values remembered per thread: a session id, its parent, a peer's
/// agent and role names, a project.
const MEMO_LEN: usize = 6;

/// One remembered value: what it was redacted as, with which rules, the
/// value, and what came out.
type Remembered = (Memo, Redactor, String, Option<String>);

thread_local! {
    /// The last values redacted on this thread, with the rules used and
    /// what came out (`None`: nothing to redact). Holding the redactor
    /// keeps its rules alive, so another set cannot take their place.
    static MEMO: std::cell::RefCell<Vec<Remembered>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// What `make` redacts `input` into (`None`: nothing), remembered: a
/// value redacted on this thread lately with the same rules is not
/// redacted (nor counted) again.
fn remembered(
    kind: Memo,
    redactor: &Redactor,
    input: &str,
    counts: &mut RedactionCounts,
    make: impl FnOnce(&mut RedactionCounts) -> Option<String>,
) -> Option<String> {
    let known = MEMO.with(|m| {
        m.borrow()
            .iter()
            .find(|(k, r, i, _)| *k == kind && i == input && r.same_rules(redactor))
            .map(|(_, _, _, out)| out.clone())
    });
    if let Some(out) = known {
        return out;
    }
    let out = make(counts);
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= MEMO_LEN {
            m.remove(0);
        }
        m.push((kind, redactor.clone(), input.to_owned(), out.clone()));
    });
    out
}

/// Bytes that join the parts of an id (`deploy-<token>`, `run_<token>`).
const SEPARATORS: &[char] = &['-', '_', '.', ':', '/', '~', '+', '=', '@', ','];

/// `id` redacted whole, then what follows each of `separators` redacted
/// on its own: the rules leave a token glued to a word before it
/// (`deploy-ghp_…` in text reads as one word), which in an id or a path
/// is just another part. `None` when nothing was redacted.
fn redact_parts(
    redactor: &Redactor,
    id: &str,
    separators: &[char],
    counts: &mut RedactionCounts,
) -> Option<String> {
    let mut cur: Cow<'_, str> = redactor.redact(id, counts);
    let mut from = 0;
    while let Some(off) = cur.get(from..).and_then(|rest| rest.find(separators)) {
        // Separators are ASCII: the byte after one starts a character.
        let at = from + off + 1;
        let tail = cur.get(at..).unwrap_or("");
        if let Cow::Owned(t) = redactor.redact(tail, counts) {
            let head = cur.get(..at).unwrap_or("");
            cur = Cow::Owned(format!("{head}{t}"));
        }
        from = at;
    }
    match cur {
        Cow::Owned(o) => Some(o),
        Cow::Borrowed(_) => None,
    }
}

/// A path (a project, a file a tool named) with every secret replaced,
/// also one that starts a part of it (`/home/dev/<token>/app`: in text a
/// token glued to a `/` reads as the inside of a base64 run, and a
/// `.netrc` or `.pgpass` line must start its line); borrowed when nothing
/// was. Adds to `counts`.
pub fn redact_path<'a>(
    redactor: &Redactor,
    path: &'a str,
    counts: &mut RedactionCounts,
) -> Cow<'a, str> {
    let whole = redactor.redact(path, counts);
    if !whole.contains(['/', '\\']) {
        return whole;
    }
    // Cheap look first: the parts set apart by spaces (the same length,
    // so nothing moves). Only when that finds something are the parts
    // redacted one by one.
    let spaced = whole.replace(['/', '\\'], " ");
    if matches!(
        redactor.redact(&spaced, &mut RedactionCounts::new()),
        Cow::Borrowed(_)
    ) {
        return whole;
    }
    match redact_parts(redactor, &whole, &['/', '\\'], counts) {
        Some(parts) => Cow::Owned(parts),
        None => whole,
    }
}

/// The suffix of a redacted `id`: hex of the first bytes of its keyed hash.
fn id_suffix(id: &str) -> String {
    let mut h = blake3::Hasher::new_derive_key(ID_CONTEXT);
    h.update(id.as_bytes());
    let digest = h.finalize();
    crate::hex::encode(&digest.as_bytes()[..SUFFIX_HEX / 2])
}

/// A record as a source emits it, every field redacted in place (the text
/// as text, the ids as ids); adds to `counts`. The agent and role are the
/// registry's own names and are left alone.
pub fn redact_record(r: &mut Record, redactor: &Redactor, counts: &mut RedactionCounts) {
    update(&mut r.text, |s| {
        redactor.redact(s, counts).into_owned_if_changed()
    });
    for f in &mut r.files {
        update(f, |s| {
            redact_path(redactor, s, counts).into_owned_if_changed()
        });
    }
    if let Some(p) = &mut r.project {
        update(p, |s| {
            redact_project(redactor, s, counts).into_owned_if_changed()
        });
    }
    update(&mut r.session_id, |s| {
        redact_id(redactor, s, counts).into_owned_if_changed()
    });
    if let Some(p) = &mut r.parent_session {
        update(p, |s| {
            redact_id(redactor, s, counts).into_owned_if_changed()
        });
    }
}

/// Replaces `s` with what `f` makes of it, if anything; whether it did.
fn update(s: &mut String, f: impl FnOnce(&str) -> Option<String>) -> bool {
    match f(s) {
        Some(new) => {
            *s = new;
            true
        }
        None => false,
    }
}

/// A record on the wire (received from a peer, or about to be sent),
/// every field redacted in place, the hash recomputed over what is left
/// when anything changed (so the record stays self-verifying). Returns
/// whether anything was redacted.
pub fn redact_wire(w: &mut WireRecord, redactor: &Redactor) -> bool {
    redact_wire_fields(w, redactor, true)
}

/// [`redact_wire`] for a record whose text `redactor` (its very rules:
/// [`Redactor::rules_id`]) made: every field but the text, which would
/// come out the same (redaction is idempotent).
pub fn redact_wire_but_text(w: &mut WireRecord, redactor: &Redactor) -> bool {
    redact_wire_fields(w, redactor, false)
}

fn redact_wire_fields(w: &mut WireRecord, redactor: &Redactor, text: bool) -> bool {
    let mut counts = RedactionCounts::new();
    let mut changed = text
        && update(&mut w.text, |s| {
            redactor.redact(s, &mut counts).into_owned_if_changed()
        });
    for f in &mut w.files {
        changed |= update(f, |s| {
            redact_path(redactor, s, &mut counts).into_owned_if_changed()
        });
    }
    if let Some(p) = &mut w.project {
        changed |= update(p, |s| {
            redact_project(redactor, s, &mut counts).into_owned_if_changed()
        });
    }
    for id in [&mut w.session_id, &mut w.agent, &mut w.role] {
        changed |= update(id, |s| {
            redact_id(redactor, s, &mut counts).into_owned_if_changed()
        });
    }
    if let Some(p) = &mut w.parent_session {
        changed |= update(p, |s| {
            redact_id(redactor, s, &mut counts).into_owned_if_changed()
        });
    }
    if changed {
        w.hash = w.content_hash();
    }
    changed
}

/// A local path as shown to people (a record's source file, a store
/// listed by `cairn sources`), redacted with the built-in rules: a path
/// holds a secret when the agent named a file after a session id that
/// does. The path stored stays the real one, to read the file again.
pub fn shown_path(path: &str) -> Cow<'_, str> {
    super::scope::redact_whole(path)
}

/// `Cow::into_owned` only when it owns: `None` when nothing changed.
trait OwnedIfChanged {
    fn into_owned_if_changed(self) -> Option<String>;
}

impl OwnedIfChanged for Cow<'_, str> {
    fn into_owned_if_changed(self) -> Option<String> {
        match self {
            Cow::Owned(o) => Some(o),
            Cow::Borrowed(_) => None,
        }
    }
}

/// True when a forget's target holds nothing the rules would redact: its
/// agent and session id as ids, its project as a path. A record target
/// is a hash and always clean.
pub fn forget_target_is_clean(redactor: &Redactor, target: &ForgetTarget) -> bool {
    let mut counts = RedactionCounts::default();
    match target {
        ForgetTarget::Session { agent, session_id } => {
            redact_id(redactor, agent, &mut counts) == agent.as_str()
                && redact_id(redactor, session_id, &mut counts) == session_id.as_str()
        }
        ForgetTarget::Project { project } => {
            redact_path(redactor, project, &mut counts) == project.as_str()
        }
        ForgetTarget::Record { .. } => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Role;

    const TOKEN: &str = "ghp_sMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8";
    const OTHER: &str = "ghp_C3J27XDCG2LmlZGEONYlgCtjfIZ4SOcMz9CP";

    fn id(s: &str) -> String {
        redact_id(&Redactor::new(), s, &mut RedactionCounts::new()).into_owned()
    }

    #[test]
    fn ids_without_secrets_are_kept_byte_for_byte() {
        for s in [
            "5e3c1a2b-7d4f-4e6a-9b8c-0d1e2f3a4b5c",
            "rollout-2026-12-05T18-01-13-01a2475e-02cf-7be3-9101-d8c7fac925d8",
            "ses_4f2a9c1e0b7d",
            "agent-a2898e3",
            "1796493695129_i0f63",
            "session_20261205_180155_c09b9b9a",
            "",
        ] {
            let mut counts = RedactionCounts::new();
            assert!(matches!(
                redact_id(&Redactor::new(), s, &mut counts),
                Cow::Borrowed(_)
            ));
            assert!(counts.is_empty(), "{s}: {counts:?}");
        }
    }

    #[test]
    fn a_redacted_id_is_exact_stable_distinct_and_idempotent() {
        let a = id(&format!("deploy-{TOKEN}"));
        assert_eq!(
            a,
            "deploy-[REDACTED:github-token]~".to_owned() + &a[a.len() - 12..]
        );
        assert_eq!(a.len(), "deploy-[REDACTED:github-token]~".len() + 12);
        assert!(a[a.len() - 12..].bytes().all(|b| b.is_ascii_hexdigit()));
        // The suffix is the keyed hash of the id as written: fixed.
        assert_eq!(
            a,
            format!(
                "deploy-[REDACTED:github-token]~{}",
                id_suffix(&format!("deploy-{TOKEN}"))
            )
        );
        // Stable: the same id, the same result, every time.
        assert_eq!(a, id(&format!("deploy-{TOKEN}")));
        // Distinct: another secret in the same place is another id.
        let b = id(&format!("deploy-{OTHER}"));
        assert_ne!(a, b);
        assert!(b.starts_with("deploy-[REDACTED:github-token]~"), "{b}");
        // Idempotent: nothing more to redact, nothing appended.
        assert_eq!(id(&a), a);
        let mut counts = RedactionCounts::new();
        redact_id(&Redactor::new(), &a, &mut counts);
        assert!(counts.is_empty());
        // Context kept around the marker.
        assert_eq!(
            id("run password=hunter22 nightly").split('~').next(),
            Some("run password=[REDACTED:password] nightly")
        );
    }

    #[test]
    fn every_field_of_a_record_is_redacted() {
        let mut r = Record::new(
            "claude-code",
            &format!("s-{TOKEN}"),
            Role::User,
            format!("use {OTHER}"),
        );
        r.parent_session = Some(format!("p-{OTHER}"));
        r.project = Some(format!("/home/dev/{TOKEN}/app"));
        r.files = vec![format!("/tmp/{OTHER}.txt")];
        let mut counts = RedactionCounts::new();
        redact_record(&mut r, &Redactor::new(), &mut counts);
        let all = format!("{r:?}");
        assert!(
            !all.contains(&TOKEN[4..]) && !all.contains(&OTHER[4..]),
            "{all}"
        );
        assert_eq!(r.text, "use [REDACTED:github-token]");
        assert_eq!(
            r.project.as_deref(),
            Some("/home/dev/[REDACTED:github-token]/app")
        );
        assert_eq!(r.files, ["/tmp/[REDACTED:github-token].txt"]);
        assert!(
            r.session_id.starts_with("s-[REDACTED:github-token]~"),
            "{}",
            r.session_id
        );
        assert!(
            r.parent_session
                .as_deref()
                .is_some_and(|p| p.starts_with("p-[REDACTED:github-token]~")),
            "{:?}",
            r.parent_session
        );
        assert_eq!(counts.get("github-token"), Some(&5));
        assert_eq!(r.agent, "claude-code");
    }

    #[test]
    fn a_wire_record_is_redacted_in_every_field_and_stays_self_verifying() {
        let mut w = WireRecord {
            seq: 1,
            hash: [0; 32],
            agent: format!("codex {TOKEN}"),
            session_id: format!("s-{TOKEN}"),
            parent_session: Some(format!("p-{OTHER}")),
            project: Some(format!("/w/{OTHER}")),
            role: "user".into(),
            time_ms: Some(1),
            text: "fine".into(),
            files: vec![format!("{TOKEN}.txt")],
        };
        w.hash = w.content_hash();
        assert!(redact_wire(&mut w, &Redactor::new()));
        let all = format!("{w:?}");
        assert!(
            !all.contains(&TOKEN[4..]) && !all.contains(&OTHER[4..]),
            "{all}"
        );
        w.verify().expect("hash over the redacted fields");
        // A second pass finds nothing: the hash stays.
        let before = w.clone();
        assert!(!redact_wire(&mut w, &Redactor::new()));
        assert_eq!(w, before);
    }

    #[test]
    fn a_secret_starting_a_part_of_a_path_is_redacted() {
        let r = Redactor::new();
        let path = |p: &str| redact_path(&r, p, &mut RedactionCounts::new()).into_owned();
        let age = "AGE-SECRET-KEY-1N9LRDMPPFNFRMSWLPX05QU4WRM0QXHFAKGKWJ9SGGTXRFPAKCL6YU34C8D";
        assert_eq!(
            path(&format!("/home/dev/{age}/app")),
            "/home/dev/[REDACTED:age-secret-key]/app"
        );
        assert_eq!(
            path("/home/dev/db.internal:5432:shop:app:Hj2pgpassWd55/app"),
            // (a .pgpass password runs to the end of its line)
            "/home/dev/db.internal:5432:shop:app:[REDACTED:password]"
        );
        assert_eq!(
            path("C:\\Users\\dev\\machine api.example.com login ci password Qz4netrcLine9"),
            "C:\\Users\\dev\\machine api.example.com login ci password [REDACTED:password]"
        );
        // What the whole path shows is redacted as before.
        assert_eq!(
            path(&format!("/tmp/{TOKEN}.txt")),
            "/tmp/[REDACTED:github-token].txt"
        );
        for plain in [
            "/home/dev/vault/src/main.rs",
            "src/redact/fields.rs",
            "C:\\work\\app\\Cargo.toml",
            "/home/dev/8638af64f306401242221d9ac7d9621ba201fdd4/x",
        ] {
            let mut counts = RedactionCounts::new();
            assert!(
                matches!(redact_path(&r, plain, &mut counts), Cow::Borrowed(_)),
                "{plain}"
            );
            assert!(counts.is_empty(), "{plain}");
        }
    }

    #[test]
    fn remembered_values_follow_the_rules_in_force() {
        let custom = Redactor::with_extra_patterns(&["ACME-[0-9]{6}".to_owned()]).expect("pattern");
        let builtin = Redactor::new();
        let mut counts = RedactionCounts::new();
        for _ in 0..2 {
            assert_eq!(
                redact_id(&builtin, "run-ACME-123456", &mut counts),
                "run-ACME-123456"
            );
            let out = redact_id(&custom, "run-ACME-123456", &mut counts);
            assert!(out.starts_with("run-[REDACTED:custom]~"), "{out}");
            assert_eq!(
                redact_project(&builtin, "/w/ACME-123456/x", &mut counts),
                "/w/ACME-123456/x"
            );
            assert_eq!(
                redact_project(&custom, "/w/ACME-123456/x", &mut counts),
                "/w/[REDACTED:custom]/x"
            );
        }
        // Each counted once: the second round was remembered.
        assert_eq!(counts.get("custom"), Some(&2));
    }

    #[test]
    fn shown_paths_are_redacted() {
        assert_eq!(
            shown_path(&format!("/home/u/.claude/projects/-w/{TOKEN}.jsonl")),
            "/home/u/.claude/projects/-w/[REDACTED:github-token].jsonl"
        );
        assert!(matches!(shown_path("/home/u/a.jsonl"), Cow::Borrowed(_)));
    }
}
