//! The processes of this host, as its kernel tells them: every pid, a process's parent, group,
//! start time and whether it is a zombie, and its environment (where an attempt's marks are,
//! `BATON_RUN_ID` and the rest: how what a dead driver left is found).
//!
//! Linux reads `/proc` (whichever process layer is in use: it is the kernel's own answer).
//! macOS asks `proc_listallpids` and `proc_pidinfo(PROC_PIDTBSDINFO)` (libproc) and
//! `sysctl(KERN_PROCARGS2)`, whose buffer [`decode_procargs2`] reads. The macOS calls are
//! checked by type and review only (no Mac runs the suite); the decoding is tested here on
//! every platform against buffers laid out as the kernel lays them out, and walks them as
//! psutil's `proc_environ` for macOS does (skip the path and its padding, then `argc`
//! strings; the environment ends at an empty string), which psutil's own CI runs on Macs.

/// What the kernel says of a live or zombie process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub parent: u32,
    pub group: u32,
    /// When it started, in the platform's units (clock ticks since boot on Linux, microseconds
    /// since the epoch on macOS): only ever compared with another reading of the same process.
    pub start_time: u64,
    /// Dead and not yet reaped by its parent: nothing to end.
    pub zombie: bool,
}

/// Every pid on this host (or none, where they cannot be listed).
pub fn all_pids() -> Vec<u32> {
    platform::all_pids()
}

/// Process `pid`, if there is one.
pub fn process(pid: u32) -> Option<Process> {
    platform::process(pid)
}

/// The environment of process `pid`, as `NAME=value` entries each ended by a NUL; `None` where
/// it cannot be read (gone, or another user's).
pub fn environment(pid: u32) -> Option<Vec<u8>> {
    platform::environment(pid)
}

/// The environment held in a `sysctl(KERN_PROCARGS2)` buffer, as [`environment`] gives it:
/// the buffer is `argc` (a native `i32`), the executable's path and the NULs that pad it, then
/// `argc` arguments and then the environment, each ended by a NUL; the environment ends at an
/// empty string or the buffer's end. `None` for a buffer too short to hold what its `argc`
/// says.
pub fn decode_procargs2(buffer: &[u8]) -> Option<Vec<u8>> {
    let argc = i32::from_ne_bytes(buffer.get(..4)?.try_into().ok()?);
    let argc = usize::try_from(argc).ok()?;
    let mut rest = &buffer[4..];
    // The executable's path, then the padding after it.
    let end = rest.iter().position(|&b| b == 0)?;
    rest = &rest[end..];
    let start = rest.iter().position(|&b| b != 0).unwrap_or(rest.len());
    rest = &rest[start..];
    for _ in 0..argc {
        let end = rest.iter().position(|&b| b == 0)?;
        rest = &rest[end + 1..];
    }
    let mut environment = Vec::new();
    for entry in rest.split(|&b| b == 0) {
        if entry.is_empty() {
            break;
        }
        environment.extend_from_slice(entry);
        environment.push(0);
    }
    Some(environment)
}

#[cfg(target_os = "linux")]
mod platform {
    use super::Process;

    pub(super) fn all_pids() -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .collect()
    }

    pub(super) fn process(pid: u32) -> Option<Process> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(&stat)
    }

    /// `/proc/PID/stat`: the command name (field 2) is in parentheses and may hold spaces, so
    /// the fields are counted from after its last `)`: state (3), parent (4), group (5), start
    /// time (22).
    pub(super) fn parse_stat(stat: &str) -> Option<Process> {
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        Some(Process {
            zombie: matches!(fields.first(), Some(&("Z" | "X"))),
            parent: fields.get(1)?.parse().ok()?,
            group: fields.get(2)?.parse().ok()?,
            start_time: fields.get(19)?.parse().ok()?,
        })
    }

    pub(super) fn environment(pid: u32) -> Option<Vec<u8>> {
        std::fs::read(format!("/proc/{pid}/environ")).ok()
    }
}

#[cfg(target_os = "macos")]
mod platform {
    use std::ffi::c_void;

    use super::Process;

    pub(super) fn all_pids() -> Vec<u32> {
        // SAFETY: with a null buffer proc_listallpids only says how many pids there are.
        let count = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
        let Ok(count) = usize::try_from(count) else {
            return Vec::new();
        };
        // Room for processes started since the count.
        let mut pids: Vec<libc::pid_t> = vec![0; count + 64];
        let bytes = i32::try_from(pids.len() * size_of::<libc::pid_t>()).unwrap_or(i32::MAX);
        // SAFETY: the buffer holds `bytes` bytes of pids, and the call writes at most that.
        let found = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast::<c_void>(), bytes) };
        let found = usize::try_from(found).unwrap_or(0).min(pids.len());
        pids.truncate(found);
        pids.into_iter()
            .filter_map(|pid| u32::try_from(pid).ok())
            .filter(|&pid| pid > 0)
            .collect()
    }

    pub(super) fn process(pid: u32) -> Option<Process> {
        let pid = libc::c_int::try_from(pid).ok()?;
        // SAFETY: proc_bsdinfo is a C struct of integers and byte arrays: all zeros is valid.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = libc::c_int::try_from(size_of::<libc::proc_bsdinfo>()).ok()?;
        // SAFETY: the buffer is one proc_bsdinfo of `size` bytes, which the call fills.
        let written = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                (&raw mut info).cast::<c_void>(),
                size,
            )
        };
        if written != size {
            return None;
        }
        Some(Process {
            parent: info.pbi_ppid,
            group: info.pbi_pgid,
            start_time: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
            zombie: info.pbi_status == libc::SZOMB,
        })
    }

    pub(super) fn environment(pid: u32) -> Option<Vec<u8>> {
        let pid = libc::c_int::try_from(pid).ok()?;
        let mut name = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
        let mut max: libc::c_int = 0;
        let mut size = size_of::<libc::c_int>();
        let mut argmax = [libc::CTL_KERN, libc::KERN_ARGMAX];
        // SAFETY: KERN_ARGMAX is one c_int, written into `max`, whose size `size` says.
        let ok = unsafe {
            libc::sysctl(
                argmax.as_mut_ptr(),
                2,
                (&raw mut max).cast::<c_void>(),
                &mut size,
                std::ptr::null_mut(),
                0,
            )
        };
        if ok != 0 {
            return None;
        }
        let mut buffer = vec![0u8; usize::try_from(max).ok()?];
        let mut size = buffer.len();
        // SAFETY: the buffer holds `size` bytes; the kernel writes at most that and says how
        // many it wrote.
        let ok = unsafe {
            libc::sysctl(
                name.as_mut_ptr(),
                3,
                buffer.as_mut_ptr().cast::<c_void>(),
                &mut size,
                std::ptr::null_mut(),
                0,
            )
        };
        if ok != 0 {
            return None;
        }
        buffer.truncate(size);
        super::decode_procargs2(&buffer)
    }
}

/// Elsewhere (no target but Linux and macOS is built): nothing can be listed.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod platform {
    use super::Process;

    pub(super) fn all_pids() -> Vec<u32> {
        Vec::new()
    }

    pub(super) fn process(_pid: u32) -> Option<Process> {
        None
    }

    pub(super) fn environment(_pid: u32) -> Option<Vec<u8>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `KERN_PROCARGS2` buffer as macOS lays it out: `argc`, the executable's path padded
    /// with NULs to a word, the arguments, the environment, then what follows it (the
    /// `apple[]` strings after an empty one).
    fn procargs(argc: i32, path: &str, args: &[&str], env: &[&str]) -> Vec<u8> {
        let mut buffer = argc.to_ne_bytes().to_vec();
        buffer.extend_from_slice(path.as_bytes());
        buffer.push(0);
        while !buffer.len().is_multiple_of(8) {
            buffer.push(0);
        }
        for s in args.iter().chain(env) {
            buffer.extend_from_slice(s.as_bytes());
            buffer.push(0);
        }
        buffer.push(0);
        buffer.extend_from_slice(b"executable_path=/bin/sleep\0ptr_munge=\0");
        buffer
    }

    #[test]
    fn the_environment_of_a_procargs2_buffer_is_what_follows_its_arguments() {
        let buffer = procargs(
            2,
            "/bin/sleep",
            &["sleep", "30"],
            &["BATON_RUN_ID=r1", "BATON_TASK_ID=a", "PATH=/usr/bin:/bin"],
        );
        assert_eq!(
            decode_procargs2(&buffer).unwrap(),
            b"BATON_RUN_ID=r1\0BATON_TASK_ID=a\0PATH=/usr/bin:/bin\0"
        );
    }

    #[test]
    fn an_empty_environment_and_a_short_buffer() {
        let buffer = procargs(1, "/bin/sh", &["sh"], &[]);
        assert_eq!(decode_procargs2(&buffer).unwrap(), b"");
        // argc says three arguments; the buffer ends inside the second.
        let mut short = 3i32.to_ne_bytes().to_vec();
        short.extend_from_slice(b"/bin/sh\0\0sh\0-c");
        assert_eq!(decode_procargs2(&short), None);
        assert_eq!(decode_procargs2(b"\x01\x00"), None);
    }

    #[test]
    fn this_process_is_listed_with_its_group_and_environment() {
        let me = std::process::id();
        assert!(all_pids().contains(&me));
        let process = process(me).unwrap();
        assert!(!process.zombie);
        // SAFETY: getpgrp takes nothing and cannot fail.
        let group = unsafe { libc::getpgrp() };
        assert_eq!(i64::from(process.group), i64::from(group));
        let path = std::env::var("PATH").unwrap();
        let environment = environment(me).unwrap();
        assert!(
            environment
                .split(|&b| b == 0)
                .any(|entry| entry == format!("PATH={path}").as_bytes()),
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_stat_line_whose_command_holds_spaces_and_parentheses() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 \
                    987654 0 0";
        let process = platform::parse_stat(stat).unwrap();
        assert_eq!(
            process,
            Process {
                parent: 1,
                group: 4242,
                start_time: 987654,
                zombie: false
            }
        );
    }
}
