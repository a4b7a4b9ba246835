//! The store's read API for search (`filter`, `candidates`, `ranker`,
//! `hits`) against what the test itself knows of each record it stored:
//! every allowed-check of a compiled filter gives the set the records'
//! own fields say, and each reader gives what the rows hold.

use std::collections::BTreeSet;

use super::candidates::FtsIndex;
use super::{Filter, Store, codec};
use crate::record::{Record, Role};

const HOUR: i64 = 3_600_000;
const NOW: i64 = 1_764_547_200_000;

/// What the test knows of a stored record (its id is its place + 1).
struct Known {
    agent: &'static str,
    project: String,
    session: String,
    machine: &'static str,
    role: Role,
    ts: Option<i64>,
    gadget: bool,
}

/// Fourteen sessions of two agents in three projects from two machines,
/// every role, some records undated, and "gadget" in every third record.
fn fixture() -> (tempfile::TempDir, Store, Vec<Known>) {
    let dir = tempfile::tempdir().expect("tmp");
    let mut store = Store::open(&dir.path().join("c.db")).expect("open");
    let mut known = Vec::new();
    for (machine, sessions) in [("node", 0..9), ("peer", 9..14)] {
        let mut ing = store.ingest(machine).expect("ingest");
        for s in sessions {
            let agent = if s % 3 == 0 { "codex" } else { "claude-code" };
            for i in 0..(4 + s % 5) {
                let n = known.len();
                let role = Role::ALL[(s + i) % Role::ALL.len()];
                let gadget = n % 3 == 0;
                let text = match gadget {
                    true => format!("record {n} gadget"),
                    false => format!("record {n} widget"),
                };
                let mut r = Record::new(agent, &format!("sess-{s:02}"), role, text);
                r.project = Some(format!("/work/p{}", s % 3));
                r.time_ms = match (s + i) % 7 {
                    0 => None,
                    _ => Some(NOW - (s as i64 * 3 + i as i64) * HOUR),
                };
                assert!(ing.insert(&r, None).expect("insert"));
                known.push(Known {
                    agent,
                    project: r.project.clone().unwrap_or_default(),
                    session: r.session_id.clone(),
                    machine,
                    role,
                    ts: r.time_ms,
                    gadget,
                });
            }
        }
        ing.commit().expect("commit");
    }
    let (first, last) = store.id_span().expect("span");
    assert_eq!((first, last), (1, known.len() as i64), "ids follow inserts");
    (dir, store, known)
}

/// Whether the filters on the session allow `k`'s session.
fn session_allows(f: &Filter, k: &Known) -> bool {
    f.agent.as_deref().is_none_or(|a| a == k.agent)
        && f.project.as_deref().is_none_or(|p| k.project.contains(p))
        && f.session
            .as_deref()
            .is_none_or(|s| k.session.starts_with(s))
}

/// Whether `f` allows `k`, from the test's own knowledge.
fn allows(f: &Filter, k: &Known) -> bool {
    session_allows(f, k)
        && f.machine.as_deref().is_none_or(|m| m == k.machine)
        && f.since_ms.is_none_or(|t| k.ts.is_some_and(|ts| ts >= t))
        && (f.roles.is_empty() || f.roles.contains(&k.role))
}

fn filters() -> Vec<Filter> {
    let since = Some(NOW - 20 * HOUR);
    vec![
        Filter::default(),
        Filter {
            agent: Some("codex".into()),
            ..Filter::default()
        },
        Filter {
            project: Some("p1".into()),
            ..Filter::default()
        },
        Filter {
            session: Some("sess-1".into()),
            ..Filter::default()
        },
        Filter {
            machine: Some("peer".into()),
            ..Filter::default()
        },
        Filter {
            roles: vec![Role::User, Role::Note],
            ..Filter::default()
        },
        Filter {
            since_ms: since,
            ..Filter::default()
        },
        Filter {
            agent: Some("claude-code".into()),
            since_ms: since,
            ..Filter::default()
        },
        Filter {
            project: Some("p2".into()),
            machine: Some("node".into()),
            roles: vec![Role::Assistant],
            ..Filter::default()
        },
    ]
}

/// The ids `f` allows, from the test's own knowledge.
fn truth(f: &Filter, known: &[Known]) -> BTreeSet<i64> {
    (1..=known.len() as i64)
        .filter(|&id| allows(f, &known[id as usize - 1]))
        .collect()
}

#[test]
fn a_compiled_filter_allows_what_the_records_fields_say() {
    let (_dir, store, known) = fixture();
    let n = known.len() as i64;
    for f in filters() {
        let want = truth(&f, &known);
        assert!(f.unfiltered() == (f == Filter::default()), "{f:?}");
        // The row check, record by record (and ids past the last: none).
        let mut check = store.row_check(&f).expect("check");
        for id in 1..=n + 2 {
            let pass = want.contains(&id);
            assert_eq!(check.passes(id).expect("passes"), pass, "{f:?}: {id}");
            let cols = check.columns(id).expect("columns");
            assert_eq!(cols.is_some(), pass, "{f:?}: {id}");
            if let Some((role, ts, _, _)) = cols {
                let k = &known[id as usize - 1];
                assert_eq!((role.as_str(), ts), (k.role.as_str(), k.ts), "{id}");
            }
        }
        // Every allowed id from the rows, and those after a bound.
        let mut rows = BTreeSet::new();
        store
            .allowed_ids_by_rows(n, &f, |id| {
                rows.insert(id);
            })
            .expect("rows");
        assert_eq!(rows, want, "{f:?}");
        let mut after = BTreeSet::new();
        store
            .allowed_ids_after((n / 2, n), &f, |id| {
                after.insert(id);
            })
            .expect("after");
        let tail: BTreeSet<i64> = want.iter().copied().filter(|&id| id > n / 2).collect();
        assert_eq!(after, tail, "{f:?}");
        // The runs and the session judge never rule out an allowed record,
        // and judge the session alone exactly when only the session is
        // filtered.
        let on_session_only = f.by_session() && f.on_session() == f;
        let map = store.allowed_session_runs(&f).expect("map");
        let mut judge = store.session_verdicts(&f).expect("judge");
        assert_eq!(
            map.is_some(),
            f.by_session() || f.since_ms.is_some(),
            "{f:?}"
        );
        assert_eq!(judge.is_some(), map.is_some(), "{f:?}");
        let mut hint = 0;
        for id in 1..=n {
            let k = &known[id as usize - 1];
            let (session, last_ms): (i64, Option<i64>) = store
                .conn()
                .query_row(
                    "SELECT se.id, se.last_ms FROM records r
                     JOIN sessions se ON se.id = r.session WHERE r.id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .expect("session");
            // The time alone: exactly the sessions that may hold a record
            // it allows (their newest record at or after it, or none dated).
            if let (false, Some(since), Some(m)) = (f.by_session(), f.since_ms, &map) {
                let may = last_ms.is_none_or(|l| l >= since);
                assert_eq!(m.allows(id, &mut 0), Some(may), "{f:?}: {id}");
            }
            let verdicts = [
                map.as_ref().and_then(|m| m.allows(id, &mut hint)),
                judge.as_mut().map(|j| j.allows(session).expect("allows")),
            ];
            for v in verdicts.into_iter().flatten() {
                if want.contains(&id) {
                    assert!(v, "{f:?}: {id} ruled out");
                }
                if on_session_only {
                    assert_eq!(v, session_allows(&f, k), "{f:?}: {id}");
                }
            }
        }
        // The share of the newest sessions the filter on the session allows.
        let (mine, all) = store.session_share(&f, 1_000).expect("share");
        let allowed = known.iter().filter(|k| session_allows(&f, k)).count();
        assert_eq!((mine, all), (allowed as f64, n as f64), "{f:?}");
    }
}

#[test]
fn role_bytes_and_stamps_give_the_ids_with_a_role_or_a_time() {
    let (_dir, store, known) = fixture();
    let n = known.len() as i64;
    // Without a columns file, nothing to judge by: the caller reads rows.
    let none = store.ids_with_roles(&[(1, n)], &[Role::User], |_, _| {});
    assert!(none.expect("roles").is_none());
    let none = store.ids_dated_since(&[(1, n)], NOW, |_, _| {});
    assert!(none.expect("stamps").is_none());
    // From the file as written, then with some entries saying nothing
    // (their rows tell): the same ids.
    assert_eq!(store.write_columns().expect("columns"), n as u64);
    for state in ["written", "some entries say nothing"] {
        if state != "written" {
            super::columns_file::tests::rewrite_entries_by_id(&store, true, |id, e| {
                if id % 3 == 1 {
                    e.fill(0);
                }
            });
        }
        judged_from_the_file(&store, &known, state);
    }
}

/// Asserts that the ids with a role, or dated since a time, that the
/// columns file gives (`state` says how it stands) are the rows' own.
fn judged_from_the_file(store: &Store, known: &[Known], state: &str) {
    let n = known.len() as i64;
    let collect = |ranges: Vec<(i64, i64)>| -> BTreeSet<i64> {
        ranges.into_iter().flat_map(|(a, b)| a..=b).collect()
    };
    for roles in [vec![Role::User], vec![Role::Assistant, Role::ToolOutput]] {
        let mut got = Vec::new();
        let done = store
            .ids_with_roles(&[(1, n)], &roles, |a, b| got.push((a, b)))
            .expect("roles");
        assert!(done.is_some(), "{state}: a file");
        let f = Filter {
            roles: roles.clone(),
            ..Filter::default()
        };
        assert_eq!(collect(got), truth(&f, known), "{state}: {roles:?}");
    }
    for back in [0, 5, 20, 100] {
        let since = NOW - back * HOUR;
        let mut got = Vec::new();
        let done = store
            .ids_dated_since(&[(1, n)], since, |a, b| got.push((a, b)))
            .expect("stamps");
        assert!(done.is_some(), "{state}: a file");
        let f = Filter {
            since_ms: Some(since),
            ..Filter::default()
        };
        assert_eq!(collect(got), truth(&f, known), "{state}: {back} hours");
        let started = store.sessions_started_since(since).expect("started");
        assert_eq!(started.1, 14.0);
        assert!(started.0 <= started.1);
    }
}

#[test]
fn candidates_are_the_newest_matches_the_filter_allows() {
    let (_dir, store, known) = fixture();
    let n = known.len() as i64;
    let gadgets: Vec<i64> = (1..=n)
        .rev()
        .filter(|&id| known[id as usize - 1].gadget)
        .collect();
    let expr = "\"gadget\"";
    assert_eq!(
        store.newest_matches(FtsIndex::Exact, expr, 5).expect("m"),
        gadgets[..5]
    );
    assert_eq!(
        store
            .newest_matches(FtsIndex::Exact, expr, 10_000)
            .expect("m"),
        gadgets
    );
    assert!(store.prefix_docs("gadg").expect("prefix") >= gadgets.len() as i64);
    assert!(store.has_stem_index().expect("stem"));
    for f in filters() {
        let allowed = truth(&f, &known);
        let want: Vec<i64> = gadgets
            .iter()
            .copied()
            .filter(|id| allowed.contains(id))
            .collect();
        let got = store
            .allowed_matches((FtsIndex::Exact, expr), &f, usize::MAX, 10_000)
            .expect("allowed");
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), want, "{f:?}");
        for (id, (role, ts, _, _)) in &got {
            let k = &known[*id as usize - 1];
            assert_eq!((role.as_str(), *ts), (k.role.as_str(), k.ts));
        }
        // A reach of the newest ten matches only, a limit of three.
        let got = store
            .allowed_matches((FtsIndex::Exact, expr), &f, 10, 3)
            .expect("reach");
        let within: Vec<i64> = gadgets[..10]
            .iter()
            .copied()
            .filter(|id| allowed.contains(id))
            .take(3)
            .collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), within, "{f:?}");
    }
    // In batches of three within two stretches, the later one first.
    let stretches = [(1, 12), (20, 40)];
    let mut batches: Vec<Vec<i64>> = Vec::new();
    store
        .match_batches(
            (FtsIndex::Exact, expr),
            Some(&stretches[..]),
            || 3,
            |b| {
                batches.push(b.to_vec());
                Ok::<bool, super::StoreError>(true)
            },
        )
        .expect("batches");
    let inside = |a: i64, b: i64| -> Vec<i64> {
        gadgets
            .iter()
            .copied()
            .filter(|&id| a <= id && id <= b)
            .collect()
    };
    let mut want = inside(20, 40);
    want.extend(inside(1, 12));
    assert_eq!(batches.concat(), want);
    assert!(batches.iter().all(|b| b.len() <= 3));
    // Stopped after the first batch: nothing more is read.
    let mut seen = 0;
    store
        .match_batches(
            (FtsIndex::Exact, expr),
            None,
            || 4,
            |b| {
                seen += b.len();
                Ok::<bool, super::StoreError>(false)
            },
        )
        .expect("stop");
    assert_eq!(seen, 4);
}

#[test]
fn ranker_columns_from_the_file_are_those_of_the_rows() {
    let (_dir, store, known) = fixture();
    let n = known.len() as i64;
    let rows = |id| {
        store
            .row_check(&Filter::default())
            .expect("check")
            .columns(id)
            .expect("row")
    };
    let mut before = store.ranker_columns().expect("reader");
    assert!(!before.reads_file());
    let from_rows: Vec<_> = (1..=n + 1)
        .map(|id| before.columns(id).expect("c"))
        .collect();
    drop(before);
    assert!(store.write_columns().expect("write") > 0);
    let mut after = store.ranker_columns().expect("reader");
    assert!(after.reads_file());
    for id in 1..=n + 1 {
        let got = after.columns(id).expect("columns");
        let row = rows(id);
        assert_eq!(from_rows[id as usize - 1], row, "{id}");
        match (got, row) {
            (Some(g), Some(r)) => {
                assert_eq!((&g.0, g.1, g.2), (&r.0, r.1, r.2), "{id}");
                assert_eq!(g.3 & codec::DECISION, r.3 & codec::DECISION, "{id}");
                let owner = after.owner(id).expect("owner");
                assert_eq!(owner, Some((r.2, r.0.clone())));
            }
            (None, None) => {}
            other => panic!("{id}: {other:?}"),
        }
    }
    let oldest = store.oldest_session_ms().expect("oldest");
    let want = known.iter().filter_map(|k| k.ts).min();
    assert_eq!(oldest, want);
}

#[test]
fn projects_are_listed_once_each_with_their_sessions_and_records() {
    let (_dir, store, known) = fixture();
    let paths: BTreeSet<String> = known.iter().map(|k| k.project.clone()).collect();
    let listed = store.project_paths(100).expect("paths");
    assert_eq!(listed, paths.iter().cloned().collect::<Vec<_>>());
    assert_eq!(store.project_paths(2).expect("two"), listed[..2]);
    for path in &paths {
        let (sessions, records) = store.project_sessions(path).expect("sessions");
        let mine: Vec<&Known> = known.iter().filter(|k| &k.project == path).collect();
        let names: BTreeSet<&str> = mine.iter().map(|k| k.session.as_str()).collect();
        assert_eq!(sessions.len(), names.len(), "{path}");
        assert_eq!(records, mine.len() as i64, "{path}");
    }
    assert_eq!(store.project_sessions("/nowhere").expect("none").1, 0);
}

#[test]
fn a_hit_shows_its_record_and_a_user_record_its_reply() {
    let (_dir, store, known) = fixture();
    let n = known.len() as i64;
    for id in 1..=n {
        let k = &known[id as usize - 1];
        let hit = store.hit_row(id).expect("hit").expect("there");
        assert_eq!(
            (
                hit.agent.as_str(),
                hit.session_id.as_str(),
                hit.machine.as_str()
            ),
            (k.agent, k.session.as_str(), k.machine)
        );
        assert_eq!((hit.role.as_str(), hit.ts), (k.role.as_str(), k.ts));
        assert_eq!(hit.project.as_deref(), Some(k.project.as_str()));
        assert!(hit.text.starts_with(&format!("record {} ", id - 1)), "{id}");
        let text = store.record_text(id).expect("text").expect("there");
        assert_eq!((text.text, text.role), (hit.text, hit.role));
        // The first assistant or note record after it in its session.
        let session_row = store
            .row_check(&Filter::default())
            .expect("check")
            .columns(id)
            .expect("row")
            .expect("there")
            .2;
        let want = (id + 1..=n).find(|&later| {
            let l = &known[later as usize - 1];
            l.session == k.session && matches!(l.role, Role::Assistant | Role::Note)
        });
        assert_eq!(store.reply_after(session_row, id).expect("reply"), want);
    }
    assert!(store.hit_row(n + 1).expect("gone").is_none());
    assert!(store.record_text(n + 1).expect("gone").is_none());
}
