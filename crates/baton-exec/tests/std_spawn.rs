//! The process tests again, every attempt started with std's `Command` (`BATON_SPAWN=std`,
//! [`baton_exec::SPAWN_ENV`]), the way out where baton's own clone misbehaves: both ways must
//! give a task the same process. `attempt.rs` and `containment.rs` run the same cases through
//! the default spawn.
#![expect(
    clippy::duplicate_mod,
    reason = "each of the two files has the `common` helpers, as in its own test target"
)]

#[path = "attempt.rs"]
mod attempt;
#[path = "containment.rs"]
mod containment;

/// Sets `BATON_SPAWN=std` before `main`, so before any thread exists and before baton-exec
/// reads it (once, at the first spawn).
extern "C" fn spawn_with_std() {
    // SAFETY: this runs from the ELF initialisers, before `main`, while the process has only
    // one thread: nothing reads the environment meanwhile.
    unsafe { std::env::set_var(baton_exec::SPAWN_ENV, "std") };
}

#[used]
// SAFETY: a function pointer in `.init_array` is how the dynamic loader runs initialisers;
// `spawn_with_std` takes no arguments and returns nothing, as they must.
#[unsafe(link_section = ".init_array")]
static SPAWN_WITH_STD: extern "C" fn() = spawn_with_std;

#[test]
fn attempts_here_are_started_with_std() {
    assert!(baton_exec::spawns_with_std());
}
