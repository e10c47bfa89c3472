//! The paths a `for_each = { glob = "…" }` task fans out over.

use std::collections::BTreeSet;
use std::path::Path;

/// The paths under `root` that `glob` matches, sorted, with the meaning scopes give globs:
/// `*` within one directory, `**` across any number. A glob ending in `/` matches directories
/// (and each item ends in `/`), else files. In a git repository the universe is what git
/// tracks (so `target/` and `node_modules/` are never items, and a worktree has every item);
/// elsewhere the directory tree, without `.git` and `.baton`.
pub(crate) fn glob_items(root: &Path, glob: &str) -> Vec<String> {
    let dirs = glob.ends_with('/');
    let pattern = [glob.trim_end_matches('/').to_owned()];
    let files = tracked(root).unwrap_or_else(|| walked(root));
    let mut items = BTreeSet::new();
    for file in &files {
        if dirs {
            // Every directory the file is in.
            let mut at = 0;
            while let Some(slash) = file[at..].find('/') {
                let dir = &file[..at + slash];
                if baton_graph::scope_covers(&pattern, dir) && exact(&pattern[0], dir) {
                    items.insert(format!("{dir}/"));
                }
                at += slash + 1;
            }
        } else if baton_graph::scope_covers(&pattern, file) && exact(&pattern[0], file) {
            items.insert(file.clone());
        }
    }
    items.into_iter().collect()
}

/// Scopes cover what is below a plain path too (`src` covers `src/a.rs`); an item is the path
/// the glob names, not what is below it.
fn exact(pattern: &str, path: &str) -> bool {
    let glob_chars = ['*', '?', '[', '{'];
    pattern.contains(glob_chars) || pattern == path
}

/// What git tracks under `root`, `None` outside a repository.
fn tracked(root: &Path) -> Option<Vec<String>> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z", "--cached"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        out.stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
    )
}

/// Every file under `root` but those of `.git` and `.baton`, as relative paths.
fn walked(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if dir.is_empty() && matches!(name.as_str(), ".git" | ".baton") {
                continue;
            }
            let path = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) => out.push(path),
                Err(_) => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_matches_directories_or_files_of_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        for file in [
            "crates/a/src/lib.rs",
            "crates/b/Cargo.toml",
            "docs/x.md",
            "top.md",
        ] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        assert_eq!(
            glob_items(dir.path(), "crates/*/"),
            ["crates/a/", "crates/b/"]
        );
        assert_eq!(glob_items(dir.path(), "**/*.md"), ["docs/x.md", "top.md"]);
        assert_eq!(glob_items(dir.path(), "docs/"), ["docs/"]);
        assert!(glob_items(dir.path(), "nothing/*").is_empty());
    }
}
