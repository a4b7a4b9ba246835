//! Relayed origins: the machines whose records reach this node only
//! through a paired peer, shown so the user can see who vouched for them
//! and refuse them (`cairn peers`, `--refuse-origin`, `--allow-origin`).
//!
//! The rule (docs/wire-format.md, "Relayed origins"): a paired peer may
//! relay any origin's log, and the first key it brings for an origin it
//! does not pair with is kept as that origin's key, with the peer that
//! vouched for it and when. A hub between two machines that never paired
//! works that way, and so would a compromised peer inventing a machine:
//! nothing on the wire tells the two apart. So every origin that is not a
//! paired machine (nor this one) is listed with its voucher, key
//! fingerprint and first sighting, and the user can refuse it: its
//! records, logs, seals and forgets are dropped, and its entries are
//! never pulled or accepted again, whoever relays them.
//!
//! Owns the listing and the resolution of what the user typed; the
//! storage rules are `store::trust`'s. Never touches the network.

use cairn_protocol::NodeId;
use serde::Serialize;

use super::peers::{PeerTable, PeersError};
use crate::config::Config;
use crate::store::{OriginKey, OriginRefusal, RefuseOriginError, Store, StoreError};

/// Failures of listing or refusing origins.
#[derive(Debug, thiserror::Error)]
pub enum OriginsError {
    /// The peer table could not be read.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The refusal failed.
    #[error(transparent)]
    Refuse(#[from] RefuseOriginError),
    /// Nothing known matches.
    #[error(
        "no relayed origin matches {query:?}: see `cairn peers` (or give the whole 32-character node id)"
    )]
    NotFound {
        /// The name or id prefix given.
        query: String,
    },
    /// More than one origin matches.
    #[error("{query:?} matches {count} origins; give more of the node id")]
    Ambiguous {
        /// The name or id prefix given.
        query: String,
        /// How many matched.
        count: usize,
    },
    /// The origin is a paired machine.
    #[error(
        "{name} ({origin}) is paired with this machine: run `cairn unpair {name}` first, then refuse it"
    )]
    Paired {
        /// The peer's name.
        name: String,
        /// Its node id.
        origin: String,
    },
}

/// An origin this node holds entries of (or refused) that is neither this
/// machine nor a paired one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelayedOrigin {
    /// Its node id and key, who vouched for it, when, and what is held.
    #[serde(flatten)]
    pub key: OriginKey,
    /// The name of the paired peer that vouched for it, when that peer is
    /// still paired.
    pub vouched_by_name: Option<String>,
}

/// The origins that are neither this machine nor paired with it, in the
/// order they were first seen; never writes (read-only database, absent
/// when there is none).
pub fn relayed_origins(config: &Config) -> Result<Vec<RelayedOrigin>, OriginsError> {
    let table = PeerTable::load(&config.home)?;
    let Ok(store) = Store::open_read_only(&config.db_path) else {
        return Ok(Vec::new());
    };
    relayed(&store, &table)
}

fn relayed(store: &Store, table: &PeerTable) -> Result<Vec<RelayedOrigin>, OriginsError> {
    let own = store.own_log()?.map(|l| l.origin);
    let keys = match store.origin_keys() {
        Ok(k) => k,
        // A database a newer build has not upgraded yet (read-only here).
        Err(StoreError::Sqlite(e)) => {
            tracing::debug!(error = %e, "origin keys unreadable");
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    Ok(keys
        .into_iter()
        .filter(|k| own.as_deref() != Some(k.origin.as_str()))
        .filter(|k| {
            k.origin
                .parse::<NodeId>()
                .map_or(true, |id| table.by_id(&id).is_none())
        })
        .map(|key| RelayedOrigin {
            vouched_by_name: key
                .vouched_by
                .as_deref()
                .and_then(|v| v.parse::<NodeId>().ok())
                .and_then(|id| table.by_id(&id))
                .map(|p| p.name.clone()),
            key,
        })
        .collect())
}

/// Refuses the origin `query` names (a name, a node id prefix of a known
/// origin, or a whole node id): see `Store::refuse_origin`.
pub fn refuse_origin(
    config: &Config,
    query: &str,
    now_ms: i64,
) -> Result<OriginRefusal, OriginsError> {
    let table = PeerTable::load(&config.home)?;
    let mut store = Store::open(&config.db_path)?;
    let origin = resolve(&store, &table, query, false)?;
    Ok(store.refuse_origin(&origin, now_ms)?)
}

/// Accepts a refused origin again; returns its node id.
pub fn allow_origin(config: &Config, query: &str) -> Result<NodeId, OriginsError> {
    let table = PeerTable::load(&config.home)?;
    let mut store = Store::open(&config.db_path)?;
    let origin = resolve(&store, &table, query, true)?;
    if store.allow_origin(&origin)? {
        Ok(origin)
    } else {
        Err(OriginsError::NotFound {
            query: query.to_owned(),
        })
    }
}

/// The relayed origin `query` names: its name (exactly), a prefix of its
/// node id, or any whole node id not paired with this machine.
fn resolve(
    store: &Store,
    table: &PeerTable,
    query: &str,
    refused_only: bool,
) -> Result<NodeId, OriginsError> {
    let q = query.trim();
    if let Ok(id) = q.parse::<NodeId>() {
        if let Some(p) = table.by_id(&id) {
            return Err(OriginsError::Paired {
                name: p.name.clone(),
                origin: id.to_string(),
            });
        }
        return Ok(id);
    }
    let lower = q.to_ascii_lowercase();
    let matches: Vec<RelayedOrigin> = relayed(store, table)?
        .into_iter()
        .filter(|o| !refused_only || o.key.refused_ms.is_some())
        .filter(|o| {
            !q.is_empty()
                && (o.key.name.as_deref() == Some(q)
                    || o.key.origin.to_ascii_lowercase().starts_with(&lower))
        })
        .collect();
    match matches.as_slice() {
        [one] => one.key.origin.parse().map_err(|_| OriginsError::NotFound {
            query: query.to_owned(),
        }),
        [] => {
            // A paired machine named so: say how to refuse it.
            if let Ok(p) = table.find(q) {
                return Err(OriginsError::Paired {
                    name: p.name.clone(),
                    origin: p.node_id.to_string(),
                });
            }
            Err(OriginsError::NotFound {
                query: query.to_owned(),
            })
        }
        many => Err(OriginsError::Ambiguous {
            query: query.to_owned(),
            count: many.len(),
        }),
    }
}
