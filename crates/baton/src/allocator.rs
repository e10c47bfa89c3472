//! The program's allocator, mimalloc, and how it is tuned.
//!
//! Loading a large graph file is mostly allocation (three trees of it, made and freed), as is
//! reading a run back; glibc's malloc spent a third of the load in `malloc`, `free` and the page
//! faults of memory it had given back. A 100,000-task run: 1.56 -> 1.36 s, its load 0.28 ->
//! 0.20 s, `baton plan` 0.31 -> 0.19 s (docs/PERFORMANCE.md).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's options, numbered as in its `mimalloc.h` (`mi_option_e`, the same in its
/// versions 2 and 3; the bindings name only some of them).
mod options {
    use libmimalloc_sys::mi_option_t;

    /// Whether an arena's memory is committed when it is reserved (2: where the OS overcommits).
    pub(super) const ARENA_EAGER_COMMIT: mi_option_t = 4;
    /// How long freed memory is kept before it is given back to the OS, in ms (1000 in
    /// version 3).
    pub(super) const PURGE_DELAY: mi_option_t = 15;
}

/// What [`tune`] sets: freed memory is given back after 10 ms rather than a second, and arenas
/// are committed as they are used rather than whole. With mimalloc's defaults a 100,000-task
/// run peaked at 203 MB (memory freed by the load still held while the run filled its own);
/// with these at 122 MB, as fast. 0 ms: 108 MB, 10% slower; 50 ms: 146 MB.
const TUNED: [(
    libmimalloc_sys::mi_option_t,
    &std::ffi::CStr,
    std::ffi::c_long,
); 2] = [
    (
        options::ARENA_EAGER_COMMIT,
        c"MIMALLOC_ARENA_EAGER_COMMIT",
        0,
    ),
    (options::PURGE_DELAY, c"MIMALLOC_PURGE_DELAY", 10),
];

/// Sets [`TUNED`], but where a `MIMALLOC_*` variable sets the option: that still wins.
///
/// mimalloc reads its options as the process loads and reserves its first arena at the first
/// allocation, which the Rust runtime makes before `main`: so on Linux this runs as the
/// program is loaded, after mimalloc's own initialiser (priority 101) and before the runtime.
/// (Set in `main` instead, the first arena stays committed whole: 138 MB.)
pub(crate) extern "C" fn tune() {
    for (option, name, value) in TUNED {
        // `getenv`, which allocates nothing: an allocation here would reserve the arena.
        // SAFETY: a NUL-terminated name; nothing sets variables while the program loads.
        if unsafe { libc::getenv(name.as_ptr()) }.is_null() {
            // SAFETY: `mi_option_set` only stores a number in mimalloc's table of options.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

/// [`tune`] among the initialisers the loader runs, in order of priority.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array.00200")]
static TUNE_AT_LOAD: extern "C" fn() = tune;

#[cfg(test)]
mod tests {
    use super::*;

    /// This test's own program has the allocator and its initialiser: by the time a test runs,
    /// the options are set (unless the environment sets them).
    #[test]
    fn the_allocator_is_tuned_as_the_program_loads() {
        for (option, name, value) in TUNED {
            if std::env::var_os(name.to_str().unwrap()).is_some() {
                continue;
            }
            // SAFETY: reads a number from mimalloc's table of options.
            let set = unsafe { libmimalloc_sys::mi_option_get(option) };
            assert_eq!(set, value, "{name:?}");
        }
    }
}
