//! Stores that are not what a command expects: an empty file, and a store it can read but not
//! write (a read-only mount), which readers read and writers refuse, saying why.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::test::{BATON, Side, Test};

const GRAPH: &str = "name = \"g\"\n\n[[task]]\nid = \"a\"\nrun = \"echo hello\"\n";

#[test]
fn an_empty_store_file_says_it_is_empty_and_a_run_makes_it_a_store() {
    let mut out = Test::new()
        .graph("g.toml", GRAPH)
        .file(".baton/baton.db", "")
        .args(&["runs"])
        .run();
    for args in [["runs"].as_slice(), &["status"], &["events", "latest"]] {
        out = out
            .then()
            .args(args)
            .run()
            .status(2)
            .stderr_contains("baton.db is empty (0 bytes), not a baton store yet")
            .stderr_contains("`baton run FILE` records one there, or delete the file");
        assert!(!out.stderr.contains("schema version"), "{}", out.stderr);
    }
    out.then()
        .args(&["run", "g.toml"])
        .run()
        .status(0)
        .then()
        .args(&["runs"])
        .run()
        .status(0)
        .stdout_contains("succeeded");
}

/// baton with `.baton/` bind-mounted read-only over itself, in a mount namespace of its own
/// (as root, whom file modes do not stop, and as anyone where user namespaces are allowed);
/// `None` where this machine cannot make one.
fn with_read_only_store(root: &Path, args: &[&str]) -> Option<Side> {
    const CANNOT_MOUNT: i32 = 97;
    let out = Command::new("unshare")
        .args(["--mount", "--map-root-user", "sh", "-c"])
        .arg(format!(
            "mount --bind -o ro .baton .baton 2>/dev/null || exit {CANNOT_MOUNT}; exec \"$@\""
        ))
        .arg("sh")
        .arg(BATON)
        .args(args)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env_remove("BATON_STORE")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if out.status.code() == Some(CANNOT_MOUNT) || out.status.code().is_none() {
        return None;
    }
    if String::from_utf8_lossy(&out.stderr).starts_with("unshare:") {
        return None;
    }
    Some(out.into())
}

#[test]
fn a_read_only_store_is_read_by_readers_and_refused_by_writers_saying_why() {
    use std::io::Write;
    let out = Test::new()
        .graph("g.toml", GRAPH)
        .args(&["run", "g.toml"])
        .run()
        .status(0);
    let run = out.store().run().id.to_string();
    let root = out.path();
    let Some(side) = with_read_only_store(root, &["runs"]) else {
        let _ = std::io::stderr().write_all(
            b"read-only store test: skipped: no mount namespace with a read-only bind mount here\n",
        );
        return;
    };
    for (args, shows) in [
        (["runs"].as_slice(), run.as_str()),
        (&["runs", "--json"], run.as_str()),
        (&["status"], "succeeded"),
        (&["events", "latest"], "run-finished"),
        (&["logs", "latest", "a"], "hello"),
    ] {
        let side = with_read_only_store(root, args).expect("the namespace worked once");
        assert_eq!(
            side.code,
            Some(0),
            "{}: {}\n{}",
            args.join(" "),
            side.stdout,
            side.stderr
        );
        assert!(
            side.stdout.contains(shows),
            "{}: {}",
            args.join(" "),
            side.stdout
        );
    }
    drop(side);
    let side = with_read_only_store(root, &["run", "g.toml"]).expect("the namespace worked once");
    assert_eq!(side.code, Some(3), "{}", side.stderr);
    assert!(
        side.stderr.contains("baton.db cannot be written (")
            && side.stderr.contains("is on a read-only file system")
            && side.stderr.contains("`--store sqlite:PATH`"),
        "{}",
        side.stderr
    );
    // Nothing was recorded by the refused run.
    assert_eq!(out.store().runs().len(), 1);
}
