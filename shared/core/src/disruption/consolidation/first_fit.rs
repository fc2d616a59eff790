//! The first node, in the cluster's node order, with room for a pod: the node the scheduler's
//! first fit over existing capacity tries first. A max-tree over the nodes' free cpu, memory and
//! pod slots finds it in about log n steps instead of a scan of every node.

use crate::resources::Resources;

/// Per node: free cpu, memory and pod slots; `None` nodes (gone, cordoned) never match.
#[derive(Debug, Default)]
pub(super) struct FirstFit {
    /// Leaves start at `size`; an inner node holds the per-resource maximum of its children.
    max: Vec<[i64; 3]>,
    size: usize,
}

const NEVER: [i64; 3] = [i64::MIN; 3];

impl FirstFit {
    pub fn new(free: impl ExactSizeIterator<Item = Option<[i64; 3]>>) -> Self {
        let size = free.len().next_power_of_two().max(1);
        let mut max = vec![NEVER; 2 * size];
        for (i, f) in free.enumerate() {
            max[size + i] = f.unwrap_or(NEVER);
        }
        for i in (1..size).rev() {
            let (l, r) = (max[2 * i], max[2 * i + 1]);
            max[i] = [l[0].max(r[0]), l[1].max(r[1]), l[2].max(r[2])];
        }
        FirstFit { max, size }
    }

    pub fn key(r: &Resources) -> [i64; 3] {
        [r.cpu, r.memory, r.pods]
    }

    /// The first node at index `from` or later whose free cpu, memory and pod slots all cover
    /// `need` (other resources, taints and labels are the caller's to check).
    pub fn first(&self, from: usize, need: [i64; 3]) -> Option<usize> {
        if from >= self.size {
            return None;
        }
        self.descend(1, 0, self.size, from, need)
    }

    fn descend(&self, at: usize, lo: usize, hi: usize, from: usize, need: [i64; 3]) -> Option<usize> {
        let m = self.max[at];
        if hi <= from || m[0] < need[0] || m[1] < need[1] || m[2] < need[2] {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.descend(2 * at, lo, mid, from, need).or_else(|| self.descend(2 * at + 1, mid, hi, from, need))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_node_with_room_in_node_order() {
        let free = [Some([500, 900, 3]), None, Some([2000, 100, 5]), Some([1000, 1000, 0]), Some([800, 800, 1])];
        let f = FirstFit::new(free.into_iter());
        assert_eq!(f.first(0, [400, 500, 1]), Some(0));
        assert_eq!(f.first(1, [400, 500, 1]), Some(4), "memory rules out 2, pod slots 3, 1 is gone");
        assert_eq!(f.first(0, [1500, 50, 1]), Some(2));
        assert_eq!(f.first(0, [3000, 0, 0]), None);
        assert_eq!(f.first(5, [0, 0, 0]), None);
        assert_eq!(FirstFit::new(std::iter::empty()).first(0, [0, 0, 0]), None);
    }
}
