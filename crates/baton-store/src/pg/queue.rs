//! The work queue of runs driven by workers (schema version 2): what a coordinator puts in,
//! what workers claim, renew and end, fenced so that an attempt's end is recorded once, by the
//! worker that holds it, and never after its lease lapsed.
//!
//! The store does not know what an attempt's work or result is: both are the runner's JSON,
//! carried as text. What it guarantees is who may write what, and when:
//! - only the coordinator holding the run's lease queues attempts ([`PgStore::enqueue`]: the
//!   lease token is checked in the statement that inserts);
//! - a queued attempt is claimed by one worker ([`PgStore::claim_attempts`], `FOR UPDATE SKIP
//!   LOCKED`: claims never wait on each other), which holds it while it renews its lease;
//! - its end is written only by that worker, only while the row is still `claimed` by it
//!   ([`PgStore::end_attempt`]): once the coordinator found the lease lapsed and recorded the
//!   attempt interrupted ([`PgStore::take_ended`]), the late end changes nothing, and the
//!   worker learns so from the answer (and from its next renewal).

use baton_model::RunId;
use postgres::fallible_iterator::FallibleIterator;

use super::PgStore;
use crate::{NewRun, StoreError};

/// Channels workers and coordinators listen on (`LISTEN`): polling is only the backstop.
pub const WORK_QUEUED: &str = "baton_work";
pub const ATTEMPT_ENDED: &str = "baton_ended";
pub const RUN_SUBMITTED: &str = "baton_runs";

/// A run that may need a coordinator, as [`PgStore::runs_to_coordinate`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinated {
    pub run: RunId,
    /// Submitted and never started.
    pub queued: bool,
    /// The process that drives it, if one is recorded.
    pub driver: Option<crate::Driver>,
    /// Its lease has lapsed (or it has none).
    pub lapsed: bool,
}

/// An attempt a coordinator queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedAttempt {
    pub task: u32,
    pub attempt: u32,
    /// The engine it runs on (`shell`, `claude`, …): a worker takes only what it offers.
    pub engine: String,
    /// Labels the worker must have (`runs_on`).
    pub labels: Vec<String>,
    /// What the worker needs to run it.
    pub work: String,
}

/// An attempt a worker claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAttempt {
    pub run: RunId,
    pub task: u32,
    pub attempt: u32,
    pub work: String,
}

/// One attempt of a run, as the queue names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttemptKey {
    pub run: RunId,
    pub task: u32,
    pub attempt: u32,
}

/// What a coordinator learns of its queued attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Its worker wrote its end.
    Ended {
        task: u32,
        attempt: u32,
        result: String,
    },
    /// Its worker's lease lapsed: the worker is dead, cut off or paused, and the attempt is
    /// over as far as the run is concerned.
    Lapsed {
        task: u32,
        attempt: u32,
        worker: String,
    },
}

/// What a coordinator takes from its run's workers at once ([`PgStore::take_arrivals`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Arrivals {
    /// What running attempts recorded (the runner's JSON events), oldest first.
    pub news: Vec<String>,
    /// Attempts that ended or whose lease lapsed.
    pub ends: Vec<AttemptEnd>,
}

/// What a renewal says of one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Still this worker's; the coordinator asks it to stop (0 run on, 1 gracefully, 2 now).
    Held { stop: i16 },
    /// No longer this worker's: its lease lapsed, or the run was taken over. Its processes
    /// must stop and its end is not recorded.
    Lost,
}

/// A worker as it registered, with its last heartbeat and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub slots: u32,
    pub engines: Vec<String>,
    pub labels: Vec<String>,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// The attempts it holds now.
    pub running: Vec<AttemptKey>,
}

fn n(value: u32) -> i64 {
    i64::from(value)
}

fn idx(value: i64) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| StoreError::PgValue(format!("{value} is not a task index")))
}

impl PgStore {
    /// Records a run for a worker to drive (`baton run --detach`): `queued`, no driver, and a
    /// `NOTIFY` that wakes idle workers.
    pub fn submit_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.insert_run(run, baton_model::RunState::Queued)?;
        let id = run.id.as_str().to_owned();
        self.conn.call(move |client| {
            client.execute("SELECT pg_notify($1, $2)", &[&RUN_SUBMITTED, &id])?;
            Ok(())
        })
    }

    /// Runs a worker could coordinate: queued ones, oldest first, then running ones, with
    /// who drives them and until when their lease holds (the caller judges whether that
    /// driver lives; claiming the run says for sure).
    pub fn runs_to_coordinate(&self) -> Result<Vec<Coordinated>, StoreError> {
        self.conn.call(move |client| {
            let rows = client.query(
                "SELECT id, status = 'queued', driver_pid, driver_start_time, driver_host, \
                 lease_expires_at_ms, lease_expires_at_ms <= baton_now_ms() FROM runs \
                 WHERE status IN ('queued', 'running') \
                 ORDER BY (status = 'queued') DESC, started_at_ms, id LIMIT 256",
                &[],
            )?;
            Ok(rows
                .iter()
                .filter_map(|row| {
                    let driver = match (
                        row.get::<_, Option<i64>>(2),
                        row.get::<_, Option<i64>>(3),
                        row.get::<_, Option<String>>(4),
                    ) {
                        (Some(pid), start_time, Some(host)) => Some(crate::Driver {
                            pid: u32::try_from(pid).ok()?,
                            start_time: start_time.map_or(0, |t| t as u64),
                            host,
                        }),
                        _ => None,
                    };
                    Some(Coordinated {
                        run: RunId::new(row.get::<_, String>(0)).ok()?,
                        queued: row.get(1),
                        driver,
                        lapsed: row.get::<_, Option<bool>>(6).unwrap_or(true),
                    })
                })
                .collect())
        })
    }

    /// Queues `attempts` of `run` for workers, if `token` is still the run's lease; wakes the
    /// workers that listen. One statement (one round trip): the fence, the rows and the
    /// notification together.
    pub fn enqueue(
        &self,
        run: &RunId,
        token: u64,
        attempts: Vec<QueuedAttempt>,
    ) -> Result<(), StoreError> {
        if attempts.is_empty() {
            return Ok(());
        }
        let run = run.clone();
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "WITH held AS (SELECT 1 FROM runs WHERE id = $1 AND lease_token = $2 FOR SHARE), \
                 queued AS (INSERT INTO attempt_queue (run_id, task_idx, attempt, \
                   coordinator_token, engine, labels, work, queued_at_ms) \
                   SELECT $1, a.task, a.attempt, $2, a.engine, \
                     COALESCE(string_to_array(NULLIF(a.labels, ''), ','), '{}'), a.work, baton_now_ms() \
                   FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[]) \
                     AS a(task, attempt, engine, labels, work) \
                   WHERE EXISTS (SELECT 1 FROM held) \
                   ON CONFLICT DO NOTHING RETURNING 1) \
                 SELECT (SELECT count(*) FROM held), pg_notify($8, $1)",
            )?;
            let tasks: Vec<i64> = attempts.iter().map(|a| n(a.task)).collect();
            let numbers: Vec<i64> = attempts.iter().map(|a| n(a.attempt)).collect();
            let engines: Vec<&str> = attempts.iter().map(|a| a.engine.as_str()).collect();
            let labels: Vec<String> = attempts.iter().map(|a| a.labels.join(",")).collect();
            let work: Vec<&str> = attempts.iter().map(|a| a.work.as_str()).collect();
            let row = session.client.query_one(
                &statement,
                &[
                    &run.as_str(),
                    &(token as i64),
                    &tasks,
                    &numbers,
                    &engines,
                    &labels,
                    &work,
                    &WORK_QUEUED,
                ],
            )?;
            let held: i64 = row.get(0);
            if held > 0 {
                return Ok(());
            }
            let known = session
                .client
                .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run.as_str()])?
                .is_some();
            Err(if known {
                StoreError::LeaseLost { run }
            } else {
                StoreError::UnknownRun(run)
            })
        })
    }

    /// What arrived from `run`'s workers since last time, taken out of the store: what their
    /// running attempts recorded (news, oldest first), then what ended — ends the workers
    /// wrote, and attempts whose worker's lease lapsed (taken so in the same statement, which
    /// fences the worker's late end off).
    ///
    /// One statement, so one snapshot: a worker records an attempt's news before its end, and
    /// whatever news of an attempt committed before its end is seen with it (taken apart, news
    /// committed between the two could come after the end it belongs before).
    pub fn take_arrivals(&self, run: &RunId) -> Result<Arrivals, StoreError> {
        let run = run.clone();
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "WITH news AS (DELETE FROM attempt_news WHERE run_id = $1 RETURNING id, event), \
                 ended AS (DELETE FROM attempt_queue WHERE run_id = $1 AND state = 'ended' \
                   RETURNING task_idx, attempt, result), \
                 lapsed AS (DELETE FROM attempt_queue WHERE run_id = $1 AND state = 'claimed' \
                   AND lease_until_ms < baton_now_ms() \
                   RETURNING task_idx, attempt, worker_id) \
                 SELECT 0::smallint, id, NULL::bigint, event FROM news \
                 UNION ALL SELECT 1::smallint, task_idx, attempt, result FROM ended \
                 UNION ALL SELECT 2::smallint, task_idx, attempt, worker_id FROM lapsed",
            )?;
            let mut news: Vec<(i64, String)> = Vec::new();
            let mut ends = Vec::new();
            for row in session.client.query(&statement, &[&run.as_str()])? {
                let text = row.get::<_, Option<String>>(3).unwrap_or_default();
                match row.get::<_, i16>(0) {
                    0 => news.push((row.get(1), text)),
                    what => {
                        let (task, attempt) = (idx(row.get(1))?, idx(row.get(2))?);
                        ends.push(if what == 1 {
                            AttemptEnd::Ended {
                                task,
                                attempt,
                                result: text,
                            }
                        } else {
                            AttemptEnd::Lapsed {
                                task,
                                attempt,
                                worker: text,
                            }
                        });
                    }
                }
            }
            news.sort_by_key(|(id, _)| *id);
            Ok(Arrivals {
                news: news.into_iter().map(|(_, event)| event).collect(),
                ends,
            })
        })
    }

    /// Asks `run`'s coordinator to cancel it (`baton cancel` of a run a worker drives).
    /// Whether the run is running (else there is nothing to ask).
    pub fn request_cancel(&self, run: &RunId) -> Result<bool, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            Ok(client.execute(
                "UPDATE runs SET cancel_requested_at_ms = \
                   COALESCE(cancel_requested_at_ms, baton_now_ms()) \
                 WHERE id = $1 AND status = 'running'",
                &[&run.as_str()],
            )? > 0)
        })
    }

    /// Whether someone asked to cancel `run` ([`PgStore::request_cancel`]) and it has not
    /// ended since.
    pub(super) fn cancel_requested_pg(&self, run: &RunId) -> Result<bool, StoreError> {
        let run = run.clone();
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "SELECT 1 FROM runs WHERE id = $1 AND cancel_requested_at_ms IS NOT NULL",
            )?;
            Ok(session
                .client
                .query_opt(&statement, &[&run.as_str()])?
                .is_some())
        })
    }

    /// Stops `run`'s queued attempts: those no worker claimed yet leave the queue (returned:
    /// they never started), claimed ones are asked to stop (`level` 1: gracefully, 2: now) at
    /// their worker's next renewal.
    pub fn stop_attempts(&self, run: &RunId, level: i16) -> Result<Vec<(u32, u32)>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            let mut unclaimed = Vec::new();
            for row in tx.query(
                "DELETE FROM attempt_queue WHERE run_id = $1 AND state = 'queued' \
                 RETURNING task_idx, attempt",
                &[&run.as_str()],
            )? {
                unclaimed.push((idx(row.get(0))?, idx(row.get(1))?));
            }
            tx.execute(
                "UPDATE attempt_queue SET stop = GREATEST(stop, $2) \
                 WHERE run_id = $1 AND state = 'claimed'",
                &[&run.as_str(), &level],
            )?;
            tx.commit()?;
            Ok(unclaimed)
        })
    }

    /// Drops what coordinators before `token` queued for `run`: a coordinator taking a run
    /// over records those attempts interrupted, and their workers learn at their next renewal
    /// that they are no longer theirs.
    pub fn drop_queued_before(&self, run: &RunId, token: u64) -> Result<u64, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            Ok(client.execute(
                "DELETE FROM attempt_queue WHERE run_id = $1 AND coordinator_token < $2",
                &[&run.as_str(), &(token as i64)],
            )?)
        })
    }

    /// Claims up to `n` queued attempts for `worker`: ones whose engine it offers (any, if
    /// `engines` is empty) and whose labels it has, oldest first, held for `lease_ms`.
    pub fn claim_attempts(
        &self,
        worker: &str,
        engines: &[String],
        labels: &[String],
        n: u32,
        lease_ms: i64,
    ) -> Result<Vec<ClaimedAttempt>, StoreError> {
        let (worker, engines, labels) = (worker.to_owned(), engines.to_vec(), labels.to_vec());
        self.conn.call_session(move |session| {
            let sql = "UPDATE attempt_queue q SET state = 'claimed', worker_id = $1, \
                       lease_until_ms = baton_now_ms() + $4, claimed_at_ms = baton_now_ms() \
                       FROM (SELECT run_id, task_idx, attempt FROM attempt_queue \
                             WHERE state = 'queued' AND (cardinality($2::text[]) = 0 OR engine = ANY($2)) \
                             AND labels <@ $3::text[] \
                             ORDER BY queued_at_ms, run_id, task_idx LIMIT $5 \
                             FOR UPDATE SKIP LOCKED) c \
                       WHERE q.run_id = c.run_id AND q.task_idx = c.task_idx AND q.attempt = c.attempt \
                       RETURNING q.run_id, q.task_idx, q.attempt, q.work";
            let statement = session.prepared(sql)?;
            let rows = session.client.query(
                &statement,
                &[&worker, &engines, &labels, &lease_ms, &i64::from(n)],
            )?;
            rows.iter()
                .map(|row| {
                    Ok(ClaimedAttempt {
                        run: RunId::new(row.get::<_, String>(0))
                            .map_err(|e| StoreError::PgValue(e.to_string()))?,
                        task: idx(row.get(1))?,
                        attempt: idx(row.get(2))?,
                        work: row.get(3),
                    })
                })
                .collect()
        })
    }

    /// Extends `worker`'s leases on `held` by `lease_ms`, and says of each whether it is still
    /// the worker's (and whether its coordinator asks it to stop).
    pub fn renew_attempts(
        &self,
        worker: &str,
        held: &[AttemptKey],
        lease_ms: i64,
    ) -> Result<Vec<(AttemptKey, Renewal)>, StoreError> {
        let (worker, held) = (worker.to_owned(), held.to_vec());
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "UPDATE attempt_queue SET lease_until_ms = baton_now_ms() + $5 \
                 WHERE run_id = $1 AND task_idx = $2 AND attempt = $3 AND worker_id = $4 \
                 AND state = 'claimed' AND lease_until_ms >= baton_now_ms() RETURNING stop",
            )?;
            let mut answers = Vec::with_capacity(held.len());
            for key in held {
                let row = session.client.query_opt(
                    &statement,
                    &[
                        &key.run.as_str(),
                        &n(key.task),
                        &n(key.attempt),
                        &worker,
                        &lease_ms,
                    ],
                )?;
                let renewal = match row {
                    Some(row) => Renewal::Held { stop: row.get(0) },
                    None => Renewal::Lost,
                };
                answers.push((key, renewal));
            }
            Ok(answers)
        })
    }

    /// Writes how `worker`'s attempt ended, if it still holds it (claimed by it, lease not
    /// lapsed); wakes the run's coordinator. Returns whether it was taken: `false` means the
    /// attempt is no longer the worker's, and its end is dropped.
    pub fn end_attempt(
        &self,
        worker: &str,
        key: &AttemptKey,
        result: &str,
    ) -> Result<bool, StoreError> {
        let (worker, key, result) = (worker.to_owned(), key.clone(), result.to_owned());
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "WITH ended AS (UPDATE attempt_queue SET state = 'ended', result = $5 \
                 WHERE run_id = $1 AND task_idx = $2 AND attempt = $3 AND worker_id = $4 \
                 AND state = 'claimed' AND lease_until_ms >= baton_now_ms() RETURNING run_id) \
                 SELECT pg_notify($6, run_id) FROM ended",
            )?;
            let rows = session.client.query(
                &statement,
                &[
                    &key.run.as_str(),
                    &n(key.task),
                    &n(key.attempt),
                    &worker,
                    &result,
                    &ATTEMPT_ENDED,
                ],
            )?;
            Ok(!rows.is_empty())
        })
    }

    /// Gives an attempt `worker` holds back (a worker stopping at once): its lease is made to
    /// have lapsed now, so that its coordinator takes it as interrupted at its next look and
    /// it runs again elsewhere. Whether the worker still held it.
    pub fn give_back(&self, worker: &str, key: &AttemptKey) -> Result<bool, StoreError> {
        let (worker, key) = (worker.to_owned(), key.clone());
        self.conn.call(move |client| {
            let changed = client.execute(
                "WITH given AS (UPDATE attempt_queue SET lease_until_ms = 0 \
                 WHERE run_id = $1 AND task_idx = $2 AND attempt = $3 AND worker_id = $4 \
                 AND state = 'claimed' RETURNING run_id) \
                 SELECT pg_notify($5, run_id) FROM given",
                &[
                    &key.run.as_str(),
                    &n(key.task),
                    &n(key.attempt),
                    &worker,
                    &ATTEMPT_ENDED,
                ],
            )?;
            Ok(changed > 0)
        })
    }

    /// Records `event` (the runner's JSON) for `run`'s coordinator, if `worker` still holds
    /// the attempt it is about.
    pub fn add_news(
        &self,
        worker: &str,
        key: &AttemptKey,
        event: &str,
    ) -> Result<bool, StoreError> {
        let (worker, key, event) = (worker.to_owned(), key.clone(), event.to_owned());
        self.conn.call_session(move |session| {
            let statement = session.prepared(
                "INSERT INTO attempt_news (run_id, event) SELECT $1, $5 WHERE EXISTS \
                 (SELECT 1 FROM attempt_queue WHERE run_id = $1 AND task_idx = $2 AND attempt = $3 \
                  AND worker_id = $4 AND state = 'claimed')",
            )?;
            let added = session.client.execute(
                &statement,
                &[
                    &key.run.as_str(),
                    &n(key.task),
                    &n(key.attempt),
                    &worker,
                    &event,
                ],
            )?;
            Ok(added > 0)
        })
    }

    /// Registers a worker (or renews its heartbeat, with the same record).
    pub fn heartbeat_worker(&self, worker: &WorkerRecord) -> Result<(), StoreError> {
        let w = worker.clone();
        self.conn.call(move |client| {
            client.execute(
                "INSERT INTO workers (id, host, pid, slots, engines, labels, started_at_ms, \
                 heartbeat_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, baton_now_ms()) \
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at_ms = baton_now_ms()",
                &[
                    &w.id,
                    &w.host,
                    &i64::from(w.pid),
                    &n(w.slots),
                    &w.engines,
                    &w.labels,
                    &w.started_at_ms,
                ],
            )?;
            Ok(())
        })
    }

    /// A worker leaving: its record goes (what it held was ended or given back first).
    pub fn remove_worker(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.conn.call(move |client| {
            client.execute("DELETE FROM workers WHERE id = $1", &[&id])?;
            Ok(())
        })
    }

    /// Workers heard from within `within_ms`, newest first, with what each holds; older
    /// records (workers that died without a word) are removed.
    pub fn workers(&self, within_ms: i64) -> Result<Vec<WorkerRecord>, StoreError> {
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            tx.execute(
                "DELETE FROM workers WHERE heartbeat_at_ms < baton_now_ms() - $1",
                &[&within_ms],
            )?;
            let mut workers = Vec::new();
            for row in tx.query(
                "SELECT id, host, pid, slots, engines, labels, started_at_ms, heartbeat_at_ms \
                 FROM workers ORDER BY started_at_ms DESC, id",
                &[],
            )? {
                workers.push(WorkerRecord {
                    id: row.get(0),
                    host: row.get(1),
                    pid: u32::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                    slots: u32::try_from(row.get::<_, i64>(3)).unwrap_or(0),
                    engines: row.get(4),
                    labels: row.get(5),
                    started_at_ms: row.get(6),
                    heartbeat_at_ms: row.get(7),
                    running: Vec::new(),
                });
            }
            for row in tx.query(
                "SELECT worker_id, run_id, task_idx, attempt FROM attempt_queue \
                 WHERE state = 'claimed' ORDER BY claimed_at_ms",
                &[],
            )? {
                let worker: Option<String> = row.get(0);
                let Some(w) = workers.iter_mut().find(|w| Some(&w.id) == worker.as_ref()) else {
                    continue;
                };
                if let Ok(run) = RunId::new(row.get::<_, String>(1)) {
                    w.running.push(AttemptKey {
                        run,
                        task: idx(row.get(2))?,
                        attempt: idx(row.get(3))?,
                    });
                }
            }
            tx.commit()?;
            Ok(workers)
        })
    }

    /// A connection of its own that `LISTEN`s on `channels`.
    pub fn listener(&self, channels: &[&str]) -> Result<Listener, StoreError> {
        // On a thread of its own: the client runs a runtime of its own to connect, which
        // panics inside another one (a worker's).
        let url = self.url.clone();
        let client = std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
                    for channel in channels {
                        client.batch_execute(&format!("LISTEN {channel}"))?;
                    }
                    Ok::<_, postgres::Error>(client)
                })
                .join()
        })
        .map_err(|_| StoreError::Recorder(std::io::Error::other("the connecting thread panicked")))?
        .map_err(|source| StoreError::Connect {
            server: self.server(),
            source,
        })?;
        Ok(Listener { client })
    }

    /// [`PgStore::listener`] on a thread of its own, for async code: each wake bumps the
    /// returned watch's counter (it ends when the receiver is dropped or the connection is
    /// gone; callers poll on).
    pub fn listen(
        &self,
        channels: &[&str],
    ) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        let mut listener = self.listener(channels)?;
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        std::thread::Builder::new()
            .name("baton-listen".to_owned())
            .spawn(move || {
                let mut count = 0u64;
                while !tx.is_closed() {
                    match listener.wait(std::time::Duration::from_secs(1)) {
                        Ok(true) => {
                            count += 1;
                            if tx.send(count).is_err() {
                                return;
                            }
                        }
                        Ok(false) => {}
                        Err(_) => return,
                    }
                }
            })
            .map_err(StoreError::Recorder)?;
        Ok(rx)
    }
}

/// A connection that listens: what wakes a worker or a coordinator before its next poll.
pub struct Listener {
    client: postgres::Client,
}

impl Listener {
    /// Waits up to `timeout` for a notification, then takes every other one already there.
    /// Whether one came; an error once the connection is gone (callers poll on).
    pub fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        let woke = {
            let mut notifications = self.client.notifications();
            let mut iter = notifications.timeout_iter(timeout);
            iter.next()?.is_some()
        };
        if woke {
            // The rest that came with it, without waiting again.
            let mut notifications = self.client.notifications();
            let mut pending = notifications.iter();
            while pending.next()?.is_some() {}
        }
        Ok(woke)
    }
}
