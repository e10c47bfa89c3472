//! A best-of round as a value: the candidates of one of the scheduler's attempts gathering
//! as they end ([`Gathering`]), and what the round comes to once all have ([`decide`]): the
//! `picked` event's list, the winner and why, and the end that becomes the attempt's. Pure: the
//! dispatcher records and applies what it decides (`candidates.rs`).

use baton_attempt::launch::HeldOutput;
use baton_model::{Candidate, FailureClass, Outcome};

/// A best-of attempt whose candidates are running: what has come of those that ended.
pub(super) struct Gathering {
    /// The scheduler's attempt.
    launch: u32,
    /// How many candidates it waits for.
    expected: u32,
    ended: Vec<Ended>,
}

/// One candidate's end.
pub(super) struct Ended {
    pub(super) candidate: Candidate,
    pub(super) outcome: Outcome,
    pub(super) output: HeldOutput,
    pub(super) stderr_tail: String,
    pub(super) head: Option<String>,
    pub(super) changed: Option<Vec<String>>,
    pub(super) review_warnings: bool,
}

impl Gathering {
    /// The scheduler's attempt `launch`, waiting for `expected` candidates, of which `kept`
    /// had ended already (before a takeover).
    pub(super) fn new(launch: u32, expected: u32, kept: Vec<Ended>) -> Self {
        Self {
            launch,
            expected,
            ended: kept,
        }
    }

    /// A candidate ended. Whether every candidate of the round has.
    pub(super) fn add(&mut self, ended: Ended) -> bool {
        self.ended.push(ended);
        self.is_whole()
    }

    pub(super) fn is_whole(&self) -> bool {
        self.ended.len() as u32 >= self.expected
    }

    /// The scheduler's attempt, and the ends in candidate order.
    pub(super) fn into_ends(mut self) -> (u32, Vec<Ended>) {
        self.ended.sort_by_key(|e| e.candidate.candidate);
        (self.launch, self.ended)
    }
}

/// What a whole round comes to.
pub(super) struct Verdict {
    /// The `picked` event's list (candidate 1's branch is the task's own when it won).
    pub(super) candidates: Vec<Candidate>,
    pub(super) winner: Option<u32>,
    pub(super) why: String,
    /// The end that becomes the scheduler's attempt's: the winner's; with none, the first that
    /// failed for the machinery (another attempt may fare better), else the first.
    pub(super) chosen: Ended,
}

/// The pick among `ended` (in candidate order); `None` for a round with no end at all.
pub(super) fn decide(ended: Vec<Ended>) -> Option<Verdict> {
    let mut candidates: Vec<Candidate> = ended.iter().map(|e| e.candidate.clone()).collect();
    let (winner, why) = baton_model::pick(&candidates);
    if winner == Some(1) {
        // The first works on the task's own branch, which it keeps.
        for c in candidates.iter_mut().filter(|c| c.candidate == 1) {
            if let Some(own) = c.branch.as_deref().and_then(|b| b.strip_suffix("@1")) {
                c.branch = Some(own.to_owned());
            }
        }
    }
    let at = match winner {
        Some(w) => ended.iter().position(|e| e.candidate.candidate == w)?,
        None => ended
            .iter()
            .position(|e| e.outcome.failure_class() == Some(FailureClass::Infrastructure))
            .unwrap_or(0),
    };
    let chosen = ended.into_iter().nth(at)?;
    Some(Verdict {
        candidates,
        winner,
        why,
        chosen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(k: u32, outcome: Outcome, lines: u64) -> Ended {
        Ended {
            candidate: Candidate {
                candidate: k,
                attempt: k,
                engine: "small".to_owned(),
                model: None,
                passed: outcome.is_success(),
                warnings: false,
                lines,
                files: 1,
                branch: Some(format!("baton/r/t@{k}")),
                outcome: outcome.to_string(),
            },
            outcome,
            output: HeldOutput::default(),
            stderr_tail: String::new(),
            head: Some(format!("head{k}")),
            changed: None,
            review_warnings: false,
        }
    }

    #[test]
    fn a_round_is_whole_once_every_candidate_ended_and_comes_out_in_order() {
        let mut round = Gathering::new(2, 3, vec![end(2, Outcome::Exited { code: 0 }, 1)]);
        assert!(!round.add(end(3, Outcome::Exited { code: 1 }, 1)));
        assert!(round.add(end(1, Outcome::Exited { code: 0 }, 5)));
        let (launch, ends) = round.into_ends();
        assert_eq!(launch, 2);
        let order: Vec<u32> = ends.iter().map(|e| e.candidate.candidate).collect();
        assert_eq!(order, [1, 2, 3]);
    }

    #[test]
    fn the_smallest_passing_change_wins_and_its_end_is_the_attempt_s() {
        let ends = vec![
            end(1, Outcome::Exited { code: 0 }, 5),
            end(2, Outcome::Exited { code: 0 }, 1),
            end(3, Outcome::Exited { code: 1 }, 1),
        ];
        let verdict = decide(ends).unwrap();
        assert_eq!(verdict.winner, Some(2));
        assert_eq!(verdict.chosen.candidate.candidate, 2);
        assert_eq!(verdict.chosen.head.as_deref(), Some("head2"));
        // Candidate 1 lost: its branch stays its own.
        assert_eq!(verdict.candidates[0].branch.as_deref(), Some("baton/r/t@1"));
    }

    #[test]
    fn the_first_candidate_winning_keeps_the_task_s_own_branch() {
        let verdict = decide(vec![
            end(1, Outcome::Exited { code: 0 }, 1),
            end(2, Outcome::Exited { code: 1 }, 1),
        ])
        .unwrap();
        assert_eq!(verdict.winner, Some(1));
        assert_eq!(verdict.candidates[0].branch.as_deref(), Some("baton/r/t"));
    }

    #[test]
    fn with_no_winner_the_machinery_s_failure_is_the_attempt_s_end() {
        let verdict = decide(vec![
            end(1, Outcome::Exited { code: 1 }, 1),
            end(2, Outcome::Interrupted, 0),
        ])
        .unwrap();
        assert_eq!(verdict.winner, None);
        assert_eq!(verdict.chosen.candidate.candidate, 2);
        // Nothing failed for the machinery: the first candidate's end.
        let verdict = decide(vec![
            end(1, Outcome::Exited { code: 1 }, 1),
            end(2, Outcome::Exited { code: 2 }, 1),
        ])
        .unwrap();
        assert_eq!(verdict.chosen.candidate.candidate, 1);
        assert!(decide(Vec::new()).is_none());
    }
}
