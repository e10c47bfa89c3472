//! The task graph as SVG: columns by depth in a topological order, each column ordered by the
//! mean row of its tasks' needs (fewer crossings), a planner's tasks kept together and framed,
//! edges another path implies left out, the critical path bold.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use baton_model::{TaskId, TaskState};

use super::{ReportInput, anchor, esc, state_class};

/// Columns by depth (the longest chain of needs before a task), rows in graph order within
/// each, a planner's tasks next to each other; boxes coloured by state; planners' tasks framed
/// together under the planner's name.
pub(super) fn graph_svg(input: &ReportInput<'_>, critical: &[TaskId]) -> String {
    const W: i64 = 168;
    const H: i64 = 34;
    const GAP_X: i64 = 56;
    const GAP_Y: i64 = 14;
    const PAD: i64 = 24;
    let index: HashMap<&TaskId, usize> = input
        .graph
        .iter()
        .enumerate()
        .map(|(i, t)| (&t.id, i))
        .collect();
    // The tasks in an order where needs come first (Kahn's; a graph grown by planners and
    // fan-outs lists its new tasks last, and what waited for them gained them as needs), then
    // each task's depth: the longest chain of needs before it.
    let needs_of: Vec<Vec<usize>> = input
        .graph
        .iter()
        .map(|t| {
            t.needs
                .iter()
                .filter_map(|n| index.get(n).copied())
                .collect()
        })
        .collect();
    let order = topological(&needs_of);
    let mut depth = vec![0usize; input.graph.len()];
    for &i in &order {
        depth[i] = needs_of[i].iter().map(|&j| depth[j] + 1).max().unwrap_or(0);
    }
    let columns = depth.iter().max().map_or(0, |d| d + 1);
    let mut by_column: Vec<Vec<usize>> = vec![Vec::new(); columns];
    for (i, &d) in depth.iter().enumerate() {
        by_column[d].push(i);
    }
    // Each column in the order of what its tasks need (the mean row of their needs, one sweep
    // from left to right: fewer crossing edges), a planner's tasks kept together.
    let mut row_of = vec![0f64; input.graph.len()];
    for column in &mut by_column {
        let centre = |i: usize| {
            let rows: Vec<f64> = input.graph[i]
                .needs
                .iter()
                .filter_map(|n| index.get(n))
                .map(|&j| row_of[j])
                .collect();
            if rows.is_empty() {
                i as f64 / input.graph.len().max(1) as f64
            } else {
                rows.iter().sum::<f64>() / rows.len() as f64
            }
        };
        let group_of = |i: usize| {
            input.graph[i]
                .planner
                .as_ref()
                .and_then(|p| index.get(p).copied())
        };
        let mut group_centre: HashMap<usize, f64> = HashMap::new();
        for &i in column.iter() {
            if let Some(g) = group_of(i) {
                let c = centre(i);
                group_centre
                    .entry(g)
                    .and_modify(|m| *m = m.min(c))
                    .or_insert(c);
            }
        }
        let mut keyed: Vec<(f64, usize, f64, usize)> = column
            .iter()
            .map(|&i| {
                let own = centre(i);
                match group_of(i) {
                    Some(g) => (group_centre[&g], g, own, i),
                    None => (own, i, own, i),
                }
            })
            .collect();
        keyed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then(a.2.total_cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        *column = keyed.into_iter().map(|k| k.3).collect();
        for (r, &i) in column.iter().enumerate() {
            row_of[i] = r as f64;
        }
    }
    // Rows top to bottom; a planner's group gets room for its frame and name.
    let mut at = vec![(0i64, 0i64); input.graph.len()];
    let mut bottom = 0i64;
    for (c, column) in by_column.iter().enumerate() {
        let mut y = PAD;
        let mut group: Option<&TaskId> = None;
        for &i in column {
            let this = input.graph[i].planner.as_ref();
            if this != group {
                if group.is_some() {
                    y += 10;
                }
                if this.is_some() {
                    y += 22;
                }
                group = this;
            }
            at[i] = (PAD + c as i64 * (W + GAP_X), y);
            y += H + GAP_Y;
        }
        if group.is_some() {
            y += 10;
        }
        bottom = bottom.max(y - GAP_Y);
    }
    let width = PAD * 2 + columns as i64 * (W + GAP_X) - GAP_X;
    let height = bottom + PAD;
    // What each task comes after, transitively: an edge another path already implies is not
    // drawn (a fan-out's instances need their task and its needs; the line from the task is
    // the one that says it).
    let mut before: Vec<Vec<bool>> = vec![vec![false; input.graph.len()]; input.graph.len()];
    for &i in &order {
        let mut set = vec![false; input.graph.len()];
        for &j in &needs_of[i] {
            set[j] = true;
            for (k, &b) in before[j].iter().enumerate() {
                set[k] |= b;
            }
        }
        before[i] = set;
    }
    let states: HashMap<&TaskId, TaskState> =
        input.view.tasks().map(|(id, t)| (id, t.status)).collect();
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="graph" viewBox="0 0 {width} {height}" width="{width}" height="{height}" style="max-width:100%;height:auto" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="task graph">"#
    );
    svg.push_str(r#"<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="arrowhead"/></marker></defs>"#);
    // Planners' groups, behind everything.
    let mut groups: BTreeMap<usize, (i64, i64, i64, i64)> = BTreeMap::new();
    for (i, task) in input.graph.iter().enumerate() {
        if let Some(p) = task.planner.as_ref().and_then(|p| index.get(p)) {
            let (x, y) = at[i];
            let g = groups.entry(*p).or_insert((x, y, x + W, y + H));
            *g = (g.0.min(x), g.1.min(y), g.2.max(x + W), g.3.max(y + H));
        }
    }
    for (p, (x0, y0, x1, y1)) in &groups {
        let _ = write!(
            svg,
            r#"<g class="group"><rect x="{}" y="{}" width="{}" height="{}" rx="10"/><text x="{}" y="{}">tasks of {}</text></g>"#,
            x0 - 8,
            y0 - 22,
            x1 - x0 + 16,
            y1 - y0 + 30,
            x0 - 2,
            y0 - 8,
            esc(input.graph[*p].id.as_str())
        );
    }
    for (i, task) in input.graph.iter().enumerate() {
        let needed: Vec<usize> = task
            .needs
            .iter()
            .filter_map(|n| index.get(n).copied())
            .collect();
        for &j in &needed {
            if needed.iter().any(|&m| m != j && before[m][j]) {
                continue;
            }
            let need = &input.graph[j].id;
            let (x0, y0) = (at[j].0 + W, at[j].1 + H / 2);
            let (x1, y1) = (at[i].0, at[i].1 + H / 2);
            let on_path = critical.contains(need) && critical.contains(&task.id);
            let mid = (x0 + x1) / 2;
            let _ = write!(
                svg,
                r#"<path class="edge{}" d="M{x0},{y0} C{mid},{y0} {mid},{y1} {x1},{y1}" marker-end="url(#arrow)"/>"#,
                if on_path { " critical" } else { "" }
            );
        }
    }
    for (i, task) in input.graph.iter().enumerate() {
        let (x, y) = at[i];
        let state = states.get(&task.id).copied().unwrap_or(TaskState::Pending);
        let label = task.id.local();
        let shown: String = if label.chars().count() > 22 {
            label.chars().take(21).chain(['…']).collect()
        } else {
            label.to_owned()
        };
        let _ = write!(
            svg,
            r##"<a href="#{anchor}"><g class="node {class}{critical}" data-task="{id}"><title>{id} · {state} · {kind}</title><rect x="{x}" y="{y}" width="{W}" height="{H}" rx="6"/><text x="{tx}" y="{ty}">{shown}</text><text class="kind" x="{kx}" y="{ty}">{kind}</text></g></a>"##,
            anchor = anchor(task.id.as_str()),
            class = state_class(state),
            critical = if critical.contains(&task.id) {
                " critical"
            } else {
                ""
            },
            id = esc(task.id.as_str()),
            state = state,
            kind = task.kind,
            tx = x + 10,
            ty = y + H / 2 + 4,
            kx = x + W - 8,
            shown = esc(&shown),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Indices in an order where each task's needs come before it; what a cycle (which a recorded
/// graph never has) leaves out comes last, in graph order.
fn topological(needs: &[Vec<usize>]) -> Vec<usize> {
    let mut waiting: Vec<usize> = needs.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); needs.len()];
    for (i, list) in needs.iter().enumerate() {
        for &j in list {
            dependents[j].push(i);
        }
    }
    let mut ready: std::collections::VecDeque<usize> =
        (0..needs.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(needs.len());
    let mut placed = vec![false; needs.len()];
    while let Some(i) = ready.pop_front() {
        order.push(i);
        placed[i] = true;
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push_back(d);
            }
        }
    }
    order.extend((0..needs.len()).filter(|&i| !placed[i]));
    order
}
