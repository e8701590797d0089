//! The server's two clocks as the engine reads them for the core: the session clock
//! (monotonic, or virtual under `--clock manual`, and optionally frozen during a pause) and
//! the wall clock (for ctime/mtime).

use std::sync::Mutex;
use std::time::Instant;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::ClockMode;
use crate::core::Now;

/// Wall-clock milliseconds since the epoch, the core's notion of time.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The session clock reads `origin_ms + elapsed`, where `elapsed` is monotonic time since
/// start minus time spent frozen (real mode), or the sum of advances (manual mode). Starting
/// at the wall time of start keeps its readings comparable to epoch milliseconds.
pub(crate) struct Clock {
    mode: ClockMode,
    start: Instant,
    origin_ms: i64,
    state: Mutex<ClockState>,
    /// Notified whenever the session clock jumps (an advance, a thaw), for [`Clock::reached`].
    moved: tokio::sync::Notify,
}

#[derive(Default)]
struct ClockState {
    /// Manual mode: total advanced. Real mode: total time spent frozen.
    offset_ms: i64,
    /// Real mode: the reading while frozen.
    frozen_at: Option<i64>,
}

impl Clock {
    pub(crate) fn new(mode: ClockMode) -> Clock {
        Clock {
            mode,
            start: Instant::now(),
            origin_ms: now_ms(),
            state: Mutex::new(ClockState::default()),
            moved: tokio::sync::Notify::new(),
        }
    }

    pub(crate) fn mode(&self) -> ClockMode {
        self.mode
    }

    fn elapsed_ms(&self) -> i64 {
        i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session clock, in ms.
    pub(crate) fn mono(&self) -> i64 {
        let st = self.lock();
        match self.mode {
            ClockMode::Manual => self.origin_ms.saturating_add(st.offset_ms),
            ClockMode::Real => st.frozen_at.unwrap_or_else(|| {
                self.origin_ms
                    .saturating_add(self.elapsed_ms())
                    .saturating_sub(st.offset_ms)
            }),
        }
    }

    /// Both clocks now.
    pub(crate) fn now(&self) -> Now {
        Now {
            mono: self.mono(),
            wall: now_ms(),
        }
    }

    /// Milliseconds the session clock has moved since start.
    pub(crate) fn elapsed(&self) -> i64 {
        self.mono() - self.origin_ms
    }

    /// Stops the session clock (real mode; manual mode stands still anyway).
    pub(crate) fn freeze(&self) {
        if self.mode == ClockMode::Real {
            let reading = self.mono();
            self.lock().frozen_at.get_or_insert(reading);
        }
    }

    /// Lets a frozen session clock run again from where it stopped.
    pub(crate) fn thaw(&self) {
        let real = self.origin_ms.saturating_add(self.elapsed_ms());
        let mut st = self.lock();
        if let Some(frozen) = st.frozen_at.take() {
            st.offset_ms = real - frozen;
        }
        drop(st);
        self.moved.notify_waiters();
    }

    /// Resolves once the session clock reads `deadline` or later: in real time (a frozen
    /// clock holds it), or when `advance` moves a manual clock that far.
    pub(crate) async fn reached(&self, deadline: i64) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let now = self.mono();
            if now >= deadline {
                return;
            }
            match self.mode {
                ClockMode::Manual => moved.await,
                ClockMode::Real => {
                    let wait = std::time::Duration::from_millis(
                        u64::try_from(deadline - now).unwrap_or(1),
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = moved => {}
                    }
                }
            }
        }
    }

    /// Moves the manual clock forward by `ms`; the new reading, or `None` in real mode.
    pub(crate) fn advance(&self, ms: u64) -> Option<i64> {
        if self.mode != ClockMode::Manual {
            return None;
        }
        let mut st = self.lock();
        st.offset_ms = st
            .offset_ms
            .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        let reading = self.origin_ms.saturating_add(st.offset_ms);
        drop(st);
        self.moved.notify_waiters();
        Some(reading)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let c = Clock::new(ClockMode::Manual);
        let t0 = c.mono();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(c.mono(), t0);
        assert_eq!(c.advance(31_000), Some(t0 + 31_000));
        assert_eq!(c.mono(), t0 + 31_000);
        assert_eq!(c.elapsed(), 31_000);
    }

    #[tokio::test]
    async fn a_wait_on_the_manual_clock_ends_when_an_advance_reaches_it() {
        let c = std::sync::Arc::new(Clock::new(ClockMode::Manual));
        let deadline = c.mono() + 500;
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.reached(deadline).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(!waiter.is_finished(), "the wall clock does not move it");
        c.advance(499);
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        assert!(!waiter.is_finished(), "499 ms are not enough");
        c.advance(1);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("ends at the deadline")
            .expect("the task");
    }

    #[tokio::test]
    async fn a_wait_on_the_real_clock_takes_its_time() {
        let c = Clock::new(ClockMode::Real);
        let started = Instant::now();
        c.reached(c.mono() + 60).await;
        assert!(started.elapsed() >= std::time::Duration::from_millis(55));
        c.reached(c.mono() - 1).await;
    }

    #[test]
    fn real_clock_refuses_advance_and_freezes() {
        let c = Clock::new(ClockMode::Real);
        assert_eq!(c.advance(5), None);
        c.freeze();
        let frozen = c.mono();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(c.mono(), frozen, "a frozen clock stands still");
        c.thaw();
        let after = c.mono();
        assert!(
            after >= frozen && after < frozen + 1_000,
            "the clock resumes from where it stopped"
        );
    }
}
