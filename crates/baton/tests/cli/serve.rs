//! `baton serve`: the dashboard in a real browser (Chromium, driven by playwright-core from
//! tests/browser) while a run goes in another process: a task turns green without a reload,
//! its log streams, a waiting task is approved from the page, and nothing is served without
//! the token.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use baton_model::TaskState;

use crate::test::{BATON, RUN_LIMIT, Store, Test, baton_in};

#[test]
fn the_dashboard_follows_a_run_streams_a_log_and_approves_from_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let graph = format!(
        r#"
[[task]]
id = "slow"
run = "echo started; while [ ! -e '{}' ]; do sleep 0.1; done; echo released"

[[task]]
id = "gate"
needs = ["slow"]
approval = true
run = "echo deployed"

[[task]]
id = "other"
run = "echo meanwhile"
"#,
        release.display()
    );
    let mut running = Test::new()
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml"])
        .spawn();
    let run = running.await_that("slow running", RUN_LIMIT, |root: &Path| {
        let store = Store::once_a_run_is_in(root)?;
        let run = store.try_run()?;
        let slow = store
            .tasks()
            .into_iter()
            .find(|t| t.task.as_str() == "slow")?;
        (slow.status == TaskState::Running).then(|| run.id.to_string())
    });

    // Not on an address others can reach, unless asked.
    let refused = baton_in(running.path(), &["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not a loopback address"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--allow-remote"),
        "{}",
        refused.stderr
    );

    // Remote, when asked: with a warning that says what is exposed.
    let (mut remote, said) = serve(running.path(), &["--addr", "0.0.0.0:0", "--allow-remote"]);
    let _ = remote.kill();
    let _ = remote.wait();
    assert!(
        said[0].starts_with("baton: warning: serving on 0.0.0.0:")
            && said[0].contains("approve, reject, cancel, retry and resume")
            && said[0].contains("TLS"),
        "{said:?}"
    );

    let (mut server, said) = serve(running.path(), &["--addr", "127.0.0.1:0"]);
    let link = said[1]
        .strip_prefix("baton: open ")
        .unwrap_or_else(|| panic!("{said:?}"))
        .to_owned();
    assert!(link.contains("?token="), "{link}");
    // Two dashboards side by side (on another port, for the same project here).
    let (mut other, said) = serve(running.path(), &["--addr", "127.0.0.1:0"]);
    let other_link = said[1].strip_prefix("baton: open ").unwrap().to_owned();

    let screenshot = match std::env::var_os("BATON_UPDATE_SCREENSHOTS") {
        Some(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/dashboard.png"),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png"),
    };
    let browser = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/serve.mjs"))
        .args([&link, &run])
        .arg(&release)
        .arg(&screenshot)
        .arg(&other_link)
        .output()
        .expect("node (the test command installs playwright-core)");
    for server in [&mut server, &mut other] {
        let _ = server.kill();
        let _ = server.wait();
    }
    assert!(
        browser.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&browser.stderr),
        String::from_utf8_lossy(&browser.stdout)
    );
    let seen: serde_json::Value = serde_json::from_slice(&browser.stdout).unwrap();
    assert_eq!(
        seen["unauthorized"],
        serde_json::json!([401, 401, 401, 401])
    );
    // The token left the address once it became a cookie.
    assert!(
        !seen["address"].as_str().unwrap().contains("token"),
        "{seen}"
    );
    // The cookie went to no other server on the host, and two dashboards keep theirs apart.
    assert!(
        seen["cookiesElsewhere"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| !c.as_str().unwrap().contains("baton")),
        "{seen}"
    );
    assert_eq!(seen["otherDashboard"], "baton runs", "{seen}");
    assert_eq!(seen["firstAfterSecond"], 200, "{seen}");
    // No page holds the token.
    assert_eq!(
        seen["tokenInPages"],
        serde_json::json!([false, false]),
        "{seen}"
    );
    // Nothing from a request is an option; only the dashboard's own paths answer.
    assert_eq!(
        seen["injection"],
        serde_json::json!({"retryOption": 400, "eventsOption": 404, "logOption": 400, "outside": 404}),
        "{seen}"
    );
    // Sixteen streams at once, and the seventeenth refused.
    let mut streams = vec![200; 16];
    streams.push(503);
    assert_eq!(seen["streams"], serde_json::json!(streams), "{seen}");
    assert!(seen["logBefore"].as_str().unwrap().contains("started"));
    assert!(!seen["logBefore"].as_str().unwrap().contains("released"));
    assert!(seen["logAfter"].as_str().unwrap().contains("released"));
    assert_eq!(seen["greenWithoutReload"], true);
    assert_eq!(seen["stillNotReloaded"], true);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["backToRuns"], true, "{seen}");
    assert_eq!(seen["listState"], "needs you", "{seen}");
    assert!(
        seen["needsYou"]
            .as_str()
            .unwrap()
            .contains("gate waits for approval"),
        "{seen}"
    );

    // The approval is recorded as the CLI records it, and the run ended.
    let out = running.wait(RUN_LIMIT).status(0);
    let store = out.store();
    assert_eq!(store.task("gate").status, TaskState::Succeeded);
    let decisions = baton_in(out.path(), &["events", &run]);
    assert!(
        decisions.stdout.contains("gate: approved"),
        "{}",
        decisions.stdout
    );
}

/// `baton serve ARGS` in `dir`, and the first two lines it printed.
fn serve(dir: &Path, args: &[&str]) -> (std::process::Child, Vec<String>) {
    let mut server = Command::new(BATON)
        .arg("serve")
        .args(args)
        .current_dir(dir)
        .env_remove("BATON_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let said: Vec<String> = (0..2).map(|_| lines.next().unwrap().unwrap()).collect();
    assert!(
        said.iter().any(|l| l.contains("the dashboard of")),
        "{said:?}"
    );
    (server, said)
}

/// Red-team finding 17: 200 followers of a run's events were 200 `baton events --follow`
/// processes (1.9 GB). The run's events are read from the store in-process now: ten open
/// streams, and the server has no child process.
#[test]
fn the_run_s_event_streams_cost_no_process() {
    let out = Test::new()
        .graph("graph.toml", "[[task]]\nid = \"a\"\nrun = \"true\"\n")
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let (mut server, said) = serve(out.path(), &["--addr", "127.0.0.1:0"]);
    let link = said[1].strip_prefix("baton: open ").unwrap();
    let (address, base, token) = parts(link);
    let streams: Vec<std::net::TcpStream> = (0..10)
        .map(|_| {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            write!(
                stream,
                "GET /{base}/runs/{run}/events HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\r\n"
            )
            .unwrap();
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).unwrap();
            assert_eq!(&head, b"HTTP/1.1 200", "{}", String::from_utf8_lossy(&head));
            stream
        })
        .collect();
    let children: usize = std::fs::read_dir(format!("/proc/{}/task", server.id()))
        .unwrap()
        .flatten()
        .map(|task| {
            std::fs::read_to_string(task.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .count()
        })
        .sum();
    drop(streams);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(children, 0);
}

/// The dashboard pages through a large run's task cards (`?page=N`), as the report file shows
/// its first page.
#[test]
fn the_dashboard_pages_through_a_large_run_s_tasks() {
    let mut graph = String::from("[run]\nconcurrency = 16\n\n");
    for i in 0..650 {
        graph.push_str(&format!("[[task]]\nid = \"t{i}\"\nrun = \"true\"\n\n"));
    }
    let out = Test::new()
        .graph("graph.toml", &graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let [third, second] = pages(
        out.path(),
        [&format!("runs/{run}?page=3"), &format!("runs/{run}?page=2")],
    );
    assert!(
        third.starts_with("HTTP/1.1 200"),
        "{}",
        &third[..200.min(third.len())]
    );
    assert!(third.contains("Tasks 601–650 of 650"), "page 3");
    assert_eq!(third.matches("<details class=\"task ").count(), 50);
    assert!(third.contains("<a href=\"?page=2\">‹ earlier</a>"));
    assert!(!third.contains("later ›"));
    assert!(second.contains("Tasks 301–600 of 650"));
    assert!(
        second.contains("id=\"t-t300\""),
        "file order after those that need a look"
    );
    assert!(second.contains("<a href=\"?page=3\">later ›</a>"));
}

/// `GET PATH` (relative to the dashboard's own path) of the dashboard at `link` (the link
/// `baton serve` printed), with its token: the whole response.
fn http_get(link: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let (address, base, token) = parts(link);
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /{base}/{path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// A dashboard's link (`http://ADDRESS/BASE/?token=TOKEN`) taken apart.
fn parts(link: &str) -> (&str, &str, &str) {
    let (address, rest) = link
        .strip_prefix("http://")
        .unwrap()
        .split_once('/')
        .unwrap();
    let (base, token) = rest.split_once("/?token=").unwrap();
    (address, base, token)
}

/// The task page's diff was double-spaced (a block per line, and a line break between them):
/// one block a line, nothing between.
#[test]
fn the_task_page_s_diff_is_a_line_a_line() {
    let graph = "[[task]]\nid = \"edit\"\nworkspace = \"worktree\"\nrun = \"printf 'two\\\\nthree\\\\n' >> shared.txt\"\n";
    let out = crate::workspaces::repo_with(graph)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(0);
    let run = out.json()["run"]["id"].as_str().unwrap().to_owned();
    let [page] = pages(out.path(), [&format!("runs/{run}/task?name=edit")]);
    let diff = page
        .split("<pre class=\"diff\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("{page}"));
    assert!(
        diff.contains("<span class=\"add\">+two</span><span class=\"add\">+three</span>"),
        "{diff}"
    );
    assert!(!diff.contains('\n'), "{diff}");
}

/// The dashboard of the project in `dir`, asked for each of `paths` (relative to its own
/// path), then stopped: the whole responses.
fn pages<const N: usize>(dir: &Path, paths: [&str; N]) -> [String; N] {
    let (mut server, said) = serve(dir, &["--addr", "127.0.0.1:0"]);
    let link = said[1].strip_prefix("baton: open ").unwrap().to_owned();
    let got = paths.map(|path| http_get(&link, path));
    let _ = server.kill();
    let _ = server.wait();
    got
}
