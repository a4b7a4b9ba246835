//! Writing a pass, on the caller's thread: the reader's [`Step`]s applied
//! in order inside the write transaction (records, redaction counts, each
//! store's new state or failure, the text dictionary), committed when the
//! bulk-load policy says so (`store::bulk`).
//!
//! It only runs store calls; it never reads an agent's files, and how
//! often it commits, its cache and the merges after it are the store's.

use std::collections::HashSet;
use std::sync::mpsc::Receiver;

use cairn_protocol::Hash32;

use super::backlog::Backlog;
use super::read::Step;
use super::{IndexContext, IndexError, IndexReport, Progress};
use crate::store::bulk::{Bulk, BulkPlan, Loaded};
use crate::store::{SourceState, Store};

/// The writer's half: steps in order, each giving its room in the
/// backlog back once the writer has taken it in.
pub(super) struct Inbox<'b> {
    pub(super) rx: Receiver<Step>,
    pub(super) backlog: &'b Backlog,
}

/// The store the writer is working on.
struct Current {
    id: i64,
    agent: &'static str,
    path: String,
    kind: &'static str,
    state: Option<SourceState>,
    /// Hashes of the records read, for a store read from scratch.
    keep: Option<HashSet<Hash32>>,
}

/// The writing side: applies the steps in order inside one write
/// transaction at a time, under the bulk-load policy `plan`.
pub(super) fn write_all(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    inbox: Inbox<'_>,
    progress: &mut dyn FnMut(Progress),
    report: IndexReport,
    plan: BulkPlan,
) -> Result<IndexReport, IndexError> {
    let mut bulk = store.begin_bulk(plan)?;
    let written = write_steps(store, ctx, inbox, progress, report, &mut bulk);
    let loaded = written.as_ref().ok().map(|r| Loaded {
        added: r.added,
        deferred: r.deferred,
    });
    store.end_bulk(bulk, loaded, ctx.deadline)?;
    written
}

fn write_steps(
    store: &mut Store,
    ctx: &IndexContext<'_>,
    inbox: Inbox<'_>,
    progress: &mut dyn FnMut(Progress),
    mut report: IndexReport,
    bulk: &mut Bulk,
) -> Result<IndexReport, IndexError> {
    let mut ing = store.ingest(ctx.origin)?;
    bulk.start(&mut ing)?;
    let mut cur: Option<Current> = None;
    for step in inbox.rx.iter() {
        // Taken off the channel: the reader may read on (the step in hand
        // is the one chunk beyond the cap).
        inbox.backlog.release(step.held_bytes());
        match step {
            Step::Begin {
                agent,
                path,
                kind,
                state,
            } => {
                report.changed += 1;
                let id = match &state {
                    Some(s) => s.id,
                    None => ing.source(agent, &path, kind)?.id,
                };
                cur = Some(Current {
                    id,
                    agent,
                    path,
                    kind,
                    state,
                    keep: None,
                });
            }
            Step::Replace => {
                if let Some(c) = &mut cur {
                    ing.reset_redactions(c.id)?;
                    c.keep = Some(HashSet::new());
                }
            }
            Step::Records {
                records,
                counts,
                bytes,
            } => {
                let Some(c) = &mut cur else { continue };
                for r in &records {
                    if let Some(k) = &mut c.keep {
                        k.insert(*r.hash());
                    }
                    bulk.wrote(r.text_len() as u64);
                    if ing.insert_new(r, Some(c.id))? {
                        report.added += 1;
                    }
                }
                ing.add_redactions(c.id, &counts)?;
                report.bytes_read += bytes;
                progress(Progress::Advance(bytes));
            }
            Step::End {
                mut state,
                skipped,
                bytes,
            } => {
                let Some(c) = cur.take() else { continue };
                state.id = c.id;
                if let Some(keep) = &c.keep {
                    report.removed += ing.retain_source_records(c.id, keep)?;
                }
                ing.save_state(&state, ctx.now_ms)?;
                report.skipped += skipped;
                report.bytes_read += bytes;
                progress(Progress::Advance(bytes));
            }
            Step::Failed { why } => {
                let Some(c) = cur.take() else { continue };
                tracing::warn!(agent = c.agent, path = %c.path, error = %why, "store skipped this pass");
                let mut st = c.state.unwrap_or_else(|| SourceState {
                    id: c.id,
                    agent: c.agent.to_owned(),
                    path: c.path.clone(),
                    kind: c.kind.to_owned(),
                    ..SourceState::default()
                });
                st.last_error = Some(why.clone());
                ing.save_state(&st, ctx.now_ms)?;
                report.failed.push((c.path, why));
            }
            Step::Deferred(n) => report.deferred += n,
            Step::Dict(d) => ing.save_text_dict(&d)?,
        }
        bulk.commit_if_due(&mut ing)?;
    }
    ing.commit()?;
    Ok(report)
}
