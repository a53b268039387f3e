//! Fleet state in SQLite (WAL, synchronous=FULL). Events are append-only and each is
//! committed on its own as it arrives: a `kill -9` of the operator loses nothing that
//! was recorded and leaves nothing half-recorded.

use crate::gate::{Latest, UnitState};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, ToSql, params};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("fleet state database {path}: {source}")]
    Db {
        path: String,
        source: rusqlite::Error,
    },
}

pub struct FleetDb {
    conn: Connection,
    path: String,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS units(
  unit_id   TEXT PRIMARY KEY,
  site      TEXT,
  host      TEXT NOT NULL,
  port      INTEGER NOT NULL,
  source    TEXT NOT NULL CHECK (source IN ('config','mdns')),
  version   TEXT,
  txt       TEXT,
  seen_ms   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs(
  run_id      INTEGER PRIMARY KEY AUTOINCREMENT,
  kind        TEXT NOT NULL,
  site        TEXT,
  operator    TEXT NOT NULL,
  args        TEXT NOT NULL,
  started_ms  INTEGER NOT NULL,
  finished_ms INTEGER,
  summary     TEXT
);
CREATE TABLE IF NOT EXISTS unit_events(
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       INTEGER NOT NULL REFERENCES runs(run_id),
  unit_id      TEXT NOT NULL,
  site         TEXT,
  state        TEXT NOT NULL CHECK (state IN ('started','pending','failed','done')),
  reason       TEXT,
  readback     TEXT,
  unit_read_ms INTEGER,
  recorded_ms  INTEGER NOT NULL,
  CHECK (state <> 'done' OR readback IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS unit_events_unit ON unit_events(unit_id, id);
CREATE TABLE IF NOT EXISTS pole_events(
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      INTEGER NOT NULL REFERENCES runs(run_id),
  site        TEXT NOT NULL,
  pole_id     TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('started','failed','done')),
  reason      TEXT,
  readback    TEXT,
  recorded_ms INTEGER NOT NULL,
  CHECK (state <> 'done' OR readback IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS pole_events_pole ON pole_events(site, pole_id, id);
-- Show pushes have their own table: the PAUSE-off gate reads unit_events' latest row, and
-- a show push must never stand in for (or hide) a unit's PAUSE-off readback.
CREATE TABLE IF NOT EXISTS show_events(
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id       INTEGER NOT NULL REFERENCES runs(run_id),
  unit_id      TEXT NOT NULL,
  site         TEXT,
  state        TEXT NOT NULL CHECK (state IN ('started','pending','failed','done')),
  reason       TEXT,
  readback     TEXT,
  bytes_sent   INTEGER NOT NULL DEFAULT 0,
  recorded_ms  INTEGER NOT NULL,
  CHECK (state <> 'done' OR readback IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS show_events_unit ON show_events(unit_id, id);
-- Software updates (push update): one row per result, the bundle it was for, the
-- phase it reached, and the unit's booted version as it read back (status, top).
CREATE TABLE IF NOT EXISTS update_events(
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id        INTEGER NOT NULL REFERENCES runs(run_id),
  unit_id       TEXT NOT NULL,
  site          TEXT,
  state         TEXT NOT NULL CHECK (state IN ('started','pending','failed','done')),
  bundle_sha256 TEXT NOT NULL,
  version       TEXT,
  phase         TEXT,
  reason        TEXT,
  readback      TEXT,
  software      TEXT,
  bytes_sent    INTEGER NOT NULL DEFAULT 0,
  switch_at_ms  INTEGER,
  recorded_ms   INTEGER NOT NULL,
  CHECK (state <> 'done' OR readback IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS update_events_unit ON update_events(unit_id, id);
-- Live actions (pfx-fleet control): who (the run's operator), what, when, and each
-- unit's answer with its stamp of the frame boundary where the action took effect.
CREATE TABLE IF NOT EXISTS control_events(
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id           INTEGER NOT NULL REFERENCES runs(run_id),
  unit_id          TEXT NOT NULL,
  site             TEXT,
  state            TEXT NOT NULL CHECK (state IN ('started','pending','failed','done')),
  action           TEXT NOT NULL,
  reason           TEXT,
  readback         TEXT,
  effective_unix_us INTEGER,
  recorded_ms      INTEGER NOT NULL,
  CHECK (state <> 'done' OR readback IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS control_events_unit ON control_events(unit_id, id);
";

/// One event of a run as recorded: the columns every event table has, and in `kind`
/// which table it goes to with that table's own columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    pub run_id: i64,
    /// The unit's id; for [`EventKind::Pole`] the pole's.
    pub target: &'a str,
    /// A pole event always has its site (the column is NOT NULL).
    pub site: Option<&'a str>,
    pub state: UnitState,
    pub reason: Option<&'a str>,
    /// The far end's own answer (JSON), required for `done` by each table's CHECK.
    pub readback: Option<&'a str>,
    pub recorded_ms: u64,
    pub kind: EventKind<'a>,
}

/// Which push an [`Event`] belongs to (its table), and that table's own columns.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind<'a> {
    /// `push pause-off` (`unit_events`): when the unit read its NIC back.
    PauseOff { unit_read_ms: Option<u64> },
    /// `rollout` (`pole_events`).
    Pole,
    /// `push show` (`show_events`): bytes sent in this attempt.
    Show { bytes_sent: u64 },
    /// `control` (`control_events`): the action's words and the unit's frame stamp.
    Control {
        action: &'a str,
        effective_unix_us: Option<u64>,
    },
}

impl<'a> Event<'a> {
    /// An event with no reason and no readback yet (a `started` marker, or a result the
    /// caller fills in).
    pub fn new(
        run_id: i64,
        target: &'a str,
        site: Option<&'a str>,
        state: UnitState,
        kind: EventKind<'a>,
        recorded_ms: u64,
    ) -> Self {
        Event {
            run_id,
            target,
            site,
            state,
            reason: None,
            readback: None,
            recorded_ms,
            kind,
        }
    }
}

/// One `push update` result as recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpdateEvent<'a> {
    pub run_id: i64,
    pub unit_id: &'a str,
    pub site: Option<&'a str>,
    pub state: Option<UnitState>,
    pub bundle_sha256: &'a str,
    pub version: Option<&'a str>,
    pub phase: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub readback: Option<&'a str>,
    /// The unit's booted software version, as it read back.
    pub software: Option<&'a str>,
    pub bytes_sent: u64,
    pub switch_at_ms: Option<u64>,
    pub recorded_ms: u64,
}

/// The latest recorded show push of a unit: the same columns as a PAUSE-off push's.
pub type ShowLatest = Latest;

/// The columns a [`Latest`] is read from, in `unit_events` and `show_events` alike.
const LATEST_COLUMNS: &str = "state, recorded_ms, reason, readback";

/// The history rows of a table of unit events (`unit_events`, `show_events`).
fn unit_history(table: &str) -> String {
    format!(
        "SELECT r.run_id, r.kind, r.operator, 'unit', e.unit_id, e.site, e.state,
                e.reason, e.readback, e.recorded_ms, e.id
         FROM {table} e JOIN runs r USING (run_id)"
    )
}

/// A row of [`LATEST_COLUMNS`] as a [`Latest`].
fn latest_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Latest> {
    let s: String = r.get(0)?;
    Ok(Latest {
        // The CHECK constraints keep unknown states out.
        state: UnitState::parse(&s).unwrap_or(UnitState::Failed),
        recorded_ms: r.get::<_, i64>(1)? as u64,
        reason: r.get(2)?,
        readback: r.get(3)?,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnitRow {
    pub unit_id: String,
    pub site: Option<String>,
    pub host: String,
    pub port: u16,
    pub source: String,
    pub version: Option<String>,
    pub txt: Option<String>,
    pub seen_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    pub run_id: i64,
    pub kind: String,
    pub operator: String,
    pub target_kind: &'static str,
    pub target: String,
    pub site: Option<String>,
    pub state: String,
    pub reason: Option<String>,
    pub readback: Option<serde_json::Value>,
    pub recorded_ms: u64,
}

impl FleetDb {
    pub fn open(path: &Path) -> Result<Self, DbError> {
        let p = path.display().to_string();
        let err = |source| DbError::Db {
            path: p.clone(),
            source,
        };
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(d);
        }
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(FleetDb { conn, path: p })
    }

    fn e(&self) -> impl Fn(rusqlite::Error) -> DbError + '_ {
        |source| DbError::Db {
            path: self.path.clone(),
            source,
        }
    }

    /// Adds or updates a unit. A `seen_ms` of 0 says "not seen now": a known unit keeps the
    /// time it was last seen (a new one starts at 0, never seen).
    pub fn upsert_unit(&self, u: &UnitRow) -> Result<(), DbError> {
        self.conn
            .execute(
                "INSERT INTO units(unit_id, site, host, port, source, version, txt, seen_ms)
                 VALUES (?1,?2,?3,?4,?5,?6,?7,?8)
                 ON CONFLICT(unit_id) DO UPDATE SET site=excluded.site, host=excluded.host,
                   port=excluded.port, source=excluded.source,
                   version=COALESCE(excluded.version, units.version),
                   txt=COALESCE(excluded.txt, units.txt),
                   seen_ms=CASE excluded.seen_ms WHEN 0 THEN units.seen_ms ELSE excluded.seen_ms END",
                params![
                    u.unit_id,
                    u.site,
                    u.host,
                    u.port,
                    u.source,
                    u.version,
                    u.txt,
                    u.seen_ms as i64
                ],
            )
            .map_err(self.e())?;
        Ok(())
    }

    pub fn units(&self, site: Option<&str>) -> Result<Vec<UnitRow>, DbError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT unit_id, site, host, port, source, version, txt, seen_ms FROM units
                 WHERE ?1 IS NULL OR site = ?1 ORDER BY site, unit_id",
            )
            .map_err(self.e())?;
        let rows = st
            .query_map(params![site], |r| {
                Ok(UnitRow {
                    unit_id: r.get(0)?,
                    site: r.get(1)?,
                    host: r.get(2)?,
                    port: r.get(3)?,
                    source: r.get(4)?,
                    version: r.get(5)?,
                    txt: r.get(6)?,
                    seen_ms: r.get::<_, i64>(7)? as u64,
                })
            })
            .map_err(self.e())?;
        rows.collect::<Result<_, _>>().map_err(self.e())
    }

    pub fn begin_run(
        &self,
        kind: &str,
        site: Option<&str>,
        operator: &str,
        args: &str,
        now_ms: u64,
    ) -> Result<i64, DbError> {
        self.conn
            .execute(
                "INSERT INTO runs(kind, site, operator, args, started_ms) VALUES (?1,?2,?3,?4,?5)",
                params![kind, site, operator, args, now_ms as i64],
            )
            .map_err(self.e())?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn finish_run(&self, run_id: i64, summary: &str, now_ms: u64) -> Result<(), DbError> {
        self.conn
            .execute(
                "UPDATE runs SET finished_ms = ?2, summary = ?3 WHERE run_id = ?1",
                params![run_id, now_ms as i64, summary],
            )
            .map_err(self.e())?;
        Ok(())
    }

    /// Records one event in its kind's table: the columns every event has, then the
    /// kind's own. Each is committed on its own (see the module's note).
    pub fn record(&self, e: &Event<'_>) -> Result<(), DbError> {
        let state = e.state.as_str();
        let recorded_ms = e.recorded_ms as i64;
        let mut cols: Vec<(&str, &dyn ToSql)> = vec![("run_id", &e.run_id)];
        match &e.kind {
            EventKind::Pole => {
                cols.extend([("pole_id", &e.target as &dyn ToSql), ("site", &e.site)])
            }
            _ => cols.extend([("unit_id", &e.target as &dyn ToSql), ("site", &e.site)]),
        }
        cols.extend([
            ("state", &state as &dyn ToSql),
            ("reason", &e.reason),
            ("readback", &e.readback),
            ("recorded_ms", &recorded_ms),
        ]);
        let (table, extra): (&str, Vec<(&str, Value)>) = match &e.kind {
            EventKind::PauseOff { unit_read_ms } => (
                "unit_events",
                vec![("unit_read_ms", Value::from(unit_read_ms.map(|v| v as i64)))],
            ),
            EventKind::Pole => ("pole_events", vec![]),
            EventKind::Show { bytes_sent } => (
                "show_events",
                vec![("bytes_sent", Value::from(*bytes_sent as i64))],
            ),
            EventKind::Control {
                action,
                effective_unix_us,
            } => (
                "control_events",
                vec![
                    ("action", Value::from(action.to_string())),
                    (
                        "effective_unix_us",
                        Value::from(effective_unix_us.map(|v| v as i64)),
                    ),
                ],
            ),
        };
        cols.extend(extra.iter().map(|(c, v)| (*c, v as &dyn ToSql)));
        self.insert(table, &cols)
    }

    /// The one INSERT of an event: `table` and the column names are this module's own
    /// constants, never input; the values go as parameters.
    fn insert(&self, table: &str, cols: &[(&str, &dyn ToSql)]) -> Result<(), DbError> {
        let names: Vec<&str> = cols.iter().map(|(c, _)| *c).collect();
        let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
        self.conn
            .execute(
                &format!(
                    "INSERT INTO {table}({}) VALUES ({})",
                    names.join(", "),
                    marks.join(",")
                ),
                rusqlite::params_from_iter(cols.iter().map(|(_, v)| *v)),
            )
            .map_err(self.e())?;
        Ok(())
    }

    /// Each unit's part in MultiSync as its last control answer said it (units that never
    /// answered, or play on their own, are absent).
    pub fn sync_parts(
        &self,
    ) -> Result<std::collections::BTreeMap<String, pfx_api::control::SyncPart>, DbError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT unit_id, readback FROM control_events WHERE id IN
                   (SELECT MAX(id) FROM control_events WHERE readback IS NOT NULL GROUP BY unit_id)",
            )
            .map_err(self.e())?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(self.e())?;
        let mut out = std::collections::BTreeMap::new();
        for row in rows {
            let (unit, readback) = row.map_err(self.e())?;
            // A readback this pfx-fleet cannot read says nothing about the unit's part.
            if let Some(part) = serde_json::from_str::<pfx_api::control::ControlAnswer>(&readback)
                .ok()
                .and_then(|a| a.sync)
            {
                out.insert(unit, part);
            }
        }
        Ok(out)
    }

    pub fn latest_unit(&self, unit_id: &str) -> Result<Option<Latest>, DbError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {LATEST_COLUMNS} FROM unit_events
                     WHERE unit_id = ?1 ORDER BY id DESC LIMIT 1"
                ),
                params![unit_id],
                latest_from,
            )
            .optional()
            .map_err(self.e())
    }

    /// (state, reason) of the pole's latest event.
    pub fn latest_pole(
        &self,
        site: &str,
        pole_id: &str,
    ) -> Result<Option<(String, Option<String>)>, DbError> {
        self.conn
            .query_row(
                "SELECT state, reason FROM pole_events WHERE site = ?1 AND pole_id = ?2
                 ORDER BY id DESC LIMIT 1",
                params![site, pole_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(self.e())
    }

    pub fn latest_show(&self, unit_id: &str) -> Result<Option<ShowLatest>, DbError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {LATEST_COLUMNS} FROM show_events
                     WHERE unit_id = ?1 AND state <> 'started' ORDER BY id DESC LIMIT 1"
                ),
                params![unit_id],
                latest_from,
            )
            .optional()
            .map_err(self.e())
    }

    pub fn record_update(&self, e: &UpdateEvent<'_>) -> Result<(), DbError> {
        let state = e.state.unwrap_or(UnitState::Started).as_str();
        let bytes_sent = e.bytes_sent as i64;
        let switch_at_ms = e.switch_at_ms.map(|v| v as i64);
        let recorded_ms = e.recorded_ms as i64;
        self.insert(
            "update_events",
            &[
                ("run_id", &e.run_id),
                ("unit_id", &e.unit_id),
                ("site", &e.site),
                ("state", &state),
                ("bundle_sha256", &e.bundle_sha256),
                ("version", &e.version),
                ("phase", &e.phase),
                ("reason", &e.reason),
                ("readback", &e.readback),
                ("software", &e.software),
                ("bytes_sent", &bytes_sent),
                ("switch_at_ms", &switch_at_ms),
                ("recorded_ms", &recorded_ms),
            ],
        )
    }

    /// The unit's latest `push update` result for this bundle (not a `started` marker).
    pub fn latest_update(
        &self,
        unit_id: &str,
        bundle_sha256: &str,
    ) -> Result<Option<Latest>, DbError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {LATEST_COLUMNS} FROM update_events
                     WHERE unit_id = ?1 AND bundle_sha256 = ?2 AND state <> 'started'
                     ORDER BY id DESC LIMIT 1"
                ),
                params![unit_id, bundle_sha256],
                latest_from,
            )
            .optional()
            .map_err(self.e())
    }

    /// The unit's software version as it last read back (booted slot's version), and when.
    pub fn software(&self, unit_id: &str) -> Result<Option<(String, u64)>, DbError> {
        self.conn
            .query_row(
                "SELECT software, recorded_ms FROM update_events
                 WHERE unit_id = ?1 AND software IS NOT NULL ORDER BY id DESC LIMIT 1",
                params![unit_id],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)),
            )
            .optional()
            .map_err(self.e())
    }

    /// Every event (results and the `started` markers of interrupted work), oldest first.
    pub fn history(&self, limit: usize) -> Result<Vec<HistoryRow>, DbError> {
        let mut st = self
            .conn
            .prepare(&format!(
                "SELECT * FROM (
                   {units}
                   UNION ALL
                   SELECT r.run_id, r.kind, r.operator, 'pole', p.pole_id, p.site, p.state,
                          p.reason, p.readback, p.recorded_ms, p.id
                   FROM pole_events p JOIN runs r USING (run_id)
                   UNION ALL
                   {shows}
                   UNION ALL
                   {updates}
                   UNION ALL
                   {controls}
                 ) ORDER BY 10 DESC, 11 DESC LIMIT ?1",
                units = unit_history("unit_events"),
                shows = unit_history("show_events"),
                updates = unit_history("update_events"),
                controls = unit_history("control_events"),
            ))
            .map_err(self.e())?;
        let rows = st
            .query_map(params![limit as i64], |r| {
                let tk: String = r.get(3)?;
                let rb: Option<String> = r.get(8)?;
                Ok(HistoryRow {
                    run_id: r.get(0)?,
                    kind: r.get(1)?,
                    operator: r.get(2)?,
                    target_kind: if tk == "unit" { "unit" } else { "pole" },
                    target: r.get(4)?,
                    site: r.get(5)?,
                    state: r.get(6)?,
                    reason: r.get(7)?,
                    readback: rb.and_then(|s| serde_json::from_str(&s).ok()),
                    recorded_ms: r.get::<_, i64>(9)? as u64,
                })
            })
            .map_err(self.e())?;
        let mut v: Vec<HistoryRow> = rows.collect::<Result<_, _>>().map_err(self.e())?;
        v.reverse();
        Ok(v)
    }
}

/// One unit's result as a push hands it to [`FleetDb::record_result`]: the event's state,
/// its reason, the far end's answer and the push's own columns.
pub struct Finished<'a> {
    pub state: UnitState,
    pub reason: Option<&'a str>,
    pub readback: Option<&'a str>,
    pub kind: EventKind<'a>,
    pub recorded_ms: u64,
}

/// A push summary's counters of results, borrowed from the summary: each push keeps its
/// own summary type (and its JSON) while the counting is done in one place.
pub struct Counts<'a> {
    pub done: &'a mut usize,
    pub pending: &'a mut usize,
    pub failed: &'a mut usize,
}

impl Counts<'_> {
    /// Counts one result; `started` (a unit cut short) is still pending.
    pub fn count(self, state: UnitState) {
        match state {
            UnitState::Done => *self.done += 1,
            UnitState::Pending | UnitState::Started => *self.pending += 1,
            UnitState::Failed => *self.failed += 1,
        }
    }
}

impl FleetDb {
    /// Records a push's result for `unit`, committed, and counts it. The caller reports
    /// the result only after this returns, so whatever it reports is on disk. One
    /// function for `push pause-off` and `push show`, so both record a result alike.
    pub fn record_result(
        &self,
        run_id: i64,
        unit: &UnitRow,
        f: Finished<'_>,
        counts: Counts<'_>,
    ) -> Result<(), DbError> {
        self.record(&Event {
            reason: f.reason,
            readback: f.readback,
            ..Event::new(
                run_id,
                &unit.unit_id,
                unit.site.as_deref(),
                f.state,
                f.kind,
                f.recorded_ms,
            )
        })?;
        counts.count(f.state);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gate::tests::good_readback;

    /// A configured unit's row, as the tests of the modules that record events use it.
    pub(crate) fn unit(id: &str, site: &str) -> UnitRow {
        UnitRow {
            unit_id: id.into(),
            site: Some(site.into()),
            host: "10.0.0.1".into(),
            port: 22,
            source: "config".into(),
            version: None,
            txt: None,
            seen_ms: 1,
        }
    }

    #[test]
    fn schema_is_wal_and_events_are_append_only_latest_wins() {
        let d = tempfile::tempdir().unwrap();
        let s = FleetDb::open(&d.path().join("f.db")).unwrap();
        let mode: String = s
            .conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        s.upsert_unit(&unit("u1", "a")).unwrap();
        s.upsert_unit(&unit("u2", "b")).unwrap();
        s.upsert_unit(&UnitRow {
            host: "10.0.0.9".into(),
            ..unit("u1", "a")
        })
        .unwrap();
        assert_eq!(s.units(Some("a")).unwrap()[0].host, "10.0.0.9");
        assert_eq!(s.units(None).unwrap().len(), 2);

        let run = s
            .begin_run("push pause-off", Some("a"), "alice", "[]", 10)
            .unwrap();
        assert_eq!(s.latest_unit("u1").unwrap(), None);
        s.record(&Event {
            reason: None,
            readback: None,
            ..Event::new(
                run,
                "u1",
                Some("a"),
                UnitState::Started,
                EventKind::PauseOff { unit_read_ms: None },
                11,
            )
        })
        .unwrap();
        assert_eq!(
            s.latest_unit("u1").unwrap().unwrap().state,
            UnitState::Started
        );
        let rb = good_readback();
        s.record(&Event {
            reason: None,
            readback: Some(&rb),
            ..Event::new(
                run,
                "u1",
                Some("a"),
                UnitState::Done,
                EventKind::PauseOff {
                    unit_read_ms: Some(12),
                },
                12,
            )
        })
        .unwrap();
        let l = s.latest_unit("u1").unwrap().unwrap();
        assert_eq!((l.state, l.recorded_ms), (UnitState::Done, 12));
        s.record(&Event {
            reason: Some("unreachable"),
            readback: None,
            ..Event::new(
                run,
                "u1",
                Some("a"),
                UnitState::Pending,
                EventKind::PauseOff { unit_read_ms: None },
                13,
            )
        })
        .unwrap();
        assert_eq!(
            s.latest_unit("u1").unwrap().unwrap().state,
            UnitState::Pending
        );
        let h = s.history(100).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h[0].operator, "alice");
        assert_eq!(h[2].state, "pending");
    }

    #[test]
    fn show_pushes_are_in_history_but_never_the_pause_gates_latest() {
        let d = tempfile::tempdir().unwrap();
        let s = FleetDb::open(&d.path().join("f.db")).unwrap();
        let run = s.begin_run("push show", None, "x", "[]", 1).unwrap();
        assert!(
            s.record(&Event {
                reason: None,
                readback: None,
                ..Event::new(
                    run,
                    "u1",
                    None,
                    UnitState::Done,
                    EventKind::Show { bytes_sent: 0 },
                    2
                )
            })
            .is_err(),
            "done without a readback"
        );
        s.record(&Event {
            reason: None,
            readback: None,
            ..Event::new(
                run,
                "u1",
                None,
                UnitState::Started,
                EventKind::Show { bytes_sent: 0 },
                2,
            )
        })
        .unwrap();
        assert_eq!(s.latest_show("u1").unwrap(), None, "started is no result");
        s.record(&Event {
            reason: Some("ok"),
            readback: Some("{\"verified\":true}"),
            ..Event::new(
                run,
                "u1",
                None,
                UnitState::Done,
                EventKind::Show { bytes_sent: 10 },
                3,
            )
        })
        .unwrap();
        let want = Latest {
            state: UnitState::Done,
            recorded_ms: 3,
            reason: Some("ok".into()),
            readback: Some("{\"verified\":true}".into()),
        };
        assert_eq!(s.latest_show("u1").unwrap(), Some(want.clone()));
        assert_eq!(s.latest_unit("u1").unwrap(), None);
        // The PAUSE-off table reads back through the same mapping.
        s.record(&Event {
            reason: Some("ok"),
            readback: Some("{\"verified\":true}"),
            ..Event::new(
                run,
                "u1",
                None,
                UnitState::Done,
                EventKind::PauseOff { unit_read_ms: None },
                3,
            )
        })
        .unwrap();
        assert_eq!(s.latest_unit("u1").unwrap(), Some(want));
        let h = s.history(10).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(
            (h[2].kind.as_str(), h[2].reason.as_deref()),
            ("push show", Some("ok"))
        );
    }

    #[test]
    fn update_results_per_bundle_in_history_and_the_units_software() {
        let d = tempfile::tempdir().unwrap();
        let s = FleetDb::open(&d.path().join("f.db")).unwrap();
        let run = s.begin_run("push update", Some("a"), "x", "[]", 1).unwrap();
        let ev = |state, sha, rb, sw, t| UpdateEvent {
            run_id: run,
            unit_id: "u1",
            site: Some("a"),
            state: Some(state),
            bundle_sha256: sha,
            version: Some("2.0.0"),
            phase: Some("committed"),
            reason: Some("ok"),
            readback: rb,
            software: sw,
            recorded_ms: t,
            ..Default::default()
        };
        assert!(
            s.record_update(&ev(UnitState::Done, "aa", None, None, 2))
                .is_err(),
            "done without a readback"
        );
        s.record_update(&ev(UnitState::Started, "aa", None, None, 2))
            .unwrap();
        assert_eq!(
            s.latest_update("u1", "aa").unwrap(),
            None,
            "started is no result"
        );
        s.record_update(&ev(UnitState::Done, "aa", Some("{}"), Some("2.0.0"), 3))
            .unwrap();
        s.record_update(&ev(UnitState::Failed, "bb", None, None, 4))
            .unwrap();
        assert_eq!(
            s.latest_update("u1", "aa").unwrap().unwrap().state,
            UnitState::Done
        );
        assert_eq!(
            s.latest_update("u1", "bb").unwrap().unwrap().state,
            UnitState::Failed
        );
        assert_eq!(s.software("u1").unwrap(), Some(("2.0.0".into(), 3)));
        assert_eq!(s.latest_unit("u1").unwrap(), None, "never the PAUSE gate's");
        let h = s.history(10).unwrap();
        assert_eq!(h.len(), 3);
        assert!(h.iter().all(|r| r.kind == "push update"));
    }

    #[test]
    fn done_without_readback_is_refused_by_the_schema() {
        let d = tempfile::tempdir().unwrap();
        let s = FleetDb::open(&d.path().join("f.db")).unwrap();
        let run = s.begin_run("push pause-off", None, "x", "[]", 1).unwrap();
        assert!(
            s.record(&Event {
                reason: None,
                readback: None,
                ..Event::new(
                    run,
                    "u1",
                    None,
                    UnitState::Done,
                    EventKind::PauseOff { unit_read_ms: None },
                    2
                )
            })
            .is_err()
        );
        assert!(
            s.record(&Event {
                reason: None,
                readback: None,
                ..Event::new(run, "p1", Some("a"), UnitState::Done, EventKind::Pole, 2)
            })
            .is_err()
        );
        assert!(
            s.record(&Event {
                reason: None,
                readback: Some("{}"),
                ..Event::new(run, "p1", Some("a"), UnitState::Done, EventKind::Pole, 2)
            })
            .is_ok()
        );
        assert_eq!(s.latest_pole("a", "p1").unwrap().unwrap().0, "done");
    }

    #[test]
    fn committed_events_survive_a_second_connection() {
        // Every record is its own transaction: another process sees it at once.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.db");
        let s = FleetDb::open(&p).unwrap();
        let run = s.begin_run("push pause-off", None, "x", "[]", 1).unwrap();
        s.record(&Event {
            reason: Some("no answer"),
            readback: None,
            ..Event::new(
                run,
                "u1",
                None,
                UnitState::Failed,
                EventKind::PauseOff { unit_read_ms: None },
                2,
            )
        })
        .unwrap();
        let other = FleetDb::open(&p).unwrap();
        assert_eq!(
            other.latest_unit("u1").unwrap().unwrap().state,
            UnitState::Failed
        );
    }

    #[test]
    fn a_live_action_is_in_the_history_and_never_a_pause_off_readback() {
        let d = tempfile::tempdir().unwrap();
        let s = FleetDb::open(&d.path().join("f.db")).unwrap();
        s.upsert_unit(&unit("u1", "a")).unwrap();
        let run = s
            .begin_run("control blackout", Some("a"), "alice", "[]", 10)
            .unwrap();
        assert!(
            s.record(&Event {
                reason: None,
                readback: None,
                ..Event::new(
                    run,
                    "u1",
                    Some("a"),
                    UnitState::Done,
                    EventKind::Control {
                        action: "blackout",
                        effective_unix_us: None
                    },
                    11
                )
            })
            .is_err(),
            "done needs the unit's answer"
        );
        s.record(&Event {
            reason: Some("blackout at 2026-01-01 00:00:00.000001 UTC"),
            readback: Some("{\"accepted\": true}"),
            ..Event::new(
                run,
                "u1",
                Some("a"),
                UnitState::Done,
                EventKind::Control {
                    action: "blackout",
                    effective_unix_us: Some(1),
                },
                12,
            )
        })
        .unwrap();
        let h = s.history(10).unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(
            (
                h[0].kind.as_str(),
                h[0].operator.as_str(),
                h[0].target.as_str(),
                h[0].state.as_str()
            ),
            ("control blackout", "alice", "u1", "done")
        );
        assert_eq!(h[0].recorded_ms, 12);
        assert_eq!(s.latest_unit("u1").unwrap(), None, "the gate never sees it");
    }

    #[test]
    fn a_unit_s_sync_part_is_its_last_answer_s() {
        let s = FleetDb::open(Path::new(":memory:")).unwrap();
        let run = s
            .begin_run("control blackout", Some("a"), "x", "[]", 1)
            .unwrap();
        let answered = |unit: &str, readback: &str| {
            s.record(&Event {
                reason: None,
                readback: Some(readback),
                ..Event::new(
                    run,
                    unit,
                    Some("a"),
                    UnitState::Done,
                    EventKind::Control {
                        action: "blackout",
                        effective_unix_us: Some(1),
                    },
                    2,
                )
            })
            .unwrap()
        };
        let a = |sync: &str| {
            format!(
                r#"{{"unit":"u","accepted":true,"error":null,"reached_player":true,"effective_unix_us":1,"state":{{}},"held_on_disk":null,"note":null{sync}}}"#
            )
        };
        answered("m", &a(r#","sync":"master""#));
        answered("r1", &a(r#","sync":"master""#));
        answered("r1", &a(r#","sync":"remote""#));
        answered("was-remote", &a(r#","sync":"remote""#));
        answered("was-remote", &a(""));
        answered("garbled", "not json");
        use pfx_api::control::SyncPart;
        let got = s.sync_parts().unwrap();
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [
                ("m".to_string(), SyncPart::Master),
                ("r1".to_string(), SyncPart::Remote)
            ]
        );
    }

    /// Each kind's own columns land in its own table, beside the common ones.
    #[test]
    fn each_event_kind_writes_its_own_columns() {
        let s = FleetDb::open(Path::new(":memory:")).unwrap();
        let run = s.begin_run("push", Some("a"), "x", "[]", 1).unwrap();
        let ev = |target, kind| Event {
            reason: Some("why"),
            readback: Some("{}"),
            ..Event::new(run, target, Some("a"), UnitState::Done, kind, 7)
        };
        s.record(&ev(
            "u1",
            EventKind::PauseOff {
                unit_read_ms: Some(5),
            },
        ))
        .unwrap();
        s.record(&ev("u2", EventKind::Show { bytes_sent: 42 }))
            .unwrap();
        s.record(&ev(
            "u3",
            EventKind::Control {
                action: "blackout",
                effective_unix_us: Some(9),
            },
        ))
        .unwrap();
        s.record(&ev("p1", EventKind::Pole)).unwrap();
        let q = |sql: &str| -> String {
            s.conn
                .query_row(sql, [], |r| r.get::<_, String>(0))
                .unwrap()
        };
        assert_eq!(
            q(
                "SELECT unit_id||site||state||reason||readback||unit_read_ms||recorded_ms FROM unit_events"
            ),
            "u1adonewhy{}57"
        );
        assert_eq!(
            q("SELECT unit_id||site||state||bytes_sent||recorded_ms FROM show_events"),
            "u2adone427"
        );
        assert_eq!(
            q("SELECT unit_id||action||effective_unix_us||reason FROM control_events"),
            "u3blackout9why"
        );
        assert_eq!(
            q("SELECT pole_id||site||state||readback FROM pole_events"),
            "p1adone{}"
        );
    }
}
