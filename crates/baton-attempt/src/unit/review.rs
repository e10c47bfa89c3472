//! The acceptance review: after a round whose checks passed, a reviewer agent reads what the
//! task was asked, what it changed and how its checks went, and judges the work against the
//! task's `acceptance` criteria. Its verdict is recorded (`reviewed`) and decides the round:
//! accepted, sent back for a fix round with the reasons, failed, or left to a person.

use baton_exec::Attempt;
use baton_model::{CheckResult, EventKind, Outcome, Review, ReviewVerdict};

use super::{Phase, Progress, Round, Unit};

/// The JSON schema of a verdict, for engines that hold an answer to one.
pub const REVIEW_SCHEMA: &str = r#"{"type":"object","properties":{"verdict":{"type":"string","enum":["verified","verified_with_warnings","rejected","inconclusive","needs_human"]},"reasons":{"type":"array","items":{"type":"string"}}},"required":["verdict"]}"#;

/// [`REVIEW_SCHEMA`] as OpenAI's strict structured outputs take one (Codex's
/// `--output-schema`).
pub const REVIEW_SCHEMA_STRICT: &str = r#"{"type":"object","additionalProperties":false,"required":["verdict","reasons"],"properties":{"verdict":{"type":"string","enum":["verified","verified_with_warnings","rejected","inconclusive","needs_human"]},"reasons":{"type":"array","items":{"type":"string"}}}}"#;

/// Most bytes of the task's diff a reviewer is shown; the rest is cut, saying so.
const DIFF_SHOWN: usize = 24 * 1024;

/// What a unit needs to have its work reviewed.
pub struct Acceptance {
    pub criteria: Vec<String>,
    /// What the task was asked: its prompt, or its command.
    pub asked: String,
}

impl Unit {
    /// Reviews a round whose checks passed; `checks` are those checks.
    pub(super) async fn review(
        &mut self,
        mut round: Round,
        checks: Option<Vec<CheckResult>>,
        progress: &mut Progress,
    ) -> Phase {
        let Some(acceptance) = &self.acceptance else {
            return Phase::Done(self.done(round, checks, progress));
        };
        let prompt = prompt(acceptance, checks.as_deref(), &self.diff(&round));
        let log = self.shared.dirs.log(
            &self.id,
            self.attempt,
            baton_layout::AttemptLog::Review(progress.rounds + 1),
        );
        let started = self
            .recipe
            .as_ref()
            .and_then(|recipe| recipe.review_round(&prompt, log));
        let review = match started {
            None => Review {
                verdict: ReviewVerdict::Inconclusive,
                reasons: vec!["the task has no agent to review its work with".to_owned()],
            },
            Some(Err(error)) => Review {
                verdict: ReviewVerdict::Inconclusive,
                reasons: vec![format!(
                    "the reviewer could not start: {}",
                    self.redact(&error.to_string())
                )],
            },
            Some(Ok((spec, watcher))) => {
                let child = Attempt::spawn_watched(spec, watcher);
                let (report, watcher) = child.wait_watched(self.shared.stop.clone()).await;
                progress.log_bytes += report.log_bytes;
                let judged = self.judged(&report, watcher);
                self.shared
                    .meter
                    .finish((self.task, self.attempt), &judged.usage);
                round.report.duration += report.duration;
                round.agent = match round.agent.take() {
                    Some(mut agent) => {
                        agent.add_earlier(&judged.usage);
                        Some(agent)
                    }
                    None => Some(Box::new(judged.usage.clone())),
                };
                if judged.outcome == Outcome::Cancelled {
                    round.report.outcome = Outcome::Cancelled;
                    return Phase::Done(self.done(round, checks, progress));
                }
                if judged.outcome.is_success() {
                    parse(&judged.output)
                } else {
                    Review {
                        verdict: ReviewVerdict::Inconclusive,
                        reasons: vec![format!("the reviewer failed: {}", judged.outcome)],
                    }
                }
            }
        };
        let _ = self
            .shared
            .progress
            .send(crate::stamp::event(EventKind::Reviewed {
                task: self.id.clone(),
                attempt: self.attempt,
                review: review.clone(),
            }));
        match review.verdict {
            ReviewVerdict::Verified => {}
            ReviewVerdict::VerifiedWithWarnings => progress.review_warnings = true,
            ReviewVerdict::Rejected if progress.rounds < self.fix_attempts && !self.stopping() => {
                let message = fix_message(&review, progress.rounds + 1, self.fix_attempts);
                return Phase::Fix { round, message };
            }
            verdict => round.report.outcome = Outcome::Reviewed { verdict },
        }
        Phase::Done(self.done(round, checks, progress))
    }

    /// What the task's branch changed since its worktree started, for the reviewer.
    fn diff(&self, round: &Round) -> String {
        let (Some(baton_model::WorkspaceCommit { start, .. }), Some(head)) =
            (&round.committed, &round.head)
        else {
            return String::new();
        };
        let Some(start) = start else {
            return String::new();
        };
        let Some(dir) = self.recipe.as_ref().map(|r| r.check_spec().cwd.clone()) else {
            return String::new();
        };
        let out = std::process::Command::new("git")
            .args(["diff", "--no-color", "--no-ext-diff", start, head])
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout);
                let mut diff = self.redact(&baton_exec::handoff::truncate_utf8(&text, DIFF_SHOWN));
                if text.len() > DIFF_SHOWN {
                    diff.push_str(&format!(
                        "\n… ({} more bytes of diff cut)",
                        text.len() - DIFF_SHOWN
                    ));
                }
                diff
            }
            _ => String::new(),
        }
    }
}

/// What the reviewer is asked.
fn prompt(acceptance: &Acceptance, checks: Option<&[CheckResult]>, diff: &str) -> String {
    let mut text = String::from(
        "You are reviewing another agent's work in this repository for baton. Do not change any \
         files. Judge the work against the acceptance criteria below, reading the repository as \
         you need, and answer with one JSON object, alone or in one ```json block:\n\
         {\"verdict\": \"verified\" | \"verified_with_warnings\" | \"rejected\" | \"inconclusive\" | \"needs_human\", \
         \"reasons\": [\"…\"]}\n\
         verified: every criterion is met. verified_with_warnings: met, with reservations (give \
         them). rejected: a criterion is not met (say which and what to change: the reasons go \
         back to the agent). inconclusive: you cannot tell. needs_human: a person must decide.\n\n\
         ACCEPTANCE CRITERIA:\n",
    );
    for (n, criterion) in acceptance.criteria.iter().enumerate() {
        text.push_str(&format!("{}. {criterion}\n", n + 1));
    }
    text.push_str(&format!("\nTHE TASK WAS:\n{}\n", acceptance.asked.trim()));
    if let Some(checks) = checks.filter(|c| !c.is_empty()) {
        text.push_str("\nITS CHECKS:\n");
        for check in checks {
            text.push_str(&format!(
                "$ {} — {}\n",
                check.command,
                if check.passed() {
                    "passed".to_owned()
                } else {
                    check.outcome.to_string()
                }
            ));
        }
    }
    if diff.trim().is_empty() {
        text.push_str("\nIt changed no files.\n");
    } else {
        text.push_str(&format!("\nWHAT IT CHANGED:\n```diff\n{diff}\n```\n"));
    }
    text
}

/// The reviewer's verdict from its final message; one it did not give is `inconclusive`.
fn parse(answer: &str) -> Review {
    #[derive(serde::Deserialize)]
    struct Answer {
        verdict: String,
        #[serde(default)]
        reasons: Vec<String>,
    }
    let unreadable = |why: String| Review {
        verdict: ReviewVerdict::Inconclusive,
        reasons: vec![format!("the reviewer's answer could not be read: {why}")],
    };
    let text = match baton_graph::plan_text(answer) {
        Ok(text) => text,
        Err(_) => return unreadable("it holds no JSON object".to_owned()),
    };
    match serde_json::from_str::<Answer>(text) {
        Ok(answer) => match ReviewVerdict::parse(answer.verdict.trim()) {
            Some(verdict) => Review {
                verdict,
                reasons: answer.reasons,
            },
            None => unreadable(format!(
                "`{}` is not a verdict ({})",
                answer.verdict,
                ReviewVerdict::NAMES.join(", ")
            )),
        },
        Err(e) => unreadable(e.to_string()),
    }
}

/// What the task is told when its work is rejected and a fix round is left.
fn fix_message(review: &Review, round: u32, of: u32) -> String {
    let mut text = format!(
        "A reviewer judged your work against the task's acceptance criteria and rejected it \
         (fix round {round} of {of}):\n"
    );
    for reason in &review.reasons {
        text.push_str(&format!("- {reason}\n"));
    }
    text.push_str("\nChange what it asks for, so that every criterion is met.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_from_the_answer_or_is_inconclusive() {
        let review =
            parse("```json\n{\"verdict\": \"rejected\", \"reasons\": [\"no tests\"]}\n```");
        assert_eq!(review.verdict, ReviewVerdict::Rejected);
        assert_eq!(review.reasons, ["no tests"]);
        assert_eq!(
            parse("{\"verdict\": \"verified\"}").verdict,
            ReviewVerdict::Verified
        );
        let odd = parse("{\"verdict\": \"great\"}");
        assert_eq!(odd.verdict, ReviewVerdict::Inconclusive);
        assert!(
            odd.reasons[0].contains("`great` is not a verdict"),
            "{odd:?}"
        );
        assert_eq!(
            parse("looks fine to me").verdict,
            ReviewVerdict::Inconclusive
        );
    }
}
