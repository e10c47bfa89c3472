use std::time::Duration;

use baton_model::OnFailure;

/// What the scheduler needs to know about one task.
#[derive(Debug, Clone, Default)]
pub struct PlanTask {
    /// Indices of the tasks it needs.
    pub needs: Vec<u32>,
    /// Indices of the tasks whose scopes conflict with its own (symmetric).
    pub conflicts: Vec<u32>,
    /// Attempts after the first.
    pub retries: u32,
    /// Delay before the first retry.
    pub backoff: Duration,
    /// `retries` cover only the machinery's failures (an agent task's default): a failure of
    /// the task's own ends it at once.
    pub retry_infrastructure_only: bool,
    /// Engines after its own that stand in when an attempt fails for the machinery's
    /// reasons ([`hands_over`](crate::hands_over)).
    pub fallbacks: u32,
    /// `fallback_on = "any"`: any failure hands over to the next engine.
    pub fallback_on_any: bool,
    /// Once ready, waits for [`Input::Approved`](crate::Input::Approved) before it starts.
    pub needs_approval: bool,
    /// The planner (`on_failure = "replan"`) that is asked again when this task, one of the
    /// tasks it added, fails for good: the failure is held, not passed on, while it re-plans.
    pub replanned_by: Option<u32>,
    /// A planner's re-plans left.
    pub replans: u32,
    /// A re-plan replaced it (it failed, or had not started): its failure means nothing more.
    pub replaced: bool,
}

/// A planner's new answer joining the plan ([`Scheduler::extend`](crate::Scheduler::extend)):
/// its unfinished tasks it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replanned {
    pub planner: u32,
    /// Its tasks that had not started: they end `skipped`, replaced.
    pub retired: Vec<u32>,
}

/// The scheduler's input graph. Must be acyclic with indices in range: the graph crate
/// guarantees both for every graph it hands out.
#[derive(Debug, Clone)]
pub struct Plan {
    pub tasks: Vec<PlanTask>,
    pub concurrency: u32,
    pub on_failure: OnFailure,
}

/// Adjacency in compressed form: the neighbours of `i` are `targets[offsets[i]..offsets[i+1]]`.
/// One allocation for all edges keeps a 100,000-task graph compact and cache friendly.
#[derive(Debug, Clone)]
pub(crate) struct Adjacency {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Adjacency {
    pub(crate) fn build(n: usize, edges: impl Iterator<Item = (u32, u32)> + Clone) -> Self {
        let mut offsets = vec![0u32; n + 1];
        for (from, _) in edges.clone() {
            offsets[from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; offsets[n] as usize];
        for (from, to) in edges {
            let slot = &mut fill[from as usize];
            targets[*slot as usize] = to;
            *slot += 1;
        }
        Self { offsets, targets }
    }

    pub(crate) fn of(&self, i: u32) -> &[u32] {
        let i = i as usize;
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// For each task, the number of tasks on the longest chain that starts at it (itself
/// included): the critical-path priority. Computed in reverse topological order, O(V + E).
pub(crate) fn priorities(needs_count: &[u32], dependents: &Adjacency) -> Vec<u32> {
    let n = needs_count.len();
    let mut remaining = needs_count.to_vec();
    let mut order = Vec::with_capacity(n);
    order.extend((0..n as u32).filter(|&i| remaining[i as usize] == 0));
    let mut head = 0;
    while head < order.len() {
        let i = order[head];
        head += 1;
        for &d in dependents.of(i) {
            remaining[d as usize] -= 1;
            if remaining[d as usize] == 0 {
                order.push(d);
            }
        }
    }
    debug_assert_eq!(order.len(), n, "the plan must be acyclic");
    let mut rank = vec![1u32; n];
    for &i in order.iter().rev() {
        let best = dependents
            .of(i)
            .iter()
            .map(|&d| rank[d as usize])
            .max()
            .unwrap_or(0);
        rank[i as usize] = best + 1;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_is_length_of_longest_chain_below() {
        // 0 -> 1 -> 3, 0 -> 2; 4 alone.
        let needs = [vec![], vec![0], vec![0], vec![1], vec![]];
        let count: Vec<u32> = needs.iter().map(|n| n.len() as u32).collect();
        let dependents = Adjacency::build(
            5,
            needs
                .iter()
                .enumerate()
                .flat_map(|(i, n)| n.iter().map(move |&d| (d, i as u32))),
        );
        assert_eq!(priorities(&count, &dependents), vec![3, 2, 1, 1, 1]);
    }
}
