//! The slow-step warning: every hold of the core's lock is timed (one clock reading at each
//! end, shared with the latency figures for client requests), and a hold longer than the
//! threshold (`Config::slow_step_warn`, 1 s by default) logs a WARN naming what ran (the
//! request's opcode, path and session's connection, or the engine call's source location)
//! and how long, and counts it (`zkd_slow_steps` in `mntr` and `/metrics`).

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use zkd_protocol::{OpCode, PathAt};

/// The threshold and the count of holds over it.
#[derive(Debug)]
pub struct SlowSteps {
    /// Microseconds; 0 = no warning.
    threshold_us: u64,
    count: AtomicU64,
}

impl SlowSteps {
    pub fn new(threshold: Duration) -> SlowSteps {
        SlowSteps {
            threshold_us: u64::try_from(threshold.as_micros()).unwrap_or(u64::MAX),
            count: AtomicU64::new(0),
        }
    }

    /// Whether a hold of `us` microseconds is over the threshold.
    pub fn is_slow(&self, us: u64) -> bool {
        self.threshold_us != 0 && us > self.threshold_us
    }

    /// Holds over the threshold since start.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Counts and logs one slow hold of `us` microseconds that ran `what`.
    pub fn report(&self, what: &dyn fmt::Display, us: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            held_ms = us / 1000,
            threshold_ms = self.threshold_us / 1000,
            "slow step: {what} held the core lock for {:.3} s (warning threshold {} ms); \
             every other request waited meanwhile",
            us as f64 / 1e6,
            self.threshold_us / 1000,
        );
    }
}

/// How many bytes of a request's start are kept while it runs, for its slow-step warning:
/// its header and, unless very long, its path.
pub const KEPT: usize = 256;

/// A client request, as the slow-step warning names it: its opcode and the path its body
/// starts with (for a multi, its first operation's path). Decoded only when it is reported.
pub struct RequestStep<'a> {
    /// The request's first bytes (at most [`KEPT`]).
    pub frame: &'a [u8],
    /// The whole request's size in bytes.
    pub len: usize,
    pub conn: u64,
}

fn int(b: &[u8], at: usize) -> Option<i32> {
    let b = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes(<[u8; 4]>::try_from(b).ok()?))
}

/// The string (a Jute `ustring`) at `at` of a request of `whole` bytes whose start is `b`,
/// shortened for a log line (and where it runs past `b`).
fn path_at(b: &[u8], whole: usize, at: usize) -> Option<String> {
    let len = usize::try_from(int(b, at)?).ok()?;
    let start = at + 4;
    let end = start.checked_add(len)?;
    if end > whole {
        return None;
    }
    let bytes = b.get(start..end.min(b.len()))?;
    let s = String::from_utf8_lossy(bytes);
    Some(if s.chars().count() > 200 || end > b.len() {
        let cut: String = s.chars().take(200).collect();
        format!("{cut}…")
    } else {
        s.into_owned()
    })
}

impl RequestStep<'_> {
    fn op(&self) -> Option<OpCode> {
        OpCode::of_payload(self.frame)
    }

    fn path(&self, op: OpCode) -> Option<String> {
        match op.info().path_at {
            PathAt::Nowhere => None,
            PathAt::Body => path_at(self.frame, self.len, 8),
            // The multi header (type, done, err) comes before the first operation's path.
            PathAt::FirstSubOp => path_at(self.frame, self.len, 8 + 9),
        }
    }
}

impl fmt::Display for RequestStep<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(op) = self.op() else {
            return write!(
                f,
                "a request of {} bytes on connection {}",
                self.len, self.conn
            );
        };
        write!(f, "request {op:?}")?;
        match self.path(op) {
            Some(p) if op.info().path_at == PathAt::FirstSubOp => write!(f, " (first path {p})")?,
            Some(p) => write!(f, " {p}")?,
            None => {}
        }
        write!(f, " of {} bytes on connection {}", self.len, self.conn)
    }
}

/// Any other hold of the lock (a tick, a control operation, a report, a snapshot), named by
/// the source location that took it.
pub struct EngineStep {
    pub what: Option<&'static str>,
    pub at: &'static Location<'static>,
}

impl fmt::Display for EngineStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.what {
            Some(w) => write!(f, "{w} ({}:{})", self.at.file(), self.at.line()),
            None => write!(f, "the core call at {}:{}", self.at.file(), self.at.line()),
        }
    }
}

/// The longest stall the control plane may ask for ([`super::Shared::stall`]).
#[cfg(feature = "admin")]
pub const MAX_STALL: Duration = Duration::from_secs(60);

#[cfg(feature = "admin")]
impl super::Shared {
    /// Holds the core's lock for `d` (at most [`MAX_STALL`]) as a stuck step would: every
    /// request, report and control operation that needs the core waits, and so does a graceful
    /// shutdown. `held` runs once the lock is taken. Blocks the calling thread.
    pub(crate) fn stall(&self, d: Duration, held: impl FnOnce()) -> Result<(), super::CoreFailed> {
        self.with_state_named("a stall the control plane asked for", |_| {
            held();
            std::thread::sleep(d.min(MAX_STALL));
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(op: i32, body: &[u8]) -> Vec<u8> {
        let mut f = 7i32.to_be_bytes().to_vec();
        f.extend_from_slice(&op.to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    fn ustring(s: &str) -> Vec<u8> {
        let mut v = (s.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    }

    #[test]
    fn names_the_opcode_and_path() {
        let f = frame(2, &[ustring("/q/item-1"), vec![0, 0, 0, 0]].concat());
        let s = step(&f, 3);
        assert_eq!(s, "request Delete /q/item-1 of 25 bytes on connection 3");
        let multi = [vec![0, 0, 0, 2, 0, 0xff, 0xff, 0xff, 0xff], ustring("/q/a")].concat();
        let f = frame(14, &multi);
        let s = step(&f, 1);
        assert!(s.starts_with("request Multi (first path /q/a) of"), "{s}");
    }

    #[test]
    fn truncated_or_unknown_frames_still_print() {
        let f = frame(2, &[0, 0, 1, 0, b'/']);
        let s = step(&f, 1);
        assert_eq!(s, "request Delete of 13 bytes on connection 1");
        let s = step(&[1, 2], 1);
        assert_eq!(s, "a request of 2 bytes on connection 1");
    }

    #[test]
    fn a_path_longer_than_what_is_kept_is_shortened() {
        let long = format!("/{}", "p".repeat(400));
        let f = frame(2, &[ustring(&long), vec![0, 0, 0, 0]].concat());
        let s = step(&f, 1);
        let shown = "p".repeat(200);
        assert!(
            s.starts_with(&format!("request Delete /{}…", &shown[..199])),
            "{s}"
        );
        assert!(
            s.ends_with(&format!("of {} bytes on connection 1", f.len())),
            "{s}"
        );
    }

    /// The warning's text for request `f` of `conn`, from the bytes the engine keeps of it.
    fn step(f: &[u8], conn: u64) -> String {
        RequestStep {
            frame: &f[..f.len().min(KEPT)],
            len: f.len(),
            conn,
        }
        .to_string()
    }

    #[test]
    fn counts_only_over_the_threshold() {
        let s = SlowSteps::new(Duration::from_millis(5));
        assert!(!s.is_slow(5_000));
        assert!(s.is_slow(5_001));
        s.report(&"x", 6_000);
        assert_eq!(s.count(), 1);
        assert!(!SlowSteps::new(Duration::ZERO).is_slow(u64::MAX));
    }
}
