//! The clone behind [`crate::spawn`]: a child that shares baton's memory and runs, with
//! baton's thread suspended, only until it execs. glibc's `posix_spawn` works the same way;
//! this one leaves out what made it cost more than the rest of an attempt's start together
//! (docs/PERFORMANCE.md, session 5):
//!
//! - glibc maps a new stack for every child and unmaps it after: the unmap of a page that
//!   another CPU may have cached flushes the TLBs of every CPU a thread of baton's ran on, an
//!   interrupt to each. Here each thread keeps one stack for all its children.
//! - glibc's child asks the kernel for the disposition of every one of the 64 signals before
//!   it execs, while baton waits. Here the parent knows which signals can have a handler of
//!   baton's ([`handled_signals`]), and the child resets only those.
//! - glibc checks each descriptor it is to duplicate against the descriptor limit (six
//!   `getrlimit` calls), and the caller then asks for a pidfd with one more syscall. Here the
//!   clone returns the pidfd (`CLONE_PIDFD`, Linux 5.2).
//!
//! The child runs only async-signal-safe libc calls on memory the parent laid out before the
//! clone and does not touch again until the child has exec'd or exited.

use std::cell::UnsafeCell;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::io;
use std::marker::PhantomData;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// What the child does, all of it prepared by the parent: the child allocates nothing.
pub(crate) struct ChildArgs<'a> {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    /// Duplicated onto 0, 1 and 2, in that order.
    fds: [RawFd; 3],
    /// The signals whose handlers go back to the default in the child.
    reset: &'static [c_int],
    /// The errno of what failed in the child before exec; 0 while nothing did.
    error: AtomicI32,
    borrows: PhantomData<&'a ()>,
}

impl<'a> ChildArgs<'a> {
    /// `argv` and `envp` are NULL-terminated arrays of pointers to strings that live as long
    /// as `'a`.
    pub(crate) fn new(
        path: &'a CStr,
        argv: &'a [*const c_char],
        envp: &'a [*const c_char],
        cwd: &'a CStr,
        fds: [RawFd; 3],
    ) -> Self {
        debug_assert!(argv.last().is_some_and(|p| p.is_null()));
        debug_assert!(envp.last().is_some_and(|p| p.is_null()));
        Self {
            path: path.as_ptr(),
            argv: argv.as_ptr(),
            envp: envp.as_ptr(),
            cwd: cwd.as_ptr(),
            fds,
            reset: handled_signals(),
            error: AtomicI32::new(0),
            borrows: PhantomData,
        }
    }
}

/// A child that has exec'd.
pub(crate) struct Started {
    pub(crate) pid: u32,
    pub(crate) pidfd: Option<OwnedFd>,
}

/// Set once the kernel refused `CLONE_PIDFD` (older than 5.2): the caller opens a pidfd, or
/// falls back to SIGCHLD, as for any other child.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

/// Starts the child described by `args` and returns once it has exec'd. An error is what
/// failed, in baton or in the child (which is then reaped before this returns).
pub(crate) fn spawn(args: &ChildArgs<'_>) -> io::Result<Started> {
    loop {
        let with_pidfd = !NO_CLONE_PIDFD.load(Ordering::Relaxed);
        match clone(args, with_pidfd) {
            Err(error) if with_pidfd && error.raw_os_error() == Some(libc::EINVAL) => {
                NO_CLONE_PIDFD.store(true, Ordering::Relaxed);
            }
            result => return result,
        }
    }
}

fn clone(args: &ChildArgs<'_>, with_pidfd: bool) -> io::Result<Started> {
    let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    if with_pidfd {
        flags |= libc::CLONE_PIDFD;
    }
    let mut pidfd: c_int = -1;
    let (pid, clone_error) = STACK.with(|stack| {
        let top = stack.top();
        // Every signal blocked in this thread, and so in the child (which inherits the mask)
        // until it has reset the handlers: a handler of baton's must never run in the child,
        // whose memory is baton's.
        let mut all = empty_set();
        let mut old = empty_set();
        // SAFETY: `all` is initialised; sigfillset and pthread_sigmask write only to the sets.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        // SAFETY: the child runs `child` on this thread's spawn stack, which nothing else uses
        // meanwhile (this thread is suspended until the child execs or exits: CLONE_VFORK);
        // `args` outlives the call for the same reason; `pidfd` is where CLONE_PIDFD writes.
        let pid = unsafe {
            libc::clone(
                child,
                top,
                flags,
                ptr::from_ref(args).cast_mut().cast::<c_void>(),
                &mut pidfd as *mut c_int,
            )
        };
        let clone_error = io::Error::last_os_error();
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut()) };
        (pid, clone_error)
    });
    if pid < 0 {
        return Err(clone_error);
    }
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = (with_pidfd && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    let error = args.error.load(Ordering::Acquire);
    if error != 0 {
        // It exited without exec'ing: reaped here, so that no zombie is left behind.
        let mut status = 0;
        // SAFETY: a plain syscall with a pointer to a local; the child is ours and has exited.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(Started {
        pid: u32::try_from(pid).expect("a cloned child's pid is positive"),
        pidfd,
    })
}

/// The child's side. Only async-signal-safe calls, and no allocation: it shares the parent's
/// memory and heap, whose locks another of baton's threads may hold.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `clone` passes the `ChildArgs` it was given, alive until the child execs.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    // SAFETY: plain syscalls on values the parent prepared; a failure ends the child through
    // `fail`, which records the errno for the parent.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for &signal in args.reset {
            libc::sigaction(signal, &default, ptr::null_mut());
        }
        // A group of its own, so that one signal reaches every descendant.
        if libc::setpgid(0, 0) != 0 {
            fail(args);
        }
        for (target, &fd) in (0..).zip(&args.fds) {
            let duplicated = if fd == target {
                // dup2 onto itself would leave close-on-exec set.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if duplicated < 0 {
                fail(args);
            }
        }
        if libc::chdir(args.cwd) != 0 {
            fail(args);
        }
        let empty = empty_set();
        libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut());
        libc::execve(args.path, args.argv, args.envp);
        fail(args)
    }
}

/// Ends the child with the errno of what just failed, for the parent to report.
unsafe fn fail(args: &ChildArgs<'_>) -> ! {
    // SAFETY: reads this thread's errno, which the failed call just set.
    let errno = unsafe { *libc::__errno_location() };
    args.error.store(errno.max(1), Ordering::Release);
    // SAFETY: ends the child only; no destructors, no atexit handlers (they are baton's).
    unsafe { libc::_exit(127) }
}

fn empty_set() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        set.assume_init()
    }
}

/// The stack a thread's children run on until they exec: a few hundred bytes are used (libc
/// calls, no lazy symbol binding: binaries are linked with `-z now`); the rest is margin.
struct SpawnStack(UnsafeCell<Box<[u128]>>);

const STACK_BYTES: usize = 64 * 1024;

thread_local! {
    static STACK: SpawnStack = SpawnStack(UnsafeCell::new(
        vec![0u128; STACK_BYTES / size_of::<u128>()].into_boxed_slice(),
    ));
}

impl SpawnStack {
    /// The stack's top (it grows down), 16-byte aligned as the ABI wants.
    fn top(&self) -> *mut c_void {
        // SAFETY: only the child writes to the stack, while this thread is suspended.
        let stack = unsafe { &mut *self.0.get() };
        stack.as_mut_ptr_range().end.cast::<c_void>()
    }
}

/// The signals whose handlers the child resets: every one that has a handler of baton's when
/// the first child is spawned, and those baton may come to handle later (a signal stream
/// opened during a run) unless ignored; and SIGPIPE, which Rust programs ignore and an
/// ignored signal stays ignored across exec (`yes | head` would never end).
///
/// Asked once per process: 64 `sigaction` calls, instead of as many in every child.
fn handled_signals() -> &'static [c_int] {
    static HANDLED: OnceLock<Vec<c_int>> = OnceLock::new();
    const LATER: [c_int; 9] = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGCHLD,
        libc::SIGWINCH,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
    ];
    HANDLED.get_or_init(|| {
        // glibc keeps the signals between 32 and SIGRTMIN for itself and refuses to set them.
        let reserved = 32..libc::SIGRTMIN();
        (1..=libc::SIGRTMAX())
            .filter(|&signal| {
                if signal == libc::SIGKILL || signal == libc::SIGSTOP || reserved.contains(&signal)
                {
                    return false;
                }
                // SAFETY: a query: the current action is written to `current`.
                let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
                if unsafe { libc::sigaction(signal, ptr::null(), &mut current) } != 0 {
                    return false;
                }
                let ignored = current.sa_sigaction == libc::SIG_IGN;
                let caught = !ignored && current.sa_sigaction != libc::SIG_DFL;
                signal == libc::SIGPIPE || caught || (!ignored && LATER.contains(&signal))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigpipe_and_baton_handled_signals_are_reset() {
        let handled = handled_signals();
        assert!(handled.contains(&libc::SIGPIPE));
        assert!(!handled.contains(&libc::SIGKILL));
        assert!(!handled.contains(&libc::SIGSTOP));
        // Rust's runtime handles SIGSEGV (stack overflows) in every program.
        assert!(handled.contains(&libc::SIGSEGV));
    }
}
