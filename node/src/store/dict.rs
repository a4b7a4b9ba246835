//! The database's zstd dictionary for record text, trained on this node's
//! own records (short texts halve, long ones shrink a third more). At
//! most one, in `meta` (`text_dict`, `text_dict_id`), written once and
//! never replaced, so every text encoded with it stays readable; trained
//! after [`SAMPLE_BYTES`] of text or from a large database's records
//! ([`Encoder`]). It never leaves the machine: peers exchange plain text.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::{Connection, OptionalExtension};

/// Why a stored text could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// The text needs the database's dictionary and there is none.
    #[error("record text needs the database's dictionary, which is missing")]
    NoDictionary,
    /// The stored dictionary does not match its digest or zstd refuses it.
    #[error("the database's text dictionary is damaged")]
    BadDictionary,
    /// The compressed bytes are damaged.
    #[error("damaged record text: {0}")]
    Frame(String),
    /// The flags name an encoding this build does not know.
    #[error("unknown record text encoding (flags {0:#x})")]
    Encoding(i64),
    /// The dictionary could not be read from the database.
    #[error("cannot read the text dictionary: {0}")]
    Database(String),
}

/// Size of a trained dictionary (zstd's usual maximum).
const DICT_BYTES: usize = 110 * 1024;
/// Text seen before a dictionary is trained.
pub const SAMPLE_BYTES: usize = 4 << 20;
/// Bytes of one text taken as a sample: long texts are cut so one huge
/// tool output does not fill the whole sample.
const SAMPLE_CAP: usize = 8 * 1024;
/// zstd level with the dictionary: the dictionary brings most of the gain.
const LEVEL: i32 = 3;
/// Stored texts are at most [`crate::sources::common::TEXT_CAP`] plus an
/// elision marker; anything claiming to be far larger is damaged.
pub(super) const MAX_PLAIN: u64 = 1 << 20;

/// A loaded dictionary, ready to compress and decompress.
pub struct TextDict {
    id: String,
    raw: Vec<u8>,
    ddict: zstd::zstd_safe::DDict<'static>,
    /// Made on first use: readers never need it.
    cdict: OnceLock<Option<zstd::zstd_safe::CDict<'static>>>,
}

impl std::fmt::Debug for TextDict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextDict")
            .field("id", &self.id)
            .field("bytes", &self.raw.len())
            .finish()
    }
}

/// The digest stored beside a dictionary, checked when it is loaded.
fn digest(raw: &[u8]) -> String {
    blake3::hash(raw).to_hex()[..32].to_owned()
}

thread_local! {
    static CCTX: RefCell<Option<zstd::zstd_safe::CCtx<'static>>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

impl TextDict {
    /// Loads dictionary bytes, checking them against `id`.
    pub fn from_raw(raw: Vec<u8>, id: &str) -> Result<TextDict, TextError> {
        if digest(&raw) != id {
            return Err(TextError::BadDictionary);
        }
        let ddict = zstd::zstd_safe::DDict::try_create(&raw).ok_or(TextError::BadDictionary)?;
        Ok(TextDict {
            id: id.to_owned(),
            raw,
            ddict,
            cdict: OnceLock::new(),
        })
    }

    /// Trains a dictionary on `samples` (texts laid end to end) cut at
    /// `sizes`; `None` when zstd finds too little to learn from.
    pub fn train(samples: &[u8], sizes: &[usize]) -> Option<TextDict> {
        let mut raw = Vec::with_capacity(DICT_BYTES);
        zstd::zstd_safe::train_from_buffer(&mut raw, samples, sizes).ok()?;
        if raw.len() < 8 {
            return None;
        }
        // Dictionary id 0: frames then carry no id (4 bytes each), and the
        // database already says which dictionary its texts use.
        raw[4..8].copy_from_slice(&[0; 4]);
        let id = digest(&raw);
        TextDict::from_raw(raw, &id).ok()
    }

    #[cfg(test)]
    pub(crate) fn raw_for_tests(&self) -> &[u8] {
        &self.raw
    }

    /// The digest that names this dictionary.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Compresses `bytes`; `None` if zstd fails.
    pub(super) fn compress(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let cdict = self
            .cdict
            .get_or_init(|| zstd::zstd_safe::CDict::try_create(&self.raw, LEVEL))
            .as_ref()?;
        CCTX.with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if slot.is_none() {
                *slot = zstd::zstd_safe::CCtx::try_create();
            }
            let cctx = slot.as_mut()?;
            let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(bytes.len()));
            cctx.compress_using_cdict(&mut out, bytes, cdict).ok()?;
            Some(out)
        })
    }

    /// Decompresses a frame made by [`TextDict::compress`].
    pub(super) fn decompress(&self, bytes: &[u8]) -> Result<Vec<u8>, TextError> {
        let size = zstd::zstd_safe::get_frame_content_size(bytes)
            .ok()
            .flatten()
            .filter(|n| *n <= MAX_PLAIN)
            .ok_or_else(|| TextError::Frame("no usable frame size".into()))?;
        DCTX.with(|cell| {
            let mut slot = cell
                .try_borrow_mut()
                .map_err(|e| TextError::Frame(e.to_string()))?;
            if slot.is_none() {
                *slot = zstd::zstd_safe::DCtx::try_create();
            }
            let dctx = slot
                .as_mut()
                .ok_or_else(|| TextError::Frame("no decompression context".into()))?;
            let mut out = Vec::with_capacity(size as usize);
            dctx.decompress_using_ddict(&mut out, bytes, &self.ddict)
                .map_err(|code| TextError::Frame(zstd::zstd_safe::get_error_name(code).into()))?;
            Ok(out)
        })
    }
}

/// Dictionaries loaded by this process, by digest: a search process loads
/// its database's once, however many texts it shows.
static LOADED: Mutex<Option<HashMap<String, Arc<TextDict>>>> = Mutex::new(None);

/// The database's dictionary: `Ok(None)` if it has none yet.
pub fn load(conn: &Connection) -> Result<Option<Arc<TextDict>>, TextError> {
    let db = |e: rusqlite::Error| TextError::Database(e.to_string());
    let Some(id) = super::meta_get(conn, "text_dict_id").map_err(db)? else {
        return Ok(None);
    };
    if let Some(d) = LOADED
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(&id).cloned()))
    {
        return Ok(Some(d));
    }
    let raw: Option<Vec<u8>> = conn
        .query_row("SELECT value FROM meta WHERE key = 'text_dict'", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(db)?;
    let dict = Arc::new(TextDict::from_raw(
        raw.ok_or(TextError::BadDictionary)?,
        &id,
    )?);
    if let Ok(mut m) = LOADED.lock() {
        m.get_or_insert_with(HashMap::new)
            .insert(id, Arc::clone(&dict));
    }
    Ok(Some(dict))
}

/// Stores `dict` as the database's dictionary, inside the caller's write
/// transaction. Fails if the database already holds a different one (another
/// process trained its own meanwhile): texts encoded with `dict` must then
/// not be stored, and the caller's transaction is abandoned.
pub(super) fn save(conn: &Connection, dict: &TextDict) -> Result<(), super::StoreError> {
    match super::meta_get(conn, "text_dict_id")? {
        Some(id) if id == dict.id => Ok(()),
        Some(_) => Err(super::StoreError::DictionaryRace),
        None => {
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('text_dict', ?1), ('text_dict_id', ?2)",
                rusqlite::params![dict.raw, dict.id],
            )?;
            Ok(())
        }
    }
}

/// Chooses each new text's encoding during an indexing pass, and trains the
/// database's dictionary once the pass has seen enough text.
pub struct Encoder {
    dict: Option<Arc<TextDict>>,
    /// Texts gathered for training, while the database has no dictionary.
    samples: Option<(Vec<u8>, Vec<usize>)>,
    /// A dictionary trained by this encoder and not yet handed over.
    trained: Option<Arc<TextDict>>,
    /// Sample bytes to gather before training ([`SAMPLE_BYTES`]).
    want: usize,
}

impl Encoder {
    /// An encoder for the database behind `conn`, with its dictionary if it
    /// has one, otherwise ready to train one.
    pub fn for_db(conn: &Connection) -> Encoder {
        Encoder::for_db_after(conn, MIN_STORED, SAMPLE_BYTES)
    }

    /// [`Encoder::for_db`], training from the stored records once there are
    /// `min_stored` of them and `want` bytes of their text.
    fn for_db_after(conn: &Connection, min_stored: i64, want: usize) -> Encoder {
        match load(conn) {
            Ok(Some(d)) => Encoder::with(Some(d)),
            Ok(None) => match train_from_stored(conn, min_stored, want) {
                // Handed to the writer like one trained during the pass.
                Some(d) => Encoder {
                    trained: Some(Arc::clone(&d)),
                    ..Encoder::with(Some(d))
                },
                None => Encoder {
                    want,
                    ..Encoder::with(None)
                },
            },
            Err(e) => {
                // Leave the damaged dictionary alone and store plain zstd.
                tracing::warn!(error = %e, "text dictionary unusable; new texts are stored without it");
                Encoder {
                    dict: None,
                    samples: None,
                    trained: None,
                    want: SAMPLE_BYTES,
                }
            }
        }
    }

    /// An encoder using `dict`, or training one when `None`.
    pub fn with(dict: Option<Arc<TextDict>>) -> Encoder {
        let samples = dict
            .is_none()
            .then(|| (Vec::with_capacity(SAMPLE_BYTES + SAMPLE_CAP), Vec::new()));
        Encoder {
            dict,
            samples,
            trained: None,
            want: SAMPLE_BYTES,
        }
    }

    /// An encoder that trains after `want` bytes of samples.
    #[cfg(test)]
    pub(crate) fn training_after(want: usize) -> Encoder {
        Encoder {
            want,
            ..Encoder::with(None)
        }
    }

    /// The dictionary texts are encoded with, if any.
    pub fn dict(&self) -> Option<&TextDict> {
        self.dict.as_deref()
    }

    /// Notes a text about to be encoded; trains the dictionary once enough
    /// text was seen.
    pub fn observe(&mut self, text: &str) {
        let Some((buf, sizes)) = &mut self.samples else {
            return;
        };
        let take = floor_char(text, SAMPLE_CAP);
        if take.is_empty() {
            return;
        }
        buf.extend_from_slice(take.as_bytes());
        sizes.push(take.len());
        if buf.len() < self.want {
            return;
        }
        let started = std::time::Instant::now();
        let dict = TextDict::train(buf, sizes).map(Arc::new);
        tracing::debug!(
            samples = sizes.len(),
            ms = started.elapsed().as_millis() as u64,
            ok = dict.is_some(),
            "trained the text dictionary"
        );
        self.samples = None;
        self.trained = dict.clone();
        self.dict = dict;
    }

    /// A newly trained dictionary, once: the writer stores it before any
    /// text encoded with it.
    pub fn take_trained(&mut self) -> Option<Arc<TextDict>> {
        self.trained.take()
    }
}

/// Records a database holds before a pass trains its dictionary from them
/// (a cheap look at the highest id; smaller ones train from a pass's text).
const MIN_STORED: i64 = 5_000;

/// Trains a dictionary from the newest stored records, for a database that
/// has many but no dictionary (one indexed before dictionaries existed):
/// `None` if they hold less than `want` bytes of text or zstd finds too
/// little to learn from.
fn train_from_stored(conn: &Connection, min_stored: i64, want: usize) -> Option<Arc<TextDict>> {
    let newest: i64 = conn
        .query_row("SELECT COALESCE(max(id), 0) FROM records", [], |r| r.get(0))
        .ok()?;
    if newest < min_stored {
        return None;
    }
    let started = std::time::Instant::now();
    let mut buf = Vec::with_capacity(want + SAMPLE_CAP);
    let mut sizes = Vec::new();
    let mut q = conn
        .prepare("SELECT text, flags FROM records ORDER BY id DESC")
        .ok()?;
    let mut rows = q.query([]).ok()?;
    while buf.len() < want {
        let Some(row) = rows.next().ok()? else { break };
        let (Ok(bytes), Ok(flags)) = (
            row.get_ref(0).and_then(|v| Ok(v.as_bytes()?)),
            row.get::<_, i64>(1),
        ) else {
            continue;
        };
        // No dictionary yet, so no text needs one.
        let Ok(text) = super::codec::decode_with(bytes, flags, Ok(None)) else {
            continue;
        };
        let take = floor_char(&text, SAMPLE_CAP);
        if !take.is_empty() {
            buf.extend_from_slice(take.as_bytes());
            sizes.push(take.len());
        }
    }
    if buf.len() < want {
        return None;
    }
    let dict = TextDict::train(&buf, &sizes).map(Arc::new);
    tracing::debug!(
        samples = sizes.len(),
        ms = started.elapsed().as_millis() as u64,
        ok = dict.is_some(),
        "trained the text dictionary from stored records"
    );
    dict
}

/// The longest prefix of `s` of at most `max` bytes ending on a character boundary.
fn floor_char(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl super::Store {
    /// How an indexing pass encodes new texts: with the database's
    /// dictionary, or training one.
    pub fn text_encoder(&self) -> Encoder {
        Encoder::for_db(&self.conn)
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::{self, COMPRESSED, DICT};
    use super::super::{NewRecord, Store};
    use super::*;
    use crate::record::{Record, Role};

    fn text(i: usize) -> String {
        match i % 3 {
            0 => format!("{{\"tool\":\"bash\",\"command\":\"cargo build -p part{i}\"}}"),
            1 => format!("compiling part{i} v0.1.0 (/home/dev/cairn/part{i})\n").repeat(1 + i % 40),
            _ => format!("short {i}"),
        }
    }

    /// Every row's text, decoded, in id order, with its encoding bits.
    fn rows(store: &Store) -> Vec<(String, i64)> {
        let conn = store.conn();
        let mut q = conn
            .prepare("SELECT text, flags FROM records ORDER BY id")
            .expect("prepare");
        q.query_map([], |r| {
            let flags: i64 = r.get(1)?;
            let text = codec::try_decode(conn, &r.get::<_, Vec<u8>>(0)?, flags).expect("decodes");
            Ok((text, flags & codec::ENCODING))
        })
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
    }

    #[test]
    fn rows_from_before_the_dictionary_stay_readable_and_later_rows_use_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let rec = |i: usize| Record::new("claude-code", "s1", Role::ToolOutput, text(i));
        // Rows written before the database has a dictionary.
        let mut ing = store.ingest("node").expect("ingest");
        for i in 0..30 {
            ing.insert(&rec(i), None).expect("insert");
        }
        ing.commit().expect("commit");
        assert!(store.text_encoder().dict().is_none());
        // Too few stored records to train from.
        let enc = Encoder::for_db_after(store.conn(), 1_000, 1_000);
        assert!(enc.dict().is_none());
        // A pass trains one once it has seen enough text, and stores it
        // before the records encoded with it.
        let mut enc = Encoder::training_after(64 << 10);
        let mut prepared = Vec::new();
        let mut trained = None;
        for i in 30..3000 {
            prepared.push(NewRecord::from_record_with(rec(i), &mut enc));
            if let Some(d) = enc.take_trained() {
                trained = Some(d);
            }
        }
        let trained = trained.expect("trained");
        let mut ing = store.ingest("node").expect("ingest");
        ing.save_text_dict(&trained).expect("save");
        for r in &prepared {
            ing.insert_new(r, None).expect("insert");
        }
        // A record written directly (a note, a peer's record) is encoded
        // with the stored dictionary too.
        ing.insert(&rec(3000), None).expect("insert");
        ing.commit().expect("commit");
        let got = rows(&store);
        let want: Vec<String> = (0..=3000).map(text).collect();
        assert_eq!(got.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>(), want);
        let count = |e: i64| got.iter().filter(|(_, f)| *f == e).count();
        assert!(count(0) > 0 && count(COMPRESSED) > 0 && count(DICT) > 0);
        assert!(got[..30].iter().all(|(_, f)| *f != DICT));
        assert_eq!(got[3000].1, DICT);
        // The dictionary is kept: a later pass encodes with it.
        assert_eq!(
            store.text_encoder().dict().map(|d| d.id().to_owned()),
            Some(trained.id().to_owned())
        );
        // It is never replaced by another one.
        let (buf, sizes): (Vec<u8>, Vec<usize>) = {
            let texts: Vec<String> = (0..2000)
                .map(|i| format!("other words {i} ").repeat(9))
                .collect();
            (
                texts.concat().into_bytes(),
                texts.iter().map(String::len).collect(),
            )
        };
        let other = TextDict::train(&buf, &sizes).expect("train");
        let mut ing = store.ingest("node").expect("ingest");
        assert!(matches!(
            ing.save_text_dict(&other),
            Err(super::super::StoreError::DictionaryRace)
        ));
        drop(ing);
        // A damaged stored dictionary is a typed error for the rows that
        // need it, and the others still read.
        store
            .conn()
            .execute(
                "UPDATE meta SET value = substr(value, 1, 5000) WHERE key = 'text_dict'",
                [],
            )
            .expect("damage");
        LOADED.lock().expect("cache").take();
        let conn = store.conn();
        let (z, flags): (Vec<u8>, i64) = conn
            .query_row("SELECT text, flags FROM records WHERE id = 3001", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("row");
        assert_eq!(
            codec::try_decode(conn, &z, flags),
            Err(TextError::BadDictionary)
        );
        assert!(codec::decode(conn, &z, flags).contains("unreadable"));
        let (first, flags): (Vec<u8>, i64) = conn
            .query_row("SELECT text, flags FROM records WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("row");
        assert_eq!(codec::try_decode(conn, &first, flags), Ok(text(0)));
    }

    #[test]
    fn a_database_indexed_before_dictionaries_trains_one_from_its_records() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        for i in 0..600 {
            let r = Record::new("claude-code", "s1", Role::ToolOutput, text(i));
            ing.insert(&r, None).expect("insert");
        }
        ing.commit().expect("commit");
        // Not enough text yet for this threshold: nothing trained.
        assert!(
            Encoder::for_db_after(store.conn(), 500, 1 << 30)
                .dict()
                .is_none()
        );
        let mut enc = Encoder::for_db_after(store.conn(), 500, 32 << 10);
        let d = enc.take_trained().expect("trained from the stored records");
        assert_eq!(enc.dict().map(TextDict::id), Some(d.id()));
        let mut ing = store.ingest("node").expect("ingest");
        ing.save_text_dict(&d).expect("save");
        let new = NewRecord::from_record_with(
            Record::new("claude-code", "s1", Role::ToolOutput, text(601)),
            &mut enc,
        );
        ing.insert_new(&new, None).expect("insert");
        ing.commit().expect("commit");
        let got = rows(&store);
        assert_eq!(got.len(), 601);
        assert_eq!(got[600], (text(601), DICT));
        assert!(got[..600].iter().all(|(_, f)| *f != DICT));
        // A later pass finds it stored and trains nothing.
        let mut later = store.text_encoder();
        assert!(later.take_trained().is_none());
        assert_eq!(later.dict().map(TextDict::id), Some(d.id()));
    }
}
