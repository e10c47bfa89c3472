//! What is written: runs created, claimed, renewed, released; turns recorded; decisions;
//! runs deleted. Each call is one transaction that locks the run's row first.

use std::time::Duration;

use baton_model::{Containment, Event, EventKind, RunId, RunState, TaskId, TaskState};
use postgres::Transaction;

use super::PgStore;
use crate::decode::outcome_kind;
use crate::seam::{RunLog, Store};
use crate::{AttemptOutput, Claim, Decision, Driver, Lease, Liveness, NewRun, StoreError};

fn n(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

/// Who holds a run, and until when; the run's row locked until the transaction ends.
struct Holder {
    status: RunState,
    driver: Option<Driver>,
    token: u64,
    expires_at_ms: Option<i64>,
}

fn lock(tx: &mut Transaction<'_>, run: &RunId) -> Result<Holder, StoreError> {
    let row = tx
        .query_opt(
            "SELECT status, driver_pid, driver_start_time, driver_host, lease_token, \
             lease_expires_at_ms FROM runs WHERE id = $1 FOR UPDATE",
            &[&run.as_str()],
        )?
        .ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
    let status: String = row.get(0);
    let driver = match (
        row.get::<_, Option<i64>>(1),
        row.get::<_, Option<i64>>(2),
        row.get::<_, Option<String>>(3),
    ) {
        (Some(pid), Some(start_time), Some(host)) => Some(Driver {
            pid: pid as u32,
            start_time: start_time as u64,
            host,
        }),
        _ => None,
    };
    Ok(Holder {
        status: RunState::parse(&status).unwrap_or(RunState::Running),
        driver,
        token: row.get::<_, i64>(4) as u64,
        expires_at_ms: row.get(5),
    })
}

/// A [`NewRun`] the connection's thread can own.
struct Owned {
    id: RunId,
    name: String,
    graph_path: String,
    started_at_ms: i64,
    concurrency: u32,
    tasks: Vec<(TaskId, u32)>,
}

/// The writer's side of the seam.
impl RunLog for PgStore {
    fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.insert_run(run, RunState::Running)
    }

    fn claim(
        &self,
        run: &RunId,
        me: &Driver,
        now_ms: i64,
        term: Duration,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<Claim, StoreError> {
        let expires_at_ms = now_ms.saturating_add(n(term.as_millis()));
        loop {
            let held = self.holder(run)?;
            if held.driver.as_ref() == Some(me) {
                let lease = Lease {
                    token: held.token,
                    expires_at_ms,
                };
                match self.renew(run, lease, now_ms, term) {
                    Ok(lease) => {
                        return Ok(Claim {
                            lease,
                            replaced: None,
                        });
                    }
                    // Claimed by another between the read and the renewal: judge again.
                    Err(StoreError::LeaseLost { .. }) => continue,
                    Err(err) => return Err(err),
                }
            }
            // The liveness check runs here, in the caller's thread; what it judged is made
            // good only if the run is still as it was read.
            crate::driver::refuses(
                run,
                held.driver.clone(),
                held.expires_at_ms,
                now_ms,
                liveness,
            )?;
            let token = held.token + 1;
            let (id, me2) = (run.clone(), me.clone());
            let claimed = self.conn.call(move |client| {
                let changed = client.execute(
                    "UPDATE runs SET driver_pid = $2, driver_start_time = $3, driver_host = $4, \
                     lease_token = $5, lease_expires_at_ms = $6 \
                     WHERE id = $1 AND lease_token = $7",
                    &[
                        &id.as_str(),
                        &i64::from(me2.pid),
                        &n(me2.start_time),
                        &me2.host,
                        &n(token),
                        &expires_at_ms,
                        &n(held.token),
                    ],
                )?;
                Ok(changed == 1)
            })?;
            if claimed {
                return Ok(Claim {
                    lease: Lease {
                        token,
                        expires_at_ms,
                    },
                    replaced: held.driver,
                });
            }
        }
    }

    fn renew(
        &self,
        run: &RunId,
        lease: Lease,
        now_ms: i64,
        term: Duration,
    ) -> Result<Lease, StoreError> {
        let expires_at_ms = now_ms.saturating_add(n(term.as_millis()));
        let id = run.clone();
        let changed = self.conn.call(move |client| {
            Ok(client.execute(
                "UPDATE runs SET lease_expires_at_ms = $3 \
                 WHERE id = $1 AND lease_token = $2 AND driver_pid IS NOT NULL",
                &[&id.as_str(), &n(lease.token), &expires_at_ms],
            )?)
        })?;
        if changed == 0 {
            return Err(StoreError::LeaseLost { run: run.clone() });
        }
        Ok(Lease {
            token: lease.token,
            expires_at_ms,
        })
    }

    fn release(&self, run: &RunId, lease: Lease) -> Result<bool, StoreError> {
        let id = run.clone();
        self.conn.call(move |client| {
            Ok(client.execute(
                "UPDATE runs SET driver_pid = NULL, driver_start_time = NULL, \
                 driver_host = NULL, lease_expires_at_ms = NULL \
                 WHERE id = $1 AND lease_token = $2 AND driver_pid IS NOT NULL",
                &[&id.as_str(), &n(lease.token)],
            )? > 0)
        })
    }

    /// One turn, in one transaction, fenced by the holder's lease token.
    fn record(
        &self,
        run: &RunId,
        lease: Lease,
        events: &[Event],
        outputs: &[AttemptOutput],
    ) -> Result<Vec<u64>, StoreError> {
        let fence = Some(lease.token);
        if events.is_empty() && outputs.is_empty() {
            return Ok(Vec::new());
        }
        let (run, events, outputs) = (run.clone(), events.to_vec(), outputs.to_vec());
        self.conn.call_session(move |session| {
            let tx = session.client.transaction()?;
            let mut turn = Turn {
                tx,
                statements: &mut session.statements,
            };
            // The run's row locked, its lease token and its last event's number, in one
            // round trip: on a loaded machine each costs a millisecond or two.
            let row = turn
                .query_opt(
                    "SELECT lease_token, (SELECT COALESCE(MAX(seq), 0) FROM events \
                     WHERE run_id = $1) FROM runs WHERE id = $1 FOR UPDATE",
                    &[&run.as_str()],
                )?
                .ok_or_else(|| StoreError::UnknownRun(run.clone()))?;
            if let Some(token) = fence
                && token != row.get::<_, i64>(0) as u64
            {
                return Err(StoreError::LeaseLost { run: run.clone() });
            }
            let last: i64 = row.get(1);
            // Every event of the turn in one statement.
            let seqs: Vec<u64> = (1..=events.len() as u64).map(|k| last as u64 + k).collect();
            let mut kinds = Vec::with_capacity(events.len());
            let mut tasks = Vec::with_capacity(events.len());
            let mut data = Vec::with_capacity(events.len());
            for event in &events {
                kinds.push(event.kind.name());
                tasks.push(event.kind.task().map(TaskId::as_str));
                data.push(serde_json::to_string(&event.kind).map_err(StoreError::Encode)?);
            }
            let numbers: Vec<i64> = seqs.iter().map(|&s| n(s)).collect();
            let at: Vec<i64> = events.iter().map(|e| e.at_ms).collect();
            if !events.is_empty() {
                turn.execute(
                    "INSERT INTO events (run_id, seq, at_ms, kind, task_id, data_json) \
                     SELECT $1, e.seq, e.at_ms, e.kind, e.task_id, e.data_json \
                     FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[]) \
                       AS e(seq, at_ms, kind, task_id, data_json)",
                    &[&run.as_str(), &numbers, &at, &kinds, &tasks, &data],
                )?;
            }
            for event in &events {
                apply(&mut turn, &run, event)?;
            }
            // An end recorded leaves the work queue in the same transaction: until then a
            // worker's end stays there for the coordinator (or its successor) to take again.
            let (ended_tasks, ended_attempts): (Vec<&str>, Vec<i64>) = events
                .iter()
                .filter_map(|event| match &event.kind {
                    EventKind::AttemptFinished { task, attempt, .. } => {
                        Some((task.as_str(), i64::from(*attempt)))
                    }
                    _ => None,
                })
                .unzip();
            if !ended_tasks.is_empty() {
                turn.execute(
                    "DELETE FROM attempt_queue q USING tasks t, \
                       unnest($2::text[], $3::bigint[]) AS e(task_id, attempt) \
                     WHERE t.run_id = $1 AND t.task_id = e.task_id \
                     AND q.run_id = $1 AND q.task_idx = t.idx AND q.attempt = e.attempt",
                    &[&run.as_str(), &ended_tasks, &ended_attempts],
                )?;
            }
            for output in &outputs {
                apply_output(&mut turn, &run, output)?;
            }
            // After every output of the turn: a best-of task's output and exit code are its
            // winner's, whichever candidate's attempt ended (or had its output land) last.
            for event in &events {
                if let Some((attempt, last)) = event.kind.picked_attempt() {
                    let task = event.kind.task().expect("a pick is about a task");
                    turn.execute(
                        "UPDATE tasks SET output_attempt = a.attempt, output = a.output, \
                         output_bytes = a.output_bytes, output_json = a.output_json, \
                         stderr_tail = a.stderr_tail, exit_code = a.exit_code \
                         FROM attempts AS a \
                         WHERE tasks.run_id = $1 AND tasks.task_id = $2 \
                         AND a.run_id = $1 AND a.task_idx = tasks.idx AND a.attempt = $3 \
                         AND tasks.attempts <= $4",
                        &[
                            &run.as_str(),
                            &task.as_str(),
                            &i64::from(attempt),
                            &i64::from(last),
                        ],
                    )?;
                }
            }
            turn.tx.commit()?;
            Ok(seqs)
        })
    }

    fn decide(
        &self,
        run: &RunId,
        task: &TaskId,
        approved: bool,
        reason: Option<&str>,
        at_ms: i64,
    ) -> Result<Result<(), Decision>, StoreError> {
        let (run, task, reason) = (run.clone(), task.clone(), reason.map(str::to_owned));
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            let inserted = tx.execute(
                "INSERT INTO approvals (run_id, task_id, approved, reason, at_ms) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, task_id) DO NOTHING",
                &[&run.as_str(), &task.as_str(), &approved, &reason, &at_ms],
            )?;
            if inserted == 1 {
                tx.commit()?;
                return Ok(Ok(()));
            }
            let row = tx.query_one(
                "SELECT approved, reason, at_ms FROM approvals WHERE run_id = $1 AND task_id = $2",
                &[&run.as_str(), &task.as_str()],
            )?;
            tx.commit()?;
            Ok(Err(Decision {
                task: task.clone(),
                approved: row.get(0),
                reason: row.get(1),
                at_ms: row.get(2),
            }))
        })
    }

    fn delete_run(
        &self,
        run: &RunId,
        now_ms: i64,
        liveness: &dyn Fn(&Driver) -> Liveness,
    ) -> Result<bool, StoreError> {
        loop {
            let held = match self.holder(run) {
                Ok(held) => held,
                Err(StoreError::UnknownRun(_)) => return Ok(false),
                Err(err) => return Err(err),
            };
            if held.status == RunState::Running {
                crate::driver::refuses(
                    run,
                    held.driver.clone(),
                    held.expires_at_ms,
                    now_ms,
                    liveness,
                )?;
            }
            let id = run.clone();
            let token = held.token;
            // Tasks, attempts, events, approvals and the graph go with the run.
            let deleted = self.conn.call(move |client| {
                Ok(client.execute(
                    "DELETE FROM runs WHERE id = $1 AND lease_token = $2",
                    &[&id.as_str(), &n(token)],
                )?)
            })?;
            if deleted == 1 {
                return Ok(true);
            }
        }
    }

    fn another(&self) -> Result<Box<dyn Store>, StoreError> {
        Ok(Box::new(self.another_connection()?))
    }
}

impl PgStore {
    /// Records a new run in `status`: `running` for a run this process drives, `queued` for
    /// one a worker will.
    pub(super) fn insert_run(&self, run: &NewRun, status: RunState) -> Result<(), StoreError> {
        // Sent in one piece: the connection's thread needs its own copy.
        let graph_json = crate::records::graph_json_text(run.graph)?;
        let run = Owned {
            id: run.id.clone(),
            name: run.name.clone(),
            graph_path: run.graph_path.clone(),
            started_at_ms: run.started_at_ms,
            concurrency: run.concurrency,
            tasks: run.tasks.clone(),
        };
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            let inserted = tx.execute(
                "INSERT INTO runs (id, name, graph_path, status, started_at_ms, concurrency, \
                 task_count) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
                &[
                    &run.id.as_str(),
                    &run.name,
                    &run.graph_path,
                    &status.as_str(),
                    &run.started_at_ms,
                    &i64::from(run.concurrency),
                    &n(run.tasks.len()),
                ],
            )?;
            if inserted == 0 {
                return Err(StoreError::RunExists(run.id.clone()));
            }
            tx.execute(
                "INSERT INTO run_graphs (run_id, graph_json) VALUES ($1, $2)",
                &[&run.id.as_str(), &graph_json],
            )?;
            let statement = tx.prepare(
                "INSERT INTO tasks (run_id, task_id, idx, status) VALUES ($1, $2, $3, $4)",
            )?;
            for (task, idx) in &run.tasks {
                tx.execute(
                    &statement,
                    &[
                        &run.id.as_str(),
                        &task.as_str(),
                        &i64::from(*idx),
                        &TaskState::Pending.as_str(),
                    ],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// The run's holder as it is now (no lock kept): judged by the caller, then acted on with
    /// an update that holds only if no one claimed the run meanwhile (its token unchanged).
    fn holder(&self, run: &RunId) -> Result<Holder, StoreError> {
        let run = run.clone();
        self.conn.call(move |client| {
            let mut tx = client.transaction()?;
            let held = lock(&mut tx, &run)?;
            tx.commit()?;
            Ok(held)
        })
    }
}

/// A turn's transaction, with the connection's prepared statements.
struct Turn<'a> {
    tx: Transaction<'a>,
    statements: &'a mut std::collections::HashMap<String, postgres::Statement>,
}

impl Turn<'_> {
    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, StoreError> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.tx.prepare(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let statement = self.statement(sql)?;
        Ok(self.tx.execute(&statement, params)?)
    }

    fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Option<postgres::Row>, StoreError> {
        let statement = self.statement(sql)?;
        Ok(self.tx.query_opt(&statement, params)?)
    }
}

fn known_task(changed: u64, run: &RunId, task: &TaskId) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::UnknownTask {
            run: run.clone(),
            task: task.clone(),
        });
    }
    Ok(())
}

fn task_known(tx: &mut Turn<'_>, run: &RunId, task: &TaskId) -> Result<(), StoreError> {
    let found = tx
        .query_opt(
            "SELECT 1 FROM tasks WHERE run_id = $1 AND task_id = $2",
            &[&run.as_str(), &task.as_str()],
        )?
        .is_some();
    known_task(u64::from(found), run, task)
}

/// The attempt's row is found through its task's index.
const ATTEMPT_ROW: &str = "run_id = $1 AND task_idx = (SELECT idx FROM tasks WHERE run_id = $1 AND task_id = $2) \
     AND attempt = $3";

/// Whether attempt `attempt` of `task` was started: what a refused start or end is told by.
fn attempt_exists(
    tx: &mut Turn<'_>,
    run: &RunId,
    task: &TaskId,
    attempt: u32,
) -> Result<bool, StoreError> {
    Ok(tx
        .query_opt(
            &format!("SELECT 1 FROM attempts WHERE {ATTEMPT_ROW}"),
            &[&run.as_str(), &task.as_str(), &i64::from(attempt)],
        )?
        .is_some())
}

/// One event's change to the tables, as [`baton_model::RunView`]'s table says.
fn apply(tx: &mut Turn<'_>, run: &RunId, event: &Event) -> Result<(), StoreError> {
    let id = run.as_str();
    let at = event.at_ms;
    match &event.kind {
        EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
            tx.execute(
                "UPDATE runs SET status = $2, ended_at_ms = NULL, stop_reason = NULL, stop_cause = NULL \
                 WHERE id = $1",
                &[&id, &RunState::Running.as_str()],
            )?;
        }
        EventKind::RunStopping { reason, cause } => {
            let cause = baton_model::StopCause::of(reason, *cause);
            tx.execute(
                "UPDATE runs SET stop_reason = $2, stop_cause = $3 WHERE id = $1",
                &[&id, reason, &cause.as_str()],
            )?;
        }
        EventKind::RunFinished { state } => {
            tx.execute(
                "UPDATE runs SET status = $2, ended_at_ms = $3, cancel_requested_at_ms = NULL \
                 WHERE id = $1",
                &[&id, &state.as_str(), &at],
            )?;
        }
        EventKind::TaskReset { task } => {
            let changed = tx.execute(
                "UPDATE tasks SET status = $3, reason = NULL, ended_at_ms = NULL, \
                 next_attempt = NULL, retry_at_ms = NULL WHERE run_id = $1 AND task_id = $2",
                &[&id, &task.as_str(), &TaskState::Pending.as_str()],
            )?;
            known_task(changed, run, task)?;
        }
        EventKind::TaskWaiting { task } => {
            let changed = tx.execute(
                "UPDATE tasks SET status = $3 WHERE run_id = $1 AND task_id = $2",
                &[&id, &task.as_str(), &TaskState::Waiting.as_str()],
            )?;
            known_task(changed, run, task)?;
        }
        EventKind::TaskDecided { task, .. }
        | EventKind::Reviewed { task, .. }
        | EventKind::Picked { task, .. }
        | EventKind::Replanning { task, .. }
        | EventKind::AttemptLost { task, .. }
        | EventKind::AgentActivity { task, .. }
        | EventKind::WorkspaceCommitted(baton_model::WorkspaceCommit { task, .. })
        | EventKind::Checked {
            task: Some(task), ..
        } => task_known(tx, run, task)?,
        EventKind::BudgetChanged { .. }
        | EventKind::GraphReloaded { .. }
        | EventKind::ResultMerged { .. }
        | EventKind::Checked { task: None, .. } => {}
        EventKind::AttemptStarted { task, attempt, pid } => {
            let changed = tx.execute(
                "UPDATE tasks SET status = $3, attempts = GREATEST(attempts, $4), \
                 started_at_ms = COALESCE(started_at_ms, $5), ended_at_ms = NULL, \
                 reason = NULL, exit_code = NULL, next_attempt = NULL, retry_at_ms = NULL \
                 WHERE run_id = $1 AND task_id = $2",
                &[
                    &id,
                    &task.as_str(),
                    &TaskState::Running.as_str(),
                    &i64::from(*attempt),
                    &at,
                ],
            )?;
            known_task(changed, run, task)?;
            // Only while the task's latest attempt is this one: numbers only grow.
            let inserted = tx.execute(
                "INSERT INTO attempts (run_id, task_idx, task_id, attempt, started_at_ms, pid) \
                 SELECT $1, idx, $2, $3, $4, $5 FROM tasks \
                 WHERE run_id = $1 AND task_id = $2 AND attempts = $3 \
                 ON CONFLICT (run_id, task_idx, attempt) DO NOTHING",
                &[
                    &id,
                    &task.as_str(),
                    &i64::from(*attempt),
                    &at,
                    &pid.map(i64::from),
                ],
            )?;
            if inserted == 0 {
                return Err(if attempt_exists(tx, run, task, *attempt)? {
                    StoreError::AttemptExists {
                        run: run.clone(),
                        task: task.clone(),
                        attempt: *attempt,
                    }
                } else {
                    StoreError::AttemptOutOfOrder {
                        run: run.clone(),
                        task: task.clone(),
                        attempt: *attempt,
                    }
                });
            }
        }
        EventKind::AttemptFinished {
            task,
            attempt,
            outcome,
            duration_ms,
            agent,
            containment,
        } => {
            let json = serde_json::to_string(outcome).map_err(StoreError::Encode)?;
            let code = outcome.exit_code();
            let (tokens, cost, agent_json) = crate::project::usage_columns(agent.as_deref())?;
            let changed = tx.execute(
                &format!(
                    "UPDATE attempts SET ended_at_ms = $4, outcome_kind = $5, outcome_json = $6, \
                     exit_code = $7, duration_ms = $8, tokens = $9, cost_usd = $10, \
                     agent_json = $11, containment = $12 \
                     WHERE {ATTEMPT_ROW} AND ended_at_ms IS NULL"
                ),
                &[
                    &id,
                    &task.as_str(),
                    &i64::from(*attempt),
                    &at,
                    &outcome_kind(outcome),
                    &json,
                    &code,
                    &n(*duration_ms),
                    &tokens,
                    &cost,
                    &agent_json,
                    &containment.map(Containment::as_str),
                ],
            )?;
            if changed == 0 {
                return Err(if attempt_exists(tx, run, task, *attempt)? {
                    StoreError::AttemptEnded {
                        run: run.clone(),
                        task: task.clone(),
                        attempt: *attempt,
                    }
                } else {
                    StoreError::UnknownAttempt {
                        run: run.clone(),
                        task: task.clone(),
                        attempt: *attempt,
                    }
                });
            }
            tx.execute(
                "UPDATE tasks SET exit_code = $4 WHERE run_id = $1 AND task_id = $2 AND attempts = $3",
                &[&id, &task.as_str(), &i64::from(*attempt), &code],
            )?;
        }
        EventKind::RetryScheduled {
            task,
            attempt,
            delay_ms,
        } => {
            let retry_at = at.saturating_add(n(*delay_ms));
            let changed = tx.execute(
                "UPDATE tasks SET status = $3, next_attempt = $4, retry_at_ms = $5 \
                 WHERE run_id = $1 AND task_id = $2",
                &[
                    &id,
                    &task.as_str(),
                    &TaskState::Pending.as_str(),
                    &i64::from(*attempt),
                    &retry_at,
                ],
            )?;
            known_task(changed, run, task)?;
        }
        EventKind::TaskFinished {
            task,
            state,
            reason,
        } => {
            let changed = tx.execute(
                "UPDATE tasks SET status = $3, reason = $4, ended_at_ms = $5, \
                 next_attempt = NULL, retry_at_ms = NULL WHERE run_id = $1 AND task_id = $2",
                &[&id, &task.as_str(), &state.as_str(), reason, &at],
            )?;
            known_task(changed, run, task)?;
        }
        EventKind::GraphExpanded { task, added, .. } => {
            task_known(tx, run, task)?;
            for new in added {
                tx.execute(
                    "INSERT INTO tasks (run_id, task_id, idx, status) \
                     SELECT $1, $2, task_count, $3 FROM runs WHERE id = $1",
                    &[&id, &new.as_str(), &TaskState::Pending.as_str()],
                )?;
                tx.execute(
                    "UPDATE runs SET task_count = task_count + 1 WHERE id = $1",
                    &[&id],
                )?;
            }
        }
    }
    Ok(())
}

/// An output lands on its attempt, and on its task unless a later attempt's is there.
fn apply_output(tx: &mut Turn<'_>, run: &RunId, output: &AttemptOutput) -> Result<(), StoreError> {
    let id = run.as_str();
    let attempt = i64::from(output.attempt);
    let bytes = n(output.output_bytes);
    let changed = tx.execute(
        &format!(
            "UPDATE attempts SET output = $4, output_bytes = $5, output_json = $6, \
             stderr_tail = $7, log_path = $8 WHERE {ATTEMPT_ROW}"
        ),
        &[
            &id,
            &output.task.as_str(),
            &attempt,
            &output.output,
            &bytes,
            &output.output_json,
            &output.stderr_tail,
            &output.log_path,
        ],
    )?;
    if changed == 0 {
        return Err(StoreError::UnknownAttempt {
            run: run.clone(),
            task: output.task.clone(),
            attempt: output.attempt,
        });
    }
    tx.execute(
        "UPDATE tasks SET output_attempt = $3, output = $4, output_bytes = $5, \
         output_json = $6, stderr_tail = $7 \
         WHERE run_id = $1 AND task_id = $2 \
         AND (output_attempt IS NULL OR output_attempt <= $3)",
        &[
            &id,
            &output.task.as_str(),
            &attempt,
            &output.output,
            &bytes,
            &output.output_json,
            &output.stderr_tail,
        ],
    )?;
    Ok(())
}
