//! `baton completions` and `baton man`, generated from the command line's definition.

use std::process::Command;

use crate::test::Test;

#[test]
fn the_bash_completion_script_completes_commands_and_their_flags() {
    let out = Test::new().args(&["completions", "bash"]).run().status(0);
    let script = out.path().join("baton.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // Sourced in a real bash, asked what `baton ru<TAB>` and `baton run --con<TAB>` complete.
    let complete = |words: &str, cword: u32| {
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; _baton baton \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let done = Command::new("bash")
            .args(["-c", &program])
            .output()
            .unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        String::from_utf8_lossy(&done.stdout).trim().to_owned()
    };
    let commands = complete("baton ru", 1);
    assert!(commands.split(' ').any(|w| w == "run"), "{commands}");
    assert!(commands.split(' ').any(|w| w == "runs"), "{commands}");
    assert_eq!(complete("baton run --con", 2), "--concurrency");
    for shell in ["zsh", "fish", "powershell"] {
        let out = Test::new().args(&["completions", shell]).run().status(0);
        assert!(out.stdout.contains("approve"), "{shell}: {}", out.stdout);
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
    let commands: Vec<String> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A long description goes on under its command, indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
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
