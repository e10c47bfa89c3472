//! Hard budgets: what agent attempts spend, counted live from their streams, against the run's
//! limit and each task's own.
//!
//! Dollars come first (token counts are inflated by cache reads): a budget's `tokens` counts
//! fresh input, output and cache writes, not cache reads. An attempt's spend is known live
//! (from its stream, priced from the table until the agent reports its own total) and final
//! (when it ends). Before an agent task starts, what it will likely spend — its own estimate
//! (`estimate = { usd }`, what a planner said of it) or, where that is less, the average of the
//! run's finished agent attempts — is reserved beside what the running ones are likely to
//! spend, and stays reserved while it runs (until it has spent more), so that parallel launches
//! cannot overshoot the run's budget together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use baton_graph::Budget;
use baton_model::AgentUsage;

/// Tokens that count against a budget: all but cache reads.
pub fn budget_tokens(input: u64, output: u64, cache_write: u64) -> u64 {
    input + output + cache_write
}

/// What one attempt has spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spent {
    pub usd: f64,
    pub tokens: u64,
}

/// Which limit an attempt went past.
#[derive(Debug, Clone, PartialEq)]
pub enum Exceeded {
    Task(String),
    Run(String),
}

impl Exceeded {
    pub fn describe(&self) -> &str {
        match self {
            Self::Task(s) | Self::Run(s) => s,
        }
    }

    /// Whose limit it is, as an `over-budget` outcome records it.
    pub fn scope(&self) -> baton_model::BudgetScope {
        match self {
            Self::Task(_) => baton_model::BudgetScope::Task,
            Self::Run(_) => baton_model::BudgetScope::Run,
        }
    }
}

/// The run's meter, shared by the dispatcher and every running agent's watcher.
#[derive(Debug, Clone)]
pub struct Meter(Arc<Mutex<State>>);

#[derive(Debug)]
struct State {
    limit: Budget,
    /// Finished attempts.
    spent: Spent,
    finished: u32,
    /// Finished attempts, by task: a task's budget covers all its attempts.
    by_task: HashMap<u32, Spent>,
    /// Running agent attempts, by (task, attempt).
    live: HashMap<(u32, u32), Running>,
}

/// An agent attempt that is running: what it spent so far, and what it was expected to.
#[derive(Debug, Clone, Copy, Default)]
struct Running {
    spent: Spent,
    /// Its task's estimate in dollars (0 without one): reserved at least, until it ends.
    expected_usd: f64,
}

impl Meter {
    pub fn new(limit: Budget) -> Self {
        Self(Arc::new(Mutex::new(State {
            limit,
            spent: Spent::default(),
            finished: 0,
            by_task: HashMap::new(),
            live: HashMap::new(),
        })))
    }

    /// The meter of one attempt run on a worker: it starts from what the run, and the task's
    /// earlier attempts, had spent when its coordinator queued it, so that the attempt is held
    /// to the run's and its task's budgets as a local one is (attempts running at the same
    /// time on other workers are not seen: each is held to what was left when it was queued).
    pub fn elsewhere(limit: Budget, task: u32, run: Spent, earlier: Spent) -> Self {
        let meter = Self::new(limit);
        {
            let mut state = meter.state();
            state.spent = run;
            state.by_task.insert(task, earlier);
        }
        meter
    }

    /// What the run's agents spent, finished and running.
    pub fn total(&self) -> Spent {
        let state = self.state();
        state
            .live
            .values()
            .fold(state.spent, |a, b| a.plus(b.spent))
    }

    /// An agent attempt was launched: from now until it ends, what it is likely to spend (its
    /// task's estimate `expected_usd`, or the average) is reserved, before it has said a word.
    pub fn start(&self, key: (u32, u32), expected_usd: Option<f64>) {
        self.state().live.insert(
            key,
            Running {
                spent: Spent::default(),
                expected_usd: expected_usd.unwrap_or(0.0).max(0.0),
            },
        );
    }

    /// How many agent attempts are running (started, and not finished on this meter).
    pub fn running(&self) -> usize {
        self.state().live.len()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain numbers behind: still usable.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn has_limit(&self) -> bool {
        !self.state().limit.is_unlimited()
    }

    /// Replaces the run's limits (a person changed them at a takeover).
    pub fn set_limit(&self, limit: Budget) {
        self.state().limit = limit;
    }

    /// Whether what is spent, finished and running, reached the run's soft limit; in words.
    pub fn soft_reached(&self) -> Option<String> {
        let state = self.state();
        let soft = Budget {
            usd: state.limit.soft_usd,
            tokens: state.limit.soft_tokens,
            ..Budget::default()
        };
        if soft.is_unlimited() {
            return None;
        }
        let total = state
            .live
            .values()
            .fold(state.spent, |a, b| a.plus(b.spent));
        over(&soft, total).map(|what| format!("soft {what}"))
    }

    /// An attempt's spend so far; `Some` if the run's budget is now exceeded.
    pub fn update(&self, key: (u32, u32), now: Spent) -> Option<Exceeded> {
        let mut state = self.state();
        state.live.entry(key).or_default().spent = now;
        let total = state
            .live
            .values()
            .fold(state.spent, |a, b| a.plus(b.spent));
        over(&state.limit, total).map(|what| Exceeded::Run(format!("run {what}")))
    }

    /// An attempt ended: its final spend replaces its live one (the larger of the two: an
    /// attempt stopped mid-stream may never report its total).
    pub fn finish(&self, key: (u32, u32), usage: &AgentUsage) {
        let mut state = self.state();
        let live = state.live.remove(&key).unwrap_or_default().spent;
        let usd = usage.cost_usd.unwrap_or(0.0).max(live.usd);
        let tokens = budget_tokens(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_write_tokens,
        )
        .max(live.tokens);
        state.spent.usd += usd;
        state.spent.tokens += tokens;
        state.finished += 1;
        let task = state.by_task.entry(key.0).or_default();
        task.usd += usd;
        task.tokens += tokens;
    }

    /// What `task`'s finished attempts spent.
    pub fn task_spent(&self, task: u32) -> Spent {
        self.state().by_task.get(&task).copied().unwrap_or_default()
    }

    /// Whether the run's budget is spent by finished attempts alone.
    pub fn exhausted(&self) -> bool {
        let state = self.state();
        over(&state.limit, state.spent).is_some()
    }

    /// Whether one more agent attempt fits: what is spent, what the running ones are likely
    /// to spend in all (at least their estimate or the average, or what they spent already),
    /// and what the new one is likely to (its task's estimate `expected_usd`, or the average
    /// where that is more), within the limit.
    pub fn can_start(&self, expected_usd: Option<f64>) -> bool {
        let state = self.state();
        if state.limit.is_unlimited() {
            return true;
        }
        if state.cost_unknown(expected_usd) {
            return false;
        }
        let mut next = state.average();
        next.usd = next.usd.max(expected_usd.unwrap_or(0.0));
        let total = state.spent.plus(state.running(state.average())).plus(next);
        // Reaching the limit exactly is spending it: only strictly less leaves room.
        let fits_usd = state.limit.usd.is_none_or(|limit| total.usd < limit);
        let fits_tokens = state.limit.tokens.is_none_or(|limit| total.tokens < limit);
        fits_usd && fits_tokens
    }

    /// Whether `n` agent attempts started at once fit (a best-of task's candidates, all
    /// reserved before any starts): as [`Meter::can_start`], each expected to spend the
    /// average of the finished attempts, or `each` (the task's estimate) where that is more.
    /// `Err` says why not.
    pub fn can_start_many(&self, n: u32, each: Option<f64>) -> Result<(), String> {
        let state = self.state();
        if state.limit.is_unlimited() {
            return Ok(());
        }
        let average = state.average();
        let one = Spent {
            usd: average.usd.max(each.unwrap_or(0.0)),
            tokens: average.tokens,
        };
        let running = state.running(average);
        let all = Spent {
            usd: one.usd * f64::from(n),
            tokens: one.tokens.saturating_mul(u64::from(n)),
        };
        let total = state.spent.plus(running).plus(all);
        let fits_usd = state.limit.usd.is_none_or(|limit| total.usd < limit);
        let fits_tokens = state.limit.tokens.is_none_or(|limit| total.tokens < limit);
        if fits_usd && fits_tokens {
            return Ok(());
        }
        Err(match state.limit.usd.filter(|_| !fits_usd) {
            Some(limit) => format!(
                "run budget: {n} candidates at {} each would pass {} ({} spent, {} reserved for the running agents)",
                format_usd(one.usd),
                format_usd(limit),
                format_usd(state.spent.usd),
                format_usd(running.usd)
            ),
            None => format!(
                "run budget: {n} candidates at {} tokens each would pass {} tokens ({} spent)",
                one.tokens,
                state.limit.tokens.unwrap_or_default(),
                state.spent.tokens
            ),
        })
    }

    /// Why an agent expected to spend `expected_usd` (its task's estimate) does not fit, when
    /// the budget is not all spent: what it would reserve, beside what is spent and what the
    /// running agents hold, against the limit.
    pub fn describe_unfit(&self, expected_usd: Option<f64>) -> String {
        let state = self.state();
        let average = state.average();
        let next = Spent {
            usd: average.usd.max(expected_usd.unwrap_or(0.0)),
            tokens: average.tokens,
        };
        let running = state.running(average);
        match (state.limit.usd, state.limit.tokens) {
            (Some(limit), _) => format!(
                "would reserve {}{} and does not fit: {} spent{}, of {}",
                format_usd(next.usd),
                match expected_usd {
                    Some(usd) if usd >= average.usd => " (its estimate)",
                    _ => " (the average of the finished agents)",
                },
                format_usd(state.spent.usd),
                match running.usd {
                    0.0 => String::new(),
                    usd => format!(" and {} reserved for the running agents", format_usd(usd)),
                },
                format_usd(limit)
            ),
            (None, Some(limit)) => format!(
                "would reserve {} tokens and does not fit: {} spent and {} reserved for the \
                 running agents, of {limit}",
                next.tokens, state.spent.tokens, running.tokens
            ),
            (None, None) => String::new(),
        }
    }

    /// Why the budget stops the run, for its reason: what is spent, what is reserved for the
    /// running agents and the next one (the average of the finished ones), and the limit —
    /// apart, since a budget that cannot cover the next agent is not all spent.
    pub fn describe(&self) -> String {
        let state = self.state();
        let reserved = state.reserved();
        match (state.limit.usd, state.limit.tokens) {
            (Some(limit), _) if state.spent.usd >= limit => format!(
                "{} of {} spent",
                format_usd(state.spent.usd),
                format_usd(limit)
            ),
            (Some(limit), _) => format!(
                "{} spent and {} reserved for the next agent, of {}",
                format_usd(state.spent.usd),
                format_usd(reserved.usd),
                format_usd(limit)
            ),
            (None, Some(limit)) if state.spent.tokens >= limit => {
                format!("{} of {limit} tokens spent", state.spent.tokens)
            }
            (None, Some(limit)) => format!(
                "{} tokens spent and {} reserved for the next agent, of {limit}",
                state.spent.tokens, reserved.tokens
            ),
            (None, None) => String::new(),
        }
    }
}

impl State {
    /// Whether an agent expected to spend `expected_usd` must wait for the running ones
    /// because nothing says what they cost: no agent of the run has finished (no average),
    /// and it or a running one has no estimate (in dollars; none counts against a token
    /// limit). Reserved $0, agents launched together each spent what the budget had left: three
    /// against $0.30 ended at $0.45, all stopped after answering. So until the first one ends
    /// they go one at a time, and a run overshoots by one agent's spend at most; tasks with an
    /// `estimate` go together from the start.
    fn cost_unknown(&self, expected_usd: Option<f64>) -> bool {
        if self.finished > 0 || self.live.is_empty() {
            return false;
        }
        let unknown = |usd: f64| usd <= 0.0 || self.limit.tokens.is_some();
        unknown(expected_usd.unwrap_or(0.0)) || self.live.values().any(|l| unknown(l.expected_usd))
    }

    /// What the running agents are likely to spend beyond what is finished (at least the
    /// average of the finished attempts, or what they spent already), and the average for one
    /// more.
    fn reserved(&self) -> Spent {
        let average = self.average();
        average.plus(self.running(average))
    }

    /// What a finished attempt spent, on average.
    fn average(&self) -> Spent {
        if self.finished == 0 {
            Spent::default()
        } else {
            Spent {
                usd: self.spent.usd / f64::from(self.finished),
                tokens: self.spent.tokens / u64::from(self.finished),
            }
        }
    }

    /// What the running agents are likely to spend in all: each at least its estimate or
    /// `average`, whichever is more, or what it spent already.
    fn running(&self, average: Spent) -> Spent {
        let mut reserved = Spent::default();
        for live in self.live.values() {
            reserved.usd += live.spent.usd.max(average.usd).max(live.expected_usd);
            reserved.tokens += live.spent.tokens.max(average.tokens);
        }
        reserved
    }
}

impl Spent {
    fn plus(self, other: Spent) -> Spent {
        Spent {
            usd: self.usd + other.usd,
            tokens: self.tokens + other.tokens,
        }
    }
}

pub use baton_model::format_usd;

/// What of `limit` `spent` reaches, in words; `None` while within it.
pub fn over(limit: &Budget, spent: Spent) -> Option<String> {
    if let Some(usd) = limit.usd
        && spent.usd >= usd
    {
        return Some(format!(
            "budget {} reached ({})",
            format_usd(usd),
            format_usd(spent.usd)
        ));
    }
    if let Some(tokens) = limit.tokens
        && spent.tokens >= tokens
    {
        return Some(format!(
            "budget of {tokens} tokens reached ({})",
            spent.tokens
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(usd: f64, tokens: u64) -> AgentUsage {
        AgentUsage {
            engine: "claude".into(),
            input_tokens: tokens,
            cost_usd: Some(usd),
            ..AgentUsage::default()
        }
    }

    #[test]
    fn live_spend_of_all_running_attempts_counts_against_the_run() {
        let meter = Meter::new(Budget {
            usd: Some(1.0),
            ..Budget::default()
        });
        let spent = |usd| Spent { usd, tokens: 0 };
        assert_eq!(meter.update((0, 1), spent(0.4)), None);
        assert_eq!(meter.update((1, 1), spent(0.5)), None);
        // Together they reach it: the one whose line tipped it over is told.
        let exceeded = meter.update((0, 1), spent(0.5)).unwrap();
        assert!(matches!(exceeded, Exceeded::Run(_)), "{exceeded:?}");
        assert!(exceeded.describe().starts_with("run budget $1.00 reached"));
    }

    #[test]
    fn launches_reserve_the_average_so_parallel_ones_cannot_overshoot_together() {
        let meter = Meter::new(Budget {
            usd: Some(1.0),
            ..Budget::default()
        });
        // Nothing known yet: the first launches are free to go.
        assert!(meter.can_start(None));
        meter.finish((0, 1), &usage(0.3, 10));
        assert!(!meter.exhausted());
        // Spent 0.3, and one more at the average 0.3 fits.
        assert!(meter.can_start(None));
        // Launched: reserved before it has spent anything.
        meter.start((1, 1), None);
        // 0.3 spent + 0.3 reserved for the running one + 0.3 for a new one = 0.9: fits.
        assert!(meter.can_start(None));
        meter.start((2, 1), None);
        // 0.3 + 2 × 0.3 + 0.3 = 1.2: does not.
        assert!(!meter.can_start(None));
        meter.finish((1, 1), &usage(0.8, 10));
        assert!(meter.exhausted());
        assert_eq!(meter.describe(), "$1.10 of $1.00 spent");
    }

    #[test]
    fn agents_of_unknown_cost_start_one_at_a_time_until_one_has_finished() {
        let meter = Meter::new(Budget {
            usd: Some(0.3),
            ..Budget::default()
        });
        assert!(meter.can_start(None));
        meter.start((0, 1), None);
        // Reserved $0, a second would spend what the first may need too.
        assert!(!meter.can_start(None));
        // With an estimate it is known, but the running one is not.
        assert!(!meter.can_start(Some(0.05)));
        meter.finish((0, 1), &usage(0.1, 10));
        // The average ($0.10) is known now: 0.1 spent + 0.1 for the next fits, and a third
        // beside it too (0.1 + 0.1 + 0.1 = 0.3 reaches the limit: not).
        assert!(meter.can_start(None));
        meter.start((1, 1), None);
        assert!(!meter.can_start(None));

        // Estimates on both: they go together from the start.
        let meter = Meter::new(Budget {
            usd: Some(1.0),
            ..Budget::default()
        });
        meter.start((0, 1), Some(0.3));
        assert!(meter.can_start(Some(0.3)));
        // Against a token limit a dollar estimate says nothing: one at a time.
        let meter = Meter::new(Budget {
            tokens: Some(1000),
            ..Budget::default()
        });
        meter.start((0, 1), Some(0.3));
        assert!(!meter.can_start(Some(0.3)));
    }

    #[test]
    fn a_tasks_estimate_is_reserved_from_its_launch_to_its_end() {
        let meter = Meter::new(Budget {
            usd: Some(1.0),
            ..Budget::default()
        });
        // Nothing has ended (no average): only the estimates say what is coming.
        assert!(meter.can_start(Some(0.6)));
        meter.start((0, 1), Some(0.6));
        // 0.6 reserved for the running one + 0.5 expected of the next = 1.1: does not fit.
        assert!(!meter.can_start(Some(0.5)));
        // One with no estimate (and no average yet) waits: nothing says what it costs.
        assert!(!meter.can_start(None));
        // Spending less than its estimate so far, it is still reserved its estimate.
        assert_eq!(
            meter.update(
                (0, 1),
                Spent {
                    usd: 0.2,
                    tokens: 0
                }
            ),
            None
        );
        assert!(!meter.can_start(Some(0.5)));
        assert!(meter.can_start(Some(0.3)));
        // Ended below its estimate: what it spent is what counts.
        meter.finish((0, 1), &usage(0.3, 10));
        // 0.3 spent + max(average 0.3, 0.5) = 0.8: fits.
        assert!(meter.can_start(Some(0.5)));
        assert!(!meter.can_start(Some(0.7)));
    }

    #[test]
    fn an_attempt_that_spends_past_its_estimate_is_reserved_what_it_spent() {
        let meter = Meter::new(Budget {
            usd: Some(1.0),
            ..Budget::default()
        });
        meter.start((0, 1), Some(0.1));
        assert_eq!(
            meter.update(
                (0, 1),
                Spent {
                    usd: 0.7,
                    tokens: 0
                }
            ),
            None
        );
        assert!(!meter.can_start(Some(0.3)));
        assert!(meter.can_start(Some(0.2)));
    }

    #[test]
    fn the_soft_limit_counts_running_attempts_too() {
        let meter = Meter::new(Budget {
            usd: Some(10.0),
            soft_usd: Some(5.0),
            ..Budget::default()
        });
        meter.finish((0, 1), &usage(3.0, 10));
        assert_eq!(meter.soft_reached(), None);
        meter.update(
            (1, 1),
            Spent {
                usd: 2.5,
                tokens: 0,
            },
        );
        assert!(
            meter
                .soft_reached()
                .unwrap()
                .starts_with("soft budget $5.00 reached")
        );
        meter.set_limit(Budget {
            usd: Some(10.0),
            ..Budget::default()
        });
        assert_eq!(meter.soft_reached(), None);
    }

    #[test]
    fn tokens_leave_cache_reads_out() {
        let meter = Meter::new(Budget {
            tokens: Some(100),
            ..Budget::default()
        });
        let mut u = usage(0.0, 50);
        u.cache_read_tokens = 1_000_000;
        meter.finish((0, 1), &u);
        assert!(!meter.exhausted());
        meter.finish((1, 1), &usage(0.0, 50));
        assert!(meter.exhausted());
    }

    #[test]
    fn small_amounts_keep_their_digits() {
        assert_eq!(format_usd(0.0), "$0.00");
        assert_eq!(format_usd(0.0056), "$0.0056");
        assert_eq!(format_usd(0.001), "$0.001");
        assert_eq!(format_usd(0.25), "$0.25");
        assert_eq!(format_usd(0.5), "$0.50");
        assert_eq!(format_usd(0.1234567), "$0.1235");
        assert_eq!(format_usd(3.5), "$3.50");
    }

    #[test]
    fn a_stop_for_want_of_budget_says_spent_reserved_and_limit_apart() {
        let meter = Meter::new(Budget {
            usd: Some(0.008),
            ..Budget::default()
        });
        meter.finish((0, 1), &usage(0.0056, 10));
        // The next agent is reserved the average: 0.0056 + 0.0056 does not fit in 0.008.
        assert!(!meter.can_start(None));
        assert!(!meter.exhausted(), "not all of it is spent");
        assert_eq!(
            meter.describe(),
            "$0.0056 spent and $0.0056 reserved for the next agent, of $0.008"
        );
    }
}
