//! The process group an attempt runs in, and the signals baton sends to it.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The process group led by an attempt's child. Dropping it KILLs whatever is left of the group,
/// so no process outlives its attempt, whichever way the attempt ends (including a supervising
/// future that is dropped half way).
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    id: Pid,
}

impl ProcessGroup {
    /// The group whose id is the pid of a leader spawned with `process_group(0)`.
    pub(crate) fn led_by(leader: u32) -> Self {
        let id = i32::try_from(leader).expect("Linux pids fit in an i32");
        Self {
            id: Pid::from_raw(id),
        }
    }

    pub(crate) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    pub(crate) fn kill(&self) {
        self.signal(Signal::SIGKILL);
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
        self.kill();
    }
}
