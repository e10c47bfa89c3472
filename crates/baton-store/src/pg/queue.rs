//! The work queue on PostgreSQL (schema version 2): [`WorkQueue`] for [`PgStore`]. Claims are
//! `FOR UPDATE SKIP LOCKED` (they never wait on each other); wakes are `LISTEN`/`NOTIFY`.

use baton_model::RunId;
use postgres::fallible_iterator::FallibleIterator;

use super::{PgStore, describe_server};
use crate::queue::{
    Arrivals, AttemptEnd, AttemptKey, ClaimedAttempt, Coordinated, QueueStore, QueuedAttempt,
    Renewal, Wake, Wakeups, WorkQueue, WorkerRecord,
};
use crate::{NewRun, StoreError};

/// Channels workers and coordinators listen on (`LISTEN`): polling is only the backstop.
pub(crate) const WORK_QUEUED: &str = "baton_work";
pub(crate) const ATTEMPT_ENDED: &str = "baton_ended";
pub(crate) const RUN_SUBMITTED: &str = "baton_runs";

fn n(value: u32) -> i64 {
    i64::from(value)
}

fn idx(value: i64) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| StoreError::PgValue(format!("{value} is not a task index")))
}

impl WorkQueue for PgStore {
    fn submit_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.insert_run(run, baton_model::RunState::Queued)?;
        let id = run.id.as_str().to_owned();
        self.conn.call(move |client| {
            client.execute("SELECT pg_notify($1, $2)", &[&RUN_SUBMITTED, &id])?;
            Ok(())
        })
    }

    fn runs_to_coordinate(&self) -> Result<Vec<Coordinated>, StoreError> {
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

    fn enqueue(
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
            Err(lost_or_unknown(&mut session.client, run)?)
        })
    }

    fn take_arrivals(&self, run: &RunId, token: u64, have: &[i64]) -> Result<Arrivals, StoreError> {
        let (run, have) = (run.clone(), have.to_vec());
        self.conn.call_session(move |session| {
            // Kind 3 says whether `token` holds the run; nothing is taken or forgotten if not.
            let statement = session.prepared(
                "WITH held AS (SELECT 1 FROM runs WHERE id = $1 AND lease_token = $2 FOR SHARE), \
                 forgotten AS (DELETE FROM attempt_news WHERE run_id = $1 AND id = ANY($3) \
                   AND EXISTS (SELECT 1 FROM held)) \
                 SELECT 0::smallint, id, NULL::bigint, event FROM attempt_news \
                   WHERE run_id = $1 AND id <> ALL($3) AND EXISTS (SELECT 1 FROM held) \
                 UNION ALL SELECT 1::smallint, task_idx, attempt, result FROM attempt_queue \
                   WHERE run_id = $1 AND state = 'ended' AND EXISTS (SELECT 1 FROM held) \
                 UNION ALL SELECT 2::smallint, task_idx, attempt, worker_id FROM attempt_queue \
                   WHERE run_id = $1 AND state = 'claimed' AND lease_until_ms < baton_now_ms() \
                   AND EXISTS (SELECT 1 FROM held) \
                 UNION ALL SELECT 3::smallint, (SELECT count(*) FROM held), NULL, NULL",
            )?;
            let mut news = Vec::new();
            let mut ends = Vec::new();
            let mut held = false;
            for row in session
                .client
                .query(&statement, &[&run.as_str(), &(token as i64), &have])?
            {
                let text = row.get::<_, Option<String>>(3).unwrap_or_default();
                match row.get::<_, i16>(0) {
                    0 => news.push(crate::queue::News {
                        id: row.get(1),
                        event: text,
                    }),
                    3 => held = row.get::<_, i64>(1) > 0,
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
            if !held {
                return Err(lost_or_unknown(&mut session.client, run)?);
            }
            news.sort_by_key(|news| news.id);
            Ok(Arrivals { news, ends })
        })
    }

    fn request_cancel(&self, run: &RunId) -> Result<bool, StoreError> {
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

    fn stop_attempts(
        &self,
        run: &RunId,
        token: u64,
        level: i16,
    ) -> Result<Vec<(u32, u32)>, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            if !holds(&mut tx, &run, token)? {
                drop(tx);
                return Err(lost_or_unknown(client, run)?);
            }
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

    fn adopt_queued(
        &self,
        run: &RunId,
        token: u64,
        keep: &[(u32, u32)],
    ) -> Result<Vec<(u32, u32)>, StoreError> {
        let run = run.clone();
        let tasks: Vec<i64> = keep.iter().map(|&(task, _)| n(task)).collect();
        let attempts: Vec<i64> = keep.iter().map(|&(_, attempt)| n(attempt)).collect();
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            if !holds(&mut tx, &run, token)? {
                drop(tx);
                return Err(lost_or_unknown(client, run)?);
            }
            let mut adopted = Vec::new();
            for row in tx.query(
                "UPDATE attempt_queue q SET coordinator_token = $2 \
                 FROM unnest($3::bigint[], $4::bigint[]) AS k(task_idx, attempt) \
                 WHERE q.run_id = $1 AND q.coordinator_token < $2 \
                 AND q.task_idx = k.task_idx AND q.attempt = k.attempt \
                 RETURNING q.task_idx, q.attempt",
                &[&run.as_str(), &(token as i64), &tasks, &attempts],
            )? {
                adopted.push((idx(row.get(0))?, idx(row.get(1))?));
            }
            tx.execute(
                "DELETE FROM attempt_queue WHERE run_id = $1 AND coordinator_token < $2",
                &[&run.as_str(), &(token as i64)],
            )?;
            tx.commit()?;
            adopted.sort_unstable();
            Ok(adopted)
        })
    }

    fn claim_attempts(
        &self,
        worker: &str,
        engines: &[String],
        labels: &[String],
        n: u32,
        lease_ms: i64,
        except: &[RunId],
    ) -> Result<Vec<ClaimedAttempt>, StoreError> {
        let (worker, engines, labels) = (worker.to_owned(), engines.to_vec(), labels.to_vec());
        let except: Vec<String> = except.iter().map(|run| run.as_str().to_owned()).collect();
        self.conn.call_session(move |session| {
            let sql = "UPDATE attempt_queue q SET state = 'claimed', worker_id = $1, \
                       lease_until_ms = baton_now_ms() + $4, claimed_at_ms = baton_now_ms() \
                       FROM (SELECT run_id, task_idx, attempt FROM attempt_queue \
                             WHERE state = 'queued' AND (cardinality($2::text[]) = 0 OR engine = ANY($2)) \
                             AND labels <@ $3::text[] AND run_id <> ALL($6::text[]) \
                             ORDER BY queued_at_ms, run_id, task_idx LIMIT $5 \
                             FOR UPDATE SKIP LOCKED) c \
                       WHERE q.run_id = c.run_id AND q.task_idx = c.task_idx AND q.attempt = c.attempt \
                       RETURNING q.run_id, q.task_idx, q.attempt, q.work";
            let statement = session.prepared(sql)?;
            let rows = session.client.query(
                &statement,
                &[&worker, &engines, &labels, &lease_ms, &i64::from(n), &except],
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

    fn renew_attempts(
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

    fn end_attempt(
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

    fn give_back(&self, worker: &str, key: &AttemptKey) -> Result<bool, StoreError> {
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

    fn add_news(&self, worker: &str, key: &AttemptKey, event: &str) -> Result<bool, StoreError> {
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

    fn heartbeat_worker(&self, worker: &WorkerRecord) -> Result<(), StoreError> {
        let w = worker.clone();
        self.conn.call(move |client| {
            client.execute(
                "INSERT INTO workers (id, host, pid, slots, engines, labels, started_at_ms, \
                 heartbeat_at_ms, lease_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, baton_now_ms(), $8) \
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at_ms = baton_now_ms()",
                &[
                    &w.id,
                    &w.host,
                    &i64::from(w.pid),
                    &n(w.slots),
                    &w.engines,
                    &w.labels,
                    &w.started_at_ms,
                    &w.lease_ms,
                ],
            )?;
            Ok(())
        })
    }

    fn remove_worker(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.conn.call(move |client| {
            client.execute("DELETE FROM workers WHERE id = $1", &[&id])?;
            Ok(())
        })
    }

    fn workers(&self, within_ms: i64) -> Result<Vec<WorkerRecord>, StoreError> {
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            tx.execute(
                "DELETE FROM workers WHERE heartbeat_at_ms < baton_now_ms() - $1",
                &[&within_ms],
            )?;
            let mut workers = Vec::new();
            for row in tx.query(
                "SELECT id, host, pid, slots, engines, labels, started_at_ms, heartbeat_at_ms, \
                 lease_ms, baton_now_ms() - heartbeat_at_ms \
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
                    lease_ms: row.get(8),
                    heard_ms_ago: row.get(9),
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

    fn listener(&self, wakes: &[Wake]) -> Result<Box<dyn Wakeups>, StoreError> {
        let channels: Vec<&'static str> = wakes
            .iter()
            .map(|wake| match wake {
                Wake::WorkQueued => WORK_QUEUED,
                Wake::AttemptEnded => ATTEMPT_ENDED,
                Wake::RunSubmitted => RUN_SUBMITTED,
            })
            .collect();
        let client = listening(&self.url, &channels)?;
        Ok(Box::new(Listener {
            client,
            url: self.url.clone(),
            channels,
        }))
    }

    fn server(&self) -> String {
        describe_server(&self.url)
    }

    fn reconnect(&self) -> Result<Box<dyn QueueStore>, StoreError> {
        Ok(Box::new(self.another_connection()?))
    }

    fn ship_log(
        &self,
        run: &RunId,
        file: &str,
        offset: u64,
        bytes: Vec<u8>,
        modified_ms: i64,
    ) -> Result<(), StoreError> {
        super::logs::ship(self, run, file, offset, bytes, modified_ms)
    }
}

/// Whether `token` is `run`'s lease, the run's row share-locked for the rest of `tx` (a
/// takeover waits until `tx` ends).
fn holds(tx: &mut postgres::Transaction<'_>, run: &RunId, token: u64) -> Result<bool, StoreError> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM runs WHERE id = $1 AND lease_token = $2 FOR SHARE",
            &[&run.as_str(), &(token as i64)],
        )?
        .is_some())
}

/// Why a fenced call was refused: `run` is another coordinator's now, or is gone.
fn lost_or_unknown(client: &mut postgres::Client, run: RunId) -> Result<StoreError, StoreError> {
    let known = client
        .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run.as_str()])?
        .is_some();
    Ok(if known {
        StoreError::LeaseLost { run }
    } else {
        StoreError::UnknownRun(run)
    })
}

/// A connection that `LISTEN`s: PostgreSQL's [`Wakeups`].
pub(crate) struct Listener {
    client: postgres::Client,
    /// To listen again when the server closed the connection.
    url: String,
    channels: Vec<&'static str>,
}

/// A connection to `url` that `LISTEN`s on `channels`. On a thread of its own: the client runs a
/// runtime of its own to connect, which panics inside another one (a worker's).
fn listening(url: &str, channels: &[&'static str]) -> Result<postgres::Client, StoreError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut client = super::conn::connect(url)?;
                for channel in channels {
                    client.batch_execute(&format!("LISTEN {channel}"))?;
                }
                Ok(client)
            })
            .join()
    })
    .map_err(|_| StoreError::Recorder(std::io::Error::other("the connecting thread panicked")))?
}

impl Listener {
    /// Listens on a new connection. Whatever was sent while the old one was down is lost: a
    /// wake, so that the caller looks. If the server cannot be reached, the error comes after
    /// `timeout`, as a wait would, so that a caller that waits in a loop does not spin.
    fn listen_again(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        match listening(&self.url, &self.channels) {
            Ok(client) => {
                self.client = client;
                Ok(true)
            }
            Err(err) => {
                std::thread::sleep(timeout);
                Err(err)
            }
        }
    }

    fn wait_for_one(&mut self, timeout: std::time::Duration) -> Result<bool, postgres::Error> {
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

impl Wakeups for Listener {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        if self.client.is_closed() {
            return self.listen_again(timeout);
        }
        match self.wait_for_one(timeout) {
            Ok(woke) => Ok(woke),
            Err(_) if self.client.is_closed() => self.listen_again(timeout),
            Err(err) => Err(err.into()),
        }
    }
}
