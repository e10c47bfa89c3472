//! Tasks that wait for a person (`approval = true`): the decisions are made from any
//! terminal (`baton approve`, `baton reject`) and recorded in the store, where the driving
//! process looks for them while some task waits.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use baton_graph::Graph;
use baton_model::{EventKind, RunId};
use baton_scheduler::Input;
use baton_store::Store;

/// How often a run with tasks waiting for approval looks for decisions.
pub(crate) const APPROVAL_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Default)]
pub(crate) struct Approvals {
    /// Tasks whose decision was applied.
    decided: BTreeSet<u32>,
    /// The reasons given with rejections, for the tasks' `task-finished`.
    rejections: HashMap<u32, Option<String>>,
    /// Read the decisions at the next chance.
    due: bool,
}

impl Approvals {
    /// A task waits for a person from now on (the scheduler knows which: it is asked whether
    /// any does). A decision may have come before the task was ready: looked for now.
    pub(crate) fn wait(&mut self) {
        self.due = true;
    }

    /// Look for decisions at the next chance.
    pub(crate) fn poll_soon(&mut self) {
        self.due = true;
    }

    /// Whether decisions are to be read now (the request is used up).
    pub(crate) fn take_due(&mut self) -> bool {
        std::mem::take(&mut self.due)
    }

    /// `task` finished: the reason its rejection was given, if it was.
    pub(crate) fn finished(&mut self, task: u32) -> Option<String> {
        self.rejections.remove(&task).flatten()
    }

    /// What people decided since last time: each decision's event (with `redact` applied to
    /// its reason) and the scheduler's input. A store that cannot be read now is read again
    /// at the next poll.
    pub(crate) fn read(
        &mut self,
        store: &dyn Store,
        run: &RunId,
        graph: &Graph,
        redact: impl Fn(&str) -> String,
    ) -> Vec<(EventKind, Input)> {
        let Ok(decisions) = store.decisions(run) else {
            return Vec::new();
        };
        let mut applied = Vec::new();
        for decision in decisions {
            let Some(task) = graph.index_of(decision.task.as_str()) else {
                continue;
            };
            if !self.decided.insert(task) {
                continue;
            }
            let event = EventKind::TaskDecided {
                task: decision.task.clone(),
                approved: decision.approved,
                reason: decision.reason.as_deref().map(&redact),
            };
            let input = if decision.approved {
                Input::Approved { task }
            } else {
                self.rejections.insert(task, decision.reason);
                Input::Rejected { task }
            };
            applied.push((event, input));
        }
        applied
    }
}
