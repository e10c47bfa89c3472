//! One list of task indices per task, kept in two flat vectors.

use crate::graph::TaskIndex;

/// `Vec<Vec<TaskIndex>>` costs 24 bytes per task, and an allocation per non-empty list; for a
/// graph of 100,000 tasks, most lists short or empty, that was several times the edges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Adjacency {
    /// List `i` is `items[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
    items: Vec<TaskIndex>,
}

impl Adjacency {
    pub(crate) fn from_lists(lists: &[Vec<TaskIndex>]) -> Self {
        let mut starts = Vec::with_capacity(lists.len() + 1);
        starts.push(0);
        let mut items = Vec::with_capacity(lists.iter().map(Vec::len).sum());
        for list in lists {
            items.extend_from_slice(list);
            starts.push(items.len());
        }
        Self { starts, items }
    }

    /// For `n` nodes, the reverse of the lists `forward` gives (`i` appears in list `j` when
    /// `forward(i)` holds `j`), each list in increasing order.
    pub(crate) fn reversed<'a, I>(n: usize, forward: impl Fn(usize) -> I) -> Self
    where
        I: IntoIterator<Item = &'a TaskIndex>,
    {
        let mut starts = vec![0usize; n + 1];
        for i in 0..n {
            for &j in forward(i) {
                starts[j as usize + 1] += 1;
            }
        }
        for k in 1..=n {
            starts[k] += starts[k - 1];
        }
        let mut next = starts.clone();
        let mut items = vec![0; starts[n]];
        for i in 0..n {
            for &j in forward(i) {
                items[next[j as usize]] = i as TaskIndex;
                next[j as usize] += 1;
            }
        }
        Self { starts, items }
    }

    pub(crate) fn get(&self, index: TaskIndex) -> &[TaskIndex] {
        let i = index as usize;
        &self.items[self.starts[i]..self.starts[i + 1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_their_reverse() {
        let lists = vec![vec![], vec![0], vec![0, 1], vec![]];
        let a = Adjacency::from_lists(&lists);
        assert_eq!((0..4).map(|i| a.get(i).to_vec()).collect::<Vec<_>>(), lists);
        let r = Adjacency::reversed(4, |i| &lists[i]);
        let expected: Vec<Vec<TaskIndex>> = vec![vec![1, 2], vec![2], vec![], vec![]];
        assert_eq!(
            (0..4).map(|i| r.get(i).to_vec()).collect::<Vec<_>>(),
            expected
        );
    }
}
