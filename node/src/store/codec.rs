//! How record text is kept on disk. `records.flags` says which encoding a
//! row's `text` uses, so rows written by any earlier version stay readable:
//! - neither bit: plain UTF-8 (short texts that do not shrink);
//! - [`COMPRESSED`]: a zstd frame of its own (rows from before the
//!   dictionary, and texts stored while a database has none);
//! - [`DICT`]: a zstd frame made with the database's dictionary (see
//!   [`super::dict`]).
//!
//! Every reader of record text goes through [`decode`] (or [`try_decode`]).
//!
//! `records.role` holds a known role as a one-byte BLOB code ([`role_value`])
//! and any other role name (one a newer peer sent, or an alias that the
//! record's hash covers as written) as its TEXT, like every row written
//! before the codes: the storage class tells them apart, so every name
//! round-trips. Readers use [`role_at`], filters [`roles_sql`].

use std::borrow::Cow;

use rusqlite::Connection;
use rusqlite::types::{Value, ValueRef};

use crate::record::Role;

pub use super::dict::{TextDict, TextError};

/// `records.flags` bit: the text uses decision language ("decided", "because", ...).
pub const DECISION: i64 = 1 << 0;
/// `records.flags` bit: the text is a plain zstd frame.
pub const COMPRESSED: i64 = 1 << 1;
/// `records.flags` bit: the text is a zstd frame made with the database's dictionary.
pub const DICT: i64 = 1 << 2;
/// The bits that name the text's encoding.
pub const ENCODING: i64 = COMPRESSED | DICT;

/// Without a dictionary, texts shorter than this are stored as they are.
const MIN_COMPRESS: usize = 384;
/// With the dictionary, texts shorter than this are stored as they are.
const MIN_DICT: usize = 12;
/// zstd level without a dictionary: fast, and most of the gain.
const LEVEL: i32 = 6;

/// Encodes text for the `text` column, with `dict` when given; returns the
/// bytes and the encoding's `flags` bits.
pub fn encode<'t>(text: &'t str, dict: Option<&TextDict>) -> (Cow<'t, [u8]>, i64) {
    let bytes = text.as_bytes();
    match dict {
        Some(d) if bytes.len() >= MIN_DICT => {
            if let Some(z) = d.compress(bytes)
                && z.len() < bytes.len()
            {
                return (Cow::Owned(z), DICT);
            }
        }
        Some(_) => {}
        None if bytes.len() >= MIN_COMPRESS => {
            if let Some(z) = compress(bytes)
                && z.len() + 16 < bytes.len()
            {
                return (Cow::Owned(z), COMPRESSED);
            }
        }
        None => {}
    }
    (Cow::Borrowed(bytes), 0)
}

thread_local! {
    /// One compression context per thread: making a zstd context per
    /// record costs more than compressing a short text.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, TextError> {
    let size = zstd::zstd_safe::get_frame_content_size(bytes)
        .ok()
        .flatten()
        .filter(|n| *n <= super::dict::MAX_PLAIN)
        .ok_or_else(|| TextError::Frame("no usable frame size".into()))?;
    DECOMPRESSOR.with(|cell| {
        let frame = |e: std::io::Error| TextError::Frame(e.to_string());
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|e| TextError::Frame(e.to_string()))?;
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(frame)?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(bytes, size as usize).map_err(frame),
            None => Err(TextError::Frame("no decompressor".into())),
        }
    })
}

fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        slot.as_mut()?.compress(bytes).ok()
    })
}

/// Decodes a `text` value given its row's `flags`, with `dict` for the
/// texts that need one (`Err` if they do and it is `None`).
pub fn decode_with(
    bytes: &[u8],
    flags: i64,
    dict: Result<Option<&TextDict>, TextError>,
) -> Result<String, TextError> {
    let plain = match flags & ENCODING {
        0 => return Ok(String::from_utf8_lossy(bytes).into_owned()),
        COMPRESSED => decompress(bytes)?,
        DICT => dict?.ok_or(TextError::NoDictionary)?.decompress(bytes)?,
        _ => return Err(TextError::Encoding(flags)),
    };
    Ok(String::from_utf8(plain)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Decodes a `text` value of the database behind `conn`, given its row's
/// `flags`. The dictionary is looked up only for texts that need it.
pub fn try_decode(conn: &Connection, bytes: &[u8], flags: i64) -> Result<String, TextError> {
    if flags & ENCODING == DICT {
        let dict = super::dict::load(conn)?;
        decode_with(bytes, flags, Ok(dict.as_deref()))
    } else {
        decode_with(bytes, flags, Ok(None))
    }
}

/// [`try_decode`] for showing and serving text: a value that cannot be
/// decoded (a damaged row) yields a marker instead of failing the whole
/// query, and is logged.
pub fn decode(conn: &Connection, bytes: &[u8], flags: i64) -> String {
    try_decode(conn, bytes, flags).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "unreadable record text");
        "[cairn: unreadable record text]".to_owned()
    })
}

/// The one-byte code of a known role in `records.role`.
pub(crate) fn role_code(r: Role) -> u8 {
    match r {
        Role::User => 1,
        Role::Assistant => 2,
        Role::ToolCall => 3,
        Role::ToolOutput => 4,
        Role::Note => 5,
    }
}

/// How role `name` is stored: a known role's code when `name` is its exact
/// name, otherwise the name as it is.
pub fn role_value(name: &str) -> Value {
    match Role::ALL.into_iter().find(|r| r.as_str() == name) {
        Some(r) => Value::Blob(vec![role_code(r)]),
        None => Value::Text(name.to_owned()),
    }
}

/// The code of the known role that a `records.role` value stands for (its
/// code, or its name in an older row); `None` for any other value.
pub(crate) fn role_code_in(value: ValueRef<'_>) -> Option<u8> {
    match value {
        ValueRef::Blob(&[c]) => Role::ALL.into_iter().map(role_code).find(|k| *k == c),
        ValueRef::Text(t) => Role::ALL
            .into_iter()
            .find(|r| r.as_str().as_bytes() == t)
            .map(role_code),
        _ => None,
    }
}

/// The role name in column `i` of a row of `records`.
pub fn role_at(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<String> {
    match row.get_ref(i)? {
        ValueRef::Text(t) => Ok(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(&[c]) => Role::ALL
            .into_iter()
            .find(|r| role_code(*r) == c)
            .map(|r| r.as_str().to_owned())
            .ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    i,
                    rusqlite::types::Type::Blob,
                    format!("unknown role code {c}").into(),
                )
            }),
        other => Err(rusqlite::Error::InvalidColumnType(
            i,
            "role".into(),
            other.data_type(),
        )),
    }
}

/// An SQL list matching `roles` in `records.role` whichever way a row
/// stores them (code, or the name in older rows): `'user', x'01'`.
pub fn roles_sql(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|r| format!("'{}', x'{:02x}'", r.as_str(), role_code(*r)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> (Vec<u8>, Vec<usize>) {
        let mut buf = Vec::new();
        let mut sizes = Vec::new();
        for i in 0..4000 {
            let t = format!(
                "{{\"tool\":\"bash\",\"command\":\"cargo test -p crate{} -- module{}::case\",\"cwd\":\"/home/dev/project{}\"}} ran {} tests, {} failed",
                i % 17,
                i % 31,
                i % 7,
                i * 3,
                i % 5
            );
            buf.extend_from_slice(t.as_bytes());
            sizes.push(t.len());
        }
        (buf, sizes)
    }

    fn trained() -> TextDict {
        let (buf, sizes) = samples();
        TextDict::train(&buf, &sizes).expect("train")
    }

    #[test]
    fn every_encoding_round_trips() {
        let dict = trained();
        let short_json =
            "{\"tool\":\"bash\",\"command\":\"cargo test -p crate3 -- module9::case\"}";
        let texts = [
            "",
            "short",
            short_json,
            &"fn main() { println!(\"hi\"); }\n".repeat(100),
            &"日本語のテキスト".repeat(200),
        ];
        for text in texts {
            let (bytes, enc) = encode(text, None);
            assert_eq!(enc != 0, text.len() > 1000, "{}", text.len());
            assert_eq!(decode_with(&bytes, enc, Ok(None)).as_deref(), Ok(text));
            let (bytes, enc) = encode(text, Some(&dict));
            assert_eq!(enc, if text.len() >= 50 { DICT } else { 0 }, "{text:.40}");
            assert_eq!(
                decode_with(&bytes, enc | DECISION, Ok(Some(&dict))).as_deref(),
                Ok(text)
            );
        }
        // The dictionary halves what plain zstd cannot touch.
        let (z, _) = encode(short_json, Some(&dict));
        assert!(z.len() * 2 < short_json.len(), "{} bytes", z.len());
    }

    #[test]
    fn damage_is_a_typed_error() {
        let dict = trained();
        assert!(matches!(
            decode_with(b"not zstd", COMPRESSED, Ok(None)),
            Err(TextError::Frame(_))
        ));
        assert!(matches!(
            decode_with(b"not zstd", DICT, Ok(Some(&dict))),
            Err(TextError::Frame(_))
        ));
        let text = "{\"tool\":\"bash\",\"command\":\"cargo test -p crate3\"} ran 12 tests";
        let (z, enc) = encode(text, Some(&dict));
        assert_eq!(enc, DICT);
        assert_eq!(decode_with(&z, enc, Ok(None)), Err(TextError::NoDictionary));
        let mut cut = z.to_vec();
        cut.truncate(z.len() - 3);
        assert!(decode_with(&cut, DICT, Ok(Some(&dict))).is_err());
        assert_eq!(
            decode_with(&z, COMPRESSED | DICT, Ok(Some(&dict))),
            Err(TextError::Encoding(COMPRESSED | DICT))
        );
        // A dictionary whose bytes no longer match their digest is refused.
        let mut raw = dict.raw_for_tests().to_vec();
        let mid = raw.len() / 2;
        raw[mid] ^= 0x55;
        assert_eq!(
            TextDict::from_raw(raw, dict.id()).map(|_| ()),
            Err(TextError::BadDictionary)
        );
        // Garbage that matches its own digest is refused by zstd or decodes
        // to an error, never a panic.
        let junk = vec![0x37, 0xa4, 0x30, 0xec, 0, 0, 0, 0, 1, 2, 3];
        let id = blake3::hash(&junk).to_hex()[..32].to_owned();
        if let Ok(d) = TextDict::from_raw(junk, &id) {
            let _ = decode_with(&z, DICT, Ok(Some(&d)));
        }
    }

    #[test]
    fn every_role_round_trips_and_filters_match_both_forms() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t(role TEXT NOT NULL)")
            .expect("table");
        let names = [
            "user",
            "assistant",
            "tool_call",
            "tool_output",
            "note",
            "tool",
            "mystery",
            "",
            "\u{1}",
            "1",
        ];
        for n in names {
            conn.execute("INSERT INTO t(role) VALUES (?1)", [role_value(n)])
                .expect("insert");
        }
        // A row from before the codes.
        conn.execute("INSERT INTO t(role) VALUES ('user')", [])
            .expect("old");
        let back: Vec<String> = conn
            .prepare("SELECT role FROM t ORDER BY rowid")
            .expect("prepare")
            .query_map([], |r| role_at(r, 0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        want.push("user".into());
        assert_eq!(back, want);
        let kinds: Vec<String> = conn
            .prepare("SELECT typeof(role) FROM t ORDER BY rowid LIMIT 2")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(kinds, ["blob", "blob"]);
        let n: i64 = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM t WHERE role IN ({})",
                    roles_sql(&[Role::User, Role::Note])
                ),
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(n, 3, "the coded user and note rows and the old user row");
    }
}
