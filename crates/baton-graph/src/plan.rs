//! `baton plan FILE`: the shape of a graph before running it.
//!
//! `--json` prints [`Plan`] as one object; `schema` changes only when an existing field changes
//! meaning or disappears:
//!
//! ```json
//! {"schema":1,"name":"add-auth","tasks":3,"edges":2,"roots":1,"leaves":1,"concurrency":4,
//!  "levels":[["schema"],["api"],["lint"]],"critical_path":["schema","api","lint"],
//!  "conflicts":[],"notes":[]}
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, TaskIndex};

/// Version of the plan wire format.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub schema: u32,
    pub name: String,
    pub tasks: usize,
    /// `needs` entries.
    pub edges: usize,
    /// Tasks that need nothing.
    pub roots: usize,
    /// Tasks nothing needs.
    pub leaves: usize,
    pub concurrency: u32,
    /// `levels[k]`: the tasks whose longest chain of predecessors has `k` tasks, in file order.
    pub levels: Vec<Vec<String>>,
    /// The longest chain of tasks, first to last (ties go to the task earlier in the file).
    pub critical_path: Vec<String>,
    /// Pairs of tasks whose scopes overlap and that no dependency orders: the scheduler keeps
    /// them apart, so they serialize. Sorted.
    pub conflicts: Vec<[String; 2]>,
    /// Tasks whose answer adds tasks while the run goes (`expand = true`), with their limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planners: Vec<PlannerLine>,
    /// `for_each` tasks and what they fan out over (their instances are added when they are
    /// ready): `{"id", "over"}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fan_outs: Vec<FanOutLine>,
    /// How the run's budget holds its agents back, when it has a hard limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetLine>,
    /// What a conversion from a legacy format did.
    pub notes: Vec<String>,
}

/// The run's hard budget, as `baton plan` shows it: before an agent starts, what it will likely
/// cost is reserved. `estimated` agent tasks reserve their `estimate.usd`; `unestimated` ones
/// (and, against a token limit, all: a dollar estimate says nothing of tokens) start one at a
/// time until one of the run's agents has finished, then reserve the average of the finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetLine {
    /// `$20.00`, `2000000 tokens`, or both.
    pub limit: String,
    pub estimated: Vec<String>,
    pub unestimated: Vec<String>,
}

/// A `for_each` task, as `baton plan` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanOutLine {
    pub id: String,
    /// `3 items`, `the paths matching crates/*/`, `the items find writes`.
    pub over: String,
}

/// A planner, as `baton plan` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannerLine {
    pub id: String,
    pub max_subtasks: u32,
    pub max_depth: u32,
    /// Times it is asked again when one of its tasks fails (`on_failure = "replan"`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replans: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub fn plan(graph: &Graph) -> Plan {
    let n = graph.len();
    let order = topological_order(graph);
    // `depth[i]`: tasks on the longest chain ending at i; `via[i]`: the need it came through.
    let mut depth = vec![0u32; n];
    let mut via: Vec<Option<TaskIndex>> = vec![None; n];
    for &i in &order {
        let task = graph.task(i);
        let mut best: Option<(u32, TaskIndex)> = None;
        for &need in &task.needs {
            let d = depth[need as usize];
            if best.is_none_or(|(bd, bi)| d > bd || (d == bd && need < bi)) {
                best = Some((d, need));
            }
        }
        depth[i as usize] = best.map_or(1, |(d, _)| d + 1);
        via[i as usize] = best.map(|(_, need)| need);
    }

    let id = |i: TaskIndex| graph.task(i).id.to_string();
    let mut levels: Vec<Vec<String>> = Vec::new();
    for (i, &d) in depth.iter().enumerate() {
        let level = d as usize - 1;
        if levels.len() <= level {
            levels.resize(level + 1, Vec::new());
        }
        levels[level].push(id(i as TaskIndex));
    }

    let mut critical_path = Vec::new();
    let mut at = (0..n)
        .max_by_key(|&i| (depth[i], std::cmp::Reverse(i)))
        .map(|i| i as TaskIndex);
    while let Some(i) = at {
        critical_path.push(id(i));
        at = via[i as usize];
    }
    critical_path.reverse();

    let conflicts = unordered_conflicts(graph, &depth)
        .into_iter()
        .map(|(a, b)| [id(a), id(b)])
        .collect();

    Plan {
        schema: PLAN_SCHEMA_VERSION,
        name: graph.name().to_owned(),
        tasks: n,
        edges: graph.tasks().iter().map(|t| t.needs.len()).sum(),
        roots: graph.tasks().iter().filter(|t| t.needs.is_empty()).count(),
        leaves: (0..n)
            .filter(|&i| graph.dependents(i as TaskIndex).is_empty())
            .count(),
        concurrency: graph.run_settings().concurrency,
        levels,
        critical_path,
        conflicts,
        planners: graph
            .tasks()
            .iter()
            .filter_map(|t| {
                t.plan.as_deref().map(|p| PlannerLine {
                    id: t.id.to_string(),
                    max_subtasks: p.max_subtasks,
                    max_depth: p.max_depth,
                    replans: p.replans,
                })
            })
            .collect(),
        fan_outs: graph
            .tasks()
            .iter()
            .filter_map(|t| {
                let over = match t.for_each.as_deref()? {
                    crate::ForEach::List(items) => format!(
                        "{} item{}",
                        items.len(),
                        if items.len() == 1 { "" } else { "s" }
                    ),
                    crate::ForEach::Glob(glob) => format!("the paths matching {glob}"),
                    crate::ForEach::From(source) => {
                        format!("the items {} writes", graph.task(*source).id)
                    }
                };
                Some(FanOutLine {
                    id: t.id.to_string(),
                    over,
                })
            })
            .collect(),
        budget: budget_line(graph),
        notes: graph.notes().to_vec(),
    }
}

fn budget_line(graph: &Graph) -> Option<BudgetLine> {
    let limit = &graph.run_settings().budget;
    let limit = match (limit.usd, limit.tokens) {
        (None, None) => return None,
        (Some(usd), None) => format!("${usd:.2}"),
        (None, Some(tokens)) => format!("{tokens} tokens"),
        (Some(usd), Some(tokens)) => format!("${usd:.2} and {tokens} tokens"),
    };
    let by_tokens = graph.run_settings().budget.tokens.is_some();
    let (mut estimated, mut unestimated) = (Vec::new(), Vec::new());
    for task in graph.tasks() {
        if !matches!(task.action, crate::Action::Agent { .. }) {
            continue;
        }
        let usd = task.expected_usd().filter(|usd| *usd > 0.0);
        match usd {
            Some(_) if !by_tokens => estimated.push(task.id.to_string()),
            _ => unestimated.push(task.id.to_string()),
        }
    }
    Some(BudgetLine {
        limit,
        estimated,
        unestimated,
    })
}

/// Kahn's algorithm; a validated graph has no cycles, so every task appears.
fn topological_order(graph: &Graph) -> Vec<TaskIndex> {
    let n = graph.len();
    let mut waiting: Vec<usize> = graph.tasks().iter().map(|t| t.needs.len()).collect();
    let mut order: Vec<TaskIndex> = (0..n as TaskIndex)
        .filter(|&i| waiting[i as usize] == 0)
        .collect();
    let mut k = 0;
    while k < order.len() {
        let i = order[k];
        k += 1;
        for &d in graph.dependents(i) {
            waiting[d as usize] -= 1;
            if waiting[d as usize] == 0 {
                order.push(d);
            }
        }
    }
    order
}

/// Conflicting pairs `(a, b)`, `a < b`, where neither task depends on the other.
fn unordered_conflicts(graph: &Graph, depth: &[u32]) -> Vec<(TaskIndex, TaskIndex)> {
    // Group each pair under its deeper task, whose ancestors are searched once for all of them.
    let mut by_later: BTreeMap<TaskIndex, Vec<TaskIndex>> = BTreeMap::new();
    let mut out = Vec::new();
    for a in 0..graph.len() as TaskIndex {
        for &b in graph.conflicts(a) {
            if b <= a {
                continue;
            }
            let (da, db) = (depth[a as usize], depth[b as usize]);
            // An ancestor is always strictly shallower, so equal depths cannot be ordered.
            if da == db {
                out.push((a, b));
            } else if da < db {
                by_later.entry(b).or_default().push(a);
            } else {
                by_later.entry(a).or_default().push(b);
            }
        }
    }
    for (later, earlier) in by_later {
        let floor = earlier
            .iter()
            .map(|&e| depth[e as usize])
            .min()
            .unwrap_or(0);
        let ancestors = ancestors_down_to(graph, later, depth, floor);
        for e in earlier {
            if !ancestors.contains(&e) {
                out.push((e.min(later), e.max(later)));
            }
        }
    }
    out.sort_unstable();
    out
}

fn ancestors_down_to(
    graph: &Graph,
    from: TaskIndex,
    depth: &[u32],
    floor: u32,
) -> HashSet<TaskIndex> {
    let mut seen = HashSet::new();
    let mut stack = vec![from];
    while let Some(i) = stack.pop() {
        for &need in &graph.task(i).needs {
            if depth[need as usize] >= floor && seen.insert(need) {
                stack.push(need);
            }
        }
    }
    seen
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 12;
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        writeln!(
            f,
            "{}: {}, {}, {}, {}; concurrency {}",
            self.name,
            plural(self.tasks, "task", "tasks"),
            plural(self.edges, "dependency", "dependencies"),
            plural(self.roots, "root", "roots"),
            plural(self.leaves, "leaf", "leaves"),
            self.concurrency
        )?;
        writeln!(f, "levels:")?;
        for (k, ids) in self.levels.iter().enumerate() {
            write!(
                f,
                "  {k}: {}",
                ids.iter()
                    .take(SHOWN)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
            if ids.len() > SHOWN {
                write!(f, " … and {} more", ids.len() - SHOWN)?;
            }
            writeln!(f)?;
        }
        writeln!(
            f,
            "critical path ({}): {}",
            plural(self.critical_path.len(), "task", "tasks"),
            self.critical_path.join(" -> ")
        )?;
        if self.conflicts.is_empty() {
            writeln!(f, "scope conflicts: none")?;
        } else {
            writeln!(f, "scope conflicts (never run at the same time):")?;
            for [a, b] in self.conflicts.iter().take(SHOWN * 4) {
                writeln!(f, "  {a} <-> {b}")?;
            }
            if self.conflicts.len() > SHOWN * 4 {
                writeln!(f, "  … and {} more", self.conflicts.len() - SHOWN * 4)?;
            }
        }
        if !self.planners.is_empty() {
            writeln!(f, "planners (their answers add tasks while the run goes):")?;
            for p in &self.planners {
                write!(
                    f,
                    "  {}: up to {} tasks, planning {} level{} deep",
                    p.id,
                    p.max_subtasks,
                    p.max_depth,
                    if p.max_depth == 1 { "" } else { "s" }
                )?;
                match p.replans {
                    0 => writeln!(f)?,
                    n => writeln!(
                        f,
                        ", re-planning up to {n} time{}",
                        if n == 1 { "" } else { "s" }
                    )?,
                }
            }
        }
        if !self.fan_outs.is_empty() {
            writeln!(f, "for each (one task per item, added when it is ready):")?;
            for line in &self.fan_outs {
                writeln!(f, "  {}: {}", line.id, line.over)?;
            }
        }
        if let Some(budget) = &self.budget {
            let list = |ids: &[String]| {
                let mut text = ids
                    .iter()
                    .take(SHOWN)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                if ids.len() > SHOWN {
                    text.push_str(&format!(" … and {} more", ids.len() - SHOWN));
                }
                text
            };
            writeln!(
                f,
                "budget: {} for the run; an agent reserves what it will likely cost before it starts",
                budget.limit
            )?;
            if !budget.estimated.is_empty() {
                writeln!(f, "  its estimate: {}", list(&budget.estimated))?;
            }
            if !budget.unestimated.is_empty() {
                writeln!(
                    f,
                    "  no estimate{}: one at a time until an agent has finished, then their average: {}",
                    if budget.limit.contains("tokens") {
                        " in tokens"
                    } else {
                        ""
                    },
                    list(&budget.unestimated)
                )?;
            }
        }
        if !self.notes.is_empty() {
            writeln!(f, "notes:")?;
            for note in &self.notes {
                writeln!(f, "  - {note}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::load_str;

    const GRAPH: &str = r#"
name = "demo"
[[task]]
id = "schema"
prompt = "make the schema"
scope = ["src/db/**"]
[[task]]
id = "docs"
run = "make docs"
scope = ["docs/**", "src/db/README.md"]
[[task]]
id = "api"
needs = ["schema"]
prompt = "api"
scope = ["src/db/*"]
[[task]]
id = "cli"
needs = ["schema"]
run = "make cli"
[[task]]
id = "lint"
needs = ["api", "cli"]
run = "cargo clippy"
"#;

    #[test]
    fn shape_of_a_small_graph() {
        let graph = load_str(Path::new("demo.toml"), GRAPH).unwrap();
        let plan = plan(&graph);
        assert_eq!(
            plan.levels,
            vec![vec!["schema", "docs"], vec!["api", "cli"], vec!["lint"]]
        );
        assert_eq!(plan.critical_path, vec!["schema", "api", "lint"]);
        assert_eq!(
            (plan.tasks, plan.edges, plan.roots, plan.leaves),
            (5, 4, 2, 2)
        );
        // schema/api overlap but are ordered; docs overlaps both and is ordered by nothing.
        assert_eq!(plan.conflicts, vec![["schema", "docs"], ["docs", "api"]]);
        insta::assert_snapshot!("plan_text", plan.to_string());
        insta::assert_json_snapshot!("plan_json", plan);
    }
}
