//! Read-only queries baton makes per task, by gix against by spawning git.
use std::process::Command;
use std::time::Instant;

fn git(dir: &str, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn main() {
    let dir = std::env::args().nth(1).expect("a repository");
    let n = 200;
    // 1. rev-parse HEAD (and its tree)
    let t = Instant::now();
    for _ in 0..n {
        let _ = git(&dir, &["rev-parse", "HEAD", "HEAD^{tree}"]);
    }
    let spawn_rev = t.elapsed() / n;
    let t = Instant::now();
    let mut last = String::new();
    for _ in 0..n {
        let repo = gix::open(&dir).unwrap();
        let head = repo.head_commit().unwrap();
        let tree = head.tree_id().unwrap();
        last = format!("{} {}", head.id, tree);
    }
    let gix_rev = t.elapsed() / n;
    let via_git = git(&dir, &["rev-parse", "HEAD", "HEAD^{tree}"]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(last, via_git);
    // 2. the driver settings: config --get-regexp
    let t = Instant::now();
    for _ in 0..n {
        let _ = git(&dir, &["config", "--null", "--get-regexp", r"^(filter|merge|diff)\..*\.(clean|smudge|process|required|driver|textconv|command)$"]);
    }
    let spawn_cfg = t.elapsed() / n;
    let t = Instant::now();
    let mut found = 0;
    for _ in 0..n {
        let repo = gix::open(&dir).unwrap();
        let config = repo.config_snapshot();
        found = 0;
        for section in config.plumbing().sections() {
            let name = section.header().name();
            if name == "filter" || name == "merge" || name == "diff" {
                found += section.body().num_values();
            }
        }
    }
    let gix_cfg = t.elapsed() / n;
    // 3. a branch's commit
    let t = Instant::now();
    for _ in 0..n {
        let _ = git(&dir, &["rev-parse", "--verify", "--quiet", "refs/heads/master^{commit}"]);
    }
    let spawn_ref = t.elapsed() / n;
    let t = Instant::now();
    for _ in 0..n {
        let repo = gix::open(&dir).unwrap();
        let _ = repo.try_find_reference("refs/heads/master").unwrap();
    }
    let gix_ref = t.elapsed() / n;
    println!("rev-parse HEAD HEAD^{{tree}}: git {spawn_rev:?}, gix (open + read) {gix_rev:?}");
    println!("driver config: git {spawn_cfg:?}, gix {gix_cfg:?} ({found} values)");
    println!("branch commit: git {spawn_ref:?}, gix {gix_ref:?}");
}
