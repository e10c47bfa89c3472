//! The clone behind [`crate::spawn`]: a child that shares baton's memory until it execs, which
//! baton does not wait for.
//!
//! glibc's `posix_spawn` (and a plain `vfork`) suspend the calling thread until the child has
//! exec'd. On a busy machine that costs far more than the syscalls: the child's exec wakes the
//! parent, which then waits for a CPU while the child (and its siblings) run on; measured on
//! the 10,000-task benchmark, baton's thread spent 1.1 s of a 4.2 s run ready to run but
//! waiting after those wakeups (docs/PERFORMANCE.md, session 5). Here the parent goes on at
//! once, and what the child reads until its exec (the program, argv, envp, the working
//! directory, a stack) stays alive in a [`Launch`] until the kernel says the child is done with
//! it: `CLONE_CHILD_CLEARTID` zeroes a word of it at the child's exec (or exit).
//!
//! Also left out, against glibc: a stack mapped and unmapped per child (the unmap flushes the
//! TLB of every CPU a thread of baton's ran on), the child asking for the disposition of all 64
//! signals (baton knows which can have a handler: [`handled_signals`]), six `getrlimit` calls,
//! and a separate `pidfd_open` (`CLONE_PIDFD` returns one, Linux 5.2).
//!
//! The child makes raw syscalls only: it shares the parent's thread-local storage, and a libc
//! call that failed would write `errno` under a parent thread that is running meanwhile. What
//! failed before the exec is left in the [`Launch`] for the parent to report.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::spawn::CStrings;

/// What a child runs.
pub(crate) struct Command {
    pub(crate) argv: CStrings,
    pub(crate) envp: CStrings,
    pub(crate) cwd: CString,
    /// Duplicated onto 0, 1 and 2, in that order.
    pub(crate) fds: [RawFd; 3],
}

/// A started child's part of baton's memory: what it reads until its exec. Dropped before the
/// child is done with it, it is kept aside until then.
pub(crate) struct Launch(Option<Box<Inner>>);

/// Laid out by the parent before the clone, and not changed while the child may read it.
struct Inner {
    command: Command,
    /// The program: `argv[0]`.
    path: *const c_char,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    /// The signals whose handlers go back to the default in the child: bit `n - 1` for
    /// signal `n`.
    reset: u64,
    /// The errno of what failed in the child before exec; 0 while nothing did.
    error: AtomicI32,
    /// Nonzero until the child has exec'd or exited: the kernel clears it then.
    running: AtomicI32,
    /// The child's stack until its exec: a few hundred bytes are used (raw syscalls only).
    stack: Box<[MaybeUninit<u128>]>,
}

// SAFETY: the raw pointers point into `command`, which moves with them.
unsafe impl Send for Inner {}

const STACK_WORDS: usize = 16 * 1024 / size_of::<u128>();

impl Launch {
    /// The program the child was to run.
    pub(crate) fn program(&self) -> &CStr {
        self.inner()
            .command
            .argv
            .first()
            .expect("a launch has a program")
    }

    pub(crate) fn cwd(&self) -> &CStr {
        &self.inner().command.cwd
    }

    /// What failed in the child before its exec, once it has exec'd or exited; `None` while it
    /// has not, and if nothing failed.
    pub(crate) fn error(&self) -> Option<io::Error> {
        let inner = self.inner();
        if inner.running.load(Ordering::Acquire) != 0 {
            return None;
        }
        match inner.error.load(Ordering::Acquire) {
            0 => None,
            errno => Some(io::Error::from_raw_os_error(errno)),
        }
    }

    fn inner(&self) -> &Inner {
        self.0.as_ref().expect("only taken on drop")
    }
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("program", &self.program())
            .finish_non_exhaustive()
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take()
            && inner.running.load(Ordering::Acquire) != 0
        {
            // Still between clone and exec: freed by a later `start` once it is not.
            UNFINISHED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(inner);
        }
    }
}

/// Launches dropped while their child had not exec'd yet.
#[expect(
    clippy::vec_box,
    reason = "the child reads the `Inner` where it is: it must not move into the vector"
)]
static UNFINISHED: Mutex<Vec<Box<Inner>>> = Mutex::new(Vec::new());

/// A child that was cloned: it runs its command, or fails to and exits with 127, leaving the
/// error in its [`Launch`].
pub(crate) struct Started {
    pub(crate) pid: u32,
    pub(crate) pidfd: Option<OwnedFd>,
}

/// Set once the kernel refused `CLONE_PIDFD` (older than 5.2): the caller opens a pidfd, or
/// falls back to SIGCHLD, as for any other child.
static NO_CLONE_PIDFD: AtomicBool = AtomicBool::new(false);

/// Starts `command` in a new child, the leader of a new process group, without waiting for
/// its exec. An error here is baton's (no child exists); what fails in the child is reported
/// by its [`Launch`].
pub(crate) fn start(command: Command) -> io::Result<(Started, Launch)> {
    {
        let mut unfinished = UNFINISHED.lock().unwrap_or_else(|e| e.into_inner());
        if !unfinished.is_empty() {
            unfinished.retain(|inner| inner.running.load(Ordering::Acquire) != 0);
        }
    }
    let argv = command.argv.pointers();
    let envp = command.envp.pointers();
    let path = argv[0];
    if path.is_null() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no program"));
    }
    let mut inner = Box::new(Inner {
        command,
        path,
        argv,
        envp,
        reset: handled_signals(),
        error: AtomicI32::new(0),
        running: AtomicI32::new(1),
        stack: Box::new_uninit_slice(STACK_WORDS),
    });
    loop {
        let with_pidfd = !NO_CLONE_PIDFD.load(Ordering::Relaxed);
        match clone(&mut inner, with_pidfd) {
            Err(error) if with_pidfd && error.raw_os_error() == Some(libc::EINVAL) => {
                NO_CLONE_PIDFD.store(true, Ordering::Relaxed);
            }
            Err(error) => return Err(error),
            Ok(started) => return Ok((started, Launch(Some(inner)))),
        }
    }
}

fn clone(inner: &mut Inner, with_pidfd: bool) -> io::Result<Started> {
    let mut flags = libc::CLONE_VM | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD;
    if with_pidfd {
        flags |= libc::CLONE_PIDFD;
    }
    let top = inner.stack.as_mut_ptr_range().end.cast::<c_void>();
    let arg = ptr::from_mut(inner).cast::<c_void>();
    let running = inner.running.as_ptr();
    let mut pidfd: c_int = -1;
    // Every signal blocked in this thread while it clones, and so in the child (which inherits
    // the mask) until it has reset the handlers: a handler of baton's must never run in the
    // child, whose memory is baton's.
    let mut all = empty_set();
    let mut old = empty_set();
    // SAFETY: sigfillset and pthread_sigmask write only to the sets given, live locals of the
    // right type (`all` is filled before pthread_sigmask reads it).
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: the child runs `child` on `inner.stack` and reads `inner`, which stay alive and
    // unchanged until it has exec'd or exited (the `Launch` keeps them, see its `Drop`);
    // `pidfd` is where CLONE_PIDFD writes; the kernel clears `running` when the child is done
    // with the memory.
    let pid = unsafe {
        libc::clone(
            child,
            top,
            flags,
            arg,
            &mut pidfd as *mut c_int,
            ptr::null_mut::<c_void>(),
            running,
        )
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: reads only `old`, the mask pthread_sigmask saved above, and writes nothing.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, ptr::null_mut()) };
    if pid < 0 {
        return Err(clone_error);
    }
    // The child makes its own group too; whichever comes first, a signal to the group sent
    // from now on reaches it, even before it has run at all. After its exec this fails
    // (EACCES), and it is done by then.
    // SAFETY: setpgid takes two integers and touches no memory; if it fails (the child has
    // exec'd, or is gone), nothing has changed.
    unsafe { libc::setpgid(pid, pid) };
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = (with_pidfd && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok(Started {
        pid: u32::try_from(pid).expect("a cloned child's pid is positive"),
        pidfd,
    })
}

/// The child's side: raw syscalls on what the parent laid out, nothing else.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `clone` passes the `Inner` it was given, alive until the child execs or exits.
    let inner = unsafe { &*arg.cast::<Inner>() };
    // The kernel's `struct sigaction` for SIG_DFL, no flags, no mask: all zeros.
    let default = [0u64; 4];
    let empty_mask = 0u64;
    let mask_size = size_of::<u64>();
    let mut reset = inner.reset;
    while reset != 0 {
        let signal = reset.trailing_zeros() as usize + 1;
        reset &= reset - 1;
        raw::syscall4(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr() as usize,
            0,
            mask_size,
        );
    }
    // A group of its own, so that one signal reaches every descendant.
    check(inner, raw::syscall4(libc::SYS_setpgid, 0, 0, 0, 0));
    for (target, &fd) in (0..).zip(&inner.command.fds) {
        let done = if fd == target {
            // Duplicating onto itself would leave close-on-exec set.
            raw::syscall4(libc::SYS_fcntl, fd as usize, libc::F_SETFD as usize, 0, 0)
        } else {
            raw::syscall4(libc::SYS_dup3, fd as usize, target as usize, 0, 0)
        };
        check(inner, done);
    }
    check(
        inner,
        raw::syscall4(
            libc::SYS_chdir,
            inner.command.cwd.as_ptr() as usize,
            0,
            0,
            0,
        ),
    );
    raw::syscall4(
        libc::SYS_rt_sigprocmask,
        libc::SIG_SETMASK as usize,
        ptr::from_ref(&empty_mask) as usize,
        0,
        mask_size,
    );
    let failed = raw::syscall4(
        libc::SYS_execve,
        inner.path as usize,
        inner.argv.as_ptr() as usize,
        inner.envp.as_ptr() as usize,
        0,
    );
    fail(inner, failed)
}

/// Ends the child if a syscall failed (returned `-errno`).
fn check(inner: &Inner, ret: isize) {
    if ret < 0 {
        fail(inner, ret);
    }
}

/// Leaves the error for the parent and ends the child.
fn fail(inner: &Inner, ret: isize) -> ! {
    let errno = i32::try_from(-ret).unwrap_or(libc::EINVAL).max(1);
    inner.error.store(errno, Ordering::Release);
    loop {
        raw::syscall4(libc::SYS_exit_group, 127, 0, 0, 0);
    }
}

/// Syscalls that return `-errno` instead of setting `errno`.
mod raw {
    #[cfg(target_arch = "x86_64")]
    pub(super) fn syscall4(n: libc::c_long, a1: usize, a2: usize, a3: usize, a4: usize) -> isize {
        let ret: isize;
        // SAFETY: the syscalls made through this take only the pointers given, which point to
        // memory alive for the call; the kernel clobbers rcx and r11 and nothing else.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a1,
                in("rsi") a2,
                in("rdx") a3,
                in("r10") a4,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    pub(super) fn syscall4(n: libc::c_long, a1: usize, a2: usize, a3: usize, a4: usize) -> isize {
        let ret: isize;
        // SAFETY: as above; the kernel preserves every register but x0.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") n,
                inlateout("x0") a1 as isize => ret,
                in("x1") a2,
                in("x2") a3,
                in("x3") a4,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    compile_error!("baton starts children with raw syscalls written for x86_64 and aarch64");
}

fn empty_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        set.assume_init()
    }
}

/// The signals whose handlers the child resets (bit `n - 1` for signal `n`): every one that
/// had a handler of baton's when they were last asked for ([`refresh_handled_signals`], and
/// the first spawn), those baton may come to handle later (a signal stream opened meanwhile)
/// unless they were ignored, and SIGPIPE, which Rust programs ignore, and an ignored signal
/// stays ignored across exec (`yes | head` would never end).
///
/// Asked once (64 `sigaction` calls) instead of in every child, where glibc asks.
fn handled_signals() -> u64 {
    match HANDLED.load(Ordering::Relaxed) {
        UNKNOWN => refresh_handled_signals(),
        known => known,
    }
}

/// No signal set has every bit up: SIGKILL's never is.
const UNKNOWN: u64 = u64::MAX;
static HANDLED: AtomicU64 = AtomicU64::new(UNKNOWN);

/// Asks again which signals have a handler of baton's: to be called once the process has
/// installed its handlers (a run calls it as it starts), so that the children reset them.
pub fn refresh_handled_signals() -> u64 {
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
    // glibc keeps the signals between 32 and SIGRTMIN for itself.
    let reserved = 32..libc::SIGRTMIN();
    let mut handled = 0u64;
    for signal in 1..=libc::SIGRTMAX().min(64) {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP || reserved.contains(&signal) {
            continue;
        }
        // SAFETY: `sigaction` is a C struct of integers, a handler address and a signal set,
        // for all of which all zeros is a valid value (SIG_DFL, no flags, an empty mask).
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a query: with no new action nothing changes, and the current one is written
        // to `current`, a live local of the right type.
        if unsafe { libc::sigaction(signal, ptr::null(), &mut current) } != 0 {
            continue;
        }
        let ignored = current.sa_sigaction == libc::SIG_IGN;
        let caught = !ignored && current.sa_sigaction != libc::SIG_DFL;
        if signal == libc::SIGPIPE || caught || (!ignored && LATER.contains(&signal)) {
            handled |= 1 << (signal - 1);
        }
    }
    HANDLED.store(handled, Ordering::Relaxed);
    handled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigpipe_and_baton_handled_signals_are_reset() {
        let handled = handled_signals();
        let has = |signal: c_int| handled & (1 << (signal - 1)) != 0;
        assert!(has(libc::SIGPIPE));
        assert!(!has(libc::SIGKILL));
        assert!(!has(libc::SIGSTOP));
        // Rust's runtime handles SIGSEGV (stack overflows) in every program.
        assert!(has(libc::SIGSEGV));
    }

    #[test]
    fn a_raw_syscall_returns_minus_errno() {
        let missing = c"/no/such/directory/anywhere";
        let ret = raw::syscall4(libc::SYS_chdir, missing.as_ptr() as usize, 0, 0, 0);
        assert_eq!(ret, -(libc::ENOENT as isize));
    }
}
