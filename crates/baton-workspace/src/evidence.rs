//! What a task changed, from git, and what of it lies outside the task's declared scope.

use std::collections::HashMap;

use crate::git::GitError;

// The shapes live in baton-model: they are what `workspace-committed` events record.
pub use baton_model::{ChangeKind, Evidence, FileChange};

/// The changed paths (and a rename's old path) that no glob of `scope` matches. An empty
/// scope declares nothing: nothing is a violation. Scope entries without glob characters mean
/// the path itself and everything below it, as in graph files.
///
/// Entries are read as the graph reads them (`{a,b}` expanded first, each alternative judged
/// on its own; `a//b`, `./a` and a trailing `/` normalised; `**` inside a segment is `*`), so
/// that what a task may touch means the same here as in the graph's scope-conflict checks.
/// `*` and `?` never cross a `/`. An entry that is no valid glob (the graph's validation
/// refuses those; a stored graph may still hold one) is taken literally.
///
/// Each violating path is listed once, in the order of `evidence`.
pub fn scope_violations(evidence: &Evidence, scope: &[String]) -> Vec<String> {
    if scope.is_empty() {
        return Vec::new();
    }
    let mut violations: Vec<String> = Vec::new();
    for file in &evidence.files {
        for path in std::iter::once(&file.path).chain(&file.from) {
            // One meaning of a scope for all of baton: the graph's, which also decides which
            // tasks may run together.
            if !baton_graph::scope_covers(scope, path) && !violations.contains(path) {
                violations.push(path.clone());
            }
        }
    }
    violations
}

/// Lines added and removed, as numstat gives them: `None` for a binary file.
type Lines = (Option<u64>, Option<u64>);

/// Builds the evidence from one `git diff --raw --numstat -M -z` of two commits: its raw
/// records (`:MODES OIDS STATUS`, then one path, or two for a rename or copy), then its
/// numstat records.
pub(crate) fn parse_raw_numstat(text: &str) -> Result<Evidence, GitError> {
    let mut name_status = String::new();
    let mut fields = text.split('\0');
    let mut numstat_start = text.len();
    let mut offset = 0;
    while let Some(field) = fields.next() {
        let Some(raw) = field.strip_prefix(':') else {
            if !field.is_empty() {
                numstat_start = offset;
                break;
            }
            offset += field.len() + 1;
            continue;
        };
        offset += field.len() + 1;
        let status = raw.rsplit(' ').next().unwrap_or_default();
        name_status.push_str(status);
        name_status.push('\0');
        let paths = if matches!(status.as_bytes().first(), Some(b'R' | b'C')) {
            2
        } else {
            1
        };
        for _ in 0..paths {
            let path = fields.next().unwrap_or_default();
            offset += path.len() + 1;
            name_status.push_str(path);
            name_status.push('\0');
        }
    }
    parse(&name_status, text.get(numstat_start..).unwrap_or_default())
}

/// Builds the evidence from `git diff --name-status -M -z` and `git diff --numstat -M -z`
/// of the same two commits.
pub(crate) fn parse(name_status: &str, numstat: &str) -> Result<Evidence, GitError> {
    let malformed = |what: &str| {
        GitError::Other(format!(
            "unexpected `git diff` output ({what}); please report this with `git --version`"
        ))
    };

    // (old path for a rename, path) -> lines (added, removed); `None` for a binary file.
    let mut counts: HashMap<(Option<&str>, &str), Lines> = HashMap::new();
    let mut fields = numstat.split('\0');
    while let Some(record) = fields.next() {
        if record.is_empty() {
            continue;
        }
        let mut parts = record.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("a numstat line without two counts"));
        };
        // A rename leaves the path empty and gives the old and new paths as the next fields.
        let key = if path.is_empty() {
            let (Some(from), Some(to)) = (fields.next(), fields.next()) else {
                return Err(malformed("a rename without its paths"));
            };
            (Some(from), to)
        } else {
            (None, path)
        };
        counts.insert(key, (added.parse().ok(), removed.parse().ok()));
    }

    let mut evidence = Evidence::default();
    let mut fields = name_status.split('\0');
    while let Some(status) = fields.next() {
        if status.is_empty() {
            continue;
        }
        let mut next_path = || {
            fields
                .next()
                .ok_or_else(|| malformed("a status without a path"))
        };
        let (kind, from, path) = match status.as_bytes()[0] {
            b'A' => (ChangeKind::Created, None, next_path()?),
            b'D' => (ChangeKind::Deleted, None, next_path()?),
            b'R' => {
                let from = next_path()?;
                (ChangeKind::Renamed, Some(from), next_path()?)
            }
            // A copy (only with `-C`, which baton does not ask for) makes a new file.
            b'C' => {
                next_path()?;
                (ChangeKind::Created, None, next_path()?)
            }
            // `M`, `T` (a file became a symlink, say) and anything newer git may print.
            _ => (ChangeKind::Modified, None, next_path()?),
        };
        let (added, removed) = counts
            .get(&(from, path))
            .or_else(|| counts.get(&(None, path)))
            .copied()
            .unwrap_or((None, None));
        evidence.lines_added += added.unwrap_or(0);
        evidence.lines_removed += removed.unwrap_or(0);
        evidence.files.push(FileChange {
            path: path.to_owned(),
            from: from.map(str::to_owned),
            kind,
            added,
            removed,
        });
    }
    Ok(evidence)
}
