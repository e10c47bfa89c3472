//! Where one worktree (a task's, or a best-of candidate's) is in its life, as one value: it
//! cannot be "to make" without a path, nor need its setup before it exists.
//!
//! ```text
//! Absent --prepare--> ToMake --its attempt takes the making--> Made { needs_setup: true }
//!    ^                                                           | setup ran
//!    |                                                           v
//!    +--- could not be made, or set aside in the pool ---- Made { needs_setup: false }
//! ```
//! A worktree found made (a takeover, a retry on a branch that exists) starts at `Made`.

use super::{MakeTree, TaskTree};

#[derive(Debug, Default)]
pub(super) enum TreeState {
    /// None: not prepared yet, could not be made, or set aside in the pool (its task
    /// succeeded: the work is on its branch).
    #[default]
    Absent,
    /// Prepared: the next attempt makes it (`MakeTree`, off the dispatcher's thread), then
    /// runs the task's setup in it.
    ToMake {
        tree: TaskTree,
        making: Box<MakeTree>,
    },
    /// Made, its setup still to run (`needs_setup`) or not.
    Made { tree: TaskTree, needs_setup: bool },
}

impl TreeState {
    /// The worktree, made or to be made.
    pub(super) fn tree(&self) -> Option<&TaskTree> {
        match self {
            Self::Absent => None,
            Self::ToMake { tree, .. } | Self::Made { tree, .. } => Some(tree),
        }
    }

    pub(super) fn tree_mut(&mut self) -> Option<&mut TaskTree> {
        match self {
            Self::Absent => None,
            Self::ToMake { tree, .. } | Self::Made { tree, .. } => Some(tree),
        }
    }

    /// How it is to be made, while nobody has taken that on.
    pub(super) fn making(&self) -> Option<&MakeTree> {
        match self {
            Self::ToMake { making, .. } => Some(making),
            Self::Absent | Self::Made { .. } => None,
        }
    }

    /// Hands its making to whoever makes it now (an attempt, or `make_now`): from here on it
    /// counts as made, its setup to run — or it is `Absent` again if the making fails.
    pub(super) fn take_making(&mut self) -> Option<MakeTree> {
        match std::mem::take(self) {
            Self::ToMake { tree, making } => {
                *self = Self::Made {
                    tree,
                    needs_setup: true,
                };
                Some(*making)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// Whether the task's setup is still to run in it.
    pub(super) fn needs_setup(&self) -> bool {
        match self {
            Self::ToMake { .. } => true,
            Self::Made { needs_setup, .. } => *needs_setup,
            Self::Absent => false,
        }
    }

    /// The task's setup ran to success in it.
    pub(super) fn set_up(&mut self) {
        if let Self::Made { needs_setup, .. } = self {
            *needs_setup = false;
        }
    }

    /// It is gone (could not be made, or set aside), and what it was.
    pub(super) fn clear(&mut self) -> Option<TaskTree> {
        match std::mem::take(self) {
            Self::Absent => None,
            Self::ToMake { tree, .. } | Self::Made { tree, .. } => Some(tree),
        }
    }
}
