//! The attempt unit on its own: real processes, real worktrees in a real git repository,
//! assembled from a real graph file by the run's own launcher.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use baton_exec::StopLevel;
use baton_graph::Graph;
use baton_layout::AttemptLog;
use baton_model::{Event, EventKind, Outcome, RunId};
use tokio::sync::{mpsc, watch};

use super::*;
use crate::RunConfig;
use crate::config::AgentConfig;
use crate::launch::Launcher;
use crate::workspace::Workspaces;

/// A run of one graph, stopped at the point where the dispatcher would launch units.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    graph: std::sync::Arc<Graph>,
    run: RunId,
    config: RunConfig,
    dirs: RunDirs,
}

impl Fixture {
    /// `graph` (TOML) in a fresh directory; a git repository with one commit if `repo`.
    fn new(graph: &str, repo: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        if repo {
            git(&root, &["init", "-q", "-b", "main"]);
            std::fs::write(root.join("README"), "hello\n").unwrap();
            git(&root, &["add", "README"]);
            git(&root, &["commit", "-q", "-m", "first"]);
        }
        let path = root.join("graph.toml");
        let graph = std::sync::Arc::new(
            baton_graph::load_str(&path, graph).expect("the test's graph is valid"),
        );
        let state_dir = root.join(".baton");
        let run = RunId::new("20261201-000000-test").unwrap();
        let dirs = RunDirs::new(&state_dir, &run);
        dirs.create("test").unwrap();
        let config = RunConfig {
            root: root.clone(),
            state_dir,
            kill_grace: Duration::from_millis(200),
            seed: 1,
            agents: AgentConfig::default(),
            worker: None,
        };
        Self {
            _dir: dir,
            root,
            graph,
            run,
            config,
            dirs,
        }
    }
}

/// git as baton runs it: no system or global config (a developer's hooks, signing or
/// `init.defaultBranch` must not change what the tests see).
fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// What the run around the units holds, as the dispatcher holds it.
struct Parts {
    launcher: Launcher,
    workspaces: Workspaces,
    shared: Shared,
    progress: mpsc::UnboundedReceiver<Event>,
    stop: watch::Sender<StopLevel>,
}

fn parts(fixture: &Fixture) -> Parts {
    let launcher = Launcher::new(
        std::sync::Arc::clone(&fixture.graph),
        fixture.run.clone(),
        fixture.dirs.clone(),
        &fixture.config,
    );
    let workspaces = Workspaces::new(
        &fixture.graph,
        &fixture.root,
        &fixture.config.state_dir,
        &fixture.run,
    )
    .unwrap();
    let (stop, stop_rx) = watch::channel(StopLevel::Run);
    let (progress_tx, progress) = mpsc::unbounded_channel();
    let shared = Shared {
        run: fixture.run.clone(),
        dirs: fixture.dirs.clone(),
        out_dir: launcher.out_dir(),
        redactor: launcher.redactor().clone(),
        meter: Meter::new(Default::default()),
        stop: stop_rx,
        progress: progress_tx,
    };
    Parts {
        launcher,
        workspaces,
        shared,
        progress,
        stop,
    }
}

impl Parts {
    fn assemble(
        &mut self,
        graph: &std::sync::Arc<Graph>,
        task: u32,
        attempt: u32,
    ) -> Result<AttemptUnit, Outcome> {
        assemble(
            Assembly {
                graph,
                launcher: &mut self.launcher,
                workspaces: &mut self.workspaces,
                shared: &self.shared,
                dropped: Vec::new(),
                engine: 0,
                candidate: None,
                ended: &|_| None,
            },
            task,
            attempt,
            false,
            None,
        )
    }

    /// The events the units sent before they ended.
    fn progress(&mut self) -> Vec<EventKind> {
        let mut kinds = Vec::new();
        while let Ok(event) = self.progress.try_recv() {
            kinds.push(event.kind);
        }
        kinds
    }
}

async fn run(unit: AttemptUnit) -> (Option<u32>, AttemptDone) {
    let started = unit.start();
    let pid = started.pid;
    (pid, started.rest.finish().await)
}

#[tokio::test]
async fn a_shell_attempt_ends_with_its_output_and_structured_output() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "hello"
run = "echo hi; echo oops >&2; printf '{\"k\": 1}' > \"$BATON_OUTPUT\""
"#,
        false,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let (pid, done) = run(unit).await;
    assert!(
        pid.is_some(),
        "spawned at start: its pid is recorded with it"
    );
    assert_eq!(done.outcome, Outcome::Exited { code: 0 });
    assert_eq!(done.output.text, "hi");
    assert_eq!(done.output.json, Some(serde_json::json!({"k": 1})));
    assert_eq!(done.output_bytes, 3);
    assert!(done.stderr_tail.contains("oops"));
    assert!(done.log_bytes > 0);
    assert!(done.committed.is_none() && done.tree.head().is_none() && done.checks.is_none());
    assert!(parts.progress().is_empty());
}

#[tokio::test]
async fn a_failed_check_goes_back_to_the_task_until_it_passes() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "fixme"
run = 'if [ -n "$BATON_FIX_FEEDBACK" ]; then echo fixing; grep -q "test -f fixed" "$BATON_FIX_FEEDBACK" && touch fixed; fi'
verify = ["test -f fixed"]
fix_attempts = 2
"#,
        false,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let (_, done) = run(unit).await;
    assert_eq!(done.outcome, Outcome::Exited { code: 0 });
    let checks = done.checks.expect("its last checks are part of its end");
    assert!(checks.iter().all(|c| c.passed()));
    // The failed round was sent as it happened: the fix round after it may take long.
    let progress = parts.progress();
    assert!(
        matches!(&progress[..], [EventKind::Checked { checks, attempt: Some(1), .. }]
            if !checks[0].passed()),
        "{progress:?}"
    );
    // The fix round logs beside the attempt, not over it.
    let id = baton_model::TaskId::new("fixme").unwrap();
    let fix_log = std::fs::read_to_string(fixture.dirs.log(&id, 1, AttemptLog::Fix(1))).unwrap();
    assert_eq!(fix_log, "fixing\n");
    assert!(
        !fixture.dirs.log(&id, 1, AttemptLog::Task).exists(),
        "the first round printed nothing"
    );
}

#[tokio::test]
async fn a_check_that_keeps_failing_fails_the_attempt_after_its_fix_rounds() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "stubborn"
run = "sleep 0.05"
verify = ["echo still broken; false"]
fix_attempts = 1
"#,
        false,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let (_, done) = run(unit).await;
    assert!(
        matches!(&done.outcome, Outcome::VerifyFailed { command, .. } if command.contains("still broken")),
        "{:?}",
        done.outcome
    );
    assert!(
        done.checks.as_ref().unwrap()[0]
            .output
            .contains("still broken")
    );
    // Both rounds are the attempt's time.
    assert!(
        done.duration >= Duration::from_millis(100),
        "{:?}",
        done.duration
    );
    assert_eq!(
        parts.progress().len(),
        1,
        "one fix round, one failed check before it"
    );
}

#[tokio::test]
async fn a_worktree_attempt_commits_its_changes_with_their_evidence() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "edit"
workspace = "worktree"
scope = ["docs/**"]
run = "echo new > notes.txt"
"#,
        true,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    assert!(unit.has_worktree());
    let (_, done) = run(unit).await;
    assert_eq!(done.outcome, Outcome::Exited { code: 0 });
    let Some(baton_model::WorkspaceCommit {
        branch,
        commit: Some(commit),
        scope_violations,
        ..
    }) = &done.committed
    else {
        panic!("committed: {:?}", done.committed);
    };
    assert_eq!(branch, "baton/20261201-000000-test/edit");
    assert_eq!(done.tree.head(), Some(commit.as_str()));
    assert_eq!(scope_violations, &["notes.txt".to_owned()]);
    assert!(done.scope_warning, "outside its scope under `warn`");
    assert_eq!(done.changed.as_deref(), Some(&["notes.txt".to_owned()][..]));
    assert_eq!(done.output.files_changed, vec!["notes.txt".to_owned()]);
    // The user's checkout is untouched.
    assert!(!fixture.root.join("notes.txt").exists());
}

#[tokio::test]
async fn a_failed_setup_is_the_machinerys_failure_and_leaves_the_worktree_fresh() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "needs-setup"
workspace = "worktree"
setup = ["echo installing; exit 3"]
run = "true"
"#,
        true,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    assert!(unit.sets_up(), "a new worktree is set up first");
    let (pid, done) = run(unit).await;
    assert_eq!(pid, None, "its process starts after the setup");
    assert!(
        matches!(&done.outcome, Outcome::SpawnFailed { error }
            if error.starts_with("setup `echo installing; exit 3` failed (exit 3): installing")),
        "{:?}",
        done.outcome
    );
    assert_eq!(
        done.outcome.failure_class(),
        Some(FailureClass::Infrastructure)
    );
    assert!(!done.set_up);
}

#[tokio::test]
async fn a_setup_that_passes_runs_once_before_the_task() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "set"
workspace = "worktree"
setup = ["touch .ready"]
run = "test -f .ready"
"#,
        true,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let (_, done) = run(unit).await;
    assert_eq!(done.outcome, Outcome::Exited { code: 0 });
    assert!(done.set_up);
    parts.workspaces.set_up(0);
    let again = parts.assemble(&fixture.graph, 0, 2).unwrap();
    assert!(!again.sets_up(), "set up once per worktree");
}

#[tokio::test]
async fn what_cannot_start_as_written_fails_at_once_without_a_process() {
    // A predecessor printed a NUL byte (`find -print0`): no command line can hold it.
    let fixture = Fixture::new(
        "[[task]]\nid = \"finds\"\nrun = \"true\"\n\n[[task]]\nid = \"uses\"\nneeds = [\"finds\"]\nrun = \"echo {{ needs.finds.output }}\"\n",
        false,
    );
    let mut parts = parts(&fixture);
    parts.launcher.hold_output(
        0,
        crate::launch::HeldOutput {
            text: "a\0b".into(),
            ..Default::default()
        },
    );
    let outcome = parts
        .assemble(&fixture.graph, 1, 1)
        .err()
        .expect("cannot start");
    assert!(
        matches!(&outcome, Outcome::LaunchFailed { error } if error.contains("NUL")),
        "{outcome:?}"
    );
    assert_eq!(outcome.failure_class(), None, "not retried");
}

#[tokio::test]
async fn a_stop_ends_the_running_process_and_no_check_starts() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "long"
run = "sleep 30"
verify = ["touch checked"]
"#,
        false,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let started = unit.start();
    let stop = parts.stop.clone();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send_replace(StopLevel::Graceful);
    });
    let done = started.rest.finish().await;
    stopper.await.unwrap();
    assert_eq!(done.outcome, Outcome::Cancelled);
    assert!(done.checks.is_none());
    assert!(!fixture.root.join("checked").exists());
}

#[tokio::test]
async fn a_stop_while_the_worktree_is_made_starts_no_process() {
    let fixture = Fixture::new(
        r#"
[[task]]
id = "edit"
workspace = "worktree"
run = "touch started"
"#,
        true,
    );
    let mut parts = parts(&fixture);
    let unit = parts.assemble(&fixture.graph, 0, 1).unwrap();
    let started = unit.start();
    assert_eq!(started.pid, None, "its worktree is made first");
    // Stopped before the unit gets to make it: it is made, and nothing is started in it.
    parts.stop.send_replace(StopLevel::Graceful);
    let done = started.rest.finish().await;
    assert_eq!(done.outcome, Outcome::Cancelled);
    assert_eq!(done.containment, None, "no process was started");
    assert_ne!(done.tree, super::TreeEnd::Unmade);
}

#[test]
fn a_session_is_continued_only_after_the_machinery_cut_the_agent_short_mid_work() {
    let usage = |output_tokens, session: Option<&str>| AgentUsage {
        output_tokens,
        session_id: session.map(str::to_owned),
        ..AgentUsage::default()
    };
    let overloaded = Outcome::AgentFailed {
        class: FailureClass::Infrastructure,
        reason: "api_error_529".into(),
        message: "overloaded".into(),
        retry_after_ms: None,
    };
    let continued = continued_session(&overloaded, &usage(10, Some("s-1"))).unwrap();
    assert_eq!(continued.session.as_deref(), Some("s-1"));
    assert!(continued.fix.is_none());
    assert!(continued_session(&overloaded, &usage(0, Some("s-1"))).is_none());
    assert!(continued_session(&overloaded, &usage(10, None)).is_none());
    assert!(continued_session(&Outcome::Exited { code: 1 }, &usage(10, Some("s-1"))).is_none());
}
