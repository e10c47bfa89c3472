//! What the dispatcher has decided but not yet recorded.
//!
//! Recording is batched across turns: a batch is handed to the recorder (see
//! [`crate::recorder`]) when a launch needs a predecessor
//! whose end is not recorded yet (a task's completion is always durable before a dependent
//! starts), when it is [`COMMIT_WINDOW`] old, when it holds [`MAX_BATCH_EVENTS`] events, and when
//! the run ends. Launches that depend on nothing unrecorded go ahead without waiting for a
//! commit. A crash can therefore lose at most a window's worth of records — attempts that
//! started or ended and are run again on resume (execution is at least once) — never a
//! completion that a dependent relied on.

use std::collections::VecDeque;

use baton_model::Event;
use baton_store::AttemptOutput;
use tokio::time::{Duration, Instant};

/// Longest time an event waits to be recorded.
pub(crate) const COMMIT_WINDOW: Duration = Duration::from_millis(20);
/// Most events in one commit (a turn's last input may add a few more).
pub(crate) const MAX_BATCH_EVENTS: usize = 4096;
/// Room made at a time for the events past [`MAX_BATCH_EVENTS`].
const BATCH_OVERSHOOT: usize = 64;

#[derive(Debug)]
pub(crate) struct Journal {
    events: Vec<Event>,
    outputs: Vec<AttemptOutput>,
    /// When the oldest unrecorded event was added.
    oldest: Option<Instant>,
    /// Per task: the number of the batch that holds the end of its latest attempt, or 0 once
    /// that batch is recorded.
    end_batch: Vec<u64>,
    /// The tasks whose ends the batch being gathered holds.
    marked: Vec<u32>,
    /// Batches taken and not yet recorded, oldest first, with the tasks whose ends each holds.
    taken: VecDeque<(u64, Vec<u32>)>,
    /// The number the batch being gathered will have (batches count from 1).
    current: u64,
}

impl Journal {
    pub(crate) fn new(tasks: usize) -> Self {
        Self {
            events: Vec::new(),
            outputs: Vec::new(),
            oldest: None,
            end_batch: vec![0; tasks],
            marked: Vec::new(),
            taken: VecDeque::new(),
            current: 1,
        }
    }

    /// The run has `tasks` tasks now (a planner added some).
    pub(crate) fn grow(&mut self, tasks: usize) {
        self.end_batch.resize(tasks, 0);
    }

    pub(crate) fn push(&mut self, event: Event) {
        self.oldest.get_or_insert_with(Instant::now);
        // A turn ends its batch a few events past MAX_BATCH_EVENTS (an input's events go
        // together): room for those few, not a doubling. Three batches of 8,192 events (one
        // gathered, two being committed) were 5 MB of a 100,000-task run's peak, half of it
        // never used.
        if self.events.len() == self.events.capacity() && self.events.len() >= MAX_BATCH_EVENTS {
            self.events.reserve_exact(BATCH_OVERSHOOT);
        }
        self.events.push(event);
    }

    pub(crate) fn push_output(&mut self, output: AttemptOutput) {
        self.outputs.push(output);
    }

    /// Notes that `task`'s latest attempt ended in an event not yet recorded.
    pub(crate) fn mark_end(&mut self, task: u32) {
        let batch = &mut self.end_batch[task as usize];
        if *batch != self.current {
            *batch = self.current;
            self.marked.push(task);
        }
    }

    /// Whether the end of `task`'s latest attempt is not recorded yet: gathered, or taken
    /// and being committed.
    pub(crate) fn end_unrecorded(&self, task: u32) -> bool {
        self.end_batch[task as usize] != 0
    }

    /// Whether the end of `task`'s latest attempt is in the batch being gathered.
    pub(crate) fn end_gathered(&self, task: u32) -> bool {
        self.end_batch[task as usize] == self.current
    }

    /// Whether any of `needs` ended unrecorded: a launch that needs them waits.
    pub(crate) fn any_unrecorded(&self, needs: &[u32]) -> bool {
        needs.iter().any(|&need| self.end_unrecorded(need))
    }

    /// Whether any of `needs` ended in the batch being gathered: it must go now.
    pub(crate) fn any_gathered(&self, needs: &[u32]) -> bool {
        needs.iter().any(|&need| self.end_gathered(need))
    }

    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty() && self.outputs.is_empty()
    }

    /// When the batch must be committed at the latest.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.oldest.map(|t| t + COMMIT_WINDOW)
    }

    pub(crate) fn is_due(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| d <= now) || self.events.len() >= MAX_BATCH_EVENTS
    }

    /// Everything gathered, to commit, and the batch's number; the journal starts gathering
    /// the next. The ends it holds stay unrecorded until [`Journal::recorded`] says so.
    pub(crate) fn take(&mut self) -> (u64, Vec<Event>, Vec<AttemptOutput>) {
        let id = self.current;
        self.current += 1;
        self.taken.push_back((id, std::mem::take(&mut self.marked)));
        self.oldest = None;
        (
            id,
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.outputs),
        )
    }

    /// Batches up to `id` are committed (or will never be: the run stops).
    pub(crate) fn recorded(&mut self, id: u64) {
        while let Some((batch, _)) = self.taken.front() {
            if *batch > id {
                break;
            }
            let (batch, tasks) = self.taken.pop_front().expect("looked at above");
            for task in tasks {
                // A later attempt's end, in a later batch, stays unrecorded.
                if self.end_batch[task as usize] == batch {
                    self.end_batch[task as usize] = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full batch's last few events do not double what it holds.
    #[test]
    fn a_batch_past_its_size_grows_by_a_little() {
        let mut journal = Journal::new(1);
        let event = || Event {
            seq: 0,
            at_ms: 0,
            kind: baton_model::EventKind::TaskWaiting {
                task: baton_model::TaskId::new("a").unwrap(),
            },
        };
        for _ in 0..MAX_BATCH_EVENTS + 3 {
            journal.push(event());
        }
        assert!(journal.is_due(Instant::now()));
        let (_, events, _) = journal.take();
        assert_eq!(events.len(), MAX_BATCH_EVENTS + 3);
        assert_eq!(events.capacity(), MAX_BATCH_EVENTS + BATCH_OVERSHOOT);
    }

    #[test]
    fn an_end_is_unrecorded_until_its_own_batch_is_recorded() {
        let mut journal = Journal::new(2);
        journal.mark_end(0);
        assert!(journal.end_gathered(0) && journal.end_unrecorded(0));
        assert!(!journal.end_unrecorded(1));
        let (first, ..) = journal.take();
        assert!(!journal.end_gathered(0) && journal.end_unrecorded(0));
        // A retry of task 0 ends in the next batch.
        journal.mark_end(0);
        let (second, ..) = journal.take();
        assert_eq!(second, first + 1);
        journal.recorded(first);
        assert!(
            journal.end_unrecorded(0),
            "its latest end is in the second batch"
        );
        journal.recorded(second);
        assert!(!journal.end_unrecorded(0));
    }
}
