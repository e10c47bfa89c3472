//! How the running graph grows: a planner's answer, a `for_each` task's instances. Each is
//! recorded (`graph-expanded`) before the end of the attempt that made it, then spliced into
//! the graph and everything the dispatcher keeps per task.

use std::sync::Arc;

use baton_attempt::launch::HeldOutput;
use baton_graph::{ForEach, Graph};
use baton_model::{EventKind, Outcome, TaskState};

use super::ending::Record;
use super::{Dispatcher, Turn, plan_of};

/// What a JSON value is, for an error about one.
fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

impl Dispatcher<'_> {
    /// A planner's answer joins the graph: recorded (before the planner's attempt ends), the
    /// graph grown, and the scheduler told. The unit checked the answer against the graph as
    /// it was at the planner's launch; it is checked again against the graph as it is now
    /// (another planner may have answered meanwhile), which is what the new tasks' indices
    /// are into.
    pub(super) fn expand(
        &mut self,
        planner: u32,
        attempt: u32,
        plan: &str,
        turn: &mut Turn,
    ) -> Result<(), baton_attempt::planner::Rejected> {
        let tasks = self
            .graph
            .expansion(planner, plan)
            .map_err(|error| self.rejected(&error))?;
        self.splice(planner, attempt, tasks, turn);
        Ok(())
    }

    /// `tasks`, made by attempt `attempt` of `planner` (or a `for_each` task), join the graph.
    fn splice(
        &mut self,
        planner: u32,
        attempt: u32,
        tasks: Vec<baton_graph::Task>,
        turn: &mut Turn,
    ) {
        self.splice_replacing(planner, attempt, tasks, &[], turn);
    }

    /// [`splice`](Dispatcher::splice) for a re-plan: `dropped` are the planner's tasks the new
    /// ones replace (failed, or not started: those end `skipped`).
    pub(super) fn splice_replacing(
        &mut self,
        planner: u32,
        attempt: u32,
        tasks: Vec<baton_graph::Task>,
        dropped: &[u32],
        turn: &mut Turn,
    ) {
        let added: Vec<baton_model::TaskId> = tasks.iter().map(|t| t.id.clone()).collect();
        let stored = serde_json::to_value(&tasks).expect("tasks are plain data");
        let replacing = !dropped.is_empty() || self.sched.replanning(planner);
        let grown = Arc::new(if replacing {
            self.graph.replanned(planner, tasks, dropped)
        } else {
            self.graph.extended(planner, tasks)
        });
        self.ledger.push(EventKind::GraphExpanded {
            task: self.graph.task(planner).id.clone(),
            attempt,
            added,
            tasks: stored,
            replaces: dropped
                .iter()
                .map(|&d| self.graph.task(d).id.clone())
                .collect(),
        });
        self.grow(grown);
        let retired: Vec<u32> = dropped
            .iter()
            .copied()
            .filter(|&d| !self.sched.state(d).is_terminal())
            .collect();
        let replanned = replacing.then_some(baton_scheduler::Replanned { planner, retired });
        // A failure planned around: the run can still succeed, with warnings.
        self.warnings |= replacing;
        let actions = self.sched.extend(&plan_of(&self.graph), replanned.as_ref());
        for action in actions {
            // Only the planner's end can end the run, after this.
            let _ = self.act(action, turn);
        }
    }

    /// A planner's answer: its first plan, or (asked again) the plan that replaces what of
    /// its first failed or had not started.
    pub(super) fn expand_or_replan(
        &mut self,
        planner: u32,
        attempt: u32,
        plan: &str,
        turn: &mut Turn,
    ) -> Result<(), baton_attempt::planner::Rejected> {
        if !self.sched.replanning(planner) {
            return self.expand(planner, attempt, plan, turn);
        }
        let dropped = self.dropped(planner);
        let tasks = self
            .graph
            .replacement(planner, plan, &dropped)
            .map_err(|error| self.rejected(&error))?;
        self.splice_replacing(planner, attempt, tasks, &dropped, turn);
        Ok(())
    }

    /// An answer the graph cannot take, as the planner's output says it.
    fn rejected(&self, error: &baton_graph::LoadError) -> baton_attempt::planner::Rejected {
        baton_attempt::planner::Rejected {
            problems: error.diagnostics.len().max(1) as u32,
            errors: self.launcher.redact(&error.to_string()),
        }
    }

    /// What a re-plan of `planner` replaces: its tasks that failed, or have not started.
    pub(super) fn dropped(&self, planner: u32) -> Vec<u32> {
        self.graph
            .planned_by(planner)
            .into_iter()
            .filter(|&t| {
                let state = self.sched.state(t);
                state.is_failure() || !(state.is_terminal() || state == TaskState::Running)
            })
            .collect()
    }

    /// What a planner asked again is told: what came of its plan, and what to answer.
    pub(super) fn replan_message(&self, planner: u32) -> baton_attempt::launch::Continue {
        let mut failed = String::new();
        let mut kept = Vec::new();
        let mut replaced = Vec::new();
        for t in self.graph.planned_by(planner) {
            let id = &self.graph.task(t).id;
            let state = self.sched.state(t);
            if state.is_failure() {
                let how = self.last_outcome[t as usize]
                    .as_ref()
                    .map_or_else(|| state.to_string(), ToString::to_string);
                let said = self.last_words.get(&t).map_or("", String::as_str);
                failed.push_str(&format!("- `{}` {state} ({how}):\n{said}\n", id.local()));
            } else if state == TaskState::Succeeded || state == TaskState::Running {
                kept.push(format!("`{}` ({state})", id.local()));
            } else {
                replaced.push(format!("`{}`", id.local()));
            }
        }
        let mut message = format!("Your plan ran, and part of it failed for good:\n{failed}\n");
        if !kept.is_empty() {
            message.push_str(&format!(
                "These stay, and a new task may need them by their ids: {}.\n",
                kept.join(", ")
            ));
        }
        if !replaced.is_empty() {
            message.push_str(&format!(
                "These had not started and are replaced: {}.\n",
                replaced.join(", ")
            ));
        }
        message.push_str(
            "Answer with a new plan, in the same shape, for what is left of your goal: tasks that \
             replace the failed and unstarted ones, done differently where the failure says so.",
        );
        let (engine, session) = self
            .store
            .attempts(&self.run_id, &self.graph.task(planner).id)
            .ok()
            .and_then(|a| {
                a.into_iter().rev().find_map(|a| {
                    a.agent
                        .and_then(|u| Some((Some(u.engine), Some(u.session_id?))))
                })
            })
            .unwrap_or_default();
        baton_attempt::launch::Continue {
            session,
            engine,
            message: self.launcher.redact(&message),
            fix: Some(1),
        }
    }

    /// A `for_each` task, ready: its items are read and its instances join the graph, in one
    /// attempt that runs no process (items that cannot be read end it as `launch-failed`).
    pub(super) fn fan_out(&mut self, task: u32, attempt: u32, turn: &mut Turn) {
        let started = std::time::Instant::now();
        self.started(task, attempt, None);
        let made = self
            .items(task)
            .and_then(|items| Ok((self.graph.instances(task, &items)?, items)));
        let (outcome, output) = match made {
            Ok((tasks, items)) => {
                if !tasks.is_empty() {
                    self.splice(task, attempt, tasks, turn);
                }
                let json = serde_json::Value::Array(items);
                let output = HeldOutput {
                    text: json.to_string(),
                    json: Some(json),
                    files_changed: Vec::new(),
                };
                (Outcome::Exited { code: 0 }, output)
            }
            Err(error) => (
                Outcome::LaunchFailed {
                    error: self.launcher.redact(&format!("for_each: {error}")),
                },
                HeldOutput::default(),
            ),
        };
        let record = Record {
            duration: started.elapsed(),
            ..Record::instant()
        };
        self.record_finished(task, attempt, &outcome, record);
        let bytes = output.text.len() as u64;
        let ending = super::ending::Ending {
            outcome,
            output,
            stderr_tail: String::new(),
        };
        self.ended(task, attempt, ending, bytes, turn);
    }

    /// A `for_each` task's items: its list, the paths of the checkout its glob matches, or the
    /// JSON array its predecessor wrote to `$BATON_OUTPUT` (or printed).
    fn items(&self, task: u32) -> Result<Vec<serde_json::Value>, String> {
        match self.graph.task(task).for_each.as_deref() {
            None => Ok(Vec::new()),
            Some(ForEach::List(items)) => Ok(items.clone()),
            Some(ForEach::Glob(glob)) => Ok(crate::fan_out::glob_items(self.launcher.root(), glob)
                .into_iter()
                .map(serde_json::Value::String)
                .collect()),
            Some(ForEach::From(source)) => {
                let from = &self.graph.task(*source).id;
                let held = self.launcher.held(*source);
                let value = held
                    .and_then(|h| h.json.clone())
                    .or_else(|| held.and_then(|h| serde_json::from_str(h.text.trim()).ok()));
                match value {
                    Some(serde_json::Value::Array(items)) => Ok(items),
                    Some(other) => Err(format!(
                        "`{from}` wrote {}, not a JSON array of items",
                        kind_of(&other)
                    )),
                    None => Err(format!(
                        "`{from}` wrote no JSON array of items to $BATON_OUTPUT (nor printed one)"
                    )),
                }
            }
        }
    }

    /// Everything kept per task makes room for the graph's new tasks.
    fn grow(&mut self, graph: Arc<Graph>) {
        let n = graph.len();
        self.ledger.grow(n);
        self.workspaces.grow(n);
        self.last_outcome.resize(n, None);
        self.graph = Arc::clone(&graph);
        let sched = &self.sched;
        let lost = self.launcher.grow(graph, &|t| super::ended(sched, t));
        if lost.is_empty() {
            return;
        }
        // Ended and recorded (a task's dependents start only once its end is): its output
        // is in the store.
        if let Ok(records) = self.store.tasks(&self.run_id) {
            for need in lost {
                if let Some(record) = records.get(need as usize) {
                    self.launcher
                        .hold_output(need, crate::takeover::recorded_output(record));
                }
            }
        }
    }
}
