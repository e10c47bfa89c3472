//! A pooled worktree, reused for another task, is what a fresh one would be: the same files,
//! nothing git does not track, no state of the task before it; and the task before it keeps
//! its branch.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use baton_workspace::{MergeOutcome, TaskStart};
use common::{Fixture, git, merged, write};

/// Every file under `dir` but `.git`, with its content: what a task sees.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            if name == ".git" {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                files.insert(format!("{name}/"), Vec::new());
                stack.push(path);
            } else {
                files.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// The names in a worktree's administrative directory.
fn admin(worktree: &Path) -> Vec<String> {
    let link = std::fs::read_to_string(worktree.join(".git")).unwrap();
    let dir = link.strip_prefix("gitdir: ").unwrap().trim().to_owned();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_reused_worktree_is_indistinguishable_from_a_fresh_one() {
    let fx = Fixture::new();
    // A base that ignores something, and a later commit for the next task to start from.
    write(fx.root(), ".gitignore", "*.log\ntarget/\n");
    write(fx.root(), "src/lib.rs", "fn a() {}\n");
    git(fx.root(), &["add", "-A"]);
    git(fx.root(), &["commit", "--quiet", "-m", "ignore logs"]);
    let first_base = git(fx.root(), &["rev-parse", "HEAD"]);
    write(fx.root(), "src/lib.rs", "fn a() {}\nfn b() {}\n");
    write(fx.root(), "docs/new.md", "new\n");
    git(fx.root(), &["rm", "--quiet", "shared.txt"]);
    git(fx.root(), &["add", "-A"]);
    git(fx.root(), &["commit", "--quiet", "-m", "next base"]);
    let next_base = git(fx.root(), &["rev-parse", "HEAD"]);

    // The first task works, commits, and leaves everything a task can leave behind.
    let first = fx.wt("first");
    merged(
        fx.repo
            .add_worktree(&first, "task/first", &TaskStart::Commit(first_base))
            .unwrap(),
    );
    write(&first, "src/lib.rs", "fn a() { changed }\n");
    let committed = fx.repo.commit_all(&first, "first").unwrap().unwrap();
    write(&first, "untracked.txt", "left\n");
    write(&first, "build.log", "ignored\n");
    write(&first, "target/debug/out", "ignored dir\n");
    write(&first, "README.md", "edited, not committed\n");
    std::fs::create_dir_all(first.join("nested")).unwrap();
    git(&first.join("nested"), &["init", "--quiet"]);
    let admin_dir = std::fs::read_to_string(first.join(".git")).unwrap();
    let admin_dir = Path::new(admin_dir.strip_prefix("gitdir: ").unwrap().trim()).to_owned();
    std::fs::write(
        admin_dir.join("config.worktree"),
        "[core]\n\teditor = evil\n",
    )
    .unwrap();
    std::fs::write(admin_dir.join("MERGE_HEAD"), format!("{committed}\n")).unwrap();
    git(fx.root(), &["worktree", "lock", first.to_str().unwrap()]);
    git(fx.root(), &["worktree", "unlock", first.to_str().unwrap()]);

    let pooled = fx.wt(".pool/1");
    fx.repo.pool_worktree(&first, &pooled, &fx.base).unwrap();
    assert!(!first.exists() && pooled.is_dir());
    // Waiting, it holds the base and nothing of the task's.
    assert_eq!(git(&pooled, &["rev-parse", "HEAD"]), fx.base);
    assert_eq!(git(&pooled, &["status", "--porcelain", "--ignored"]), "");
    // Its branch is free: nothing has it checked out.
    assert_eq!(
        git(fx.root(), &["rev-parse", "task/first"]),
        committed,
        "the first task's branch keeps its work"
    );

    let second = fx.wt("second");
    let start = TaskStart::Commit(next_base.clone());
    let reused = fx
        .repo
        .reuse_worktree(&pooled, &second, "task/second", &start)
        .unwrap()
        .expect("the pooled worktree is reused");
    assert_eq!(reused, MergeOutcome::Merged(next_base.clone()));
    assert!(!pooled.exists());

    let fresh = fx.wt("fresh");
    merged(
        fx.repo
            .add_worktree(&fresh, "task/fresh", &TaskStart::Commit(next_base))
            .unwrap(),
    );
    assert_eq!(tree(&second), tree(&fresh));
    assert_eq!(admin(&second), admin(&fresh));
    let orig_head = |w: &Path| {
        let link = std::fs::read_to_string(w.join(".git")).unwrap();
        let dir = Path::new(link.strip_prefix("gitdir: ").unwrap().trim()).to_owned();
        std::fs::read_to_string(dir.join("ORIG_HEAD")).unwrap()
    };
    assert_eq!(orig_head(&second), orig_head(&fresh));
    assert_eq!(git(&second, &["status", "--porcelain", "--ignored"]), "");
    assert_eq!(
        git(&second, &["symbolic-ref", "HEAD"]),
        "refs/heads/task/second"
    );
    // It works as a worktree: a change commits on its branch.
    write(&second, "docs/new.md", "changed\n");
    let next = fx.repo.commit_all(&second, "second").unwrap().unwrap();
    assert_eq!(git(fx.root(), &["rev-parse", "task/second"]), next);
    assert_eq!(fx.worktree_count(), 3);
}

#[test]
fn a_pooled_worktree_taken_already_or_broken_is_not_reused() {
    let fx = Fixture::new();
    let start = TaskStart::Commit(fx.base.clone());
    // Gone before the reuse (another run took it).
    let missing = fx.wt(".pool/gone");
    assert_eq!(
        fx.repo
            .reuse_worktree(&missing, &fx.wt("a"), "task/a", &start)
            .unwrap(),
        None
    );
    // Not a worktree at all (a crash left a directory).
    let junk = fx.wt(".pool/junk");
    write(&junk, "file", "x\n");
    assert_eq!(
        fx.repo
            .reuse_worktree(&junk, &fx.wt("b"), "task/b", &start)
            .unwrap(),
        None
    );
    assert!(!fx.wt("b").exists(), "what was taken of it is removed");
    // A fresh one can be made where they were to go.
    merged(fx.repo.add_worktree(&fx.wt("b"), "task/b", &start).unwrap());
}

/// Worktrees made, committed in, pooled and reused from many threads at once, as a run's
/// attempts do: git's own commands on `.git/worktrees/` race (one listing the worktrees meets
/// one another is still making: `failed to read .git/worktrees/NAME/commondir`), so those
/// take turns. Eight threads, five tasks each; every step must succeed.
#[test]
fn worktrees_are_made_pooled_and_reused_from_many_threads_at_once() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 5;
    let fx = Fixture::new();
    let pool = fx.dir.path().join("pool");
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (fx, pool) = (&fx, &pool);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let name = format!("t{t}r{round}");
                    let path = fx.wt(&name);
                    let branch = format!("task/{name}");
                    let start = TaskStart::Commit(fx.base.clone());
                    // A pooled one when there is one to take, else a fresh one.
                    let taken = std::fs::read_dir(pool)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .find_map(|pooled| {
                            fx.repo
                                .reuse_worktree(&pooled.path(), &path, &branch, &start)
                                .unwrap()
                        });
                    let made = match taken {
                        Some(made) => made,
                        None => fx.repo.add_worktree(&path, &branch, &start).unwrap(),
                    };
                    merged(made);
                    write(&path, &format!("{name}.txt"), "work\n");
                    fx.repo.commit_all(&path, &name).unwrap().unwrap();
                    let pooled = pool.join(&name);
                    fx.repo.pool_worktree(&path, &pooled, &fx.base).unwrap();
                }
            });
        }
    });
    // They took turns through the repository's lock file.
    assert!(fx.root().join(".git/baton-worktrees.lock").is_file());
    // Every task's work is on its branch.
    for t in 0..THREADS {
        for round in 0..ROUNDS {
            let name = format!("t{t}r{round}");
            let file = git(fx.root(), &["show", &format!("task/{name}:{name}.txt")]);
            assert_eq!(file, "work");
        }
    }
}
