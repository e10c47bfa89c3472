//! What the dispatcher has decided but not yet recorded.
//!
//! Recording is batched across turns: a batch is committed when a launch needs a predecessor
//! whose end is not recorded yet (a task's completion is always durable before a dependent
//! starts), when it is [`COMMIT_WINDOW`] old, when it holds [`MAX_BATCH_EVENTS`] events, and when
//! the run ends. Launches that depend on nothing unrecorded go ahead without waiting for a
//! commit. A crash can therefore lose at most a window's worth of records — attempts that
//! started or ended and are run again on resume (execution is at least once) — never a
//! completion that a dependent relied on.

use baton_model::Event;
use baton_store::AttemptOutput;
use tokio::time::{Duration, Instant};

/// Longest time an event waits to be recorded.
pub(crate) const COMMIT_WINDOW: Duration = Duration::from_millis(20);
/// Most events in one commit.
pub(crate) const MAX_BATCH_EVENTS: usize = 4096;

#[derive(Debug)]
pub(crate) struct Journal {
    events: Vec<Event>,
    outputs: Vec<AttemptOutput>,
    /// When the oldest unrecorded event was added.
    oldest: Option<Instant>,
    /// Per task: whether the end of its latest attempt is among the unrecorded events.
    unrecorded_end: Vec<bool>,
    marked: Vec<u32>,
}

impl Journal {
    pub(crate) fn new(tasks: usize) -> Self {
        Self {
            events: Vec::new(),
            outputs: Vec::new(),
            oldest: None,
            unrecorded_end: vec![false; tasks],
            marked: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, event: Event) {
        self.oldest.get_or_insert_with(Instant::now);
        self.events.push(event);
    }

    pub(crate) fn push_output(&mut self, output: AttemptOutput) {
        self.outputs.push(output);
    }

    /// Notes that `task`'s latest attempt ended in an event not yet recorded.
    pub(crate) fn mark_end(&mut self, task: u32) {
        if !self.unrecorded_end[task as usize] {
            self.unrecorded_end[task as usize] = true;
            self.marked.push(task);
        }
    }

    pub(crate) fn end_unrecorded(&self, task: u32) -> bool {
        self.unrecorded_end[task as usize]
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

    /// Everything unrecorded, to commit; the journal starts empty again.
    pub(crate) fn take(&mut self) -> (Vec<Event>, Vec<AttemptOutput>) {
        for task in self.marked.drain(..) {
            self.unrecorded_end[task as usize] = false;
        }
        self.oldest = None;
        (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.outputs),
        )
    }
}
