//! Filter, merge and diff drivers: those the repository's config defined when baton took it in
//! hand keep working; one planted afterwards (or a trusted one redefined), named by a
//! `.gitattributes`, never runs in anything baton does.

mod common;

use std::path::Path;

use baton_workspace::{Drivers, MergeOutcome, Repo, TaskStart};
use common::{Fixture, git, merged, read, user_git, write};

/// A command that appends `what` to `marker`, then (for a filter) passes its input through.
fn logs(marker: &Path, what: &str) -> String {
    format!("sh -c 'echo {what} >> \"{}\"; cat'", marker.display())
}

fn set(root: &Path, key: &str, value: &str) {
    git(root, &["config", key, value]);
}

/// A repository whose trusted config has a filter `upper` (upper-cases `*.up` files when they
/// are added), with attributes that name drivers `evil` and `x=y` for `*.txt` files, none
/// of them defined yet. Then the planting: `evil` and `x=y` defined, `upper` redefined, all
/// logging to the returned marker.
fn planted() -> (Fixture, std::path::PathBuf) {
    let mut fx = Fixture::new();
    let root = fx.root().to_path_buf();
    set(&root, "filter.upper.clean", "tr a-z A-Z");
    set(&root, "filter.upper.smudge", "cat");
    write(
        &root,
        ".gitattributes",
        "*.up filter=upper\n*.txt filter=evil merge=evil diff=evil\n*.eq filter=x=y\n",
    );
    git(&root, &["add", ".gitattributes"]);
    git(&root, &["commit", "--quiet", "-m", "attributes"]);
    // Taken in hand now, as at the start of a run.
    fx.repo = Repo::discover(&root).unwrap();
    fx.base = fx.repo.resolve("HEAD").unwrap();

    let marker = fx.dir.path().join("driver-ran");
    set(&root, "filter.evil.clean", &logs(&marker, "clean"));
    set(&root, "filter.evil.smudge", &logs(&marker, "smudge"));
    set(&root, "filter.evil.required", "true");
    set(&root, "merge.evil.driver", &logs(&marker, "merge"));
    set(&root, "diff.evil.textconv", &logs(&marker, "textconv"));
    set(&root, "diff.evil.command", &logs(&marker, "command"));
    set(&root, "filter.x=y.clean", &logs(&marker, "x=y"));
    set(&root, "filter.upper.clean", &logs(&marker, "redefined"));
    (fx, marker)
}

/// Tasks `a` and `b` merged into the run's result, as at the end of a run.
fn merge_result(fx: &Fixture, a: &str, b: &str) -> MergeOutcome {
    let tasks = [
        ("a".to_owned(), a.to_owned()),
        ("b".to_owned(), b.to_owned()),
    ];
    let path = fx.wt("merge");
    fx.repo
        .merge_into_branch(&path, "baton/r/result", &fx.base, &tasks)
        .unwrap()
}

fn assert_never_ran(marker: &Path) {
    assert!(
        !marker.exists(),
        "a planted driver ran: {}",
        std::fs::read_to_string(marker).unwrap()
    );
}

#[test]
fn planted_drivers_never_run_and_trusted_ones_still_do() {
    let (fx, marker) = planted();
    let (wt_a, wt_b) = (fx.wt("a"), fx.wt("b"));

    // Checkouts (smudge), commits (clean), with the worktree's own config planted too.
    let start = TaskStart::Commit(fx.base.clone());
    merged(fx.repo.add_worktree(&wt_a, "task/a", &start).unwrap());
    git(fx.root(), &["config", "extensions.worktreeConfig", "true"]);
    git(
        &wt_a,
        &[
            "config",
            "--worktree",
            "filter.local.clean",
            &logs(&marker, "local"),
        ],
    );
    write(
        &wt_a,
        ".gitattributes",
        &format!("{}*.md filter=local\n", read(fx.root(), ".gitattributes")),
    );
    write(&wt_a, "shared.txt", "ONE\ntwo\nthree\n");
    write(&wt_a, "loud.up", "quiet words\n");
    write(&wt_a, "notes.md", "notes\n");
    write(&wt_a, "odd.eq", "odd\n");
    let a = fx.repo.commit_all(&wt_a, "task a").unwrap().unwrap();
    // The trusted filter applied (its trusted definition, not the planted one); the files
    // under planted drivers went in as they are.
    let blob = |rev: &str, path: &str| git(fx.root(), &["show", &format!("{rev}:{path}")]);
    assert_eq!(blob(&a, "loud.up"), "QUIET WORDS");
    assert_eq!(blob(&a, "shared.txt"), "ONE\ntwo\nthree");
    assert_eq!(blob(&a, "notes.md"), "notes");

    merged(fx.repo.add_worktree(&wt_b, "task/b", &start).unwrap());
    write(&wt_b, "shared.txt", "one\ntwo\nTHREE\n");
    let b = fx.repo.commit_all(&wt_b, "task b").unwrap().unwrap();

    // Merges: a dependent's start, and the run's result. Both sides changed `shared.txt`
    // (different lines): git's own three-way merge joins them.
    let c = merged(
        fx.repo
            .add_worktree(
                &fx.wt("c"),
                "task/c",
                &TaskStart::Merge(vec![a.clone(), b.clone()]),
            )
            .unwrap(),
    );
    assert_eq!(read(&fx.wt("c"), "shared.txt"), "ONE\ntwo\nTHREE\n");
    let result = merged(merge_result(&fx, &a, &b));
    assert_eq!(blob(&result, "shared.txt"), "ONE\ntwo\nTHREE");
    let evidence = fx.repo.evidence(&fx.base, &c).unwrap();
    assert!(evidence.paths().any(|p| p == "shared.txt"), "{evidence:?}");
    assert!(fx.repo.diff(&fx.base, &result).unwrap().contains("+ONE"));
    for wt in ["a", "b", "c"] {
        fx.repo.remove_worktree(&fx.wt(wt)).unwrap();
    }
    // Into the user's own checkout, which has the attributes too.
    merged(fx.repo.apply(&result, "baton: apply run r", false).unwrap());
    assert_eq!(read(fx.root(), "shared.txt"), "ONE\ntwo\nTHREE\n");
    assert_never_ran(&marker);

    // The drivers are real: the user's own git runs them.
    write(fx.root(), "shared.txt", "changed\n");
    let status = user_git(fx.root())
        .args(["add", "shared.txt"])
        .status()
        .unwrap();
    assert!(status.success());
    let ran = std::fs::read_to_string(&marker).unwrap();
    assert!(ran.lines().any(|l| l == "clean"), "{ran}");
}

#[test]
fn a_conflict_under_a_planted_merge_driver_is_still_a_conflict() {
    let (fx, marker) = planted();
    let a = fx.task_from_base("a", &[("shared.txt", Some("one\nA\nthree\n"))]);
    let b = fx.task_from_base("b", &[("shared.txt", Some("one\nB\nthree\n"))]);
    let outcome = merge_result(&fx, &a, &b);
    let MergeOutcome::Conflict(conflict) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(conflict.incoming, "b");
    assert_eq!(conflict.files, ["shared.txt"]);
    assert_never_ran(&marker);
}

#[test]
fn drivers_trusted_at_a_runs_start_hold_for_a_later_handle() {
    // A resumed run reopens the repository after its agents may have planted drivers: it is
    // held to what was trusted when the run began, kept as text.
    let (fx, marker) = planted();
    let kept = fx.repo.trusted_drivers().encode();
    assert!(
        kept.contains("filter.upper.clean\ntr a-z A-Z\0"),
        "{kept:?}"
    );
    let mut later = Repo::discover(fx.root()).unwrap();
    assert_ne!(later.trusted_drivers(), fx.repo.trusted_drivers());
    later.trust_drivers(Drivers::decode(&kept));
    assert_eq!(later.trusted_drivers(), fx.repo.trusted_drivers());
    let wt = fx.wt("late");
    let start = TaskStart::Commit(fx.base.clone());
    merged(later.add_worktree(&wt, "task/late", &start).unwrap());
    write(&wt, "shared.txt", "late\n");
    write(&wt, "late.up", "late\n");
    let commit = later.commit_all(&wt, "late").unwrap().unwrap();
    assert_eq!(
        git(fx.root(), &["show", &format!("{commit}:late.up")]),
        "LATE"
    );
    assert_never_ran(&marker);
}

/// A commit in a task's worktree of a `*.txt` file whose filter `evil` is defined after the
/// repository was taken in hand, somewhere the repository's own config file does not show.
fn commit_under_evil(fx: &Fixture, marker: &Path, plant: impl FnOnce(&Path)) {
    write(fx.root(), ".gitattributes", "*.txt filter=evil\n");
    git(fx.root(), &["add", ".gitattributes"]);
    git(fx.root(), &["commit", "--quiet", "-m", "attributes"]);
    let base = fx.repo.resolve("HEAD").unwrap();
    let wt = fx.wt("t");
    merged(
        fx.repo
            .add_worktree(&wt, "task/t", &TaskStart::Commit(base))
            .unwrap(),
    );
    // Once before the planting: what git said of the drivers is at hand.
    write(&wt, "before.txt", "before\n");
    fx.repo.commit_all(&wt, "before").unwrap().unwrap();
    let config = std::fs::read(fx.root().join(".git/config")).unwrap();
    plant(&wt);
    assert_eq!(
        std::fs::read(fx.root().join(".git/config")).unwrap(),
        config,
        "planted elsewhere"
    );
    write(&wt, "after.txt", "after\n");
    fx.repo.commit_all(&wt, "after").unwrap().unwrap();
    assert_never_ran(marker);
}

#[test]
fn a_driver_planted_in_an_included_file_never_runs() {
    // The config includes a file; the driver appears in that file, not in the config.
    let mut fx = Fixture::new();
    let included = fx.dir.path().join("included.config");
    write(fx.dir.path(), "included.config", "");
    set(fx.root(), "include.path", included.to_str().unwrap());
    fx.repo = Repo::discover(fx.root()).unwrap();
    let marker = fx.dir.path().join("driver-ran");
    commit_under_evil(&fx, &marker, |_| {
        let file = included.to_str().unwrap();
        let clean = logs(&marker, "clean");
        git(
            fx.root(),
            &["config", "--file", file, "filter.evil.clean", &clean],
        );
    });
}

#[test]
fn a_driver_planted_in_a_worktrees_own_config_never_runs() {
    // Per-worktree config on from the start: the driver goes in the worktree's own file.
    let mut fx = Fixture::new();
    set(fx.root(), "extensions.worktreeConfig", "true");
    fx.repo = Repo::discover(fx.root()).unwrap();
    let marker = fx.dir.path().join("driver-ran");
    commit_under_evil(&fx, &marker, |wt| {
        git(
            wt,
            &[
                "config",
                "--worktree",
                "filter.evil.clean",
                &logs(&marker, "clean"),
            ],
        );
    });
}

#[test]
fn a_driver_planted_in_the_config_after_it_was_read_never_runs() {
    let fx = Fixture::new();
    let marker = fx.dir.path().join("driver-ran");
    write(fx.root(), ".gitattributes", "*.txt filter=evil\n");
    let wt = fx.wt("t");
    let start = TaskStart::Commit(fx.base.clone());
    merged(fx.repo.add_worktree(&wt, "task/t", &start).unwrap());
    write(&wt, "before.txt", "before\n");
    write(&wt, ".gitattributes", "*.txt filter=evil\n");
    fx.repo.commit_all(&wt, "before").unwrap().unwrap();
    set(fx.root(), "filter.evil.clean", &logs(&marker, "clean"));
    write(&wt, "after.txt", "after\n");
    fx.repo.commit_all(&wt, "after").unwrap().unwrap();
    assert_never_ran(&marker);
}

#[test]
fn a_driver_behind_a_worktrees_fake_git_directory_never_runs() {
    // A worktree inside the repository (as baton's are, under `.baton/worktrees/`) whose
    // `.git` file the task replaced by a directory holding a copy of the config as it was:
    // git passes over a directory that is no repository and finds the repository's own
    // `.git` further up, whose config now points `core.worktree` at the worktree and defines
    // the driver. The copy must not stand for the config git reads.
    let fx = Fixture::new();
    let marker = fx.dir.path().join("driver-ran");
    let wt = fx.root().join(".wt").join("t");
    let start = TaskStart::Commit(fx.base.clone());
    merged(fx.repo.add_worktree(&wt, "task/t", &start).unwrap());
    write(&wt, "before.txt", "before\n");
    fx.repo.commit_all(&wt, "before").unwrap().unwrap();
    let config = std::fs::read(fx.root().join(".git/config")).unwrap();
    std::fs::remove_file(wt.join(".git")).unwrap();
    std::fs::create_dir(wt.join(".git")).unwrap();
    std::fs::write(wt.join(".git/config"), &config).unwrap();
    set(fx.root(), "core.worktree", wt.to_str().unwrap());
    set(fx.root(), "filter.evil.clean", &logs(&marker, "clean"));
    write(&wt, ".gitattributes", "* filter=evil\n");
    write(&wt, "after.txt", "after\n");
    // Whether the commit goes through is not the point: no planted driver may run.
    let _ = fx.repo.commit_all(&wt, "after");
    assert_never_ran(&marker);
}
