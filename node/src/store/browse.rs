//! Read queries for the browse page (`cairn ui`): recent sessions, activity
//! per day, the machines records came from, and which records of a session
//! match a query. Nothing here writes.

use rusqlite::params;
use rusqlite::types::Value as SqlValue;
use serde::Serialize;

use super::read::{SessionInfo, session_info};
use super::{Store, StoreError};

/// Filters for [`Store::recent_sessions`].
#[derive(Debug, Clone, Default)]
pub struct RecentFilter {
    /// Only this agent.
    pub agent: Option<String>,
    /// Only sessions whose project path contains this.
    pub project: Option<String>,
    /// Only sessions first indexed on the machine with this name or node id.
    pub machine: Option<String>,
    /// Only sessions active at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only sessions last active before this time (Unix ms), for paging.
    pub before_ms: Option<i64>,
    /// Sessions to return at most.
    pub limit: usize,
}

/// Records counted for one day and one key (agent or machine name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayCount {
    /// Day number: `floor((time_ms + offset_ms) / 86_400_000)`.
    pub day: i64,
    /// Agent id or machine name.
    pub key: String,
    /// Records.
    pub records: u64,
}

/// A project's share of the activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectCount {
    /// Working directory (`None` for records without one, e.g. global notes).
    pub project: Option<String>,
    /// Records.
    pub records: u64,
    /// Sessions.
    pub sessions: u64,
}

/// Records per day per agent and per machine, and the busiest projects.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Activity {
    /// Per day and agent.
    pub by_agent: Vec<DayCount>,
    /// Per day and machine.
    pub by_machine: Vec<DayCount>,
    /// Busiest projects first.
    pub top_projects: Vec<ProjectCount>,
}

/// A machine that records came from (this node, a peer or a relayed origin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// Node id.
    pub node_id: String,
    /// Name, as announced (the id when no name is known).
    pub name: String,
    /// Records stored here that it indexed first.
    pub records: u64,
    /// Newest of those records, Unix ms.
    pub last_ms: Option<i64>,
}

impl Store {
    /// Sessions, most recently active first.
    pub fn recent_sessions(&self, f: &RecentFilter) -> Result<Vec<SessionInfo>, StoreError> {
        let mut sql = format!("{} WHERE 1", super::read::SESSION_INFO);
        let mut args: Vec<SqlValue> = Vec::new();
        let mut arg = |sql: &mut String, clause: &str, v: SqlValue| {
            args.push(v);
            sql.push_str(&clause.replace("?X", &format!("?{}", args.len())));
        };
        if let Some(a) = &f.agent {
            arg(&mut sql, " AND s.agent = ?X", SqlValue::Text(a.clone()));
        }
        if let Some(p) = &f.project {
            arg(
                &mut sql,
                " AND instr(s.project, ?X) > 0",
                SqlValue::Text(p.clone()),
            );
        }
        if let Some(m) = &f.machine {
            arg(
                &mut sql,
                " AND (n.name = ?X OR s.origin = ?X)",
                SqlValue::Text(m.clone()),
            );
        }
        if let Some(t) = f.since_ms {
            arg(&mut sql, " AND s.last_ms >= ?X", SqlValue::Integer(t));
        }
        if let Some(t) = f.before_ms {
            arg(&mut sql, " AND s.last_ms < ?X", SqlValue::Integer(t));
        }
        arg(
            &mut sql,
            " ORDER BY s.last_ms IS NULL, s.last_ms DESC, s.id DESC LIMIT ?X",
            SqlValue::Integer(f.limit.min(10_000) as i64),
        );
        let mut q = self.conn.prepare(&sql)?;
        let rows = q.query_map(rusqlite::params_from_iter(args.iter()), session_info)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Record ids of a session in transcript order (the order of
    /// [`Store::session_records`]).
    pub fn session_record_ids(&self, session_row: i64) -> Result<Vec<i64>, StoreError> {
        let mut q = self.conn.prepare(
            "SELECT r.id FROM records r WHERE r.session = ?1
             ORDER BY r.ts IS NULL, r.ts, r.source, r.offset, r.id",
        )?;
        let rows = q.query_map([session_row], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Ids of the records of a session that match an FTS5 expression
    /// (`search::Query::to_fts`). An expression FTS5 refuses matches nothing.
    pub fn session_matches(&self, session_row: i64, fts: &str) -> Result<Vec<i64>, StoreError> {
        if fts.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut q = self.conn.prepare(
            "SELECT r.id FROM fts JOIN records r ON r.id = fts.rowid
             WHERE fts MATCH ?1 AND r.session = ?2",
        )?;
        let rows = match q.query_map(params![fts, session_row], |r| r.get(0)) {
            Ok(rows) => rows,
            Err(_) => return Ok(Vec::new()),
        };
        Ok(rows.filter_map(Result::ok).collect())
    }

    /// Records per day (shifted by `offset_ms` for the viewer's time zone)
    /// per agent and per machine since `since_ms`, and the top projects.
    pub fn activity(
        &self,
        since_ms: i64,
        offset_ms: i64,
        top: usize,
    ) -> Result<Activity, StoreError> {
        let day_counts = |sql: &str| -> Result<Vec<DayCount>, StoreError> {
            let mut q = self.conn.prepare(sql)?;
            let rows = q.query_map(params![since_ms, offset_ms], |r| {
                Ok(DayCount {
                    day: r.get(0)?,
                    key: r.get(1)?,
                    records: r.get::<_, i64>(2)? as u64,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        };
        let by_agent = day_counts(
            "SELECT (r.ts + ?2) / 86400000 AS day, se.agent, count(*)
             FROM records r JOIN sessions se ON se.id = r.session
             WHERE r.ts >= ?1 GROUP BY day, se.agent ORDER BY day, se.agent",
        )?;
        let by_machine = day_counts(
            "SELECT (r.ts + ?2) / 86400000 AS day, COALESCE(n.name, og.node) AS m, count(*)
             FROM records r JOIN origins og ON og.id = r.origin LEFT JOIN nodes n ON n.id = og.node
             WHERE r.ts >= ?1 GROUP BY day, m ORDER BY day, m",
        )?;
        let mut q = self.conn.prepare(
            "SELECT se.project, count(*), count(DISTINCT se.id)
             FROM records r JOIN sessions se ON se.id = r.session
             WHERE r.ts >= ?1 GROUP BY se.project ORDER BY 2 DESC, 1 LIMIT ?2",
        )?;
        let rows = q.query_map(params![since_ms, top as i64], |r| {
            Ok(ProjectCount {
                project: r.get(0)?,
                records: r.get::<_, i64>(1)? as u64,
                sessions: r.get::<_, i64>(2)? as u64,
            })
        })?;
        let top_projects = rows.collect::<Result<_, _>>()?;
        Ok(Activity {
            by_agent,
            by_machine,
            top_projects,
        })
    }

    /// Every machine known to this store (named in `nodes` or owning
    /// records), with how many records each indexed first.
    pub fn origins(&self) -> Result<Vec<Origin>, StoreError> {
        let mut q = self.conn.prepare(
            "WITH c AS (SELECT og.node, count(*) AS n, max(r.ts) AS last
                        FROM records r JOIN origins og ON og.id = r.origin GROUP BY r.origin)
             SELECT o.id, COALESCE(n.name, o.id), COALESCE(c.n, 0), c.last
             FROM (SELECT id FROM nodes UNION SELECT node FROM c) o
             LEFT JOIN nodes n ON n.id = o.id
             LEFT JOIN c ON c.node = o.id
             ORDER BY 3 DESC, 2",
        )?;
        let rows = q.query_map([], |r| {
            Ok(Origin {
                node_id: r.get(0)?,
                name: r.get(1)?,
                records: r.get::<_, i64>(2)? as u64,
                last_ms: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, Role};

    #[test]
    fn empty_store_answers_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("cairn.db")).expect("open");
        let f = RecentFilter {
            limit: 10,
            ..RecentFilter::default()
        };
        assert!(store.recent_sessions(&f).expect("recent").is_empty());
        let a = store.activity(0, 0, 10).expect("activity");
        assert!(a.by_agent.is_empty() && a.by_machine.is_empty() && a.top_projects.is_empty());
        assert!(store.origins().expect("origins").is_empty());
        assert!(store.session_matches(1, "").expect("matches").is_empty());
        assert!(
            store
                .session_matches(1, "\"unbalanced")
                .expect("bad fts")
                .is_empty()
        );
    }

    fn rec(agent: &str, session: &str, project: &str, t: i64, text: &str) -> Record {
        let mut r = Record::new(agent, session, Role::User, text);
        r.project = Some(project.to_owned());
        r.time_ms = Some(t);
        r
    }

    #[test]
    fn recent_activity_origins_and_matches() {
        const DAY: i64 = 86_400_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("open");
        store.upsert_node("nodeA", "alpha").expect("node");
        let mut ing = store.ingest("nodeA").expect("ingest");
        ing.insert(
            &rec(
                "codex",
                "s1",
                "/p/one",
                10 * DAY + 5,
                "the ledger rounding bug",
            ),
            None,
        )
        .expect("insert");
        ing.insert(
            &rec(
                "codex",
                "s1",
                "/p/one",
                10 * DAY + 9,
                "fixed with banker rounding",
            ),
            None,
        )
        .expect("insert");
        ing.insert(
            &rec("claude-code", "s2", "/p/two", 12 * DAY, "unrelated words"),
            None,
        )
        .expect("insert");
        ing.commit().expect("commit");

        let all = RecentFilter {
            limit: 10,
            ..RecentFilter::default()
        };
        let recent = store.recent_sessions(&all).expect("recent");
        let ids: Vec<&str> = recent.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids, ["s2", "s1"]);
        assert_eq!(recent[1].machine, "alpha");
        let only = RecentFilter {
            agent: Some("codex".into()),
            ..all.clone()
        };
        assert_eq!(store.recent_sessions(&only).expect("recent").len(), 1);
        let by_machine = RecentFilter {
            machine: Some("alpha".into()),
            project: Some("two".into()),
            ..all.clone()
        };
        let r = store.recent_sessions(&by_machine).expect("recent");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].session_id, "s2");
        let older = RecentFilter {
            before_ms: Some(12 * DAY),
            ..all
        };
        assert_eq!(
            store.recent_sessions(&older).expect("recent")[0].session_id,
            "s1"
        );

        let row = recent[1].row;
        let ids = store.session_record_ids(row).expect("ids");
        assert_eq!(ids.len(), 2);
        let m = store
            .session_matches(row, &crate::search::Query::parse("banker").to_fts())
            .expect("matches");
        assert_eq!(m, vec![ids[1]]);

        let a = store.activity(11 * DAY, 0, 5).expect("activity");
        assert_eq!(
            a.by_agent,
            vec![DayCount {
                day: 12,
                key: "claude-code".into(),
                records: 1
            }]
        );
        let a = store.activity(0, 0, 5).expect("activity");
        assert_eq!(a.by_machine.iter().map(|d| d.records).sum::<u64>(), 3);
        assert_eq!(a.top_projects[0].project.as_deref(), Some("/p/one"));
        assert_eq!(a.top_projects[0].records, 2);

        let o = store.origins().expect("origins");
        assert_eq!(o.len(), 1);
        assert_eq!((o[0].name.as_str(), o[0].records), ("alpha", 3));
        assert_eq!(o[0].last_ms, Some(12 * DAY));
    }
}
