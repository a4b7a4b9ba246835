//! How many records a word matches (its document frequency), at a cost
//! that does not grow with the index: FTS5 keeps no per-word count, so a
//! word's newest matches are read, at most [`SCAN_LIMIT`] + 1 newest
//! first; a word with no more is counted exactly, a more common one
//! estimated from how densely they lie among the record ids. The matches
//! read are kept: a single word is scored from them
//! ([`Frequencies::newest`]) without asking FTS5 again.

use std::collections::HashMap;

use super::SCAN_LIMIT;
use super::query::Term;
pub(super) use crate::store::candidates::FtsIndex as Index;
use crate::store::{Store, StoreError};

/// Document frequencies for one search, each looked up once.
pub(super) struct Frequencies<'s> {
    store: &'s Store,
    /// The lowest and highest record id (0, 0 when there are none).
    ids: (i64, i64),
    /// Each token counted: its frequency, and its newest matches, newest
    /// first (at most [`SCAN_LIMIT`] + 1).
    seen: HashMap<(Index, String), (i64, Vec<i64>)>,
}

impl<'s> Frequencies<'s> {
    /// Reads the span of record ids the estimates scale to.
    pub(super) fn new(store: &'s Store) -> Result<Self, StoreError> {
        Ok(Frequencies {
            store,
            ids: store.id_span()?,
            seen: HashMap::new(),
        })
    }

    /// The highest record id: how many records there are, near enough
    /// (ids are never reused, so forgotten records still count).
    pub(super) fn docs(&self) -> i64 {
        self.ids.1
    }

    /// Records that hold the single token `token` (an index term, as the
    /// tokenizer wrote it) in `index`.
    pub(super) fn token(&mut self, index: Index, token: &str) -> Result<i64, StoreError> {
        let key = (index, token.to_string());
        if let Some((df, _)) = self.seen.get(&key) {
            return Ok(*df);
        }
        let ids = self
            .store
            .newest_matches(index, &token_expr(token), SCAN_LIMIT + 1)?;
        let oldest = ids.last().copied().unwrap_or(0);
        let df = estimate(ids.len() as i64, oldest, self.ids);
        self.seen.insert(key, (df, ids));
        Ok(df)
    }

    /// [`Frequencies::token`] for a token wanted only when it is rare:
    /// its exact count when it matches at most `most` records (below
    /// [`SCAN_LIMIT`]), `None` when it matches more, found by reading no
    /// more than `most` + 1 of its matches. A rare token is counted as
    /// [`Frequencies::token`] counts it (and its matches kept for
    /// [`Frequencies::newest`]); a common one is not kept.
    pub(super) fn rare(
        &mut self,
        index: Index,
        token: &str,
        most: i64,
    ) -> Result<Option<i64>, StoreError> {
        let most = most.min(SCAN_LIMIT);
        let key = (index, token.to_string());
        if let Some((df, _)) = self.seen.get(&key) {
            return Ok((*df <= most).then_some(*df));
        }
        let ids = self
            .store
            .newest_matches(index, &token_expr(token), most + 1)?;
        let df = ids.len() as i64;
        if df > most {
            return Ok(None);
        }
        self.seen.insert(key, (df, ids));
        Ok(Some(df))
    }

    /// The newest [`SCAN_LIMIT`] records that hold `token` in `index`,
    /// newest first, when [`Frequencies::token`] has counted it: the same
    /// rows as `SELECT rowid … MATCH` on [`token_expr`] ordered by
    /// `rowid DESC`, as of this search's snapshot.
    pub(super) fn newest(&self, index: Index, token: &str) -> Option<&[i64]> {
        self.seen
            .get(&(index, token.to_string()))
            .map(|(_, ids)| &ids[..ids.len().min(SCAN_LIMIT as usize)])
    }

    /// An upper bound on the records `term` matches in the exact index: a
    /// phrase matches no more records than its rarest word, and a prefix no
    /// more than all the words it opens summed (up to 2,000 words, from
    /// the vocabulary: linear in how often those words occur; prefix
    /// searches are rare and their own match is no cheaper).
    pub(super) fn term(&mut self, term: &Term) -> Result<i64, StoreError> {
        match term {
            Term::Phrase(tokens) => {
                let mut min = i64::MAX;
                for t in tokens {
                    min = min.min(self.token(Index::Exact, t)?);
                }
                Ok(if min == i64::MAX { 0 } else { min })
            }
            Term::Prefix(p) => self.store.prefix_docs(p),
        }
    }
}

/// The FTS5 expression that matches the single index term `token`.
pub(super) fn token_expr(token: &str) -> String {
    format!("\"{}\"", token.replace('"', "\"\""))
}

/// The document frequency that `count` newest matches, the oldest of them at
/// id `oldest`, suggest among records `ids.0..=ids.1`: exact when the scan
/// found them all, else the matches' density over the ids they span, scaled
/// to all ids (never less than what was seen).
fn estimate(count: i64, oldest: i64, ids: (i64, i64)) -> i64 {
    if count <= SCAN_LIMIT {
        return count;
    }
    let (first, last) = ids;
    let spanned = (last - oldest + 1).max(1) as f64;
    let all = (last - first + 1).max(1) as f64;
    ((count as f64 * all / spanned).round() as i64).max(count)
}

/// The exact count from the vocabulary, for tests that compare estimates.
#[cfg(test)]
fn vocab_count(conn: &rusqlite::Connection, token: &str) -> rusqlite::Result<i64> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .query_row("SELECT doc FROM fts_vocab WHERE term = ?1", [token], |r| {
            r.get(0)
        })
        .optional()?
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rare_token_is_counted_as_any_token_and_a_common_one_not_read_through() {
        use crate::record::{Record, Role};
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("c.db")).expect("open");
        let mut ing = store.ingest("node").expect("ingest");
        // Thirty records say "common", ten of them "rare" too.
        for i in 0..30 {
            let text = match i % 3 {
                0 => format!("common rare {i}"),
                _ => format!("common {i}"),
            };
            ing.insert(&Record::new("codex", "s", Role::User, text), None)
                .expect("insert");
        }
        ing.commit().expect("commit");
        let mut freq = Frequencies::new(&store).expect("frequencies");
        assert_eq!(freq.rare(Index::Exact, "rare", 10).expect("rare"), Some(10));
        assert_eq!(freq.rare(Index::Exact, "rare", 9).expect("rare"), None);
        assert_eq!(freq.rare(Index::Exact, "common", 29).expect("rare"), None);
        assert_eq!(freq.rare(Index::Exact, "absent", 5).expect("rare"), Some(0));
        // The same count and matches as `token` gives.
        let kept = freq.newest(Index::Exact, "rare").expect("kept").to_vec();
        let mut other = Frequencies::new(&store).expect("frequencies");
        assert_eq!(other.token(Index::Exact, "rare").expect("df"), 10);
        assert_eq!(other.newest(Index::Exact, "rare"), Some(&kept[..]));
        // A common token was not kept; counted in full, then asked again.
        assert!(freq.newest(Index::Exact, "common").is_none());
        assert_eq!(freq.token(Index::Exact, "common").expect("df"), 30);
        assert_eq!(
            freq.rare(Index::Exact, "common", 40).expect("rare"),
            Some(30)
        );
        assert_eq!(freq.rare(Index::Exact, "common", 20).expect("rare"), None);
    }

    #[test]
    fn a_scan_that_found_every_match_is_exact() {
        assert_eq!(estimate(0, 0, (1, 1_000_000)), 0);
        assert_eq!(estimate(17, 900_000, (1, 1_000_000)), 17);
        assert_eq!(estimate(SCAN_LIMIT, 1, (1, 1_000_000)), SCAN_LIMIT);
    }

    #[test]
    fn more_matches_scale_by_the_ids_they_span() {
        // The newest 8,001 matches span the newest tenth of the ids.
        let n = SCAN_LIMIT + 1;
        assert_eq!(estimate(n, 900_001, (1, 1_000_000)), n * 10);
        // Spread evenly from the first id: all of them were seen.
        assert_eq!(estimate(n, 1, (1, 1_000_000)), n);
        // Ids that do not start at 1 (the oldest records were forgotten).
        assert_eq!(estimate(n, 550_001, (500_001, 1_000_000)), n * 10 / 9);
    }

    #[test]
    fn estimates_follow_the_vocabulary_and_cost_one_look_up_per_word() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = crate::store::Store::open(&dir.path().join("c.db")).expect("open");
        let conn = store.test_conn();
        // 30,000 records: "every" in each, "third" in every third, "rare"
        // in five. The ids the index uses are the records' own.
        conn.execute_batch(
            "INSERT INTO origins(node) VALUES ('n');
             INSERT INTO sessions(agent, session_id, origin) VALUES ('a', 's', 'n');",
        )
        .expect("session");
        let tx = conn.unchecked_transaction().expect("tx");
        for id in 1..=30_000i64 {
            let mut body = String::from("every");
            if id % 3 == 0 {
                body.push_str(" third");
            }
            if id % 6_000 == 0 {
                body.push_str(" rare");
            }
            tx.execute(
                "INSERT INTO records(id, hash, session, role, origin, text)
                 VALUES (?1, randomblob(32), 1, 'user', 1, x'')",
                [id],
            )
            .expect("record");
            tx.execute(
                "INSERT INTO fts(rowid, body, files) VALUES (?1, ?2, '')",
                rusqlite::params![id, body],
            )
            .expect("fts");
        }
        tx.commit().expect("commit");
        let mut df = Frequencies::new(&store).expect("frequencies");
        assert_eq!(df.docs(), 30_000);
        for word in ["every", "third", "rare", "absent"] {
            let exact = vocab_count(conn, word).expect("vocab");
            let got = df.token(Index::Exact, word).expect("estimate");
            if exact <= SCAN_LIMIT {
                assert_eq!(got, exact, "{word}");
            } else {
                let off = (got - exact).abs() as f64 / exact as f64;
                assert!(off < 0.01, "{word}: {got} for {exact}");
            }
        }
        // The newest matches counted are those the index gives, newest first.
        for word in ["every", "third", "rare", "absent"] {
            let mut stmt = conn
                .prepare("SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2")
                .expect("prepare");
            let want: Vec<i64> = stmt
                .query_map(rusqlite::params![token_expr(word), SCAN_LIMIT], |r| {
                    r.get(0)
                })
                .expect("query")
                .collect::<Result<_, _>>()
                .expect("rows");
            assert_eq!(df.newest(Index::Exact, word), Some(&want[..]), "{word}");
        }
        assert_eq!(df.newest(Index::Stem, "every"), None);
        // A phrase is bounded by its rarest word.
        let phrase = Term::Phrase(vec!["every".into(), "rare".into()]);
        assert_eq!(df.term(&phrase).expect("phrase"), 5);
        assert_eq!(df.seen.len(), 4);
    }
}
