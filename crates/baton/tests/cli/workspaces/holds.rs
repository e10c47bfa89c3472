//! What a task's worktree holds, and what it does not: only what git tracks, what
//! `worktree_include` brings in, and never the run's own store.

use crate::workspaces::{git, repo_with};

/// A store kept inside the repository (`--store sqlite:state.db`) is never copied into a
/// worktree, whatever `worktree_include` matches: a copy of a live database is torn, and
/// opening it in baton's own process (as a copy does) and closing it again drops every lock
/// SQLite holds on it there, so that another process could delete the WAL under the run
/// (`docs/ARCHITECTURE.md`, "nothing opens baton.db but SQLite"). Other files the patterns
/// match still come. Before the fix the store and its WAL were copied.
#[test]
fn a_store_inside_the_repository_is_never_copied_into_a_worktree() {
    let graph = "[[task]]\nid = \"look\"\nworkspace = \"worktree\"\n\
                 worktree_include = [\"*.db\", \"*.db-wal\", \"*.db-shm\"]\n\
                 run = \"test -f fixture.db && echo $(ls *.db*)\"\n";
    let test = repo_with(graph).file(".gitignore", "*.db\n*.db-*\n");
    git(test.path(), &["add", ".gitignore"]);
    git(test.path(), &["commit", "-qm", "ignore"]);
    let test = test.file("fixture.db", "a fixture\n");
    let out = test
        .args(&["run", "graph.toml", "--json", "--store", "sqlite:state.db"])
        .run()
        .status(0);
    assert!(out.path().join("state.db").is_file());
    assert_eq!(out.json_task("look")["output"], "fixture.db");
}

/// A worktree task whose command is not there (exit 127: a script the user has not committed)
/// says why a worktree may lack it and what to do, where the newcomer got only `exit 127 ·
/// "./tools/lint.sh: not found"`. A task in the user's checkout gets no such hint.
#[test]
fn a_command_not_found_in_a_worktree_says_what_a_worktree_holds() {
    let graph = "[[task]]\nid = \"lint\"\nworkspace = \"worktree\"\nrun = \"./tools/lint.sh\"\n";
    let test = repo_with(graph).file("tools/lint.sh", "#!/bin/sh\necho linted\n");
    let script = test.path().join("tools/lint.sh");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = test.args(&["run", "graph.toml", "--json"]).run().status(1);
    let reason = out.json_task("lint")["reason"].as_str().unwrap().to_owned();
    assert!(reason.starts_with("exit 127"), "{reason}");
    assert!(
        reason.contains("a worktree holds only what git tracks")
            && reason.contains("base = \"working-tree\""),
        "{reason}"
    );
    let shared = "[[task]]\nid = \"lint\"\nrun = \"./tools/absent.sh\"\n";
    let out = repo_with(shared)
        .args(&["run", "graph.toml", "--json"])
        .run()
        .status(1);
    let reason = out.json_task("lint")["reason"].as_str().unwrap().to_owned();
    assert_eq!(reason, "exit 127");
}
