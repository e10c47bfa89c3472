//! Commands an attempt runs beside its task's own process: a new worktree's `setup`, and the
//! task's `verify` checks after an attempt that succeeded.

use std::path::PathBuf;

use baton_exec::{Attempt, AttemptSpec, Program, StopLevel};
use baton_model::CheckResult;
use tokio::sync::watch;

/// What is kept of a check's output: enough to see why it failed.
const CHECK_OUTPUT: usize = 4096;

/// Runs `commands` one after another as `spec` (same environment, place, timeout, redaction:
/// each a supervised process like an attempt), with each command's log at `log(n)` (from 1),
/// stopping at the first that fails.
pub async fn run_checks(
    commands: &[String],
    spec: &AttemptSpec,
    log: impl Fn(usize) -> PathBuf,
    stop: &watch::Receiver<StopLevel>,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        let mut check = spec.clone();
        check.program = Program::Shell(command.clone());
        check.stdin = None;
        check.idle_timeout = None;
        check.log_path = log(i + 1);
        let report = Attempt::spawn(check).wait(stop.clone()).await;
        let mut output = report.stdout.text.clone();
        if !report.stderr.text.is_empty() {
            output.push_str(&report.stderr.text);
        }
        let passed = report.outcome.is_success();
        // The command is the graph file's, and may hold a secret's value: what is recorded of
        // it is redacted, as what it printed is.
        let recorded = match &spec.redactor {
            Some(redactor) => redactor.redact_str(command).into_owned(),
            None => command.clone(),
        };
        results.push(CheckResult {
            command: recorded,
            outcome: report.outcome,
            duration_ms: report.duration.as_millis() as u64,
            output: tail(&output, CHECK_OUTPUT),
        });
        if !passed {
            break;
        }
    }
    results
}

/// What a task is told in a fix round: the check that failed and what it printed.
pub(super) fn fix_message(check: &CheckResult, round: u32, of: u32) -> String {
    format!(
        "baton ran the task's checks on your work (fix round {round} of {of}) and this one \
         failed:\n\n$ {}\n{}\n\n{}\n\nFix the problem so that the check passes. Do not \
         change the check.",
        check.command, check.outcome, check.output
    )
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn a_tail_is_cut_at_a_character_boundary() {
        assert_eq!(tail("short", 10), "short");
        assert_eq!(tail("aébc", 3), "…bc");
        assert_eq!(tail("abcdef", 3), "…def");
    }
}
