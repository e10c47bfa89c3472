//! The process group an attempt runs in (and its cgroup, where it has one), and the signals
//! baton sends to them.

use baton_model::Containment;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::cgroup::CgroupScope;

/// The process group led by an attempt's child, and the cgroup it joined if it has one.
/// Dropping it KILLs whatever is left of both, so no process outlives its attempt, whichever
/// way the attempt ends (including a supervising future that is dropped half way).
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    id: Pid,
    cgroup: Option<CgroupScope>,
    /// [`ProcessGroup::end`] has KILLed it: one KILL reaches every member (a fork racing the
    /// signal is aborted by it), so dropping it need not send another.
    ended: bool,
}

impl ProcessGroup {
    /// The group whose id is the pid of a leader spawned with `process_group(0)`, which joined
    /// `cgroup` before its exec.
    pub(crate) fn led_by(leader: u32, cgroup: Option<CgroupScope>) -> Self {
        let id = i32::try_from(leader).expect("Linux pids fit in an i32");
        Self {
            id: Pid::from_raw(id),
            cgroup,
            ended: false,
        }
    }

    pub(crate) fn containment(&self) -> Containment {
        if self.cgroup.is_some() {
            Containment::Cgroup
        } else {
            Containment::ProcessGroup
        }
    }

    /// TERM to the group only: a graceful stop reaches the processes that expect one. Those
    /// that left the group get the KILL that follows the grace.
    pub(crate) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// KILL to the group and to the whole cgroup, which holds even the descendants that
    /// called `setsid`.
    pub(crate) fn kill(&self) {
        self.signal(Signal::SIGKILL);
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill();
        }
    }

    /// The end of the attempt: KILLs what is left and removes the cgroup, once its killed
    /// members are gone.
    pub(crate) async fn end(&mut self) {
        self.signal(Signal::SIGKILL);
        self.ended = true;
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.finish().await;
        }
    }

    fn signal(&self, signal: Signal) {
        // ESRCH means the group is already empty, which is what we want. EPERM can only mean a
        // member changed its credentials (a setuid program); there is nothing more baton can
        // do about it, and the attempt's outcome does not depend on it.
        match killpg(self.id, signal) {
            Ok(()) | Err(Errno::ESRCH | Errno::EPERM) => {}
            Err(error) => debug_assert!(false, "killpg({}, {signal}): {error}", self.id),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // The group id cannot be recycled while any member lives, so this reaches only our own
        // stragglers. Once the group is empty the id is free again, but a new group with the
        // same id needs the pid counter to wrap around in between, which takes millions of
        // spawns, not the microseconds since the leader was reaped.
        // The cgroup, if still held, is killed and removed by its own drop.
        if !self.ended {
            self.signal(Signal::SIGKILL);
        }
    }
}
