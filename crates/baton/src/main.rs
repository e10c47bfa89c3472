//! The `baton` command line: parse flags, resolve them, run a command, map the result to an
//! exit code. Everything substantial lives in the library crates.

// Every byte printed goes through `out`: terminal-safe, and a write that fails is an error, not
// a panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod commands;
mod complete;
mod diagnostics;
mod exit;
mod mcp;
mod notify;
mod out;
mod project;
mod serve;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Failure;

fn main() -> ExitCode {
    keep_large_blocks_mapped();
    // A shell asking what to complete (`COMPLETE=bash baton -- …`): answered, and exits.
    clap_complete::CompleteEnv::with_factory(<cli::Cli as clap::CommandFactory>::command)
        .complete();
    let result = match cli::Cli::try_parse() {
        Ok(args) => commands::dispatch(args),
        // `--help`, `--version` and usage errors, printed the same way out.
        Err(err) => out::clap(&err),
    };
    let code = match result {
        Ok(code) => code,
        Err(Failure::Reported(code)) => code,
        Err(Failure::Closed) => exit::SUCCESS,
        Err(Failure::BadInput(message)) => {
            out::err(&format!("error: {message}"));
            exit::BAD_INPUT
        }
        Err(Failure::Internal(err)) => {
            out::err(&format!("error: {err:#}"));
            exit::INTERNAL
        }
    };
    ExitCode::from(code as u8)
}

/// glibc raises its mmap threshold to the size of the largest mapped block freed (up to
/// 32 MiB); from then on, large short-lived blocks — a graph file's text, tables as they grow,
/// the parse of a plan — come from the heap and leave holes in it that are never given back. A
/// 100,000-task run peaked at 144 MB with 99 MB in use; with the threshold fixed at glibc's
/// default, such blocks keep mappings of their own, returned when freed: 128 MB
/// (docs/PERFORMANCE.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_large_blocks_mapped() {
    // SAFETY: `mallopt` only changes the allocator's tuning, and is called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_large_blocks_mapped() {}
