//! What a task changed, and what of it lies outside its scope.

mod common;

use baton_workspace::{ChangeKind, Evidence, FileChange, TaskStart, scope_violations};
use common::{Fixture, git, write, write_bytes};

fn change(
    kind: ChangeKind,
    path: &str,
    from: Option<&str>,
    lines: Option<(u64, u64)>,
) -> FileChange {
    FileChange {
        path: path.into(),
        from: from.map(Into::into),
        kind,
        added: lines.map(|l| l.0),
        removed: lines.map(|l| l.1),
    }
}

#[test]
fn evidence_sees_every_kind_of_change() {
    let fx = Fixture::new();
    let body: String = (0..20).map(|i| format!("line {i}\n")).collect();
    write(fx.root(), "src/old name.rs", &body);
    write(fx.root(), "gone.txt", "a\nb\n");
    write_bytes(fx.root(), "logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary");
    git(fx.root(), &["add", "-A"]);
    git(fx.root(), &["commit", "--quiet", "-m", "more"]);
    let from = git(fx.root(), &["rev-parse", "HEAD"]);

    let path = fx.wt("a");
    fx.repo
        .add_worktree(&path, "task/a", &TaskStart::Commit(from.clone()))
        .unwrap();
    write(&path, "README.md", "hello\nmore\n");
    write(&path, "naïve file.txt", "x\ny\n");
    write(&path, "line\nbreak.txt", "z\n");
    std::fs::remove_file(path.join("gone.txt")).unwrap();
    std::fs::rename(path.join("src/old name.rs"), path.join("src/new name.rs")).unwrap();
    write(&path, "src/new name.rs", &format!("{body}line 20\n"));
    write_bytes(&path, "logo.png", b"\x89PNG\r\n\x1a\n\0\0\0other binary");
    let to = fx.repo.commit_all(&path, "task a").unwrap().unwrap();

    let evidence = fx.repo.evidence(&from, "task/a").unwrap();
    assert_eq!(
        evidence,
        Evidence {
            files: vec![
                change(ChangeKind::Modified, "README.md", None, Some((1, 0))),
                change(ChangeKind::Deleted, "gone.txt", None, Some((0, 2))),
                change(ChangeKind::Created, "line\nbreak.txt", None, Some((1, 0))),
                change(ChangeKind::Modified, "logo.png", None, None),
                change(ChangeKind::Created, "naïve file.txt", None, Some((2, 0))),
                change(
                    ChangeKind::Renamed,
                    "src/new name.rs",
                    Some("src/old name.rs"),
                    Some((1, 0))
                ),
            ],
            lines_added: 5,
            lines_removed: 2,
        }
    );
    assert_eq!(fx.repo.evidence(&to, &to).unwrap(), Evidence::default());
    // Backwards, the rename goes the other way and the created files are deleted.
    let back = fx.repo.evidence(&to, &from).unwrap();
    assert!(back.files.contains(&change(
        ChangeKind::Renamed,
        "src/old name.rs",
        Some("src/new name.rs"),
        Some((0, 1))
    )));
    assert!(back.files.contains(&change(
        ChangeKind::Deleted,
        "naïve file.txt",
        None,
        Some((0, 2))
    )));
}

#[test]
fn a_new_binary_file_has_no_line_counts() {
    let fx = Fixture::new();
    let a = fx.task_from_base("a", &[("data.bin", Some("\0\u{1}\u{2}"))]);
    let evidence = fx.repo.evidence(&fx.base, &a).unwrap();
    assert_eq!(
        evidence.files,
        vec![change(ChangeKind::Created, "data.bin", None, None)]
    );
    assert_eq!((evidence.lines_added, evidence.lines_removed), (0, 0));
}

#[test]
fn evidence_of_a_missing_commit_says_so() {
    let fx = Fixture::new();
    let error = fx.repo.evidence(&fx.base, "nope").unwrap_err().to_string();
    assert!(error.contains("no commit `nope`"), "{error}");
}

fn evidence(paths: &[&str]) -> Evidence {
    Evidence {
        files: paths
            .iter()
            .map(|p| match p.split_once(" <- ") {
                Some((to, from)) => change(ChangeKind::Renamed, to, Some(from), Some((0, 0))),
                None => change(ChangeKind::Modified, p, None, Some((0, 0))),
            })
            .collect(),
        lines_added: 0,
        lines_removed: 0,
    }
}

fn violations(paths: &[&str], scope: &[&str]) -> Vec<String> {
    let scope: Vec<String> = scope.iter().map(|s| s.to_string()).collect();
    scope_violations(&evidence(paths), &scope)
}

#[test]
fn an_empty_scope_allows_everything() {
    assert!(violations(&["anything/at/all.rs"], &[]).is_empty());
}

#[test]
fn a_plain_path_is_itself_and_everything_below() {
    let paths = [
        "src/db",
        "src/db/x.rs",
        "src/db/deep/y.rs",
        "src/dbx.rs",
        "src/d",
        "README.md",
    ];
    assert_eq!(
        violations(&paths, &["src/db"]),
        ["src/dbx.rs", "src/d", "README.md"]
    );
    assert_eq!(
        violations(&paths, &["./src/db/", "README.md"]),
        ["src/dbx.rs", "src/d"]
    );
    assert!(violations(&paths, &["."]).is_empty());
}

#[test]
fn a_star_stays_within_one_directory() {
    let paths = ["src/a.rs", "src/b.txt", "src/sub/c.rs", "a.rs"];
    assert_eq!(
        violations(&paths, &["src/*.rs"]),
        ["src/b.txt", "src/sub/c.rs", "a.rs"]
    );
    assert_eq!(violations(&paths, &["src/**"]), ["a.rs"]);
    assert_eq!(violations(&paths, &["**/*.rs"]), ["src/b.txt"]);
    assert_eq!(
        violations(&paths, &["src/?.rs"]),
        ["src/b.txt", "src/sub/c.rs", "a.rs"]
    );
    assert_eq!(
        violations(&paths, &["src/[ab].*"]),
        ["src/sub/c.rs", "a.rs"]
    );
    assert_eq!(
        violations(&paths, &["src/[!a].*"]),
        ["src/a.rs", "src/sub/c.rs", "a.rs"]
    );
    // `**` inside a segment is `*`, as in the graph.
    assert_eq!(
        violations(&paths, &["src/**.rs"]),
        ["src/b.txt", "src/sub/c.rs", "a.rs"]
    );
}

#[test]
fn migrations_and_alternatives() {
    let paths = [
        "migrations/001_init.sql",
        "migrations/2024/002.sql",
        "src/db/mod.rs",
        "src/api/mod.rs",
        "docs/db.md",
    ];
    assert_eq!(
        violations(&paths, &["migrations/**", "src/{db,api}"]),
        ["docs/db.md"]
    );
    // Each alternative is judged on its own: `src/db` without glob characters means the
    // directory too.
    assert_eq!(
        violations(&paths, &["{src/db,docs/*.md}"]),
        [
            "migrations/001_init.sql",
            "migrations/2024/002.sql",
            "src/api/mod.rs"
        ]
    );
}

#[test]
fn a_rename_needs_both_of_its_paths_in_scope() {
    assert_eq!(
        violations(&["src/new.rs <- lib/old.rs"], &["src"]),
        ["lib/old.rs"]
    );
    assert_eq!(
        violations(&["x/new.rs <- y/old.rs", "x/other.rs"], &["z"]),
        ["x/new.rs", "y/old.rs", "x/other.rs"]
    );
    assert!(violations(&["src/new.rs <- src/old.rs"], &["src"]).is_empty());
}

#[test]
fn paths_with_spaces_and_unicode_match() {
    assert_eq!(
        violations(
            &["docs/naïve file.md", "docs/other.md"],
            &["docs/naïve *.md"]
        ),
        ["docs/other.md"]
    );
}
