//! What an agent's tools leave running (a daemon, a server) ends with its attempt, its
//! timeout, or when its run is resumed after a crash.

use super::*;

/// The escapes, each writing its pid under `root`, for Claude Code's Bash tool to run; then
/// `then` (a shell command).
fn agent_escapes(root: &Path, then: &str) -> (String, [String; 3]) {
    let pid = |name: &str| root.join(name).to_str().unwrap().to_owned();
    let (daemon, double, stubborn) = (pid("daemon.pid"), pid("double.pid"), pid("stubborn.pid"));
    let command = format!(
        "setsid sh -c 'echo $$ > {daemon}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         ( ( setsid sh -c 'echo $$ > {double}; exec sleep 300' </dev/null >/dev/null 2>&1 & ) & )\n\
         sh -c 'trap \"\" TERM; echo $$ > {stubborn}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
         while [ ! -s {daemon} ] || [ ! -s {double} ] || [ ! -s {stubborn} ]; do sleep 0.01; done\n\
         {then}"
    );
    (command, [daemon, double, stubborn])
}

fn assert_gone(paths: &[String], when: &str) {
    for path in paths {
        let pid: i32 = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .trim()
            .parse()
            .unwrap();
        assert!(
            crate::procs::gone_within(pid, std::time::Duration::from_secs(5)),
            "{when}: {path}: {pid} outlived the agent's attempt"
        );
    }
}

/// `test` with a Claude task (not confined: the pid files are written outside its worktree)
/// whose Bash tool runs `command`, then answers `Daemons: started`; its worktree's repository
/// has a commit.
fn daemon_agent(test: Test, command: &str, timeout: &str) -> (Test, MockModel) {
    let script = Script::new()
        .rule(Rule::text("Daemons: started").when_last_contains("toolu_mock"))
        .rule(
            Rule::tool_use(
                "Bash",
                serde_json::json!({"command": command, "description": "start daemons"}),
            )
            .when_contains("TASK-DAEMONS"),
        );
    let model = MockModel::start(script).unwrap();
    let graph = format!(
        "[[task]]\nid = \"work\"\nengine = \"claude\"\ntimeout = \"{timeout}\"\n\
         confine = \"none\"\nprompt = \"TASK-DAEMONS: start some servers\"\n\
         allowed_tools = [\"Bash\"]\n"
    );
    let test = with_claude(test, &model).graph("graph.toml", &graph);
    crate::workspaces::git(test.path(), &["add", "-A"]);
    crate::workspaces::git(test.path(), &["commit", "-qm", "start"]);
    (test, model)
}

/// What an agent's tool calls start ends with the agent's attempt (#14 item 3): a daemon in a
/// session of its own, a double fork into one and a TERM-ignoring child, started by Claude
/// Code's Bash tool, outlive the tool call but not the attempt.
#[test]
fn what_an_agent_s_tools_left_running_ends_with_its_attempt() {
    if !crate::test::cgroups_here("what_an_agent_s_tools_left_running_ends_with_its_attempt") {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let (command, pids) = agent_escapes(&root, "true");
    let (test, _model) = daemon_agent(test, &command, "2m");
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(0);
    let work = out.json_task("work");
    assert_eq!(work["output"], "Daemons: started", "{work}");
    assert_eq!(work["containment"], "cgroup");
    assert_gone(&pids, "after the agent finished");
}

/// … when the agent's time runs out under a tool call that hangs …
#[test]
fn what_an_agent_s_tools_left_running_ends_with_its_timeout() {
    if !crate::test::cgroups_here("what_an_agent_s_tools_left_running_ends_with_its_timeout") {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let (command, pids) = agent_escapes(&root, "sleep 120");
    let (test, _model) = daemon_agent(test, &command, "4s");
    let out = test
        .args(&["run", "graph.toml", "--json", "--kill-grace", "200ms"])
        .run()
        .status(1);
    assert_eq!(out.json_task("work")["state"], "timed_out");
    assert_gone(&pids, "after the agent's timeout");
}

/// … and when its driver dies (the daemons live on: nothing is left to end them) and the run
/// is resumed, which ends them before the task goes on.
#[test]
fn what_an_agent_s_tools_left_running_ends_when_its_run_is_resumed() {
    if !crate::test::cgroups_here("what_an_agent_s_tools_left_running_ends_when_its_run_is_resumed")
    {
        return;
    }
    let test = Test::new();
    let root = test.path().canonicalize().unwrap();
    let marker = root.join("started");
    let (escapes, pids) = agent_escapes(&root, &format!("touch {}; sleep 120", marker.display()));
    // The second time (after the resume) the tool call returns at once.
    let command = format!(
        "if [ -e {} ]; then true; else\n{escapes}\nfi",
        marker.display()
    );
    let (test, _model) = daemon_agent(test, &command, "2m");
    let mut running = test.args(&["run", "graph.toml", "--quiet"]).spawn();
    running.await_that("the daemons", crate::test::RUN_LIMIT, |root| {
        root.join("started").exists().then_some(())
    });
    let killed = running.kill();
    std::thread::sleep(std::time::Duration::from_millis(200));
    for path in &pids {
        let pid: i32 = std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(crate::procs::alive(pid), "{path} died with the driver");
    }
    let (_, resumed) = killed.resumed();
    assert_eq!(resumed.json_task("work")["output"], "Daemons: started");
    assert_gone(&pids, "after the resume");
}
