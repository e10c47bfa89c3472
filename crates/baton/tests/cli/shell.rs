//! `baton completions` and `baton man`, generated from the command line's definition.

use std::process::Command;

use crate::test::Test;

/// Sourced in a real bash in `dir`, with this baton first on `PATH` (the script asks it what
/// to complete): what `COMP_WORDS` completes to at its last word.
fn complete(script: &std::path::Path, dir: &std::path::Path, words: &str) -> Vec<String> {
    let bin = std::path::Path::new(crate::test::BATON).parent().unwrap();
    let program = format!(
        "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
         _clap_complete_baton baton \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let done = Command::new("bash")
        .args(["-c", &program])
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    String::from_utf8_lossy(&done.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_bash_completion_script_completes_commands_flags_runs_and_tasks() {
    let test = Test::new()
        .graph(
            "two.toml",
            "[[task]]\nid = \"alpha\"\nrun = \"true\"\n\n[[task]]\nid = \"beta\"\nrun = \"true\"\n",
        )
        .graph("one.toml", "[[task]]\nid = \"gamma\"\nrun = \"true\"\n");
    let first = test.args(&["run", "two.toml", "--json"]).run().status(0);
    let two = first.json()["run"]["id"].as_str().unwrap().to_owned();
    let second = first
        .then()
        .args(&["run", "one.toml", "--json"])
        .run()
        .status(0);
    let one = second.json()["run"]["id"].as_str().unwrap().to_owned();
    let out = second.then().args(&["completions", "bash"]).run().status(0);
    let dir = out.path().to_owned();
    let script = dir.join("baton.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let words = |line: &str| complete(&script, &dir, line);

    // Commands and flags, from the command line's definition.
    let commands = words("baton ru");
    assert!(commands.iter().any(|w| w == "run"), "{commands:?}");
    assert!(commands.iter().any(|w| w == "runs"), "{commands:?}");
    assert_eq!(words("baton run --con"), ["--concurrency"]);
    // Run ids from the store, newest first, and `latest`.
    let runs: Vec<String> = words("baton logs ''")
        .into_iter()
        .filter(|w| !w.starts_with('-'))
        .collect();
    assert_eq!(runs, ["latest".to_owned(), one.clone(), two.clone()]);
    // A prefix of one run's id that the other's does not share (two runs started in one
    // second share all but the last characters).
    let differ = two
        .chars()
        .zip(one.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let prefix = words(&format!("baton status {}", &two[..=differ]));
    assert_eq!(prefix, std::slice::from_ref(&two));
    // Task ids of the run on the line, else of the latest.
    let tasks = |line: &str| -> Vec<String> {
        words(line)
            .into_iter()
            .filter(|w| !w.starts_with('-'))
            .collect()
    };
    assert_eq!(tasks(&format!("baton logs {two} ''")), ["alpha", "beta"]);
    assert_eq!(tasks(&format!("baton retry {two} alpha b")), ["beta"]);
    assert_eq!(tasks("baton logs latest ''"), ["gamma"]);
    // Outside a project, or before any run, nothing to offer and no error.
    let empty = Test::new();
    let nothing: Vec<String> = complete(&script, empty.path(), "baton logs ''")
        .into_iter()
        .filter(|w| !w.starts_with('-'))
        .collect();
    assert!(nothing.is_empty(), "{nothing:?}");

    for shell in ["zsh", "fish", "powershell", "elvish"] {
        let out = Test::new().args(&["completions", shell]).run().status(0);
        assert!(out.stdout.contains("COMPLETE"), "{shell}: {}", out.stdout);
    }
    Test::new()
        .args(&["completions", "tcsh"])
        .run()
        .status(2)
        .stderr_contains("possible values: bash, elvish, fish, powershell, zsh");
}

#[test]
fn the_man_pages_cover_every_command() {
    let out = Test::new().args(&["man"]).run().status(0);
    assert!(out.stdout.starts_with(".ie"), "{}", &out.stdout[..80]);
    assert!(out.stdout.contains(".TH baton 1"), "{}", out.stdout);
    assert!(out.stdout.contains("Run a graph file"));
    let dir = out.path().join("man1");
    // Kept until the end: the test's directory goes with it.
    let written = out
        .then()
        .args(&["man", "--dir", dir.to_str().unwrap()])
        .run()
        .status(0)
        .stdout_contains("man pages to");
    // One page for baton and one per command it lists.
    let help = written.then().args(&["--help"]).run().status(0);
    let commands = crate::test::commands_in_help(&help.stdout);
    assert!(commands.len() > 20, "{}", help.stdout);
    for name in &commands {
        assert!(
            dir.join(format!("baton-{name}.1")).exists(),
            "no page for {name}"
        );
    }
    let pages = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(pages, commands.len() + 1);
    let run = std::fs::read_to_string(dir.join("baton-run.1")).unwrap();
    assert!(run.contains(".TH baton-run 1"), "{run}");
    assert!(run.contains("concurrency"), "{run}");
    // The hidden command a user never types has no page.
    assert!(!dir.join("baton-agent-http.1").exists());
    drop(help);
}
