//! Dependency cycles: strongly connected components (Tarjan's algorithm, iterative so that a
//! chain of 100,000 tasks cannot overflow the stack), and one cycle through each.

use std::collections::{HashMap, HashSet, VecDeque};

/// The strongly connected components with more than one node, each sorted, in order of their
/// smallest node. `adj[v]` lists the nodes `v` has an edge to.
pub(crate) fn cyclic_components(adj: &[Vec<u32>]) -> Vec<Vec<u32>> {
    const UNSEEN: u32 = u32::MAX;
    let n = adj.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, usize)> = Vec::new();
    let mut next = 0u32;
    let mut out = Vec::new();
    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN {
            continue;
        }
        index[root as usize] = next;
        low[root as usize] = next;
        next += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        call.push((root, 0));
        while let Some(top) = call.last_mut() {
            let v = top.0 as usize;
            if let Some(&w) = adj[v].get(top.1) {
                top.1 += 1;
                let wi = w as usize;
                if index[wi] == UNSEEN {
                    index[wi] = next;
                    low[wi] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[wi] = true;
                    call.push((w, 0));
                } else if on_stack[wi] {
                    low[v] = low[v].min(index[wi]);
                }
                continue;
            }
            call.pop();
            if let Some(&(parent, _)) = call.last() {
                low[parent as usize] = low[parent as usize].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    component.push(w);
                    if w as usize == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    out.push(component);
                }
            }
        }
    }
    out.sort_unstable_by_key(|c| c[0]);
    out
}

/// A shortest cycle through the component's smallest node, as the list of nodes
/// `[start, …, last]` where `last` has an edge back to `start`.
pub(crate) fn cycle_through(adj: &[Vec<u32>], component: &[u32]) -> Vec<u32> {
    let members: HashSet<u32> = component.iter().copied().collect();
    let start = component[0];
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &adj[v as usize] {
            if w == start {
                let mut path = vec![v];
                let mut at = v;
                while at != start {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if members.contains(&w) && !parent.contains_key(&w) {
                parent.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    // A strongly connected component always has a cycle through each of its nodes.
    vec![start]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_cycle_once() {
        // 0 -> 1 -> 2 -> 0, 2 -> 1 (same component), 3 -> 4 -> 3, 5 alone.
        let adj = vec![vec![1], vec![2], vec![0, 1], vec![4], vec![3], vec![0]];
        let comps = cyclic_components(&adj);
        assert_eq!(comps, vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!(cycle_through(&adj, &comps[0]), vec![0, 1, 2]);
        assert_eq!(cycle_through(&adj, &comps[1]), vec![3, 4]);
    }

    #[test]
    fn long_chains_do_not_overflow() {
        let n = 200_000u32;
        let mut adj: Vec<Vec<u32>> = (0..n)
            .map(|i| if i + 1 < n { vec![i + 1] } else { vec![] })
            .collect();
        assert!(cyclic_components(&adj).is_empty());
        adj[(n - 1) as usize].push(0);
        let comps = cyclic_components(&adj);
        assert_eq!(comps.len(), 1);
        assert_eq!(comps[0].len(), n as usize);
    }
}
