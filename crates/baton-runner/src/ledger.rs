//! What the dispatcher has decided, on its way into the store: the [`Journal`] gathers it, the
//! [`Recorder`] commits it on a thread of its own, and what is acknowledged goes to the
//! reporter. After the first failure to commit, nothing more is recorded (see
//! [`Ledger::failure`]): the dispatcher stops the run.

use baton_attempt::stamp::event;
use baton_model::{Event, EventKind};
use baton_report::Reporter;
use baton_store::{AttemptOutput, StoreError};

use crate::journal::Journal;
use crate::recorder::{Ack, Recorder, Signal};

pub(crate) struct Ledger {
    journal: Journal,
    recorder: Recorder,
    /// The first store failure.
    fatal: Option<StoreError>,
    /// Launches decided that wait for a predecessor's end to be recorded.
    deferred: Vec<(u32, u32)>,
}

impl Ledger {
    pub(crate) fn new(tasks: usize, recorder: Recorder) -> Self {
        Self {
            journal: Journal::new(tasks),
            recorder,
            fatal: None,
            deferred: Vec::new(),
        }
    }

    /// The run has `tasks` tasks now (a planner added some).
    pub(crate) fn grow(&mut self, tasks: usize) {
        self.journal.grow(tasks);
    }

    /// `kind`, as it happens now.
    pub(crate) fn push(&mut self, kind: EventKind) {
        self.journal.push(event(kind));
    }

    /// An event stamped when it happened (a unit's, a takeover's).
    pub(crate) fn push_event(&mut self, event: Event) {
        self.journal.push(event);
    }

    pub(crate) fn push_output(&mut self, output: AttemptOutput) {
        self.journal.push_output(output);
    }

    /// `task`'s latest attempt ended in what was just pushed.
    pub(crate) fn mark_end(&mut self, task: u32) {
        self.journal.mark_end(task);
    }

    /// What is gathered and what is in flight, task by task.
    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Whether a commit failed: nothing more is recorded.
    pub(crate) fn failed(&self) -> bool {
        self.fatal.is_some()
    }

    /// Whether another process holds the run now: what this one would still do to it (merge
    /// its result, remove its worktrees) is the new holder's.
    pub(crate) fn lost_the_run(&self) -> bool {
        matches!(self.fatal, Some(StoreError::LeaseLost { .. }))
    }

    /// The first failure to commit, once the run is over.
    pub(crate) fn failure(&mut self) -> Option<StoreError> {
        self.fatal.take()
    }

    /// Hands everything gathered to the recorder, to commit in one transaction; it is reported
    /// once it is (or, after a store failure, once the recorder sends it back unrecorded).
    pub(crate) fn record(&mut self) {
        if self.journal.is_empty() {
            return;
        }
        let (id, events, outputs) = self.journal.take();
        // After a store failure too: the recorder then sends them back unrecorded, in order
        // behind the batches still in flight, to be reported.
        self.recorder.send(id, events, outputs);
    }

    /// Waits for the recorder: a batch acknowledged (applied, its events reported) or the run
    /// found lost by the heartbeat (nothing more is recorded; the dispatcher stops the run).
    /// Cancel-safe.
    pub(crate) async fn next(&mut self, reporter: &mut dyn Reporter) {
        match self.recorder.signal().await {
            Signal::Ack(ack) => self.acknowledged(ack, reporter),
            Signal::Lost(err) => {
                self.fatal.get_or_insert(err);
            }
        }
    }

    /// Every acknowledgement that has come, applied.
    pub(crate) fn take_acks(&mut self, reporter: &mut dyn Reporter) {
        while let Some(ack) = self.recorder.try_ack() {
            self.acknowledged(ack, reporter);
        }
    }

    /// A batch committed (or failed): its ends are recorded, its events reported.
    pub(crate) fn acknowledged(&mut self, ack: Ack, reporter: &mut dyn Reporter) {
        let mut events = ack.events;
        match ack.seqs {
            Ok(seqs) => {
                for (event, seq) in events.iter_mut().zip(seqs) {
                    event.seq = seq;
                }
            }
            Err(err) => {
                // Keep going without a record: the dispatcher stops the run so that nothing
                // more starts unrecorded, lets running attempts end, and the failure is
                // reported at the end.
                self.fatal.get_or_insert(err);
            }
        }
        self.journal.recorded(ack.id);
        reporter.events(&events);
    }

    /// Records everything gathered and waits until all of it is committed.
    pub(crate) async fn settle(&mut self, reporter: &mut dyn Reporter) {
        self.record();
        self.wait(0, reporter).await;
    }

    /// Takes the recorder's acknowledgements until at most `in_flight` batches are left.
    pub(crate) async fn wait(&mut self, in_flight: u64, reporter: &mut dyn Reporter) {
        while self.recorder.batches_in_flight() > in_flight {
            let ack = self.recorder.ack().await;
            self.acknowledged(ack, reporter);
        }
    }

    /// Sets aside the `launches` that need (by `needs`) a task whose end is not recorded yet:
    /// a completion is durable before any dependent starts.
    pub(crate) fn defer<'g>(
        &mut self,
        launches: &mut Vec<(u32, u32)>,
        needs: impl Fn(u32) -> &'g [u32],
    ) {
        let journal = &self.journal;
        let waits = |task: u32| journal.any_unrecorded(needs(task));
        if self.failed() || !launches.iter().any(|&(task, _)| waits(task)) {
            return;
        }
        let deferred = &mut self.deferred;
        launches.retain(|&(task, attempt)| {
            let wait = waits(task);
            if wait {
                deferred.push((task, attempt));
            }
            !wait
        });
    }

    /// Moves the deferred launches whose needs' ends are recorded now (all of them after a
    /// store failure, or once the run is `stopping`) to `launches`; returns those decided
    /// before a stop, which are not to start at all.
    pub(crate) fn release<'g>(
        &mut self,
        launches: &mut Vec<(u32, u32)>,
        needs: impl Fn(u32) -> &'g [u32],
        stopping: bool,
    ) -> Vec<(u32, u32)> {
        let mut declined = Vec::new();
        if self.deferred.is_empty() {
            return declined;
        }
        let (journal, fatal) = (&self.journal, self.fatal.is_some());
        self.deferred.retain(|&(task, attempt)| {
            let ready = fatal || stopping || !journal.any_unrecorded(needs(task));
            if ready && stopping && !fatal {
                declined.push((task, attempt));
            } else if ready {
                launches.push((task, attempt));
            }
            !ready
        });
        declined
    }

    /// Whether a launch waits for a commit.
    pub(crate) fn any_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }
}
