//! Every task's [`Phase`], with the counts the dispatcher asks about kept beside them: every
//! change goes through [`Phases::set`], so a count cannot drift from the phases it counts.

use super::Phase;

#[derive(Debug)]
pub(super) struct Phases {
    phase: Vec<Phase>,
    /// Tasks in [`Phase::Approval`].
    awaiting: u32,
}

impl Phases {
    pub(super) fn new(n: usize) -> Self {
        Self {
            phase: vec![Phase::Waiting; n],
            awaiting: 0,
        }
    }

    pub(super) fn set(&mut self, task: u32, phase: Phase) {
        let slot = &mut self.phase[task as usize];
        self.awaiting -= u32::from(*slot == Phase::Approval);
        self.awaiting += u32::from(phase == Phase::Approval);
        *slot = phase;
    }

    /// A new task (a planner's answer grew the graph), waiting.
    pub(super) fn push(&mut self) {
        self.phase.push(Phase::Waiting);
    }

    pub(super) fn len(&self) -> usize {
        self.phase.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }

    /// How many tasks wait for a person's decision.
    pub(super) fn awaiting(&self) -> u32 {
        self.awaiting
    }
}

impl std::ops::Index<usize> for Phases {
    type Output = Phase;

    fn index(&self, task: usize) -> &Phase {
        &self.phase[task]
    }
}
