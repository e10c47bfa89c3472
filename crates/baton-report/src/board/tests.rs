//! The board as a person sees it: frames drawn from events, line by line.

use baton_model::{AgentUsage, Outcome, RunId};

use super::*;

fn id(name: &str) -> TaskId {
    TaskId::new(name).unwrap()
}

fn at(at_ms: i64, kind: EventKind) -> Event {
    Event {
        seq: 0,
        at_ms,
        kind,
    }
}

fn board() -> Board {
    let info = RunInfo {
        run_id: RunId::new("20261201-120000-ab12").unwrap(),
        name: "refactor".to_owned(),
        tasks: 4,
        concurrency: 4,
        earlier: 0,
        view: Some(RunView::new(["api", "docs", "deploy", "lint"].map(id))),
        started_at_ms: Some(0),
        budget_usd: Some(5.0),
        budget_tokens: None,
        agents: ["api", "docs", "silent"].map(id).into_iter().collect(),
        best_of: HashMap::new(),
        logs: None,
    };
    let mut board = Board::new(&info);
    for event in [
        at(
            0,
            EventKind::AttemptStarted {
                task: id("api"),
                attempt: 1,
                pid: None,
            },
        ),
        at(
            1_000,
            EventKind::AttemptStarted {
                task: id("docs"),
                attempt: 1,
                pid: None,
            },
        ),
        at(
            2_000,
            EventKind::AgentActivity {
                task: id("api"),
                attempt: 1,
                doing: Some("Edit …/api/src/lib.rs".to_owned()),
                tokens: 12_300,
                cost_usd: Some(0.08),
            },
        ),
        at(
            3_000,
            EventKind::AgentActivity {
                task: id("docs"),
                attempt: 1,
                doing: Some("Bash cargo doc".to_owned()),
                tokens: 900,
                cost_usd: None,
            },
        ),
        at(
            4_000,
            EventKind::AttemptStarted {
                task: id("lint"),
                attempt: 1,
                pid: None,
            },
        ),
        at(
            5_000,
            EventKind::AttemptFinished {
                task: id("lint"),
                attempt: 1,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 1_000,
                agent: Some(Box::new(AgentUsage {
                    engine: "claude".to_owned(),
                    input_tokens: 1_000,
                    cost_usd: Some(0.10),
                    ..AgentUsage::default()
                })),
                containment: None,
            },
        ),
        at(
            5_000,
            EventKind::TaskFinished {
                task: id("lint"),
                state: TaskState::Succeeded,
                reason: None,
            },
        ),
        at(6_000, EventKind::TaskWaiting { task: id("deploy") }),
    ] {
        board.apply(&event);
    }
    board
}

#[test]
fn what_needs_a_person_comes_first_then_what_works() {
    let frame = board().frame(100_000, 200, 40, Paint::Plain);
    assert_eq!(
        frame,
        [
            "baton 20261201-120000-ab12 · `refactor` · 1/4 done (1 ok) · 2 running · 1 needs you · 1m40s · 14.2k tokens · $0.18 of $5.00",
            "needs you",
            "  ⏸ deploy  waits for approval for 1m34s · baton approve 20261201-120000-ab12 deploy (or reject)",
            "running",
            "  ⠋ api   1m40s  Edit …/api/src/lib.rs  · quiet for 1m38s  · 12.3k tokens $0.08",
            "  ⠋ docs  1m39s  Bash cargo doc  · quiet for 1m37s  · 900 tokens",
        ]
    );
}

#[test]
fn a_planners_running_tasks_are_shown_under_it() {
    let mut board = board();
    let started = |at_ms, task: &str| {
        at(
            at_ms,
            EventKind::AttemptStarted {
                task: id(task),
                attempt: 1,
                pid: None,
            },
        )
    };
    for event in [
        at(
            7_000,
            EventKind::GraphExpanded {
                task: id("api"),
                attempt: 1,
                added: ["api/db", "api/routes", "api/glue"].map(id).to_vec(),
                tasks: serde_json::json!([]),
                replaces: Vec::new(),
            },
        ),
        at(
            7_000,
            EventKind::AttemptFinished {
                task: id("api"),
                attempt: 1,
                outcome: Outcome::Exited { code: 0 },
                duration_ms: 7_000,
                agent: None,
                containment: None,
            },
        ),
        at(
            7_000,
            EventKind::TaskFinished {
                task: id("api"),
                state: TaskState::Succeeded,
                reason: None,
            },
        ),
        started(8_000, "api/db"),
        started(9_000, "api/routes"),
    ] {
        board.apply(&event);
    }
    let frame = board.frame(10_000, 200, 40, Paint::Plain);
    assert_eq!(
        frame[3..],
        [
            "running",
            "  ⠋ docs         9s  Bash cargo doc  · 900 tokens",
            "  ▾ api  3 tasks: 0 done, 2 running, 1 waiting",
            "    ⠋ db         2s",
            "    ⠋ routes     1s",
        ]
    );
    // Cut short, what is left out is counted in tasks.
    let short = board.frame(10_000, 200, 6, Paint::Plain);
    assert_eq!(short[5], "  … and 2 more running");
}

#[test]
fn an_agent_that_spoke_lately_is_not_quiet() {
    let frame = board().frame(30_000, 200, 40, Paint::Plain);
    assert_eq!(
        frame[4],
        "  ⠋ api     30s  Edit …/api/src/lib.rs  · 12.3k tokens $0.08"
    );
}

#[test]
fn lines_fit_the_terminal_and_rows_that_do_not_fit_are_counted() {
    let frame = board().frame(30_000, 40, 5, Paint::Plain);
    assert!(frame.iter().all(|l| display_width(l) <= 40), "{frame:#?}");
    assert_eq!(frame.len(), 5, "{frame:#?}");
    assert_eq!(frame[4], "  … and 2 more running");
    assert!(frame[0].ends_with('…'), "{}", frame[0]);
}

#[test]
fn colour_is_only_painted_when_asked() {
    let plain = board().frame(30_000, 200, 40, Paint::Plain);
    assert!(plain.iter().all(|l| !l.contains('\u{1b}')));
    let color = board().frame(30_000, 200, 40, Paint::Color);
    assert!(color[1].starts_with("\u{1b}[1;33m"), "{:?}", color[1]);
}

/// A best-of task's attempts are its candidates: the line counts those of the round still
/// running and times the round from its first start, not "attempt 6".
#[test]
fn a_best_of_tasks_line_counts_its_running_candidates() {
    let mut board = board();
    board.best_of.insert(id("deploy"), 3);
    let start = |at_ms, attempt| {
        at(
            at_ms,
            EventKind::AttemptStarted {
                task: id("deploy"),
                attempt,
                pid: None,
            },
        )
    };
    let end = |at_ms, attempt| {
        at(
            at_ms,
            EventKind::AttemptFinished {
                task: id("deploy"),
                attempt,
                outcome: baton_model::Outcome::Exited { code: 0 },
                duration_ms: 1,
                agent: None,
                containment: None,
            },
        )
    };
    let line = |board: &Board| {
        let frame = board.frame(20_000, 200, 40, Paint::Plain);
        frame
            .into_iter()
            .find(|l| l.contains(" deploy "))
            .expect("deploy is running")
    };
    for event in [start(10_000, 1), start(10_000, 2), start(10_000, 3)] {
        board.apply(&event);
    }
    assert!(
        line(&board).ends_with("deploy    10s  best of 3: 3 running"),
        "{}",
        line(&board)
    );
    board.apply(&end(12_000, 2));
    assert!(
        line(&board).ends_with("best of 3: 2 running"),
        "{}",
        line(&board)
    );
    // What it is doing is what a running candidate said last, not what the last to start
    // said before it ended.
    let said = |at_ms, attempt, doing: &str| {
        at(
            at_ms,
            EventKind::AgentActivity {
                task: id("deploy"),
                attempt,
                doing: Some(doing.to_owned()),
                tokens: 0,
                cost_usd: None,
            },
        )
    };
    board.apply(&said(12_500, 3, "editing main.rs"));
    board.apply(&said(12_800, 1, "running the tests"));
    assert!(
        line(&board).ends_with("best of 3: 2 running  running the tests"),
        "{}",
        line(&board)
    );
    board.apply(&end(12_900, 1));
    assert!(
        line(&board).ends_with("best of 3: 1 running  editing main.rs"),
        "{}",
        line(&board)
    );
    // Tried again: a second round of three.
    board.apply(&end(13_000, 3));
    for attempt in 4..=6 {
        board.apply(&start(15_000, attempt));
    }
    assert!(
        line(&board).ends_with("deploy     5s  best of 3: 3 running, round 2"),
        "{}",
        line(&board)
    );
}

#[test]
fn an_agent_that_never_spoke_is_quiet_too_and_a_command_is_not() {
    let mut command = board();
    command.apply(&at(
        9_000,
        EventKind::AttemptStarted {
            task: id("deploy"),
            attempt: 1,
            pid: None,
        },
    ));
    let frame = command.frame(100_000, 200, 40, Paint::Plain);
    let deploy = frame.iter().find(|l| l.contains(" deploy ")).unwrap();
    // deploy is a command: silent is its right.
    assert!(!deploy.contains("quiet"), "{frame:#?}");
    let mut agents = board();
    agents.agents.insert(id("deploy"));
    agents.apply(&at(
        9_000,
        EventKind::AttemptStarted {
            task: id("deploy"),
            attempt: 1,
            pid: None,
        },
    ));
    let frame = agents.frame(100_000, 200, 40, Paint::Plain);
    let deploy = frame.iter().find(|l| l.contains(" deploy ")).unwrap();
    assert!(deploy.ends_with("· quiet for 1m31s"), "{frame:#?}");
}

#[test]
fn a_run_at_its_soft_budget_waits_for_a_person_first() {
    let mut board = board();
    board.apply(&at(
        8_000,
        // Known by its cause, not its words.
        EventKind::RunStopping {
            reason: "soft budget $1.00 reached; ask the team".to_owned(),
            cause: Some(baton_model::StopCause::SoftBudget),
        },
    ));
    let frame = board.frame(30_000, 300, 40, Paint::Plain);
    assert_eq!(frame[1], "needs you");
    assert!(
        frame[2].starts_with("  ⏸ the run  waits at its budget: soft budget $1.00 reached"),
        "{frame:#?}"
    );
    assert!(frame[3].contains("deploy"), "{frame:#?}");
}

#[test]
fn a_decision_takes_the_task_out_of_needs_you() {
    let mut board = board();
    board.apply(&at(
        7_000,
        EventKind::TaskDecided {
            task: id("deploy"),
            approved: true,
            reason: None,
        },
    ));
    board.apply(&at(
        7_000,
        EventKind::AttemptStarted {
            task: id("deploy"),
            attempt: 1,
            pid: None,
        },
    ));
    let frame = board.frame(30_000, 200, 40, Paint::Plain);
    assert!(!frame.iter().any(|l| l == "needs you"), "{frame:#?}");
    assert!(frame.iter().any(|l| l.contains("deploy")), "{frame:#?}");
}

#[test]
fn a_running_shell_task_shows_the_latest_line_it_printed_until_its_next_attempt() {
    let mut board = board();
    board.apply(&at(
        9_000,
        EventKind::AttemptStarted {
            task: id("deploy"),
            attempt: 1,
            pid: None,
        },
    ));
    // Only the shell task's log is read: an agent's doings come in its events.
    assert_eq!(board.running_shell_tasks(), [(id("deploy"), 1)]);
    board.printed(id("deploy"), "uploading 3/7".to_owned());
    let frame = board.frame(10_000, 200, 40, Paint::Plain);
    let deploy = frame.iter().find(|l| l.contains(" deploy ")).unwrap();
    assert!(
        deploy.ends_with("deploy     1s  › uploading 3/7"),
        "{frame:#?}"
    );
    // A new attempt has printed nothing yet.
    board.apply(&at(
        11_000,
        EventKind::AttemptStarted {
            task: id("deploy"),
            attempt: 2,
            pid: None,
        },
    ));
    let frame = board.frame(12_000, 200, 40, Paint::Plain);
    let deploy = frame.iter().find(|l| l.contains(" deploy ")).unwrap();
    assert!(!deploy.contains('›'), "{frame:#?}");
}
