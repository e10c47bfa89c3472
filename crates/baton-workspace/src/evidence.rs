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
    let scope = Scope::new(scope);
    let mut violations: Vec<String> = Vec::new();
    for file in &evidence.files {
        for path in std::iter::once(&file.path).chain(&file.from) {
            if !scope.matches(path) && !violations.contains(path) {
                violations.push(path.clone());
            }
        }
    }
    violations
}

/// A task's scope, compiled.
struct Scope {
    globs: globset::GlobSet,
    /// Entries taken literally: the path and everything below it.
    literal: Vec<String>,
}

impl Scope {
    fn new(entries: &[String]) -> Scope {
        let mut globs = globset::GlobSetBuilder::new();
        let mut literal = Vec::new();
        for entry in entries {
            match compile(entry) {
                Some(compiled) => {
                    for glob in compiled {
                        globs.add(glob);
                    }
                }
                None => literal.push(normalise(entry)),
            }
        }
        let globs = globs.build().unwrap_or_else(|_| globset::GlobSet::empty());
        Scope { globs, literal }
    }

    fn matches(&self, path: &str) -> bool {
        self.globs.is_match(path) || self.literal.iter().any(|l| is_at_or_below(path, l))
    }
}

/// The globs one scope entry stands for, or `None` if it is not a valid glob.
fn compile(entry: &str) -> Option<Vec<globset::Glob>> {
    let mut globs = Vec::new();
    for alternative in expand_braces(entry)? {
        let pattern = normalise(&alternative);
        let has_glob = pattern.contains(['*', '?', '[']);
        let mut patterns = vec![pattern.clone()];
        if !has_glob {
            // `src/db` is `src/db` and everything below it; the empty pattern (from `.`) is
            // the whole repository.
            patterns = if pattern.is_empty() {
                vec!["**".to_owned()]
            } else {
                vec![pattern.clone(), format!("{pattern}/**")]
            };
        }
        for pattern in patterns {
            let glob = globset::GlobBuilder::new(&pattern)
                .literal_separator(true)
                .backslash_escape(false)
                .empty_alternates(true)
                .build()
                .ok()?;
            globs.push(glob);
        }
    }
    Some(globs)
}

/// Drops empty and `.` segments and turns `**` inside a segment into `*`.
fn normalise(pattern: &str) -> String {
    pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .map(|s| {
            if s == "**" || !s.contains("**") {
                return s.to_owned();
            }
            let mut out = String::with_capacity(s.len());
            for c in s.chars() {
                if !(c == '*' && out.ends_with('*')) {
                    out.push(c);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn is_at_or_below(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// More alternatives than this from `{…}` is refused, as in the graph.
const MAX_ALTERNATIVES: usize = 64;

/// Expands `{a,b}` (nested too) into the alternatives, in order; `None` when braces do not
/// pair up or there are too many alternatives.
fn expand_braces(text: &str) -> Option<Vec<String>> {
    let Some((open, close)) = first_group(text)? else {
        return Some(vec![text.to_owned()]);
    };
    let (head, inner, tail) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
    let mut out = Vec::new();
    for choice in split_top_level(inner) {
        for rest in expand_braces(&format!("{head}{choice}{tail}"))? {
            out.push(rest);
            if out.len() > MAX_ALTERNATIVES {
                return None;
            }
        }
    }
    Some(out)
}

/// Byte positions of the first top-level `{` and its `}` (`[...]` skipped); `None` when the
/// braces do not pair up.
fn first_group(text: &str) -> Option<Option<(usize, usize)>> {
    let mut depth = 0usize;
    let mut open = None;
    let mut in_class = false;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'{' if !in_class => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            b'}' if !in_class => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open.map(|o| (o, i)));
                }
            }
            _ => {}
        }
    }
    (depth == 0).then_some(None)
}

fn split_top_level(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, b) in inner.bytes().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// Lines added and removed, as numstat gives them: `None` for a binary file.
type Lines = (Option<u64>, Option<u64>);

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
