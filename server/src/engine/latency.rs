//! Request processing latency, measured by the engine around each call into the core
//! and kept in fixed buckets of atomics (no lock), split into reads and updates as ZooKeeper's
//! `readlatency` and `updatelatency` are; and the request latency ZooKeeper's `ServerStats`
//! and each connection keep (min/avg/max, from the moment a request was read off its socket
//! until its reply was queued), in [`AvgMinMax`].

use std::sync::atomic::{AtomicU64, Ordering};

use zkd_protocol::{LatencyGroup, OpCode};

/// Upper bounds of the buckets, in microseconds.
pub const BUCKETS_US: [u64; 12] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 100_000,
];

/// One latency distribution.
#[derive(Debug, Default)]
pub struct Distribution {
    /// Count per bucket of [`BUCKETS_US`], plus one for larger values.
    counts: [AtomicU64; BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    /// `u64::MAX` minus the least value (0 before the first), and the greatest value.
    min_inverted_us: AtomicU64,
    max_us: AtomicU64,
}

/// A copy of a [`Distribution`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencySnapshot {
    /// (upper bound in seconds, count in that bucket, not cumulative); the last bound is
    /// infinite.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
    /// The least and greatest values, in microseconds (0 before the first).
    pub min_us: u64,
    pub max_us: u64,
}

/// Values of a [`Distribution`] gathered without atomics, added to it at once.
#[derive(Debug, Default)]
struct Pending {
    counts: [u64; BUCKETS_US.len() + 1],
    /// Count, sum, least and greatest value.
    all: AvgMinMax,
}

impl Pending {
    fn record(&mut self, us: u64) {
        let i = BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(BUCKETS_US.len());
        self.counts[i] += 1;
        self.all.record(us);
    }
}

impl Distribution {
    fn add(&self, p: &Pending) {
        let all = &p.all;
        if all.count == 0 {
            return;
        }
        for (c, &n) in self.counts.iter().zip(&p.counts) {
            if n != 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.sum_us.fetch_add(all.sum_us, Ordering::Relaxed);
        self.min_inverted_us
            .fetch_max(u64::MAX - all.min_us, Ordering::Relaxed);
        self.max_us.fetch_max(all.max_us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencySnapshot {
        let mut buckets = Vec::with_capacity(BUCKETS_US.len() + 1);
        let mut count = 0;
        for (i, c) in self.counts.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            count += n;
            let bound = BUCKETS_US.get(i).map_or(f64::INFINITY, |&b| b as f64 / 1e6);
            buckets.push((bound, n));
        }
        LatencySnapshot {
            buckets,
            count,
            sum_seconds: self.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            min_us: match self.min_inverted_us.load(Ordering::Relaxed) {
                0 => 0,
                inverted => u64::MAX - inverted,
            },
            max_us: self.max_us.load(Ordering::Relaxed),
        }
    }
}

/// Latency of requests from arrival to reply: count, sum, min, max and the last one, in
/// microseconds. The reports show milliseconds, as ZooKeeper does (min, max and last whole;
/// the average with the fraction the microseconds give).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AvgMinMax {
    pub count: u64,
    pub sum_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub last_us: u64,
}

impl AvgMinMax {
    pub fn record(&mut self, us: u64) {
        self.min_us = if self.count == 0 {
            us
        } else {
            self.min_us.min(us)
        };
        self.max_us = self.max_us.max(us);
        self.sum_us = self.sum_us.saturating_add(us);
        self.count += 1;
        self.last_us = us;
    }

    /// Adds the requests `other` recorded, as if recorded here after the ones before.
    pub fn merge(&mut self, other: &AvgMinMax) {
        if other.count == 0 {
            return;
        }
        self.min_us = if self.count == 0 {
            other.min_us
        } else {
            self.min_us.min(other.min_us)
        };
        self.max_us = self.max_us.max(other.max_us);
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.count += other.count;
        self.last_us = other.last_us;
    }

    /// `(min, avg, max)` in ms; all 0 before the first request, as ZooKeeper reports.
    pub fn ms(&self) -> (i64, f64, i64) {
        if self.count == 0 {
            return (0, 0.0, 0);
        }
        let avg = self.sum_us as f64 / self.count as f64 / 1000.0;
        (whole_ms(self.min_us), avg, whole_ms(self.max_us))
    }

    /// The last request's latency in ms.
    pub fn last_ms(&self) -> i64 {
        whole_ms(self.last_us)
    }
}

fn whole_ms(us: u64) -> i64 {
    i64::try_from(us / 1000).unwrap_or(i64::MAX)
}

/// Read and update latencies, and the server-wide request latency.
#[derive(Debug, Default)]
pub struct Latencies {
    pub read: Distribution,
    pub update: Distribution,
    /// Every request, arrival to reply (ZooKeeper's `min/avg/max_latency`); reset by `srst`.
    pub requests: std::sync::Mutex<AvgMinMax>,
}

impl Latencies {
    /// The server-wide request latency.
    pub fn requests(&self) -> AvgMinMax {
        *self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `srst`: forget the server-wide request latency.
    pub fn reset_requests(&self) {
        *self.requests.lock().unwrap_or_else(|e| e.into_inner()) = AvgMinMax::default();
    }

    /// Adds what `batch` gathered: a few atomic operations per batch of requests instead of
    /// per request.
    pub fn add(&self, batch: &Batch) {
        self.read.add(&batch.read);
        self.update.add(&batch.update);
        if batch.requests.count != 0 {
            self.requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .merge(&batch.requests);
        }
    }
}

/// The latencies of requests handled one after the other, for [`Latencies::add`].
#[derive(Debug, Default)]
pub struct Batch {
    read: Pending,
    update: Pending,
    requests: AvgMinMax,
}

impl Batch {
    /// Records one request's arrival-to-reply latency.
    pub fn record_request(&mut self, us: u64) {
        self.requests.record(us);
    }

    /// Records the processing time of one request whose payload is `frame` (header: xid,
    /// opcode).
    pub fn record(&mut self, frame: &[u8], us: u64) {
        let Some(op) = OpCode::of_payload(frame) else {
            return;
        };
        match op.info().latency {
            LatencyGroup::Update => self.update.record(us),
            LatencyGroup::Read => self.read.record(us),
            LatencyGroup::Uncounted => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_avg_max_in_ms() {
        let mut l = AvgMinMax::default();
        assert_eq!(l.ms(), (0, 0.0, 0));
        l.record(2_500);
        l.record(500);
        l.record(12_000);
        assert_eq!((l.ms(), l.last_ms()), ((0, 5.0, 12), 12));
    }

    #[test]
    fn batches_add_up_to_their_requests_one_by_one() {
        let l = Latencies::default();
        let mut direct = AvgMinMax::default();
        let get_data = [0, 0, 0, 1, 0, 0, 0, 4];
        for batch in [&[700, 20][..], &[], &[5, 9_000, 40]] {
            let mut b = Batch::default();
            for &us in batch {
                b.record_request(us);
                b.record(&get_data, us);
                direct.record(us);
            }
            l.add(&b);
        }
        assert_eq!(l.requests(), direct);
        let r = l.read.snapshot();
        assert_eq!((r.count, r.min_us, r.max_us), (5, 5, 9_000));
        assert_eq!(r.buckets.iter().map(|b| b.1).sum::<u64>(), 5);
    }

    #[test]
    fn buckets_and_classification() {
        let l = Latencies::default();
        let get_data = [0, 0, 0, 1, 0, 0, 0, 4];
        let set_data = [0, 0, 0, 1, 0, 0, 0, 5];
        let ping = [0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11];
        let mut b = Batch::default();
        b.record(&get_data, 3);
        b.record(&get_data, 7);
        b.record(&set_data, 1_000_000);
        b.record(&ping, 1);
        b.record(&[1, 2], 1);
        l.add(&b);
        let r = l.read.snapshot();
        assert_eq!((r.count, r.buckets[0].1, r.buckets[1].1), (2, 1, 1));
        assert!((r.sum_seconds - 10e-6).abs() < 1e-12);
        let u = l.update.snapshot();
        assert_eq!(u.count, 1);
        assert_eq!(u.buckets.last(), Some(&(f64::INFINITY, 1)));
    }
}
