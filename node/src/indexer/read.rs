//! Reading the changed stores, on the pass's reading thread: each planned
//! store from where the last pass stopped (appended lines from the saved
//! offset, a rewritten file from its start, a whole document re-parsed, a
//! database from its watermark), parsed, cleaned of recalled memory,
//! redacted and prepared, and handed to the writer as [`Step`]s within the
//! backlog's bound.
//!
//! It never touches the database: what it read, and the state to save,
//! travel to `write` in the steps.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::mpsc::SyncSender;

use super::IndexContext;
use super::backlog::Backlog;
use super::detect::Plan;
use crate::record::Record;
use crate::redact::{RedactionCounts, Redactor, scope};
use crate::sources::{self, LineParser, ParseError, Reader};
use crate::store::codec::TextDict;
use crate::store::{Encoder, NewRecord, SourceState};

/// Bytes hashed at the head of a file, and before its saved offset, to notice rewrites.
const FINGERPRINT: u64 = 4096;
/// Records per chunk handed from the reading thread to the writer.
pub(super) const BATCH: usize = 4000;
/// Bytes read per chunk, whichever of the two limits comes first.
const CHUNK_BYTES: u64 = 4 << 20;

/// Longest line read; a longer one is skipped and counted.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// The reading side's half of the channel, and how it encodes record text.
/// A send fails only when the writer stopped (on a database error); the
/// reader then stops too.
pub(super) struct Out<'b> {
    pub(super) tx: SyncSender<Step>,
    pub(super) encoder: std::cell::RefCell<Encoder>,
    pub(super) backlog: &'b Backlog,
}

/// The writer hung up.
pub(super) struct Hangup;

impl Out<'_> {
    /// Hands `step` to the writer, first waiting for room in the backlog
    /// for the memory its records hold.
    fn send(&self, step: Step) -> Result<(), Hangup> {
        self.backlog.hold(step.held_bytes()).map_err(|_| Hangup)?;
        self.tx.send(step).map_err(|_| Hangup)
    }
}

/// What the reading thread hands the writer, in order, for each store:
/// `Begin`, maybe `Replace`, any `Records`, then `End` or `Failed`.
pub(super) enum Step {
    /// A store is about to be read.
    Begin {
        agent: &'static str,
        path: String,
        kind: &'static str,
        /// What the last pass saved, if the store was seen before.
        state: Option<SourceState>,
    },
    /// The store is read from scratch: its redaction counts restart, and
    /// at its end its records no longer in it are removed.
    Replace,
    /// Records read from the store, redacted and prepared, with the
    /// redaction counts and the bytes read for them.
    Records {
        records: Vec<NewRecord>,
        counts: RedactionCounts,
        bytes: u64,
    },
    /// The store was read up to `state` (its id is the writer's to fill).
    End {
        state: SourceState,
        skipped: u64,
        bytes: u64,
    },
    /// The store could not be read this pass.
    Failed { why: String },
    /// The reader trained the database's text dictionary: stored before
    /// the records encoded with it, which follow.
    Dict(std::sync::Arc<TextDict>),
    /// Stores (or parts of one) left for the next pass by the deadline.
    Deferred(u64),
}

impl Step {
    /// Heap bytes this step's records hold, their list's spare room
    /// included (what the backlog bounds).
    pub(super) fn held_bytes(&self) -> u64 {
        match self {
            Step::Records { records, .. } => {
                let spare = records.capacity() - records.len();
                let held: usize = records.iter().map(NewRecord::held_bytes).sum();
                (held + spare * std::mem::size_of::<NewRecord>()) as u64
            }
            _ => 0,
        }
    }
}

/// The reading side: every planned store in turn, until the deadline.
pub(super) fn read_all(ctx: &IndexContext<'_>, plans: Vec<Plan>, out: &Out) {
    // Parsers that cut long texts redact them whole first, with this
    // node's rules (see `redact::scope`).
    let _scope = scope::enter(ctx.redactor);
    let total = plans.len() as u64;
    for (i, plan) in plans.into_iter().enumerate() {
        // Every pass reads at least one store, so passes always make progress.
        if i > 0 && past(ctx.deadline) {
            let _ = out.send(Step::Deferred(total - i as u64));
            return;
        }
        if read_one(ctx, &plan, out).is_err() {
            return;
        }
    }
}

/// Reads one store and hands what it holds to the writer.
fn read_one(ctx: &IndexContext<'_>, plan: &Plan, out: &Out) -> Result<(), Hangup> {
    let begin = || Step::Begin {
        agent: plan.agent,
        path: plan.file.path.to_string_lossy().into_owned(),
        kind: reader_kind(&plan.file.reader),
        state: plan.state.clone(),
    };
    if plan.file.path.is_dir() {
        // A folder the source could not list: report it like a file
        // that cannot be read (if it became readable meanwhile, its
        // files are discovered next pass).
        if let Some(why) = sources::common::folder_error(&plan.file.path) {
            out.send(begin())?;
            out.send(Step::Failed { why })?;
        }
        return Ok(());
    }
    out.send(begin())?;
    // Counts left by a file that failed part-way are not this file's.
    drop(scope::take_counts());
    let outcome = match plan.file.reader {
        Reader::Lines(factory) => read_lines(ctx, plan, factory, out),
        Reader::Whole(parse) => read_whole(ctx, plan, parse, out),
        Reader::Database(read) => read_database(ctx, plan, read, out),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(FileError::Hangup) => Err(Hangup),
        Err(FileError::Source(why)) => out.send(Step::Failed { why }),
    }
}

enum FileError {
    /// The writer stopped.
    Hangup,
    /// The store cannot be read.
    Source(String),
}

impl From<Hangup> for FileError {
    fn from(_: Hangup) -> Self {
        FileError::Hangup
    }
}

fn io_err(path: &Path, e: std::io::Error) -> FileError {
    FileError::Source(format!("failed to read {}: {e}", path.display()))
}

fn reader_kind(r: &Reader) -> &'static str {
    match r {
        Reader::Lines(_) => "lines",
        Reader::Whole(_) => "whole",
        Reader::Database(_) => "database",
    }
}

/// Cleans a record in place before it is stored: removes text cairn itself
/// injected into an agent's context (recalled memory echoed back into the
/// agent's transcript must not be re-indexed as if someone had said it),
/// then redacts secrets in every field (ids included, see
/// `redact::fields`), adding to `counts`.
pub(crate) fn redact(r: &mut Record, redactor: &Redactor, counts: &mut RedactionCounts) {
    if let std::borrow::Cow::Owned(t) = crate::redact::recalled::strip_recalled(&r.text) {
        r.text = t;
    }
    crate::redact::fields::redact_record(r, redactor, counts);
}

/// Redacts and prepares records for the writer and sends them.
fn send_records(
    ctx: &IndexContext<'_>,
    agent: &str,
    records: &mut Vec<Record>,
    bytes: u64,
    out: &Out,
) -> Result<(), Hangup> {
    // What the parsers redacted before cutting long texts, then the rest.
    let mut counts = scope::take_counts();
    let mut prepared = Vec::with_capacity(records.len());
    let mut enc = out.encoder.borrow_mut();
    for mut r in records.drain(..) {
        // Filed under the source that found the store, so a source can reuse
        // another agent's parser (Crush reads with opencode's).
        if r.agent != agent {
            r.agent = agent.to_owned();
        }
        redact(&mut r, ctx.redactor, &mut counts);
        if r.text.trim().is_empty() {
            continue;
        }
        prepared.push(NewRecord::from_record_with(r, &mut enc));
    }
    if let Some(d) = enc.take_trained() {
        out.send(Step::Dict(d))?;
    }
    out.send(Step::Records {
        records: prepared,
        counts,
        bytes,
    })
}

fn hash_range(file: &mut File, start: u64, len: u64) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity(len as usize);
    file.by_ref().take(len).read_to_end(&mut buf)?;
    Ok(blake3::hash(&buf).as_bytes().to_vec())
}

/// The head and tail fingerprints of a file whose first `offset` bytes were consumed.
fn fingerprints(file: &mut File, offset: u64) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let head = hash_range(file, 0, offset.min(FINGERPRINT))?;
    let tail_len = offset.min(FINGERPRINT);
    let tail = hash_range(file, offset - tail_len, tail_len)?;
    Ok((head, tail))
}

fn read_lines(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    factory: fn(&Path) -> Box<dyn LineParser>,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut state = plan.state.clone().unwrap_or_default();
    let mut start = state.offset;
    let mut rewritten = false;
    if start > 0 {
        let same = plan.size >= start
            && fingerprints(&mut file, start)
                .map(|(h, t)| Some(h) == state.head_hash && Some(t) == state.tail_hash)
                .unwrap_or(false);
        if !same {
            tracing::info!(path = %key, "file was rewritten; re-reading it");
            rewritten = true;
            start = 0;
        }
    }
    let mut parser = factory(path);
    let mut records = Vec::new();
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    if start > 0 {
        // Let the parser learn the session identity from the header line.
        let mut first = Vec::new();
        reader
            .seek(SeekFrom::Start(0))
            .map_err(|e| io_err(path, e))?;
        read_line(&mut reader, &mut first).map_err(|e| io_err(path, e))?;
        if first.ends_with(b"\n") {
            let mut discard = Vec::new();
            let _ignored = parser.line(trim_eol(&first), 0, &mut discard);
            drop(scope::take_counts());
        }
    }
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|e| io_err(path, e))?;
    if rewritten {
        out.send(Step::Replace)?;
        state.skipped = 0;
    }
    let mut pos = start;
    let mut buf = Vec::new();
    let mut skipped = 0u64;
    let mut cut_short = false;
    // Bytes read since the last chunk was sent.
    let mut pending = 0u64;
    loop {
        buf.clear();
        let n = read_line(&mut reader, &mut buf).map_err(|e| io_err(path, e))?;
        if n == 0 || !buf.ends_with(b"\n") {
            break; // end of file, or a torn last line left for the next pass
        }
        let line = trim_eol(&buf);
        if buf.len() > MAX_LINE {
            skipped += 1;
        } else if !line.iter().all(u8::is_ascii_whitespace)
            && let Err(e) = parser.line(line, pos, &mut records)
        {
            log_skip(&key, &e);
            skipped += 1;
        }
        pos += n as u64;
        pending += n as u64;
        if records.len() >= BATCH && past(ctx.deadline) && !rewritten {
            // Out of time: keep what was read and resume here next pass.
            let _ = out.send(Step::Deferred(1));
            cut_short = true;
            break;
        }
        if records.len() >= BATCH || pending >= CHUNK_BYTES {
            // Chunks before the last keep the old offset: a crash re-reads
            // them and the content hashes absorb the repeat.
            send_records(ctx, plan.agent, &mut records, pending, out)?;
            pending = 0;
        }
    }
    parser.finish(&mut records);
    let mut file = reader.into_inner();
    let (head, tail) = fingerprints(&mut file, pos).map_err(|e| io_err(path, e))?;
    state.offset = pos;
    state.head_hash = Some(head);
    state.tail_hash = Some(tail);
    // A file cut short records the size it was read to, so the next pass sees it changed.
    state.size = if cut_short { pos } else { plan.size };
    state.mtime_ns = plan.mtime_ns;
    state.skipped += skipped;
    state.last_error = None;
    state.kind = "lines".into();
    send_records(ctx, plan.agent, &mut records, 0, out)?;
    out.send(Step::End {
        state,
        skipped,
        bytes: pending,
    })?;
    Ok(())
}

fn read_whole(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    parse: fn(&Path, &[u8]) -> sources::Parsed,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let len = bytes.len() as u64;
    let mut parsed = parse(path, &bytes);
    drop(bytes);
    for e in &parsed.errors {
        log_skip(&key, e);
    }
    let mut state = plan.state.clone().unwrap_or_default();
    state.size = plan.size;
    state.mtime_ns = plan.mtime_ns;
    state.skipped = parsed.errors.len() as u64;
    state.last_error = None;
    state.kind = "whole".into();
    out.send(Step::Replace)?;
    while parsed.records.len() > BATCH {
        let mut chunk: Vec<Record> = parsed.records.drain(..BATCH).collect();
        send_records(ctx, plan.agent, &mut chunk, 0, out)?;
    }
    send_records(ctx, plan.agent, &mut parsed.records, 0, out)?;
    let skipped = state.skipped;
    out.send(Step::End {
        state,
        skipped,
        bytes: len,
    })?;
    Ok(())
}

fn read_database(
    ctx: &IndexContext<'_>,
    plan: &Plan,
    read: fn(&Path, &sources::Watermark) -> Result<sources::DbBatch, sources::SourceError>,
    out: &Out,
) -> Result<(), FileError> {
    let path = &plan.file.path;
    let key = path.to_string_lossy().into_owned();
    let mut state = plan.state.clone().unwrap_or_default();
    let mut batch = read(path, &state.watermark)
        .map_err(|e| FileError::Source(sources::layout::classify(e).to_string()))?;
    for e in &batch.parsed.errors {
        log_skip(&key, e);
    }
    state.watermark = batch.watermark.clone();
    state.size = plan.size;
    state.mtime_ns = plan.mtime_ns;
    let skipped = batch.parsed.errors.len() as u64;
    state.skipped += skipped;
    state.last_error = None;
    state.kind = "database".into();
    while batch.parsed.records.len() > BATCH {
        let mut chunk: Vec<Record> = batch.parsed.records.drain(..BATCH).collect();
        send_records(ctx, plan.agent, &mut chunk, 0, out)?;
    }
    send_records(ctx, plan.agent, &mut batch.parsed.records, 0, out)?;
    out.send(Step::End {
        state,
        skipped,
        bytes: plan.size,
    })?;
    Ok(())
}

fn past(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_some_and(|d| std::time::Instant::now() >= d)
}

fn log_skip(path: &str, e: &ParseError) {
    tracing::warn!(path, error = %e, "skipped malformed input");
}

/// Reads one line including its newline, refusing to buffer more than
/// [`MAX_LINE`] bytes: a longer line is consumed and returned truncated.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(total);
        }
        let (used, done) = match memchr_newline(avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if buf.len() < MAX_LINE + 1 {
            let room = (MAX_LINE + 1 - buf.len()).min(used);
            buf.extend_from_slice(&avail[..room]);
        }
        r.consume(used);
        total += used;
        if done {
            if !buf.ends_with(b"\n") {
                buf.push(b'\n');
            }
            return Ok(total);
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

fn trim_eol(buf: &[u8]) -> &[u8] {
    let b = buf.strip_suffix(b"\n").unwrap_or(buf);
    b.strip_suffix(b"\r").unwrap_or(b)
}
