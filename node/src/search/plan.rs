//! A question planned once, before any tier runs: the filter compiled once
//! (`store::Filter`), the period the question names parsed once (`when`),
//! the words left to look up once the period's words are taken out, and
//! whether the meaning tier applies (an embedder, not an exact look-up,
//! not `--lexical`). Both tiers and fusion read the plan; none parses the
//! question again.
//!
//! Pure but for [`Plan::runs_up_front`], which reads the runs when the
//! plan says both tiers will want them.

use super::{Query, SearchError, SearchOptions, query::Term, semantic, when};
use crate::embed::Embedder;
use crate::store::{Filter, Store, runs};

/// One search's plan (see the module's notes).
pub(crate) struct Plan<'q> {
    /// The question as parsed.
    pub(crate) query: &'q Query,
    /// The words to look up: the question less the words naming a period.
    pub(crate) words: Query,
    /// The question names nothing but a date or period ("what happened on
    /// June 1 2024?").
    pub(crate) dates_only: bool,
    /// The period the question names, if any: it boosts, never filters.
    pub(crate) period: Option<when::Period>,
    /// The filters, compiled once.
    pub(crate) filter: Filter,
    /// "Now" for recency, Unix ms.
    pub(crate) now_ms: i64,
    /// The meaning tier's embedder, when the tier applies.
    pub(crate) embedder: Option<&'static Embedder<'static>>,
}

impl<'q> Plan<'q> {
    /// Plans the search of `q` with `opts`.
    pub(crate) fn new(q: &'q Query, opts: &SearchOptions) -> Plan<'q> {
        let period = when::period(&q.text, opts.now_ms);
        let dates_only = period.as_ref().is_some_and(|p| {
            q.terms
                .iter()
                .all(|t| matches!(t, Term::Phrase(w) if w.len() == 1 && p.words.contains(&w[0])))
        });
        let words = match &period {
            Some(p) => q.without_words(&p.words),
            None => q.clone(),
        };
        let embedder = opts
            .semantic
            .filter(|_| !opts.lexical_only && !semantic::is_exact_lookup(&q.text));
        Plan {
            query: q,
            words,
            dates_only,
            period,
            filter: opts.filter(),
            now_ms: opts.now_ms,
            embedder,
        }
    }

    /// Every run with the filter's verdict on its session, read once up
    /// front when both tiers would read them: for a filter too `narrow`
    /// to check the vector file's nearest records (the meaning tier's scan
    /// then reads every allowed session's runs, and the lexical tier's
    /// screen takes a binary search per candidate from them instead of a
    /// run and a session read each); for any filter on the time (its
    /// reach back through every match of a word reads only the stretches
    /// of ids the runs leave open, and a screen judging sessions one by
    /// one reads every allowed session anyway once it has met 64). `None`
    /// otherwise: a filter on the agent alone judges sessions as its
    /// candidates meet them.
    pub(crate) fn runs_up_front(
        &self,
        store: &Store,
        narrow: bool,
    ) -> Result<Option<runs::RunMap>, SearchError> {
        match narrow || self.filter.since_ms.is_some() {
            true => Ok(store.allowed_session_runs(&self.filter)?),
            false => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(now_ms: i64) -> SearchOptions {
        SearchOptions {
            limit: 10,
            agent: Some("codex".into()),
            since_ms: Some(5),
            now_ms,
            ..SearchOptions::default()
        }
    }

    #[test]
    fn a_named_period_is_parsed_once_and_its_words_leave_the_lookup() {
        // 2024-06-10.
        let now = 1_718_000_000_000;
        let q = Query::parse("what did we decide about hyper in May 2024");
        let plan = Plan::new(&q, &opts(now));
        let period = plan.period.as_ref().expect("a period");
        assert_eq!(Some(period), when::period(&q.text, now).as_ref());
        assert!(!plan.dates_only);
        let left = plan.words.highlight_words();
        assert!(left.contains(&"hyper".to_string()), "{left:?}");
        assert!(!left.contains(&"may".to_string()), "{left:?}");
        assert_eq!(plan.filter, opts(now).filter());
        assert_eq!(plan.filter.agent.as_deref(), Some("codex"));
    }

    #[test]
    fn a_question_of_only_a_date_is_dates_only() {
        let now = 1_718_000_000_000;
        let q = Query::parse("June 1 2024");
        let plan = Plan::new(&q, &opts(now));
        assert!(plan.period.is_some());
        assert!(plan.dates_only);
        let q = Query::parse("hyper pin");
        let plan = Plan::new(&q, &opts(now));
        assert!(plan.period.is_none() && !plan.dates_only);
        assert_eq!(plan.words.text, q.text);
    }

    #[test]
    fn the_meaning_tier_is_planned_only_for_prose_and_not_when_lexical() {
        let embedder = crate::embed::builtin();
        let with = |text: &str, lexical_only: bool| {
            let q = Query::parse(text);
            let o = SearchOptions {
                semantic: Some(embedder),
                lexical_only,
                ..SearchOptions::default()
            };
            Plan::new(&q, &o).embedder.is_some()
        };
        assert!(with("why did we pin hyper", false));
        assert!(!with("why did we pin hyper", true));
        assert!(!with("error[E0382]", false));
        let q = Query::parse("why did we pin hyper");
        assert!(Plan::new(&q, &SearchOptions::default()).embedder.is_none());
    }
}
