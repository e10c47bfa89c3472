//! What tasks print: a flood that must not grow baton, bytes that are not UTF-8, a crash.

use std::time::Duration;

use baton_model::Outcome;

use crate::procs;
use crate::test::{RUN_LIMIT, Test, baton_in, fixture};

/// 200 MB through baton must not be held in memory. A whole run of the quickstart peaks at about
/// 9 MiB of RSS (debug build); keeping the flood would take 200 MB.
const RSS_LIMIT_KIB: u64 = 60 * 1024;
const FLOOD_BYTES: u64 = 200_000_000;

#[test]
fn a_200_mb_output_keeps_baton_small_and_reaches_the_log() {
    let mut running = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "flood"
log_limit = "1GiB"
run = "sh {} {FLOOD_BYTES}"
"#,
                fixture("flood.sh")
            ),
        )
        .args(&["run", "g.toml", "--quiet"])
        .spawn();
    let pid = running.pid();
    let mut peak = 0;
    let deadline = std::time::Instant::now() + RUN_LIMIT;
    while !running.exited() && std::time::Instant::now() < deadline {
        // VmHWM only grows, so a sample taken late still covers everything before it.
        if let Some(kib) = procs::peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = running.wait(RUN_LIMIT).status(0);
    eprintln!("baton's peak RSS during a {FLOOD_BYTES}-byte flood: {peak} KiB");
    assert!(peak > 0, "never sampled baton's memory");
    assert!(
        peak < RSS_LIMIT_KIB,
        "baton's peak RSS was {peak} KiB printing {FLOOD_BYTES} bytes"
    );

    let store = out.store();
    let attempt = &store.attempts("flood")[0];
    assert_eq!(attempt.output_bytes, Some(FLOOD_BYTES));
    let log = attempt.log_path.as_deref().expect("log path");
    let log = out.path().join(log);
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        FLOOD_BYTES,
        "{}",
        log.display()
    );
    // What is kept in the store and handed on is bounded.
    let kept = store.task("flood").output.unwrap_or_default();
    assert!(kept.len() < 1024 * 1024, "kept {} bytes", kept.len());
    assert!(kept.contains(" cut …]"), "no cut marker in the kept output");
}

#[test]
fn invalid_utf8_is_logged_raw_and_handed_on_lossily() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "bytes"
run = "sh {}"

[[task]]
id = "reader"
needs = ["bytes"]
run = "printf '%s' {{{{ needs.bytes.output }}}} > got.txt"
"#,
                fixture("invalid-utf8.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let output = out.json_task("bytes")["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        output.starts_with("before ") && output.ends_with(" after"),
        "{output:?}"
    );
    assert!(output.contains('\u{FFFD}'), "{output:?}");
    let stderr = out.json_task("bytes")["stderr"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        stderr.contains("err ") && stderr.contains(" end"),
        "{stderr:?}"
    );

    let got = String::from_utf8(out.read("got.txt")).expect("handed on as UTF-8");
    assert_eq!(got, output);

    let store = out.store();
    let log = store.attempts("bytes")[0].log_path.clone().unwrap();
    let log = std::fs::read(out.path().join(log)).unwrap();
    let window = |needle: &[u8]| log.windows(needle.len()).any(|w| w == needle);
    assert!(window(b"before \xff\xfe after\n"), "log: {log:?}");
    assert!(window(b"err \xff end\n"), "log: {log:?}");
    store.assert_consistent();
}

#[test]
fn a_crash_is_a_signal_with_its_name() {
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "crash"
run = "exec sh {}"
"#,
                fixture("crash.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(1);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    let task = out.json_task("crash");
    assert_eq!(task["state"], "failed");
    assert_eq!(
        task["outcome"],
        serde_json::json!({"kind": "signaled", "signal": 11, "name": "SEGV"})
    );
    assert_eq!(task["output"], "about to crash");
    assert_eq!(
        out.store().attempts("crash")[0].outcome,
        Some(Outcome::signaled(11))
    );
}

#[test]
fn a_stderr_flood_is_logged_and_its_tail_bounded() {
    const BYTES: u64 = 20_000_000;
    let out = Test::new()
        .graph(
            "g.toml",
            &format!(
                r#"
[[task]]
id = "noisy"
run = "echo to stdout; sh {} {BYTES} stderr; echo; echo done >&2"
"#,
                fixture("flood.sh")
            ),
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let task = out.json_task("noisy");
    assert_eq!(task["output"], "to stdout");
    let stderr = task["stderr"].as_str().unwrap();
    assert!(
        stderr.len() < 64 * 1024,
        "kept {} bytes of stderr",
        stderr.len()
    );
    assert!(stderr.trim_end().ends_with("done"), "the tail is kept");
    let log = task["log"].as_str().unwrap();
    let size = std::fs::metadata(out.path().join(log)).unwrap().len();
    // Both streams, interleaved: the flood plus the short lines around it.
    assert_eq!(
        size,
        BYTES + "to stdout\n".len() as u64 + 1 + "done\n".len() as u64
    );
}

/// What tasks print, and the names of files they make, never reach the user's terminal as
/// control sequences (an OSC 52 clipboard write here) through anything baton shows: the run's
/// summary and progress lines, `status`, `events` and `runs`. (`logs` shows them made safe on
/// a terminal, and passes the log's bytes on unchanged into a pipe or file, like `cat`.)
#[test]
fn control_sequences_from_tasks_never_reach_the_terminal_raw() {
    let graph = r#"
name = "hostile"

[defaults]
workspace = "worktree"

[[task]]
id = "evil"
scope = ["src/**"]
scope_policy = "enforce"
run = '''
osc=$(printf '\033]52;c;SGVsbG8=\007')
printf 'x' > "evil${osc}.txt"
echo "said ${osc} on stdout"
echo "said ${osc} on stderr" >&2
'''
"#;
    let out = crate::workspaces::repo_with(graph)
        .args(&["run", "graph.toml"])
        .run()
        .status(1);
    let root = out.path().to_path_buf();
    let mut shown = vec![
        ("run stdout".to_owned(), out.stdout.clone()),
        ("run stderr".to_owned(), out.stderr.clone()),
    ];
    for args in [vec!["status"], vec!["events", "latest"], vec!["runs"]] {
        shown.push((args.join(" "), baton_in(&root, &args).stdout));
    }
    for (what, text) in &shown {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
            "a control character reached {what}: {text:?}"
        );
    }
    // Shown, in a visible form.
    let status = &shown[2].1;
    assert!(status.contains("evil^[]52;c;SGVsbG8=^G.txt"), "{status}");
    let events = &shown[3].1;
    assert!(events.contains("evil^[]52;c;SGVsbG8=^G.txt"), "{events}");
    let piped = baton_in(&root, &["logs", "latest", "evil"]).stdout;
    assert!(
        piped.contains("said \u{1b}]52;c;SGVsbG8=\u{7} on stdout"),
        "{piped:?}"
    );
}

#[test]
fn a_log_past_its_limit_keeps_its_start_and_end_and_the_task_runs_on() {
    let out = Test::new()
        .graph(
            "g.toml",
            r#"
[defaults]
log_limit = "64KiB"

[[task]]
id = "chatty"
run = "echo the-start; head -c 20000000 /dev/zero | tr '\\0' y; echo; echo the-end"
"#,
        )
        .args(&["run", "g.toml", "--json"])
        .run()
        .status(0);
    let task = out.json_task("chatty");
    assert_eq!(task["state"], "succeeded");
    let log_path = out.store().attempts("chatty")[0].log_path.clone().unwrap();
    let log = std::fs::read(out.path().join(&log_path)).unwrap();
    assert!(log.len() < 70 * 1024, "{} bytes", log.len());
    let text = String::from_utf8_lossy(&log);
    assert!(text.starts_with("the-start\n"), "{}", &text[..40]);
    assert!(
        text.ends_with("\nthe-end\n"),
        "{}",
        &text[text.len() - 40..]
    );
    assert!(
        text.contains("bytes of this attempt's output were cut here"),
        "no note of the cut"
    );
    // Stored as one of the run's log bytes, not the 20 MB it printed.
    let logs = out
        .then()
        .args(&["logs", "latest", "chatty"])
        .run()
        .status(0);
    assert!(logs.stdout.len() < 70 * 1024);
}
