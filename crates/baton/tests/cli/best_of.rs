//! Best-of-N (`best_of`, `candidates`): a task's attempt runs N candidates at once, each in
//! its own worktree from the same start, each through the task's checks; the winner's branch
//! becomes the task's result and the others are kept as branches.

use baton_model::{EventKind, TaskState};

use crate::workspaces::{git, git_shim, git_shim_holding, git_shim_killing_once, repo_with};

/// `command` engines that write `out.txt` in their worktree: `big` five lines, `small` one,
/// `broken` one its check refuses.
fn engines_toml() -> String {
    let engine = |name: &str, script: &str| {
        format!(
            "[engines.{name}]\nkind = \"command\"\ncommand = \"sh\"\nargs = [\"-c\", \"{script}\"]\n"
        )
    };
    [
        engine(
            "big",
            "printf 'a\\\\nb\\\\nc\\\\nd\\\\ne\\\\n' > out.txt; echo big wrote",
        ),
        engine("small", "printf 'a\\\\n' > out.txt; echo small wrote"),
        engine(
            "broken",
            "printf 'broken\\\\n' > out.txt; echo broken wrote",
        ),
    ]
    .concat()
}

const GRAPH: &str = r#"
[[task]]
id = "write"
candidates = ["big", "broken", { engine = "small", model = "tiny" }]
prompt = "write out.txt"
verify = ["! grep -q broken out.txt"]

[[task]]
id = "echo"
needs = ["write"]
run = "printf '%s' {{ needs.write.output }}"
"#;

/// `baton run graph.toml --json` with `path` for `PATH`, which must succeed: what it printed,
/// the run's id, and the repository.
fn run_with_path(
    test: crate::test::Test,
    path: &str,
) -> (crate::test::Output, String, std::path::PathBuf) {
    let root = test.path().to_owned();
    let out = test
        .env("PATH", path)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    (out, run, root)
}

/// A repository with task `write` of two candidates, `big` and then `small`.
fn two_candidates() -> crate::test::Test {
    let graph = r#"
[[task]]
id = "write"
candidates = ["big", "small"]
prompt = "write out.txt"
"#;
    repo_with(graph).file("baton.toml", engines_toml())
}

#[test]
fn the_smallest_change_that_passes_its_checks_wins_and_the_others_are_kept() {
    let test = repo_with(GRAPH).file("baton.toml", engines_toml());
    let root = test.path().to_owned();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();

    // Three candidates, recorded as three attempts, one on each engine.
    let attempts = out.store().attempts("write");
    let engines: Vec<_> = attempts
        .iter()
        .map(|a| a.agent.as_ref().unwrap().engine.clone())
        .collect();
    assert_eq!(engines, ["big", "broken", "small"]);
    assert_eq!(out.store().task("write").status, TaskState::Succeeded);

    // The winner's work is the task's branch, and what its dependent started from.
    let show = |rev: &str| git(&root, &["show", &format!("{rev}:out.txt")]);
    assert_eq!(show(&format!("baton/{run}/write")), "a");
    assert_eq!(show(&format!("baton/{run}/result")), "a");
    assert_eq!(out.json_task("echo")["output"], "small wrote");
    // The others stay, as branches.
    assert_eq!(show(&format!("baton/{run}/write@1")), "a\nb\nc\nd\ne");
    assert_eq!(show(&format!("baton/{run}/write@2")), "broken");

    // Why the winner won is recorded, shown, and in the result.
    let picked = out
        .store()
        .events_of(|k| matches!(k, EventKind::Picked { .. }));
    let [
        EventKind::Picked {
            winner,
            why,
            candidates,
            ..
        },
    ] = picked.as_slice()
    else {
        panic!("{picked:?}");
    };
    assert_eq!(*winner, Some(3));
    assert_eq!(
        why,
        "candidate 3 won: the smallest change of those that passed (1 line, against 5 lines of candidate 1); candidate 2 failed"
    );
    assert!(!candidates[1].passed);
    let json = out.json_task("write");
    assert_eq!(json["candidates"]["winner"], 3, "{json}");
    assert_eq!(json["candidates"]["list"][2]["engine"], "small", "{json}");
    assert_eq!(json["candidates"]["list"][2]["model"], "tiny", "{json}");
    assert_eq!(json["candidates"]["list"][1]["passed"], false, "{json}");
    assert_eq!(json["workspace"]["evidence"]["lines_added"], 1, "{json}");
    let status = out.then().args(&["status"]).run().status(0);
    let status = status.stdout_contains("candidate 3 won: the smallest change");
    // Each candidate's work can be looked at.
    let diff = status
        .then()
        .args(&["diff", &run, "write", "--candidate", "1"])
        .run()
        .status(0);
    assert!(diff.stdout.contains("+e"), "{}", diff.stdout);
}

/// The candidates' worktrees are made by their attempts, at once and off the thread every
/// other attempt is driven from: while candidate 2's `git worktree add` checks out (seconds
/// on a large repository; here it waits until task `b` has run), the run's other tasks start
/// and run. Made on the dispatcher's thread, as they were, it would hold `b` back, and time
/// out. Each candidate still starts where the task does, and the winner's work is its result.
#[test]
fn candidates_worktrees_are_made_while_the_run_goes_on() {
    let graph = r#"
[run]
concurrency = 4

[[task]]
id = "write"
candidates = ["big", "small"]
prompt = "write out.txt"

[[task]]
id = "b"
run = "touch b-ran"
"#;
    let test = repo_with(graph).file("baton.toml", engines_toml());
    let marker = test.path().join("b-ran");
    let path = git_shim_holding(&test, "*\" worktree add \"*write@2*", &marker);
    let (out, run, root) = run_with_path(test, &path);
    let show = |rev: &str| git(&root, &["show", &format!("{rev}:out.txt")]);
    assert_eq!(show(&format!("baton/{run}/write")), "a");
    assert_eq!(show(&format!("baton/{run}/write@1")), "a\nb\nc\nd\ne");
    // Both started from the run's base: each changed only what it wrote.
    for k in [1, 2] {
        let changed = git(
            &root,
            &[
                "diff",
                "--name-only",
                "HEAD",
                &format!("baton/{run}/write@{k}"),
            ],
        );
        assert_eq!(changed, "out.txt", "candidate {k}");
    }
    assert_eq!(out.json_task("write")["candidates"]["winner"], 2);
}

/// A best-of task that needs two tasks starts from a merge of their work: the task's own
/// worktree is made first (the merge is its first commit), and every other candidate starts
/// from that merge, with both dependencies' files.
#[test]
fn candidates_of_a_task_with_two_dependencies_start_from_their_merge() {
    let graph = r#"
[[task]]
id = "x"
workspace = "worktree"
run = "echo x > x.txt"

[[task]]
id = "y"
workspace = "worktree"
run = "echo y > y.txt"

[[task]]
id = "write"
needs = ["x", "y"]
candidates = ["big", "small"]
prompt = "write out.txt"
"#;
    let test = repo_with(graph).file("baton.toml", engines_toml());
    let root = test.path().to_owned();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    for k in [1, 2] {
        let branch = format!("baton/{run}/write@{k}");
        assert_eq!(git(&root, &["show", &format!("{branch}:x.txt")]), "x");
        assert_eq!(git(&root, &["show", &format!("{branch}:y.txt")]), "y");
        // Its own change is what it wrote, measured from the merge.
        let changed = git(
            &root,
            &["diff", "--name-only", &format!("{branch}~1"), &branch],
        );
        assert_eq!(changed, "out.txt", "candidate {k}");
    }
    let result = format!("baton/{run}/result");
    assert_eq!(git(&root, &["show", &format!("{result}:out.txt")]), "a");
    assert_eq!(git(&root, &["show", &format!("{result}:x.txt")]), "x");
    let evidence = &out.json_task("write")["workspace"]["evidence"];
    let files: Vec<_> = evidence["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["out.txt"], "{evidence}");
}

/// The driver dies while candidate 2's worktree is being checked out (registered, not yet
/// checked out): the takeover makes it again rather than take the empty directory for the
/// candidate's work (committed as it was, it would delete every file on its branch), and the
/// best-of task goes on to its pick.
#[test]
fn a_candidate_worktree_half_made_when_the_driver_died_is_made_again() {
    let test = two_candidates();
    let path = git_shim_killing_once(&test, "*\" reset --hard \"*", "*write@2");
    let killed = test.env("PATH", &path).args(&["run", "graph.toml"]).run();
    assert_eq!(killed.code, None, "killed: {}", killed.stderr);
    assert!(
        !killed.path().join(".kill-once").exists(),
        "the driver was killed at candidate 2's checkout"
    );
    let (run, resumed) = killed.resumed();
    let root = resumed.path().to_owned();
    let branch = format!("baton/{run}/write@2");
    let changed = git(&root, &["diff", "--name-only", "HEAD", &branch]);
    assert_eq!(changed, "out.txt", "nothing deleted on {branch}");
    assert_eq!(
        git(&root, &["show", &format!("baton/{run}/result:out.txt")]),
        "a"
    );
}

/// The task's output, exit code and what its dependents are handed are its winner's, whichever
/// candidate ended last: here candidate 1 wins and candidate 2 (a bigger change, slower) ends
/// after it. Before, the task showed and stored the last candidate's output.
#[test]
fn a_best_of_tasks_output_is_its_winners_whichever_ended_last() {
    let graph = r#"
[[task]]
id = "write"
candidates = ["small", "slow-big"]
prompt = "write out.txt"

[[task]]
id = "echo"
needs = ["write"]
run = "printf '%s' {{ needs.write.output }}"
"#;
    let slow_big = "[engines.slow-big]\nkind = \"command\"\ncommand = \"sh\"\n\
                    args = [\"-c\", \"sleep 1; printf 'a\\\\nb\\\\n' > out.txt; echo slow big wrote\"]\n";
    let test = repo_with(graph).file("baton.toml", format!("{}{slow_big}", engines_toml()));
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    assert_eq!(out.json_task("write")["candidates"]["winner"], 1);
    assert_eq!(out.json_task("write")["output"], "small wrote");
    assert_eq!(out.json_task("echo")["output"], "small wrote");
    let status = out.then().args(&["status"]).run().status(0);
    let status = status.stdout_contains("“small wrote”");
    // The report's card says so too, and shows the winner's output.
    let report = status.then().args(&["report", "-o", "-"]).run().status(0);
    let card = report
        .stdout
        .split("<details class=\"task")
        .find(|card| card.contains("<span class=\"id mono\">write</span>"))
        .expect("write's card");
    assert!(card.contains("best of 2 · 2 attempts"), "{card}");
    assert!(card.contains("small wrote"), "{card}");
    assert!(!card.contains("slow big wrote"), "{card}");
}

/// Candidate 1's worktree is the task's own; when it cannot be made (git fails here, every
/// time) the other candidates still run, and the winner's work still becomes the task's
/// branch, what its dependents and the result start from.
#[test]
fn the_winner_becomes_the_task_even_when_candidate_1_could_not_start() {
    let test = two_candidates();
    let path = git_shim(
        &test,
        "*\" worktree add \"*\"/write \"*) echo 'no room' >&2; exit 1;;",
    );
    let (out, run, root) = run_with_path(test, &path);
    let write = out.json_task("write");
    assert_eq!(write["candidates"]["winner"], 2, "{write}");
    assert_eq!(write["candidates"]["list"][0]["passed"], false, "{write}");
    let show = |rev: &str| git(&root, &["show", &format!("{rev}:out.txt")]);
    assert_eq!(show(&format!("baton/{run}/write")), "a");
    assert_eq!(show(&format!("baton/{run}/result")), "a");
}

#[test]
fn a_budget_too_small_for_every_candidate_starts_none() {
    let graph = r#"
[run]
budget = { usd = 1 }

[[task]]
id = "write"
engine = "small"
best_of = 3
estimate = { usd = 0.5 }
prompt = "write out.txt"
"#;
    let test = repo_with(graph).file("baton.toml", engines_toml());
    let root = test.path().to_owned();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    let attempts = out.store().attempts("write");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert!(attempts[0].agent.is_none(), "nothing ran: {attempts:?}");
    let reason = out.json_task("write")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("3 candidates at $0.50 each would pass $1.00"),
        "{reason}"
    );
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let branches = git(&root, &["branch", "--list", &format!("baton/{run}/write*")]);
    assert!(
        !branches.contains('@'),
        "no candidate's worktree was made: {branches}"
    );
}

#[test]
fn a_best_of_task_that_does_not_fit_beside_a_running_agent_waits_for_it() {
    // $1.20 covers the two candidates, or one candidate and `other`, never all three at once:
    // whichever starts first, the rest waits for it to end, and all of it runs. (Before, the
    // candidates were reserved only once the turn's other launches had been, so `other` got
    // its reservation and the best-of task failed as over budget.)
    let graph = r#"
[run]
budget = { usd = 1.2 }

[[task]]
id = "write"
engine = "small"
best_of = 2
estimate = { usd = 0.5 }
prompt = "write out.txt"

[[task]]
id = "other"
engine = "small"
estimate = { usd = 0.5 }
prompt = "write out.txt too"
"#;
    let test = repo_with(graph).file("baton.toml", engines_toml());
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    for task in ["write", "other"] {
        assert_eq!(out.json_task(task)["state"], "succeeded", "{}", out.stdout);
    }
    let attempts = out.store().attempts("write");
    assert_eq!(attempts.len(), 2, "both candidates ran: {attempts:?}");
}

#[test]
fn two_claude_code_candidates_each_work_in_their_own_worktree() {
    use baton_mock_model::{MockModel, Rule, Script};
    // Claude Code tells the model its working directory: the second candidate's is its own.
    let bash = |command: &str| {
        Rule::tool_use(
            "Bash",
            serde_json::json!({"command": command, "description": "write"}),
        )
    };
    let script = Script::new()
        .rule(Rule::text("Candidate done").when_last_contains("toolu_mock"))
        .rule(bash("printf 'one\\n' > out.txt").when_contains("write@2"))
        .rule(bash("printf 'a\\nb\\nc\\n' > out.txt"));
    let model = MockModel::start(script).unwrap();
    let graph = r#"
[[task]]
id = "write"
engine = "claude"
best_of = 2
allowed_tools = ["Bash"]
timeout = "2m"
prompt = "write out.txt"
"#;
    let test = crate::agents::with_claude(repo_with(graph), &model);
    let root = test.path().to_owned();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let attempts = out.store().attempts("write");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    // Each candidate had a session of its own.
    let sessions: Vec<_> = attempts
        .iter()
        .map(|a| a.agent.as_ref().unwrap().session_id.clone().unwrap())
        .collect();
    assert_ne!(sessions[0], sessions[1]);
    let show = |rev: &str| git(&root, &["show", &format!("{rev}:out.txt")]);
    assert_eq!(show(&format!("baton/{run}/write")), "one");
    assert_eq!(show(&format!("baton/{run}/write@1")), "a\nb\nc");
    let candidates = &out.json_task("write")["candidates"];
    assert_eq!(candidates["winner"], 2, "{candidates}");
    assert_eq!(out.json_task("write")["output"], "Candidate done");
}

/// Task `write` of two candidates on engine `mine`, which writes `mine-ATTEMPT.txt` and then
/// hangs for a minute when `[ $BATON_ATTEMPT HANG ]` holds.
fn mine_twice(hang: &str) -> crate::test::Test {
    let graph = r#"
[[task]]
id = "write"
candidates = ["mine", "mine"]
prompt = "write your file"
"#;
    let mine = format!(
        "[engines.mine]\nkind = \"command\"\ncommand = \"sh\"\nargs = [\"-c\", \
         \"echo $BATON_ATTEMPT > mine-$BATON_ATTEMPT.txt; \
         if [ $BATON_ATTEMPT {hang} ]; then sleep 60; fi; echo wrote $BATON_ATTEMPT\"]\n"
    );
    repo_with(graph).file("baton.toml", mine)
}

/// Waits until both candidates of `write`'s first round wrote their files.
fn first_round_files(running: &mut crate::test::Running) {
    running.await_that("the first round's files", crate::test::RUN_LIMIT, |root| {
        let trees = root.join(".baton/worktrees");
        let run = std::fs::read_dir(&trees).ok()?.flatten().next()?.path();
        (run.join("write/mine-1.txt").exists() && run.join("write@2/mine-2.txt").exists())
            .then_some(())
    });
}

/// A best-of task's candidates are noted in the run's launch log before they start, as every
/// other attempt launched in the driver's process is: a driver killed between a candidate's
/// start and its commit leaves a takeover what ran (before, candidates were never noted, and
/// one whose start was not committed was run again under the same number).
#[test]
fn a_best_of_tasks_candidates_are_noted_before_they_start() {
    let mut running = mine_twice("-le 2").args(&["run", "graph.toml"]).spawn();
    first_round_files(&mut running);
    let killed = running.kill();
    let run = killed.store().run().id.to_string();
    let noted = std::fs::read_to_string(killed.scratch(&run).join("launched")).unwrap();
    assert_eq!(noted, "write 1\nwrite 2\n");
}

/// #31 item 6 (finding 13), its wrong result: a best-of task whose driver was killed mid-round
/// ran a new round after the resume in which each candidate built on its predecessor's work
/// (`write@2` held `mine-2.txt` and `mine-4.txt`, the winner two candidates' files). Each
/// candidate of a new round starts from the task's start; what the round before left is kept
/// on its attempt's ref.
#[test]
fn a_new_round_of_candidates_after_a_crash_starts_from_the_tasks_start() {
    // The first round hangs once it has written its files; the driver is killed meanwhile.
    let mut running = mine_twice("-le 2").args(&["run", "graph.toml"]).spawn();
    first_round_files(&mut running);
    let (run, resumed) = running.kill_and_resume();
    let root = resumed.path();
    let files = |reference: &str| -> Vec<String> {
        git(root, &["ls-tree", "--name-only", reference])
            .lines()
            .filter(|f| f.starts_with("mine-"))
            .map(str::to_owned)
            .collect()
    };
    // Each candidate of the new round holds its own file alone.
    assert_eq!(files(&format!("baton/{run}/write@2")), ["mine-4.txt"]);
    let result = files(&format!("baton/{run}/result"));
    assert_eq!(
        result.len(),
        1,
        "the winner holds one candidate's work: {result:?}"
    );
    // What the interrupted round left in the task's own worktree is kept on its attempt's
    // ref.
    assert_eq!(
        files(&format!("refs/baton/{run}/write/attempt-1")),
        ["mine-1.txt"]
    );
    assert_eq!(resumed.store().task("write").status, TaskState::Succeeded);
}

/// #31 item 6 (finding 13), its cost: a candidate that had ended before the crash is not run
/// (and paid for) again. The resumed round runs only the candidate the crash cut short; the
/// pick is among the one that ended before and the one run again.
#[test]
fn a_candidate_that_ended_before_a_crash_is_not_run_again() {
    // Candidate 2 of the first round hangs; candidate 1 ends at once.
    let mut running = mine_twice("= 2").args(&["run", "graph.toml"]).spawn();
    running.await_that(
        "candidate 1's end and candidate 2's file",
        crate::test::RUN_LIMIT,
        |root| {
            let store = crate::test::Store::once_a_run_is_in(root)?;
            store.try_run()?;
            let ended = store.attempts("write").first()?.outcome.is_some();
            let trees = root.join(".baton/worktrees");
            let run = std::fs::read_dir(&trees).ok()?.flatten().next()?.path();
            (ended && run.join("write@2/mine-2.txt").exists()).then_some(())
        },
    );
    let (run, resumed) = running.kill_and_resume();
    let root = resumed.path();
    let attempts: Vec<(u32, String)> = resumed
        .store()
        .attempts("write")
        .iter()
        .map(|a| {
            (
                a.attempt,
                a.outcome.as_ref().map_or("-".into(), |o| o.to_string()),
            )
        })
        .collect();
    let numbers: Vec<u32> = attempts.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 4], "candidate 1 ran once: {attempts:?}");
    let picked = resumed
        .store()
        .events_of(|k| matches!(k, EventKind::Picked { .. }));
    let EventKind::Picked { candidates, .. } = picked.last().expect("a pick") else {
        unreachable!()
    };
    let among: Vec<u32> = candidates.iter().map(|c| c.attempt).collect();
    assert_eq!(among, [1, 4]);
    let files: Vec<String> = git(
        root,
        &["ls-tree", "--name-only", &format!("baton/{run}/result")],
    )
    .lines()
    .filter(|f| f.starts_with("mine-"))
    .map(str::to_owned)
    .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(resumed.store().task("write").status, TaskState::Succeeded);
}
