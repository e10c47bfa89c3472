//! Which tasks may write the same files, so that the scheduler never runs them together.

use std::collections::{HashMap, HashSet};

use crate::glob::{Pattern, intersects, parse_scope};
use crate::graph::{Task, TaskIndex};

/// For each task, the other tasks whose scopes can match a common path with its own (sorted,
/// symmetric). Tasks without a scope conflict with nothing.
///
/// Patterns are filed in a trie by their leading literal segments (`src/db/*.rs` under
/// `src` → `db`): two patterns can only overlap if one's literal prefix is a prefix of the
/// other's, so only a node's own patterns and those below it are compared with it. Disjoint
/// scopes (`crates/a/**`, `crates/b/**`, …) thus cost about one trie walk, not a comparison of
/// every pair; patterns that start with a glob sit at the root and are compared with everything,
/// as they must be.
pub fn conflicts(tasks: &[Task]) -> Vec<Vec<TaskIndex>> {
    let mut trie = Trie::default();
    let mut patterns: Vec<(TaskIndex, Pattern)> = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        for entry in &task.scope {
            // A validated graph has only valid entries; a stored one read back by a newer baton
            // might not, and assuming the widest scope is the safe reading.
            let parsed = parse_scope(entry).unwrap_or_else(|_| vec![Pattern::everything()]);
            for pattern in parsed {
                let node = trie.insert(pattern.literal_prefix());
                trie.nodes[node].patterns.push(patterns.len() as u32);
                patterns.push((index as TaskIndex, pattern));
            }
        }
    }

    let mut pairs: HashSet<(TaskIndex, TaskIndex)> = HashSet::new();
    let mut below = Vec::new();
    for node in 0..trie.nodes.len() {
        let own = &trie.nodes[node].patterns;
        if own.is_empty() {
            continue;
        }
        below.clear();
        trie.collect_below(node, &mut below);
        for (k, &p) in own.iter().enumerate() {
            // This node's own patterns after `p`, then everything in the subtrees.
            let others = own[k + 1..].iter().chain(below.iter());
            for &q in others {
                let (a, pa) = &patterns[p as usize];
                let (b, pb) = &patterns[q as usize];
                if a == b {
                    continue;
                }
                let key = ((*a).min(*b), (*a).max(*b));
                if !pairs.contains(&key) && intersects(pa, pb) {
                    pairs.insert(key);
                }
            }
        }
    }

    let mut out = vec![Vec::new(); tasks.len()];
    for (a, b) in pairs {
        out[a as usize].push(b);
        out[b as usize].push(a);
    }
    for list in &mut out {
        list.sort_unstable();
    }
    out
}

#[derive(Default)]
struct Trie {
    nodes: Vec<TrieNode>,
}

#[derive(Default)]
struct TrieNode {
    children: HashMap<String, usize>,
    /// Indices into the flat pattern list.
    patterns: Vec<u32>,
}

impl Trie {
    fn insert(&mut self, path: impl Iterator<Item = String>) -> usize {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        let mut node = 0;
        for segment in path {
            node = match self.nodes[node].children.get(&segment) {
                Some(&child) => child,
                None => {
                    let child = self.nodes.len();
                    self.nodes.push(TrieNode::default());
                    self.nodes[node].children.insert(segment, child);
                    child
                }
            };
        }
        node
    }

    /// The patterns strictly below `node`.
    fn collect_below(&self, node: usize, out: &mut Vec<u32>) {
        let mut stack: Vec<usize> = self.nodes[node].children.values().copied().collect();
        while let Some(n) = stack.pop() {
            out.extend_from_slice(&self.nodes[n].patterns);
            stack.extend(self.nodes[n].children.values().copied());
        }
    }
}

/// Whether `path` (repository-relative, `/`-separated) is inside `scope`: matched by one of its
/// entries, with the meaning graph files give them (an entry without glob characters is the
/// path itself and everything below it; `*` stays within one directory, `**` crosses any
/// number; `{a,b}` are alternatives). An entry that does not parse matches nothing: the graph
/// was validated before, so that is a stored graph from an older baton.
pub fn scope_covers(scope: &[String], path: &str) -> bool {
    scope.iter().any(|entry| {
        crate::glob::parse_scope(entry)
            .is_ok_and(|patterns| patterns.iter().any(|p| crate::glob::matches(p, path)))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use baton_model::TaskId;

    use super::*;
    use crate::graph::{Action, Workspace};

    fn task(id: &str, scope: &[&str]) -> Task {
        Task {
            id: TaskId::new(id).unwrap(),
            needs: Vec::new(),
            action: Action::Noop,
            timeout: None,
            retries: 0,
            backoff: Duration::from_secs(1),
            scope: scope.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: None,
            handoff_limit: 8192,
            log_limit: crate::DEFAULT_LOG_LIMIT,
            verify: Vec::new(),
            approval: false,
            workspace: Workspace::None,
            workspace_asked: false,
            pass_env: Vec::new().into(),
            secret_env: Vec::new().into(),
            scope_policy: Default::default(),
            fix_attempts: 0,
            setup: Vec::new().into(),
            shell: Vec::new().into(),
            worktree_include: Vec::new().into(),
            runs_on: Vec::new().into(),
            confine: None,
            contain: None,
            plan: None,
            parent: None,
            planned: false,
            depth: 0,
            for_each: None,
            item: None,
            acceptance: Vec::new().into(),
            reviewer: None,
            replaced: false,
            estimate: None,
            candidates: Vec::new().into(),
        }
    }

    #[test]
    fn pairs_across_the_trie() {
        let tasks = [
            task("all-md", &["**/*.md"]),
            task("readme", &["README.md"]),
            task("db", &["src/db"]),
            task("db-file", &["src/db/schema.rs"]),
            task("api", &["src/api/**"]),
            task("none", &[]),
            task("src-rs", &["src/*.rs"]),
            task("main", &["src/main.rs", "docs/x.txt"]),
        ];
        let c = conflicts(&tasks);
        // A literal path is also everything under it, so `**/*.md` reaches into each of them
        // (`docs/x.txt/y.md` included).
        assert_eq!(c[0], vec![1, 2, 3, 4, 7]);
        assert_eq!(c[1], vec![0]);
        assert_eq!(c[2], vec![0, 3]);
        assert_eq!(c[3], vec![0, 2]);
        assert_eq!(c[4], vec![0]);
        assert!(c[5].is_empty());
        assert_eq!(c[6], vec![7]);
        assert_eq!(c[7], vec![0, 6]);
    }

    #[test]
    fn unreadable_scope_conflicts_with_everything_scoped() {
        let tasks = [task("bad", &["a["]), task("x", &["x"]), task("free", &[])];
        let c = conflicts(&tasks);
        assert_eq!(c[0], vec![1]);
        assert!(c[2].is_empty());
    }

    #[test]
    fn many_disjoint_scopes_are_fast() {
        let tasks: Vec<Task> = (0..100_000)
            .map(|i| {
                let dir = format!("crates/c{i}/**");
                task(&format!("t{i}"), &[&dir])
            })
            .collect();
        let started = std::time::Instant::now();
        let c = conflicts(&tasks);
        assert!(c.iter().all(Vec::is_empty));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
