//! The `baton` command line: parse flags, resolve them, run a command, map the result to an
//! exit code. Everything substantial lives in the library crates.

// Every byte printed goes through `out`: terminal-safe, and a write that fails is an error, not
// a panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod allocator;
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
    #[cfg(not(target_os = "linux"))]
    allocator::tune();
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
