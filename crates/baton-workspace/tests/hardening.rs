//! Whatever an agent plants in the repository, baton's own git commands do only what baton
//! asks.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use baton_workspace::{MergeOutcome, TaskStart};
use common::{Fixture, git, merged, parents, read, user_git, write};

const HOOKS: &[&str] = &[
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-merge-commit",
    "post-merge",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
];

/// Hooks in `dir` that append their name to `marker`.
fn plant_hooks(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for hook in HOOKS {
        let path = dir.join(hook);
        let script = format!("#!/bin/sh\necho {hook} >> '{}'\n", marker.display());
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Everything baton does in a run, and a check of the results.
fn run_everything(fx: &Fixture) {
    let a = fx.task_from_base("a", &[("a.txt", Some("a\n"))]);
    let b = fx.task_from_base("b", &[("b.txt", Some("b\n"))]);
    let c = fx.task(
        "c",
        &TaskStart::Merge(vec![a.clone(), b.clone()]),
        &[("c.txt", Some("c\n"))],
    );
    let c_start = parents(fx.root(), &c)[0].clone();
    assert_eq!(parents(fx.root(), &c_start), vec![a.clone(), b.clone()]);
    // A fast-forward where one is possible.
    let d = merged(
        fx.repo
            .add_worktree(
                &fx.wt("d"),
                "task/d",
                &TaskStart::Merge(vec![fx.base.clone(), a.clone()]),
            )
            .unwrap(),
    );
    assert_eq!(d, a);
    fx.repo.remove_worktree(&fx.wt("d")).unwrap();

    let result = merged(
        fx.repo
            .merge_into_branch(
                &fx.wt("merge"),
                "baton/r/result",
                &fx.base,
                &[("a".into(), a), ("b".into(), b), ("c".into(), c.clone())],
            )
            .unwrap(),
    );
    assert_eq!(
        git(
            fx.root(),
            &[
                "log",
                "--first-parent",
                "--format=%s",
                &format!("{}..{result}", fx.base)
            ]
        ),
        "baton: merge task c\nbaton: merge task b\nbaton: merge task a"
    );
    let evidence = fx.repo.evidence(&fx.base, &result).unwrap();
    assert_eq!(
        evidence.paths().collect::<Vec<_>>(),
        ["a.txt", "b.txt", "c.txt"]
    );
    let diff = fx.repo.diff(&fx.base, &result).unwrap();
    assert!(diff.contains("diff --git a/a.txt b/a.txt"), "{diff}");

    // The user's branch moved on: apply makes a merge commit.
    write(fx.root(), "user.txt", "mine\n");
    git(fx.root(), &["add", "user.txt"]);
    git(fx.root(), &["commit", "--quiet", "-m", "user's work"]);
    assert!(!fx.repo.is_dirty().unwrap());
    write(fx.root(), "untracked.txt", "x\n");
    assert!(fx.repo.is_dirty().unwrap());
    std::fs::remove_file(fx.root().join("untracked.txt")).unwrap();
    let applied = merged(
        fx.repo
            .apply("baton/r/result", "baton: apply run r", false)
            .unwrap(),
    );
    assert_eq!(parents(fx.root(), &applied).len(), 2);
    assert_eq!(read(fx.root(), "c.txt"), "c\n");

    // Every commit baton made is baton's.
    let authors = git(
        fx.root(),
        &[
            "log",
            "--format=%an <%ae> %cn <%ce> %G?",
            "--no-merges",
            &format!("{}..{c}", fx.base),
        ],
    );
    for line in authors.lines().chain(
        git(
            fx.root(),
            &["log", "-1", "--format=%an <%ae> %cn <%ce> %G?", &applied],
        )
        .lines(),
    ) {
        assert_eq!(line, "baton <baton@localhost> baton <baton@localhost> N");
    }

    fx.repo.delete_branches("task/").unwrap();
    fx.repo.delete_branches("baton/r/").unwrap();
    assert_eq!(fx.worktree_count(), 1);
}

#[test]
fn planted_hooks_never_run() {
    let fx = Fixture::new();
    let marker = fx.dir.path().join("hook-ran");
    plant_hooks(&fx.root().join(".git/hooks"), &marker);
    // Also where a planted `core.hooksPath` points.
    let elsewhere = fx.dir.path().join("hooks");
    plant_hooks(&elsewhere, &marker);
    git(
        fx.root(),
        &["config", "core.hooksPath", elsewhere.to_str().unwrap()],
    );

    run_everything(&fx);
    assert!(
        !marker.exists(),
        "{}",
        std::fs::read_to_string(&marker).unwrap()
    );

    // The hooks are real: git run as the user runs them.
    let status = user_git(fx.root())
        .args(["commit", "--quiet", "--allow-empty", "-m", "user"])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::read_to_string(&marker)
            .unwrap()
            .contains("post-commit")
    );
}

#[test]
fn the_repositorys_config_does_not_change_what_baton_does() {
    let fx = Fixture::new();
    let marker = fx.dir.path().join("program-ran");
    let program = fx.dir.path().join("program");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 1\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = program.to_str().unwrap();
    for (key, value) in [
        ("user.name", "Mallory"),
        ("user.email", "mallory@example.com"),
        ("merge.ff", "only"),
        ("status.showUntrackedFiles", "no"),
        ("diff.noprefix", "true"),
        ("diff.external", program),
        ("core.fsmonitor", program),
        ("commit.gpgSign", "true"),
        ("gpg.program", program),
        ("core.pager", program),
        ("core.editor", program),
        ("rerere.enabled", "true"),
        ("submodule.recurse", "true"),
    ] {
        git(fx.root(), &["config", key, value]);
    }

    run_everything(&fx);
    assert!(
        !marker.exists(),
        "{}",
        std::fs::read_to_string(&marker).unwrap()
    );
}

#[test]
fn replace_refs_are_ignored() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("a.txt", Some("honest\n"))]);
    let b = fx.task_from_base("b", &[("a.txt", Some("forged\n"))]);
    git(fx.root(), &["replace", &a, &b]);
    let evidence = fx.repo.diff(&fx.base, &a).unwrap();
    assert!(evidence.contains("+honest"), "{evidence}");
    let outcome = fx
        .repo
        .merge_into_branch(&fx.wt("m"), "baton/r/result", &fx.base, &[("a".into(), a)])
        .unwrap();
    let MergeOutcome::Merged(result) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        user_git(fx.root())
            .args(["--no-replace-objects", "show", &format!("{result}:a.txt")])
            .output()
            .unwrap()
            .stdout,
        b"honest\n"
    );
}
