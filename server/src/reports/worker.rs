//! The reports' worker: one thread, at a lowered scheduling priority, that copies and formats
//! large reports (pages of the tree export, lists of sessions, connections and watches), so
//! that building a report competes as little as possible for CPU with the threads serving
//! clients. Jobs are short (one page, one chunked gathering): reports asked for at the same
//! time take turns. Cheap reports ([`run_light`]) do not queue here.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::OnceLock;

type Job = Box<dyn FnOnce() + Send>;

/// How much lower than the server's own threads the worker runs (a `nice` increment): low
/// enough that clients' threads win the CPU while a report is built, not so low that a busy
/// machine starves the report.
const NICENESS: i32 = 10;

/// The worker's queue, started on first use; `None` when the thread could not be started.
fn queue() -> Option<&'static mpsc::Sender<Job>> {
    static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("zkd-reports".into())
                .spawn(move || {
                    lower_priority();
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                })
                .map_err(|e| tracing::warn!(error = %e, "cannot start the reports' worker thread"))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

#[cfg(target_os = "linux")]
fn lower_priority() {
    // On Linux a thread id names one thread, so only this thread is affected.
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), NICENESS) {
        tracing::debug!(error = %e, "the reports' worker keeps normal priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Runs `f` on the worker and waits for it without blocking the async runtime. A panic in
/// `f` is returned as its message; the worker goes on with the next job.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    let refused = match queue() {
        Some(q) => q.send(job).err().map(|e| e.0),
        None => Some(job),
    };
    if let Some(job) = refused {
        // No worker: a blocking thread of the runtime does it.
        tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| e.to_string())?;
    }
    match rx.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(payload)) => Err(crate::engine::panic_message(&*payload)),
        Err(_) => Err("the report was abandoned".into()),
    }
}

/// Cheap reports (counters and settings) under way at once on [`run_light`]'s threads.
const LIGHT_AT_ONCE: usize = 16;

/// Runs a cheap report (`srvr`, `mntr`, the AdminServer's `monitor`, ...) on a blocking
/// thread of the runtime, never on the worker: it does not wait for any long report. At most
/// [`LIGHT_AT_ONCE`] run at once (the others wait for a turn, each turn short), so a flood of
/// them cannot start hundreds of threads. `None` if `f` panicked.
pub async fn run_light<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(LIGHT_AT_ONCE);
    let _turn = TURNS.acquire().await.ok()?;
    tokio::task::spawn_blocking(f).await.ok()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn runs_jobs_and_survives_a_panic() {
        assert_eq!(super::run(|| 6 * 7).await, Ok(42));
        let failed = super::run(|| -> u8 { panic!("broken report") }).await;
        assert_eq!(failed, Err("broken report".to_string()));
        assert_eq!(super::run(|| "again").await, Ok("again"));
    }
}
