use serde::{Deserialize, Serialize};

/// Most buckets a timeline is cut into, whatever the run's length.
const MAX_BUCKETS: u64 = 60;

/// How many tasks ran at once over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Most attempts that ever ran at the same instant.
    pub peak: u32,
    /// Width of each bucket.
    pub bucket_ms: u64,
    /// Average number of running attempts in each bucket.
    pub running: Vec<f64>,
}

/// Builds the timeline from attempt intervals `(start_ms, end_ms)` relative to the run start.
pub fn timeline(intervals: &[(u64, u64)], run_ms: u64) -> Timeline {
    let mut edges: Vec<(u64, i32)> = Vec::with_capacity(intervals.len() * 2);
    for &(start, end) in intervals {
        edges.push((start, 1));
        edges.push((end.max(start), -1));
    }
    // Ends sort before starts at the same instant: back-to-back attempts do not overlap.
    edges.sort_unstable();
    let mut peak = 0;
    let mut now = 0i32;
    for &(_, delta) in &edges {
        now += delta;
        peak = peak.max(now);
    }
    let run_ms = run_ms.max(1);
    let bucket_ms = run_ms.div_ceil(MAX_BUCKETS).max(1);
    let buckets = run_ms.div_ceil(bucket_ms) as usize;
    let mut busy = vec![0u64; buckets];
    for &(start, end) in intervals {
        let (mut t, end) = (start.min(run_ms), end.min(run_ms));
        while t < end {
            let b = (t / bucket_ms) as usize;
            let bucket_end = ((b as u64 + 1) * bucket_ms).min(end);
            busy[b] += bucket_end - t;
            t = bucket_end;
        }
    }
    let running = busy
        .iter()
        .map(|&ms| ((ms as f64 / bucket_ms as f64) * 100.0).round() / 100.0)
        .collect();
    Timeline {
        peak: peak.max(0) as u32,
        bucket_ms,
        running,
    }
}

impl Timeline {
    /// One character per bucket, `▁` to `█`, scaled to the peak.
    pub fn sparkline(&self) -> String {
        const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        let top = f64::from(self.peak.max(1));
        self.running
            .iter()
            .map(|&r| BARS[((r / top) * 7.0).round().clamp(0.0, 7.0) as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_counts_overlap_not_adjacency() {
        let t = timeline(&[(0, 10), (10, 20), (5, 15)], 20);
        assert_eq!(t.peak, 2);
        let t = timeline(&[(0, 10), (0, 10), (0, 10)], 10);
        assert_eq!(t.peak, 3);
        assert_eq!(t.running, vec![3.0; 10]);
    }

    #[test]
    fn buckets_are_bounded() {
        let t = timeline(&[(0, 1_000_000)], 1_000_000);
        assert!(t.running.len() <= MAX_BUCKETS as usize);
        assert_eq!(t.sparkline().chars().count(), t.running.len());
    }
}
