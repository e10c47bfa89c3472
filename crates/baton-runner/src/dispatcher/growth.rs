//! How the running graph grows: a planner's answer, a `for_each` task's instances. Each is
//! recorded (`graph-expanded`) before the end of the attempt that made it, then spliced into
//! the graph and everything the dispatcher keeps per task.

use std::sync::Arc;

use baton_graph::{ForEach, Graph};
use baton_model::{EventKind, Outcome};

use super::{Dispatcher, Turn, plan_of};
use crate::launch::HeldOutput;

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
    ) -> Result<(), crate::planner::Rejected> {
        let tasks =
            self.graph
                .expansion(planner, plan)
                .map_err(|error| crate::planner::Rejected {
                    problems: error.diagnostics.len().max(1) as u32,
                    errors: self.launcher.redact(&error.to_string()),
                })?;
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
        let added: Vec<baton_model::TaskId> = tasks.iter().map(|t| t.id.clone()).collect();
        let stored = serde_json::to_value(&tasks).expect("tasks are plain data");
        let grown = Arc::new(self.graph.extended(planner, tasks));
        self.ledger.push(EventKind::GraphExpanded {
            task: self.graph.task(planner).id.clone(),
            attempt,
            added,
            tasks: stored,
        });
        self.grow(grown);
        let actions = self.sched.extend(&plan_of(&self.graph));
        for action in actions {
            // Only the planner's end can end the run, after this.
            let _ = self.act(action, turn);
        }
    }

    /// A `for_each` task, ready: its items are read and its instances join the graph, in one
    /// attempt that runs no process (items that cannot be read end it as `launch-failed`).
    pub(super) fn fan_out(&mut self, task: u32, attempt: u32, turn: &mut Turn) {
        let id = self.graph.task(task).id.clone();
        let started = std::time::Instant::now();
        self.ledger.push(EventKind::AttemptStarted {
            task: id.clone(),
            attempt,
            pid: None,
        });
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
        self.ledger.push(EventKind::AttemptFinished {
            task: id,
            attempt,
            outcome: outcome.clone(),
            duration_ms: started.elapsed().as_millis() as u64,
            agent: None,
            containment: None,
        });
        let bytes = output.text.len() as u64;
        self.ended(task, attempt, (outcome, output, bytes, String::new()), turn);
    }

    /// A `for_each` task's items: its list, the paths of the checkout its glob matches, or the
    /// JSON array its predecessor wrote to `$BATON_OUTPUT` (or printed).
    fn items(&self, task: u32) -> Result<Vec<serde_json::Value>, String> {
        match self.graph.task(task).for_each.as_ref() {
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
        let lost = self.launcher.grow(graph);
        if lost.is_empty() {
            return;
        }
        // Ended and recorded (a task's dependents start only once its end is): its output
        // is in the store.
        if let Ok(records) = self.store.tasks(&self.run_id) {
            for need in lost {
                if let Some(record) = records.get(need as usize) {
                    self.launcher
                        .hold_output(need, HeldOutput::recorded(record));
                }
            }
        }
    }
}
