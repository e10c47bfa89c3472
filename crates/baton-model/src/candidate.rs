//! A best-of task's candidates (`best_of`, `candidates`): what each one came to, and the rule
//! that picks the winner.

use serde::{Deserialize, Serialize};

/// One candidate of a best-of attempt, as judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// 1 for the first.
    pub candidate: u32,
    /// The attempt it was recorded as.
    pub attempt: u32,
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// It succeeded: its checks passed (and its reviewer, where there is one, accepted it).
    pub passed: bool,
    /// Its reviewer had reservations (`verified_with_warnings`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warnings: bool,
    /// What its branch changed since the task started: lines added and removed, files.
    pub lines: u64,
    pub files: u32,
    /// Where its work is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// How it ended, in words (`succeeded`, `verify-failed: …`).
    pub outcome: String,
}

/// The winner among `candidates` and why: the candidates that passed, then the one its
/// reviewer accepted without reservations, then the smallest change (lines, then files),
/// then the first. `None` when none passed.
pub fn pick(candidates: &[Candidate]) -> (Option<u32>, String) {
    let passed: Vec<&Candidate> = candidates.iter().filter(|c| c.passed).collect();
    let failed: Vec<String> = candidates
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.candidate.to_string())
        .collect();
    let failed_note = match failed.len() {
        0 => String::new(),
        1 => format!("; candidate {} failed", failed[0]),
        _ => format!("; candidates {} failed", failed.join(", ")),
    };
    let Some(best) = passed
        .iter()
        .min_by_key(|c| (c.warnings, c.lines, c.files, c.candidate))
    else {
        return (None, format!("no candidate passed{failed_note}"));
    };
    let why = match passed.len() {
        1 => "the only one that passed".to_owned(),
        _ if passed.iter().any(|c| c.warnings) && !best.warnings => {
            "the one its reviewer accepted without reservations".to_owned()
        }
        _ => {
            let others: Vec<String> = passed
                .iter()
                .filter(|c| c.candidate != best.candidate)
                .map(|c| format!("{} of candidate {}", lines(c.lines), c.candidate))
                .collect();
            format!(
                "the smallest change of those that passed ({}, against {})",
                lines(best.lines),
                others.join(", ")
            )
        }
    };
    // A later round's candidate is named with its attempt too: the task's output is that
    // attempt's (after a crash, a round's candidates can come from two rounds).
    let named = if best.attempt == best.candidate {
        format!("candidate {}", best.candidate)
    } else {
        format!("candidate {} (attempt {})", best.candidate, best.attempt)
    };
    (
        Some(best.candidate),
        format!("{named} won: {why}{failed_note}"),
    )
}

fn lines(n: u64) -> String {
    format!("{n} line{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(k: u32, passed: bool, lines: u64) -> Candidate {
        Candidate {
            candidate: k,
            attempt: k,
            engine: "claude".into(),
            model: None,
            passed,
            warnings: false,
            lines,
            files: 1,
            branch: None,
            outcome: String::new(),
        }
    }

    #[test]
    fn the_smallest_change_that_passed_wins() {
        let all = [
            candidate(1, false, 1),
            candidate(2, true, 9),
            candidate(3, true, 4),
        ];
        assert_eq!(
            pick(&all),
            (
                Some(3),
                "candidate 3 won: the smallest change of those that passed (4 lines, against 9 lines of candidate 2); candidate 1 failed".to_owned()
            )
        );
        // A tie goes to the first.
        let tied = [candidate(1, true, 4), candidate(2, true, 4)];
        assert_eq!(pick(&tied).0, Some(1));
    }

    /// Finding 13: after a crash the summary said "candidate 1 won" while the output shown
    /// was attempt 4's. A candidate of a later round is named with its attempt.
    #[test]
    fn a_later_rounds_winner_is_named_with_its_attempt() {
        let mut again = candidate(2, true, 1);
        again.attempt = 4;
        let (winner, why) = pick(&[candidate(1, true, 5), again]);
        assert_eq!(winner, Some(2));
        assert!(why.starts_with("candidate 2 (attempt 4) won: "), "{why}");
    }

    #[test]
    fn a_reviewer_s_reservations_count_before_size_and_none_passing_is_no_winner() {
        let mut reserved = candidate(1, true, 1);
        reserved.warnings = true;
        let all = [reserved, candidate(2, true, 50)];
        let (winner, why) = pick(&all);
        assert_eq!(winner, Some(2));
        assert!(why.contains("without reservations"), "{why}");
        let none = [candidate(1, false, 0), candidate(2, false, 3)];
        assert_eq!(
            pick(&none),
            (
                None,
                "no candidate passed; candidates 1, 2 failed".to_owned()
            )
        );
        assert_eq!(
            pick(&[candidate(1, true, 3), candidate(2, false, 0)]).1,
            "candidate 1 won: the only one that passed; candidate 2 failed"
        );
    }
}
