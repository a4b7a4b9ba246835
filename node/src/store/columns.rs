//! How the columns file (`store::columns_file`) codes a record's facts:
//! its time and decision mark as one word ([`Stamp`]), its length as a
//! class on a 10% scale ([`class_of`]), its role as a byte
//! ([`role_byte`]), and the plain length of a stored text without
//! decoding it ([`stored_len`]). The same codes are made from a record's
//! row when the file cannot say, so both give the same answer.
//!
//! Pure: no file, no database, no clock.

use rusqlite::types::ValueRef;

use super::codec;

/// The ratio between the lengths of two neighbouring classes.
const STEP: f64 = 1.1;

/// The role byte of a role none of the known ones (a name a newer peer
/// sent): no filter allows it.
pub(crate) const OTHER_ROLE: u8 = 0xff;

/// The class of a text `len` bytes long: 1 for an empty one, then one
/// more for every 10% of length, up to 255 (about 2.6 · 10¹⁰ bytes, far
/// beyond what a record holds). 0 means "not known".
pub(crate) fn class_of(len: usize) -> u8 {
    let c = 1.0 + ((len as f64) + 1.0).ln() / STEP.ln();
    c.round().clamp(1.0, 255.0) as u8
}

/// The length a class stands for (the middle of its range, in bytes);
/// `None` for class 0, "not known".
pub(crate) fn length_of(class: u8) -> Option<f64> {
    // Worked out once: a search asks for thousands.
    static LENGTHS: std::sync::LazyLock<[f64; 256]> =
        std::sync::LazyLock::new(|| std::array::from_fn(|c| STEP.powf(c as f64 - 1.0) - 1.0));
    (class > 0).then(|| LENGTHS[usize::from(class)])
}

/// The role byte of a `records.role` value: the code of a known role
/// (`codec::role_code`), else [`OTHER_ROLE`]; never 0.
pub(crate) fn role_byte(value: ValueRef<'_>) -> u8 {
    codec::role_code_in(value).unwrap_or(OTHER_ROLE)
}

/// The plain text's length of a stored `text` column's value, from its
/// bytes and the row's `flags`, without decompressing it (a zstd frame
/// states its size); `None` for a value that cannot say. Older databases
/// hold some texts as SQL text, newer ones as blobs.
pub(crate) fn stored_len(text: ValueRef<'_>, flags: i64) -> Option<usize> {
    let bytes = match text {
        ValueRef::Blob(b) | ValueRef::Text(b) => b,
        _ => return None,
    };
    match flags & codec::ENCODING {
        0 => Some(bytes.len()),
        _ => zstd::zstd_safe::get_frame_content_size(bytes)
            .ok()
            .flatten()
            .map(|n| n as usize),
    }
}

/// A record's time (Unix ms; `None` for an undated record) and whether
/// it carries the decision mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) ts: Option<i64>,
    pub(crate) decision: bool,
}

const KNOWN: u64 = 1;
const DECISION: u64 = 1 << 1;
const DATED: u64 = 1 << 2;
/// The bits below the time.
const SHIFT: u32 = 3;

impl Stamp {
    /// The stamp of a record's `ts` and `flags` columns.
    pub(crate) fn of(ts: Option<i64>, flags: i64) -> Stamp {
        Stamp {
            ts,
            decision: flags & codec::DECISION != 0,
        }
    }

    /// Its word: from the lowest bit, 1 (known), the decision mark,
    /// whether the record is dated, then its time (signed). 0 (not known)
    /// for a time too far from 1970 to fit in the word's 61 bits (about
    /// 36 million years either way).
    pub(crate) fn word(self) -> u64 {
        let mut w = KNOWN;
        if self.decision {
            w |= DECISION;
        }
        if let Some(ts) = self.ts {
            let fits = ts.checked_shl(SHIFT).is_some_and(|s| s >> SHIFT == ts);
            if !fits {
                return 0;
            }
            w |= DATED | ((ts << SHIFT) as u64);
        }
        w
    }

    /// The stamp a word holds; `None` for a word that says nothing (0), or
    /// one no writer makes (bits set beyond what it marks).
    pub(crate) fn from_word(w: u64) -> Option<Stamp> {
        if w & KNOWN == 0 {
            return None;
        }
        let dated = w & DATED != 0;
        if !dated && w >> SHIFT != 0 {
            return None;
        }
        Some(Stamp {
            ts: dated.then_some((w as i64) >> SHIFT),
            decision: w & DECISION != 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_grow_with_length_and_stand_for_it_within_a_step() {
        assert_eq!(class_of(0), 1);
        assert_eq!(length_of(0), None);
        let mut last = 0;
        for len in [1usize, 10, 100, 1_000, 10_000, 100_000, 10_000_000] {
            let c = class_of(len);
            assert!(c > last, "{len}: class {c} after {last}");
            last = c;
            let back = length_of(c).expect("known");
            let ratio = (back + 1.0) / (len as f64 + 1.0);
            assert!((0.95..=1.05).contains(&ratio), "{len} → {c} → {back}");
        }
        assert_eq!(class_of(usize::MAX), 255);
    }

    #[test]
    fn a_stored_text_states_its_plain_length_without_decoding() {
        let text = "the queue worker retries the job ".repeat(200);
        let (stored, flags) = codec::encode(&text, None);
        assert_ne!(flags & codec::ENCODING, 0, "compressed");
        assert!(stored.len() < text.len());
        assert_eq!(stored_len(ValueRef::Blob(&stored), flags), Some(text.len()));
        assert_eq!(stored_len(ValueRef::Text(b"short"), 0), Some(5));
        assert_eq!(stored_len(ValueRef::Null, 0), None);
        // Bytes flagged compressed that are no frame cannot say.
        assert_eq!(stored_len(ValueRef::Blob(b"nope"), codec::COMPRESSED), None);
    }

    #[test]
    fn words_give_back_the_stamp_they_were_made_from() {
        let times = [
            None,
            Some(0),
            Some(1),
            Some(-1),
            Some(1_767_225_600_123),
            Some(-62_135_596_800_000),
            Some((1 << 60) - 1),
            Some(-(1 << 60)),
        ];
        for ts in times {
            for decision in [false, true] {
                let s = Stamp { ts, decision };
                let w = s.word();
                assert_ne!(w, 0, "{s:?}");
                assert_eq!(Stamp::from_word(w), Some(s), "{s:?} → {w:#x}");
            }
        }
        // Too far out to fit: not known, so read from the row.
        for ts in [1 << 60, -(1 << 60) - 1, i64::MAX, i64::MIN] {
            assert_eq!(Stamp::of(Some(ts), 0).word(), 0, "{ts}");
        }
        assert_eq!(Stamp::from_word(0), None);
        // An undated word with time bits set is none a writer makes.
        assert_eq!(Stamp::from_word(KNOWN | (5 << SHIFT)), None);
        assert_eq!(
            Stamp::of(Some(7), codec::DECISION | codec::COMPRESSED),
            Stamp {
                ts: Some(7),
                decision: true
            }
        );
    }
}
