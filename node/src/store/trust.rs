//! Signed origins, the store's side: each origin's key (the first seen,
//! with the peer that vouched for it), the verified seals kept for
//! relaying, refused origins, and the checks a received batch passes
//! before any of it is stored (`docs/wire-format.md`, "Signed origins"):
//! never this node's own origin, the origin's key hashing to its id,
//! seals over every entry that verify with it, no refused origin.
//! Refusing an origin drops its logs, seals, forgets and the records only
//! it holds. Never signs (`crate::seal::Signer` does) and never touches
//! the network.

use cairn_protocol::{Batch, Hash32, NodeId, Seal, SealError, seal_checks};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::log::{hash32, own_log};
use super::{Store, StoreError};

/// Why a batch's origin was not trusted. Nothing of it was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The batch claims this node's own origin.
    #[error(
        "refused entries claiming to be this node's own ({origin}): only this node writes its log"
    )]
    OwnOrigin {
        /// This node's id.
        origin: NodeId,
    },
    /// No key, a key of another node, or seals that do not cover the batch.
    #[error("refused {origin}'s log: {source}")]
    Seal {
        /// The batch's origin.
        origin: NodeId,
        /// What was wrong.
        #[source]
        source: SealError,
    },
    /// A seal whose signature does not verify with the origin's key.
    #[error(
        "refused {origin}'s log: its entries are not what {origin} signed (forged or altered on the way)"
    )]
    BadSignature {
        /// The batch's origin.
        origin: NodeId,
    },
    /// A key other than the one this node knows for the origin.
    #[error(
        "refused {origin}'s log: it comes with another key than the one this node knows for it"
    )]
    KeyChanged {
        /// The batch's origin.
        origin: NodeId,
    },
    /// An origin the user refused.
    #[error(
        "refused {origin}'s log: the user refused this origin (`cairn peers --allow-origin` undoes it)"
    )]
    RefusedOrigin {
        /// The batch's origin.
        origin: NodeId,
    },
    /// A forget whose target holds a secret.
    #[error(
        "refused {origin}'s log: a forget in it names a session or project holding a secret, which is never stored or relayed"
    )]
    SecretInForget {
        /// The batch's origin.
        origin: NodeId,
    },
}

/// Why a forget in a batch was refused before anything of the batch was
/// stored: its target names a session or project holding what the rules
/// redact. An honest node forgets the ids it stored, which are redacted
/// already; such a target is hostile or from other rules, and storing or
/// relaying it would keep the secret (redacting it would break the
/// issuer's seal).
pub fn forget_names_a_secret(
    batch: &Batch,
    redactor: &crate::redact::Redactor,
) -> Option<TrustError> {
    batch
        .tombstones
        .iter()
        .any(|t| !crate::redact::fields::forget_target_is_clean(redactor, &t.target))
        .then_some(TrustError::SecretInForget {
            origin: batch.origin,
        })
}

/// A key this node knows for an origin, or an origin the user refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OriginKey {
    /// The origin's node id.
    pub origin: String,
    /// Its name, as the peers that relay it announce it (`None`: unknown).
    pub name: Option<String>,
    /// The blake3 fingerprint of its key, 64 hex digits (`None`: refused
    /// before any key was seen).
    pub fingerprint: Option<String>,
    /// The peer that first brought it (`None`: learned before this was kept).
    pub vouched_by: Option<String>,
    /// When, Unix ms (for an origin refused before any key was seen:
    /// when it was refused).
    pub learned_ms: i64,
    /// When the user refused it, Unix ms (`None`: accepted).
    pub refused_ms: Option<i64>,
    /// Log entries of it held (records, forgets and stubs).
    pub entries: u64,
}

/// What refusing an origin did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OriginRefusal {
    /// The origin's node id.
    pub origin: String,
    /// Records deleted (those no other origin's log holds).
    pub records: u64,
    /// Sessions left with no record and deleted.
    pub sessions: u64,
    /// Logs of it dropped.
    pub logs: u64,
    /// Its forgets dropped.
    pub tombstones: u64,
    /// Whether the freed bytes were scrubbed from the files (false when
    /// another connection held them; the next forget finishes the job).
    pub wal_truncated: bool,
}

/// Why an origin cannot be refused.
#[derive(Debug, thiserror::Error)]
pub enum RefuseOriginError {
    /// It is this node's own.
    #[error("{origin} is this machine's own origin; it cannot refuse itself")]
    Own {
        /// This node's id.
        origin: NodeId,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for RefuseOriginError {
    fn from(e: rusqlite::Error) -> Self {
        RefuseOriginError::Store(StoreError::from(e))
    }
}

impl Store {
    /// Lets the store seal batches of its own log (the node sets it).
    pub fn set_signer(&mut self, signer: std::sync::Arc<crate::seal::Signer>) {
        self.signer = Some(signer);
    }

    /// The keys known for origins, with who vouched for them, and the
    /// origins the user refused.
    pub fn origin_keys(&self) -> Result<Vec<OriginKey>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT o.origin, n.name, k.spki, k.vouched_by,
                    coalesce(k.learned_ms, r.refused_ms), r.refused_ms,
                    (SELECT coalesce(sum(w.seq), 0) FROM watermarks w WHERE w.origin = o.origin)
             FROM (SELECT origin FROM origin_keys UNION SELECT origin FROM refused_origins) o
             LEFT JOIN origin_keys k ON k.origin = o.origin
             LEFT JOIN refused_origins r ON r.origin = o.origin
             LEFT JOIN nodes n ON n.id = o.origin
             ORDER BY 5, 1",
        )?;
        let rows = q.query_map([], |r| {
            let spki: Vec<u8> = r.get::<_, Option<Vec<u8>>>(2)?.unwrap_or_default();
            Ok(OriginKey {
                origin: r.get(0)?,
                name: r.get(1)?,
                fingerprint: (!spki.is_empty())
                    .then(|| crate::hex::encode(&cairn_protocol::spki_fingerprint(&spki))),
                vouched_by: r.get(3)?,
                learned_ms: r.get(4)?,
                refused_ms: r.get(5)?,
                entries: r.get::<_, i64>(6)?.max(0) as u64,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Refuses `origin` from now on: its batches are refused whoever
    /// relays them, and what this node holds of it goes: its logs (slots,
    /// watermarks, seals), its forgets, and the records no other origin's
    /// log holds (deleted as a forget deletes them, bytes scrubbed).
    /// Records another origin also holds stay, shown under that origin.
    pub fn refuse_origin(
        &mut self,
        origin: &NodeId,
        now_ms: i64,
    ) -> Result<OriginRefusal, RefuseOriginError> {
        let text = origin.to_string();
        if own_log(&self.conn)?.is_some_and(|l| l.origin == text) {
            return Err(RefuseOriginError::Own { origin: *origin });
        }
        self.conn.pragma_update(None, "secure_delete", "ON")?;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut report = OriginRefusal {
            origin: text.clone(),
            ..OriginRefusal::default()
        };
        let oid: Option<i64> = tx
            .query_row("SELECT id FROM origins WHERE node = ?1", [&text], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(oid) = oid {
            // Its records: named by a slot of its logs, or stored under it
            // (a record redacted again on receipt is stored apart from
            // the slot naming the hash its origin signed); kept when a
            // slot of another origin's log names them.
            let doomed: Vec<(i64, i64, Vec<u8>)> = {
                let mut q = tx.prepare(
                    "SELECT r.id, r.session, r.hash FROM records r
                     WHERE (r.origin = ?1
                            OR r.id IN (SELECT l.rec FROM logs l
                                        JOIN origin_logs g ON g.id = l.log
                                        WHERE g.origin = ?1 AND l.rec IS NOT NULL))
                       AND NOT EXISTS (SELECT 1 FROM logs l JOIN origin_logs g ON g.id = l.log
                                       WHERE l.rec = r.id AND g.origin != ?1)",
                )?;
                let rows = q.query_map([oid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                rows.collect::<Result<_, _>>()?
            };
            let sessions = super::forget::delete_records(&tx, &doomed, false)?;
            report.records = doomed.len() as u64;
            report.sessions = super::forget::refresh_sessions(&tx, sessions)?;
            // What stays is shown under an origin that holds it.
            tx.execute(
                "UPDATE records SET origin = (
                     SELECT g.origin FROM logs l JOIN origin_logs g ON g.id = l.log
                     WHERE l.rec = records.id AND g.origin != ?1 LIMIT 1)
                 WHERE origin = ?1",
                [oid],
            )?;
            tx.execute(
                "UPDATE sessions SET origin = coalesce((
                     SELECT o.node FROM records r JOIN origins o ON o.id = r.origin
                     WHERE r.session = sessions.id LIMIT 1), origin)
                 WHERE origin = ?1",
                [&text],
            )?;
            tx.execute(
                "DELETE FROM log_seals WHERE log IN (SELECT id FROM origin_logs WHERE origin = ?1)",
                [oid],
            )?;
            tx.execute(
                "DELETE FROM logs WHERE log IN (SELECT id FROM origin_logs WHERE origin = ?1)",
                [oid],
            )?;
            report.logs = tx.execute("DELETE FROM origin_logs WHERE origin = ?1", [oid])? as u64;
            if report.records > 0 {
                super::fts::optimize(&tx)?;
            }
        }
        tx.execute("DELETE FROM watermarks WHERE origin = ?1", [&text])?;
        report.tombstones = tx.execute("DELETE FROM tombstones WHERE origin = ?1", [&text])? as u64;
        tx.execute(
            "INSERT INTO refused_origins(origin, refused_ms) VALUES (?1, ?2)
             ON CONFLICT(origin) DO UPDATE SET refused_ms = excluded.refused_ms",
            params![text, now_ms],
        )?;
        tx.commit()?;
        report.wal_truncated = self.scrub()?;
        tracing::info!(
            origin = %origin,
            records = report.records,
            logs = report.logs,
            "refused an origin"
        );
        Ok(report)
    }

    /// Accepts an origin the user refused again (its entries come back at
    /// the next sync with a peer that holds them). Returns whether it was
    /// refused.
    pub fn allow_origin(&mut self, origin: &NodeId) -> Result<bool, StoreError> {
        let n = self.conn.execute(
            "DELETE FROM refused_origins WHERE origin = ?1",
            [origin.to_string()],
        )?;
        Ok(n > 0)
    }

    /// The origins the user refused.
    pub fn refused_origins(&self) -> Result<Vec<NodeId>, StoreError> {
        refused(&self.conn)
    }
}

/// The origins the user refused (ids that do not parse are left out).
pub(crate) fn refused(conn: &Connection) -> Result<Vec<NodeId>, StoreError> {
    let mut q = conn.prepare_cached("SELECT origin FROM refused_origins")?;
    let rows = q.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for row in rows {
        if let Ok(id) = row?.parse() {
            out.push(id);
        }
    }
    Ok(out)
}

/// Checks a batch's origin and seals; see the module docs.
pub(super) fn check(
    conn: &Connection,
    batch: &Batch,
) -> Result<Result<(), TrustError>, StoreError> {
    let origin = batch.origin;
    if own_log(conn)?.is_some_and(|l| l.origin == origin.to_string()) {
        return Ok(Err(TrustError::OwnOrigin { origin }));
    }
    if is_refused(conn, &origin)? {
        return Ok(Err(TrustError::RefusedOrigin { origin }));
    }
    let checks = match seal_checks(batch) {
        Ok(c) => c,
        Err(source) => return Ok(Err(TrustError::Seal { origin, source })),
    };
    if checks.is_empty() {
        return Ok(Ok(()));
    }
    if let Some(known) = known_key(conn, &origin)?
        && known != batch.origin_key
    {
        return Ok(Err(TrustError::KeyChanged { origin }));
    }
    if crate::seal::verify(&batch.origin_key, &checks).is_err() {
        return Ok(Err(TrustError::BadSignature { origin }));
    }
    Ok(Ok(()))
}

/// Judges a checked batch's origin again inside the apply transaction:
/// what another connection may have changed since [`check`] (a refusal
/// of the origin, a first key learned from another batch). Only table
/// look-ups; the seals were verified by [`check`].
pub(super) fn recheck(
    conn: &Connection,
    batch: &Batch,
) -> Result<Result<(), TrustError>, StoreError> {
    let origin = batch.origin;
    if is_refused(conn, &origin)? {
        return Ok(Err(TrustError::RefusedOrigin { origin }));
    }
    if !batch.seals.is_empty()
        && let Some(known) = known_key(conn, &origin)?
        && known != batch.origin_key
    {
        return Ok(Err(TrustError::KeyChanged { origin }));
    }
    Ok(Ok(()))
}

/// Keeps a checked batch's key (first one wins) and seals, inside the
/// apply transaction.
pub(super) fn record(
    conn: &Connection,
    log: i64,
    batch: &Batch,
    peer: Option<&NodeId>,
    now_ms: i64,
) -> Result<(), StoreError> {
    if batch.seals.is_empty() {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO origin_keys(origin, spki, vouched_by, learned_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(origin) DO NOTHING",
    )?
    .execute(params![
        batch.origin.to_string(),
        &batch.origin_key,
        peer.map(|p| p.to_string()),
        now_ms
    ])?;
    let mut put = conn.prepare_cached(
        "INSERT INTO log_seals(log, first, last, sig) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT DO NOTHING",
    )?;
    for s in &batch.seals {
        put.execute(params![log, s.first as i64, s.last as i64, &s.sig[..]])?;
    }
    Ok(())
}

fn is_refused(conn: &Connection, origin: &NodeId) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM refused_origins WHERE origin = ?1)")?
        .query_row([origin.to_string()], |r| r.get(0))?)
}

fn known_key(conn: &Connection, origin: &NodeId) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT spki FROM origin_keys WHERE origin = ?1")?
        .query_row([origin.to_string()], |r| r.get(0))
        .optional()?)
}

/// Seals a batch this node relays (of log number `log`, held up to
/// `held`) with the origin's seals it keeps: the batch is cut back to
/// where they reach, and left empty when none covers its start (or the
/// origin's key is unknown).
pub(super) fn seal_relayed(
    conn: &Connection,
    log: i64,
    batch: &mut Batch,
    held: u64,
) -> Result<(), StoreError> {
    let a = batch.after_seq;
    if batch.last_seq <= a {
        return Ok(());
    }
    let Some(key) = known_key(conn, &batch.origin)? else {
        truncate(batch, a);
        return Ok(());
    };
    let mut q = conn.prepare_cached(
        "SELECT first, last, sig FROM log_seals
         WHERE log = ?1 AND last > ?2 AND first <= ?3 AND last <= ?4
         ORDER BY first",
    )?;
    let rows = q.query_map(
        params![log, a as i64, batch.last_seq as i64, held as i64],
        |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, i64>(1)? as u64,
                r.get::<_, Vec<u8>>(2)?,
            ))
        },
    )?;
    let stored: Vec<(u64, u64, Vec<u8>)> = rows.collect::<Result<_, _>>()?;
    let mut chosen: Vec<Seal> = Vec::new();
    let mut pos = a + 1;
    while pos <= batch.last_seq && chosen.len() < cairn_protocol::MAX_SEALS {
        let Some((first, last, sig)) = stored
            .iter()
            .filter(|(f, l, _)| *f <= pos && pos <= *l)
            .max_by_key(|(_, l, _)| *l)
        else {
            break;
        };
        let Ok(sig) = <[u8; 64]>::try_from(sig.as_slice()) else {
            break;
        };
        chosen.push(Seal {
            first: *first,
            last: *last,
            sig,
            before: Vec::new(),
            after: Vec::new(),
        });
        pos = last + 1;
    }
    let Some(end) = chosen.last().map(|s| s.last) else {
        truncate(batch, a);
        return Ok(());
    };
    if end < batch.last_seq {
        truncate(batch, end);
    }
    let last_seq = batch.last_seq;
    if let Some(s) = chosen.first_mut()
        && s.first <= a
    {
        match slot_hashes(conn, log, s.first, a)? {
            Some(h) => s.before = h,
            None => {
                truncate(batch, a);
                return Ok(());
            }
        }
    }
    if let Some(s) = chosen.last_mut()
        && s.last > last_seq
    {
        match slot_hashes(conn, log, last_seq + 1, s.last)? {
            Some(h) => s.after = h,
            None => {
                truncate(batch, a);
                return Ok(());
            }
        }
    }
    batch.seals = chosen;
    batch.origin_key = key;
    // Never send what the receiver would refuse: the seals kept are checked
    // again against the slots they are served with (hashes this node
    // received at another time may differ from a seal's).
    let sound = seal_checks(batch)
        .ok()
        .is_some_and(|c| crate::seal::verify(&batch.origin_key, &c).is_ok());
    if !sound {
        tracing::warn!(origin = %batch.origin, after = a, "kept seals do not prove this range; not relayed");
        truncate(batch, a);
        batch.origin_key.clear();
    }
    Ok(())
}

/// Drops the entries after `last` (more is then left to pull).
fn truncate(batch: &mut Batch, last: u64) {
    batch.records.retain(|r| r.seq <= last);
    batch.tombstones.retain(|t| t.seq <= last);
    batch.stubs.retain(|s| s.seq <= last);
    batch.more = batch.more || batch.last_seq > last;
    batch.last_seq = last;
    if last <= batch.after_seq {
        // Nothing this node can prove: an empty batch, and no claim of more.
        batch.more = false;
        batch.seals.clear();
    }
}

/// The hashes the slots `from..=to` of log `log` announce, or `None` when
/// one is missing.
fn slot_hashes(
    conn: &Connection,
    log: i64,
    from: u64,
    to: u64,
) -> Result<Option<Vec<Hash32>>, StoreError> {
    let mut q = conn.prepare_cached(
        "SELECT l.seq, coalesce(l.hash, r.hash) FROM logs l
         LEFT JOIN records r ON l.kind = 0 AND r.id = l.rec
         WHERE l.log = ?1 AND l.seq BETWEEN ?2 AND ?3 ORDER BY l.seq",
    )?;
    let rows = q.query_map(params![log, from as i64, to as i64], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Option<Vec<u8>>>(1)?))
    })?;
    let mut out = Vec::new();
    let mut next = from;
    for row in rows {
        let (seq, hash) = row?;
        let Some(hash) = hash.filter(|_| seq == next) else {
            return Ok(None);
        };
        out.push(hash32(&hash));
        next += 1;
    }
    Ok((next == to + 1).then_some(out))
}
