//! A worker's watchdog: a small process of its own that ends the worker's attempts when the
//! worker stops renewing their leases, before anyone runs them again.
//!
//! A worker that is paused (SIGSTOP, a debugger, a process stuck in the kernel) renews
//! nothing, and its attempts' processes, which are not paused with it, would run on past
//! their leases beside their re-runs on other workers. Nothing inside the worker can act
//! while it is paused, so a second process does: the worker writes a byte to the watchdog's
//! stdin at each heartbeat (every third of its lease), and a watchdog that hears nothing for
//! two thirds of the lease ends every process marked as the worker's (`BATON_WORKER`). Two
//! thirds: the lease runs out at the earliest a full term after the last renewal, which came
//! before the last byte, so the processes are gone before the coordinator can take the
//! attempts as lapsed. When the worker exits (or dies) its end of the pipe closes, and the
//! watchdog ends whatever of the worker's is left, then exits itself.
//!
//! The watchdog lives in a process group of its own, so that a Ctrl-Z (SIGTSTP to the
//! terminal's foreground group) that stops the worker does not stop its watchdog.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// The worker's end: pings the watchdog; dropping it lets the watchdog go.
pub struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts `program` (baton itself) as the watchdog of worker `worker` (its `PID:START`)
    /// holding leases of `lease`.
    pub fn start(
        program: &std::path::Path,
        worker: &str,
        lease: Duration,
    ) -> std::io::Result<Self> {
        let mut child = Command::new(program)
            .args([
                "worker-watchdog",
                "--worker",
                worker,
                "--silence-ms",
                &silence(lease).as_millis().to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = child.stdin.take();
        Ok(Self { child, stdin })
    }

    /// Tells the watchdog the worker is alive (at each heartbeat). Never blocks for long: the
    /// watchdog reads each byte as it comes.
    pub fn ping(&mut self) {
        if let Some(stdin) = &mut self.stdin
            && stdin.write_all(b".").is_err()
        {
            // The watchdog is gone: nothing more to tell it.
            self.stdin = None;
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// How long the watchdog waits for a ping before it ends the worker's attempts: two thirds
/// of the lease (see the module's docs).
fn silence(lease: Duration) -> Duration {
    lease * 2 / 3
}

/// What the watchdog did, for the worker's log.
pub enum Watched {
    /// Nothing heard for `silence`: `killed` processes of the worker's attempts ended.
    Silent { silence: Duration, killed: usize },
}

/// The watchdog's loop (`baton worker-watchdog`): reads pings from stdin; after `silence`
/// without one, ends the processes of worker `worker`'s attempts (and says so through
/// `said`); at the end of stdin, ends whatever of the worker's is left and returns.
pub fn watch(worker: &str, silence: Duration, said: &mut dyn FnMut(Watched)) {
    let (tx, pings) = std::sync::mpsc::channel::<bool>();
    // Reads on a thread of its own: a blocking read with a timeout, portably.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut byte = [0u8; 64];
        loop {
            match stdin.read(&mut byte) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(false);
                    return;
                }
                Ok(_) => {
                    if tx.send(true).is_err() {
                        return;
                    }
                }
            }
        }
    });
    // Said once per silence, not at every wake while it lasts.
    let mut quiet = false;
    loop {
        match pings.recv_timeout(silence) {
            Ok(true) => quiet = false,
            Ok(false) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                baton_attempt::leftovers::kill_workers_attempts(worker);
                return;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let killed = baton_attempt::leftovers::kill_workers_attempts(worker);
                if !quiet && killed > 0 {
                    said(Watched::Silent { silence, killed });
                }
                quiet = true;
            }
        }
    }
}
