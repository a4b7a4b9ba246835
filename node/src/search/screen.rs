//! What a filtered search can tell of a candidate without reading its row:
//! whether the filters allow its session (from every run read up front,
//! `store::runs`, or from its session, judged once per session), its role
//! (role byte) and its time (stamp), the last three from the columns file
//! through `store::ranker::Facts`, which reads the row only where the file
//! cannot say. A candidate ruled out is never looked up; one allowed by
//! every filter needs no look-up either when nothing else filters, since
//! a role byte or stamp is known only for a record that exists.

use super::SearchError;
use crate::store::ranker::Facts;
use crate::store::{Filter, SessionVerdicts, Store, codec, columns_file, runs};

/// A search's screen of its candidates (see the module's notes).
pub(crate) struct Screen<'c> {
    /// Whether the filters allow a session; `None` without a filter on
    /// the session or the time, or when `map` says.
    sessions: Option<SessionVerdicts<'c>>,
    /// Every run with the filters' verdict on its session, read up front
    /// (for a narrow filter, whose scan reads them anyway): a search from
    /// the run found last per candidate instead.
    map: Option<&'c runs::RunMap>,
    /// The run of `map` found last (see `runs::RunMap::allows`).
    hint: usize,
    /// The role bytes the filters allow; `None` without a filter on roles.
    roles: Option<Vec<u8>>,
    /// The filter on the time (Unix ms), judged from each record's stamp.
    since: Option<i64>,
    /// True when the sessions, the role bytes and the stamps answer every
    /// filter: none is on the machine.
    settles: bool,
    /// The ranker's columns of a record it allows come without its row
    /// (`store::columns_file`): then a record is worth the read of its role
    /// byte, so that the screen may allow it and spare the row.
    columns_elsewhere: bool,
    /// The roles file (`store::columns_file`), where the search has it:
    /// the role bytes of a batch of candidates read at once, in a few
    /// reads of the stretches that hold them ([`Screen::roles_ahead`]),
    /// instead of one look-up each.
    roles_file: Option<columns_file::Bytes>,
}

impl<'c> Screen<'c> {
    /// The screen of `filter` on `store`; `map`, when given, holds every
    /// run, read up front with the filter's verdict on its session (see
    /// `runs::RunMap`).
    pub(crate) fn new(
        store: &'c Store,
        filter: &Filter,
        map: Option<&'c runs::RunMap>,
    ) -> Result<Screen<'c>, SearchError> {
        let sessions = match map {
            Some(_) => None,
            None => store.session_verdicts(filter)?,
        };
        let roles = (!filter.roles.is_empty())
            .then(|| filter.roles.iter().map(|r| codec::role_code(*r)).collect());
        let settles = filter.beyond_columns().unfiltered();
        Ok(Screen {
            sessions,
            map,
            hint: 0,
            roles,
            since: filter.since_ms,
            settles,
            columns_elsewhere: false,
            roles_file: None,
        })
    }

    /// Gives the screen the roles file to read candidates' role bytes
    /// ahead from (`None`: every role byte through [`Facts`]).
    pub(crate) fn read_roles(&mut self, file: Option<columns_file::Bytes>) {
        self.roles_file = file;
    }

    /// The role bytes of `ids`, in their order, from the roles file: 0
    /// where it cannot say (past its mark, a deleted record) and for every
    /// id without the file. For [`Screen::verdict`], which asks
    /// [`Facts`] about those.
    pub(crate) fn roles_ahead(&mut self, ids: &[i64]) -> Vec<u8> {
        match &mut self.roles_file {
            Some(file) => file.of(ids),
            None => vec![0; ids.len()],
        }
    }

    /// Tells the screen that the ranker's columns of a record it allows
    /// are read without the record's row (see [`Screen::judge`]).
    pub(crate) fn columns_elsewhere(&mut self, yes: bool) {
        self.columns_elsewhere = yes;
    }

    /// What a caller that reads the row of every record the screen neither
    /// rules out nor allows makes of record `id`: [`Screen::verdict`] when
    /// the columns of a record it allows come without its row, else only
    /// whether it rules the record out ([`Screen::rules_out`]: `Some(false)`
    /// or `None`), which spares the role byte when the row is read anyway.
    /// `ahead` is its role byte read ahead ([`Screen::roles_ahead`]), 0
    /// when not known.
    pub(crate) fn judge(
        &mut self,
        bytes: &mut Facts<'_>,
        id: i64,
        ahead: u8,
    ) -> Result<Option<bool>, SearchError> {
        match self.columns_elsewhere {
            true => self.verdict(bytes, id, ahead),
            false => Ok(match self.rules_out(bytes, id, ahead)? {
                true => Some(false),
                false => None,
            }),
        }
    }

    /// The stretches of ids, ascending, that hold every record the screen
    /// does not rule out by its session, when every run was read up front
    /// (see `search::spans`): the allowed runs and the ids no run holds
    /// (`runs::RunMap::open_ranges`), joined into at most
    /// [`spans::MOST`](super::spans::MOST) stretches, and every id past the
    /// runs' end. `None` when the runs are read as candidates come.
    pub(crate) fn stretches(&self) -> Option<Vec<(i64, i64)>> {
        let (ranges, covered) = self.map?.open_ranges();
        Some(super::spans::joined(&ranges, covered, super::spans::MOST))
    }

    /// True when the screen can rule records out without their rows (and,
    /// without a filter on the machine, allow them): by their session (a
    /// filter on the session, or on the time, which rules out every
    /// session that ended before it), their role or their time.
    pub(crate) fn prunes(&self) -> bool {
        self.settles
            || self.sessions.is_some()
            || self.map.is_some()
            || self.roles.is_some()
            || self.since.is_some()
    }

    /// Whether a filter rules record `id` out, as [`Screen::verdict`]
    /// would say `Some(false)`, for a caller that reads the row of every
    /// record not ruled out anyway: without a filter on roles or the time,
    /// the role byte, which would only say that the record exists, is not
    /// read. `ahead` as for [`Screen::judge`].
    pub(crate) fn rules_out(
        &mut self,
        bytes: &mut Facts<'_>,
        id: i64,
        ahead: u8,
    ) -> Result<bool, SearchError> {
        if self.roles.is_some() || self.since.is_some() {
            return Ok(self.verdict(bytes, id, ahead)? == Some(false));
        }
        Ok(self.session_verdict(bytes, id)? == Some(Some(false)))
    }

    /// Whether the filters allow record `id`'s session: `None` without a
    /// filter on the session or the time, `Some(None)` when neither the
    /// runs nor the record can say (a record gone, an id no run holds).
    fn session_verdict(
        &mut self,
        bytes: &mut Facts<'_>,
        id: i64,
    ) -> Result<Option<Option<bool>>, SearchError> {
        Ok(match (self.map, &mut self.sessions) {
            (Some(map), _) => Some(map.allows(id, &mut self.hint)),
            (None, Some(v)) => Some(match bytes.session(id)? {
                Some(session) => Some(v.allows(session)?),
                None => None,
            }),
            (None, None) => None,
        })
    }

    /// What the screen says of record `id` (its bytes read through
    /// `bytes`): `Some(false)` when a filter rules it out, `Some(true)`
    /// when it exists and every filter allows it, `None` when only its row
    /// can tell. `ahead` is its role byte read ahead
    /// ([`Screen::roles_ahead`]); when 0, it is read from `bytes`.
    pub(crate) fn verdict(
        &mut self,
        bytes: &mut Facts<'_>,
        id: i64,
        ahead: u8,
    ) -> Result<Option<bool>, SearchError> {
        let mut known = self.settles;
        // The session first: a rejected session spares the rest.
        match self.session_verdict(bytes, id)? {
            Some(Some(false)) => return Ok(Some(false)),
            Some(None) => known = false,
            _ => {}
        }
        // A role byte is known only for a record that exists; for one that
        // is gone, its row (none) tells.
        let role = match ahead {
            0 => bytes.role(id)?,
            b => Some(b),
        };
        match role {
            Some(b) if self.roles.as_ref().is_some_and(|r| !r.contains(&b)) => {
                return Ok(Some(false));
            }
            Some(_) => {}
            None => known = false,
        }
        // The time last: the runs have ruled out the sessions that ended
        // before it, so only the records of the others are read here.
        if let Some(since) = self.since {
            match bytes.stamp(id)? {
                Some(s) if s.ts.is_some_and(|ts| ts >= since) => {}
                Some(_) => return Ok(Some(false)),
                None => known = false,
            }
        }
        Ok(known.then_some(true))
    }
}
