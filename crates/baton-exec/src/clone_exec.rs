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
    /// A cgroup v2 directory, open: the child is born in it (`CLONE_INTO_CGROUP`), so
    /// nothing it starts is ever outside, and no process is moved (a move takes a lock every
    /// fork on the machine waits for: what made cgroups cost 4× on small tasks).
    pub(crate) cgroup: Option<RawFd>,
    /// A Landlock ruleset the child restricts itself to before its exec.
    pub(crate) ruleset: Option<RawFd>,
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

/// Set once `clone3` was refused (Linux older than 5.3, or a seccomp policy written before
/// it, as Docker's once was): children are cloned with `clone`, and none is born in a cgroup.
static NO_CLONE3: AtomicBool = AtomicBool::new(false);

/// Set once `CLONE_INTO_CGROUP` was refused (Linux 5.3 to 5.6).
static NO_CLONE_INTO_CGROUP: AtomicBool = AtomicBool::new(false);

/// Whether a child can be born in a cgroup here, as far as this process knows: Linux 5.7 or
/// later, and no clone of this process was refused it.
pub(crate) fn clones_into_cgroups() -> bool {
    static KERNEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !NO_CLONE3.load(Ordering::Relaxed)
        && !NO_CLONE_INTO_CGROUP.load(Ordering::Relaxed)
        && *KERNEL.get_or_init(|| kernel_at_least(5, 7))
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(release) = nix::sys::utsname::uname() else {
        return false;
    };
    let release = release.release().to_string_lossy().into_owned();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// What [`start`] returns when the command asked for a cgroup and this kernel cannot start a
/// child in one: the caller moves the child instead, or does without.
pub(crate) fn cannot_clone_into_cgroup() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "this kernel cannot start a child in a cgroup (clone3 with CLONE_INTO_CGROUP)",
    )
}

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
    let into_cgroup = inner.command.cgroup.is_some();
    if into_cgroup && !clones_into_cgroups() {
        return Err(cannot_clone_into_cgroup());
    }
    loop {
        if !NO_CLONE3.load(Ordering::Relaxed) {
            match clone3(&mut inner) {
                Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                    NO_CLONE3.store(true, Ordering::Relaxed);
                    if into_cgroup {
                        return Err(cannot_clone_into_cgroup());
                    }
                }
                // An unknown flag, or a `clone_args` longer than the kernel knows: 5.3 to 5.6.
                Err(error)
                    if into_cgroup
                        && matches!(error.raw_os_error(), Some(libc::EINVAL | libc::E2BIG)) =>
                {
                    NO_CLONE_INTO_CGROUP.store(true, Ordering::Relaxed);
                    return Err(cannot_clone_into_cgroup());
                }
                Err(error) => return Err(error),
                Ok(started) => return Ok((started, Launch(Some(inner)))),
            }
            continue;
        }
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

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP`, which the libc crate does not name on every target.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// [`clone`] with `clone3`: the same child, born in the command's cgroup if it names one.
fn clone3(inner: &mut Inner) -> io::Result<Started> {
    let mut pidfd: c_int = -1;
    let stack = inner.stack.as_mut_ptr_range();
    let mut args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_CHILD_CLEARTID | libc::CLONE_PIDFD) as u64,
        pidfd: ptr::from_mut(&mut pidfd) as u64,
        child_tid: inner.running.as_ptr() as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack.start as u64,
        stack_size: (stack.end as usize - stack.start as usize) as u64,
        ..CloneArgs::default()
    };
    if let Some(cgroup) = inner.command.cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = u64::try_from(cgroup).expect("an open descriptor is not negative");
    }
    let arg = ptr::from_mut(inner).cast::<c_void>();
    let old = block_all_signals();
    // SAFETY: as for `clone` below: the child runs `child` on `inner.stack` and reads `inner`,
    // which stay alive and unchanged until it has exec'd or exited; `args` and `pidfd` are
    // live locals the kernel reads and writes during the call.
    let ret = unsafe { raw::clone3(&mut args, child, arg) };
    restore_signals(&old);
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(
            i32::try_from(-ret).unwrap_or(libc::EINVAL),
        ));
    }
    let pid = i32::try_from(ret).expect("a pid fits in an i32");
    // SAFETY: see `clone`.
    unsafe { libc::setpgid(pid, pid) };
    // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    Ok(Started {
        pid: u32::try_from(pid).expect("a cloned child's pid is positive"),
        pidfd,
    })
}

/// Every signal blocked in this thread while it clones, and so in the child (which inherits
/// the mask) until it has reset the handlers: a handler of baton's must never run in the
/// child, whose memory is baton's. Returns the mask to restore.
fn block_all_signals() -> libc::sigset_t {
    let mut all = empty_set();
    let mut old = empty_set();
    // SAFETY: sigfillset and pthread_sigmask write only to the sets given, live locals of the
    // right type (`all` is filled before pthread_sigmask reads it).
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    old
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: reads only `old`, a mask pthread_sigmask saved, and writes nothing.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, ptr::null_mut()) };
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
    let old = block_all_signals();
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
    restore_signals(&old);
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
    // Every pointer given to a syscall below points into `inner` or to this function's own
    // stack: alive until the child execs or exits, which is after each call returns.
    // The kernel's `struct sigaction` for SIG_DFL, no flags, no mask: all zeros.
    let default = [0u64; 4];
    let empty_mask = 0u64;
    let mask_size = size_of::<u64>();
    let mut reset = inner.reset;
    while reset != 0 {
        let signal = reset.trailing_zeros() as usize + 1;
        reset &= reset - 1;
        // SAFETY: `default` (read) is alive for the call; no old action is asked for.
        unsafe {
            raw::syscall4(
                libc::SYS_rt_sigaction,
                signal,
                default.as_ptr() as usize,
                0,
                mask_size,
            )
        };
    }
    // A group of its own, so that one signal reaches every descendant.
    // SAFETY: no pointer.
    check(inner, unsafe {
        raw::syscall4(libc::SYS_setpgid, 0, 0, 0, 0)
    });
    for (target, &fd) in (0..).zip(&inner.command.fds) {
        let done = if fd == target {
            // Duplicating onto itself would leave close-on-exec set.
            // SAFETY: no pointer.
            unsafe { raw::syscall4(libc::SYS_fcntl, fd as usize, libc::F_SETFD as usize, 0, 0) }
        } else {
            // SAFETY: no pointer.
            unsafe { raw::syscall4(libc::SYS_dup3, fd as usize, target as usize, 0, 0) }
        };
        check(inner, done);
    }
    let cwd = inner.command.cwd.as_ptr() as usize;
    // SAFETY: `cwd` is a C string in `inner`, alive for the call; chdir only reads it.
    check(inner, unsafe {
        raw::syscall4(libc::SYS_chdir, cwd, 0, 0, 0)
    });
    if let Some(ruleset) = inner.command.ruleset {
        // What `sandbox::restrict_self` does, raw: `no_new_privs` (Landlock's condition for
        // an unprivileged process, and no setuid program sheds the restriction), then the
        // ruleset. The fifth argument of prctl must be 0 too.
        let no_new_privs = libc::PR_SET_NO_NEW_PRIVS as usize;
        // SAFETY: no pointer.
        check(inner, unsafe {
            raw::syscall5(libc::SYS_prctl, no_new_privs, 1, 0, 0, 0)
        });
        let restrict = libc::SYS_landlock_restrict_self;
        // SAFETY: no pointer (a descriptor the parent made).
        check(inner, unsafe {
            raw::syscall4(restrict, ruleset as usize, 0, 0, 0)
        });
    }
    let empty = ptr::from_ref(&empty_mask) as usize;
    let set = libc::SIG_SETMASK as usize;
    // SAFETY: `empty_mask` (read) is on this stack, alive for the call.
    unsafe { raw::syscall4(libc::SYS_rt_sigprocmask, set, empty, 0, mask_size) };
    let (path, argv, envp) = (
        inner.path as usize,
        inner.argv.as_ptr() as usize,
        inner.envp.as_ptr() as usize,
    );
    // SAFETY: the path, and the null-terminated arrays of C strings, are in `inner`, alive
    // until the exec has copied them (or failed).
    let failed = unsafe { raw::syscall4(libc::SYS_execve, path, argv, envp, 0) };
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
        // SAFETY: no pointer.
        unsafe { raw::syscall4(libc::SYS_exit_group, 127, 0, 0, 0) };
    }
}

/// Syscalls that return `-errno` instead of setting `errno`.
mod raw {
    use std::ffi::{c_int, c_void};

    use super::CloneArgs;

    /// The function a `clone3` child runs on its new stack; it never returns (it execs or
    /// exits), but if it did, the child would exit with its value.
    pub(super) type ChildMain = extern "C" fn(*mut c_void) -> c_int;

    /// Syscall `n` with four arguments (the fifth 0): its result, `-errno` on failure.
    ///
    /// # Safety
    /// As [`syscall5`].
    pub(super) unsafe fn syscall4(
        n: libc::c_long,
        a1: usize,
        a2: usize,
        a3: usize,
        a4: usize,
    ) -> isize {
        // SAFETY: the caller's promise.
        unsafe { syscall5(n, a1, a2, a3, a4, 0) }
    }

    #[cfg(target_arch = "x86_64")]
    /// Syscall `n` with five arguments: its result, `-errno` on failure.
    ///
    /// # Safety
    /// Every argument `n` reads as a pointer points to memory valid for what the kernel reads
    /// or writes there, for the whole call; and the syscall does nothing this process's Rust
    /// code does not expect (the child's, before it execs, may do anything to itself).
    pub(super) unsafe fn syscall5(
        n: libc::c_long,
        a1: usize,
        a2: usize,
        a3: usize,
        a4: usize,
        a5: usize,
    ) -> isize {
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
                in("r8") a5,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    /// `clone3(args)`; in the child, on the stack `args` gives it, `main(arg)` and then
    /// `exit` with what it returned. glibc has no `clone3` wrapper to call: the child must not
    /// return into a function whose stack frame is the parent's, so the call is made here.
    ///
    /// # Safety
    /// `args` describes a child sharing this memory (`CLONE_VM`) with a stack of its own that
    /// stays alive, with what `main` reads through `arg`, until the child has exec'd or exited.
    #[cfg(target_arch = "x86_64")]
    pub(super) unsafe fn clone3(args: &mut CloneArgs, main: ChildMain, arg: *mut c_void) -> isize {
        let ret: isize;
        // SAFETY: the caller's promise. The parent comes out of the syscall with every
        // register but rax, rcx and r11 as it went in; the child starts on its own (16-byte
        // aligned) stack with the same registers and rax = 0, and never leaves the block.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "mov rdi, r13",
                "call r12",
                "mov edi, eax",
                "mov eax, {exit}",
                "syscall",
                "ud2",
                "2:",
                exit = const libc::SYS_exit,
                inlateout("rax") libc::SYS_clone3 as isize => ret,
                in("rdi") std::ptr::from_mut(args),
                in("rsi") size_of::<CloneArgs>(),
                in("r12") main,
                in("r13") arg,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    /// Syscall `n` with five arguments: its result, `-errno` on failure.
    ///
    /// # Safety
    /// Every argument `n` reads as a pointer points to memory valid for what the kernel reads
    /// or writes there, for the whole call; and the syscall does nothing this process's Rust
    /// code does not expect (the child's, before it execs, may do anything to itself).
    pub(super) unsafe fn syscall5(
        n: libc::c_long,
        a1: usize,
        a2: usize,
        a3: usize,
        a4: usize,
        a5: usize,
    ) -> isize {
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
                in("x4") a5,
                options(nostack),
            );
        }
        ret
    }

    /// As on x86_64 (x19 is LLVM's, so `main` and `arg` travel in x20 and x21).
    ///
    /// # Safety
    /// As on x86_64.
    #[cfg(target_arch = "aarch64")]
    pub(super) unsafe fn clone3(args: &mut CloneArgs, main: ChildMain, arg: *mut c_void) -> isize {
        let ret: isize;
        // SAFETY: as on x86_64; the kernel preserves every register but x0, and the child's
        // clobbering of x8 and x30 happens only on its own path, which never leaves the block.
        unsafe {
            std::arch::asm!(
                "svc 0",
                "cbnz x0, 2f",
                "mov x0, x21",
                "blr x20",
                "mov x8, #{exit}",
                "svc 0",
                "brk #1",
                "2:",
                exit = const libc::SYS_exit,
                in("x8") libc::SYS_clone3,
                inlateout("x0") std::ptr::from_mut(args) as isize => ret,
                in("x1") size_of::<CloneArgs>(),
                in("x20") main,
                in("x21") arg,
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
        // SAFETY: `missing` is a C string alive for the call; chdir only reads it.
        let ret = unsafe { raw::syscall4(libc::SYS_chdir, missing.as_ptr() as usize, 0, 0, 0) };
        assert_eq!(ret, -(libc::ENOENT as isize));
    }
}
