//! The `baton` command line: parse flags, resolve them, run a command, map the result to an
//! exit code. Everything substantial lives in the library crates.

mod cli;
mod commands;
mod diagnostics;
mod exit;
mod project;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Failure;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let code = match commands::dispatch(args) {
        Ok(code) => code,
        Err(Failure::Reported(code)) => code,
        Err(Failure::BadInput(message)) => {
            eprintln!("error: {message}");
            exit::BAD_INPUT
        }
        Err(Failure::Internal(err)) => {
            eprintln!("error: {err:#}");
            exit::INTERNAL
        }
    };
    ExitCode::from(code as u8)
}
