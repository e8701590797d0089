//! The reports: four-letter words and what each needs ([`Needs`]), gathered from the engine
//! into plain data ([`report`]), rendered by the pure formatters in [`format`] (the
//! AdminServer's JSON and the metrics build on the same data), on the reports' [`worker`].
//! See docs/protocol.md for the wire behaviour.

mod civil_date;
pub(crate) mod format;
pub(crate) mod gate;
pub(crate) mod host;
pub(crate) mod metrics;
mod monitor_keys;
#[cfg(feature = "json")]
pub mod recipe_checks;
pub(crate) mod report;
#[cfg(feature = "json")]
pub mod timeline;
pub(crate) mod worker;

use zkd_protocol::FourLetterWord;

use crate::core::Serving;
use crate::engine::ensemble::MemberId;
use crate::engine::{now_ms, Shared};

pub(crate) use format::*;
pub(crate) use host::gather as host_info;
pub(crate) use report::*;

/// The version the reports of a server behaving as the default release line (3.9) show; the
/// one a server reports is [`crate::version_string`] of its release line.
#[cfg(test)]
pub const VERSION: &str = crate::version_string(crate::ZookeeperVersion::V3_9);

/// The git commit this build was made from (`unknown` when built outside a checkout from an
/// unrecorded source); recorded by the build script.
pub const BUILD_COMMIT: &str = env!("ZKD_BUILD_COMMIT");

/// When this build was made, `YYYY-MM-DD HH:MM` in UTC (`ZKD_BUILD_EPOCH` or
/// `SOURCE_DATE_EPOCH` when the build set one); recorded by the build script.
pub const BUILD_DATE: &str = env!("ZKD_BUILD_DATE");

/// What a word's answer needs gathered; the rest of a [`FourLetterView`] stays empty, so a
/// cheap word never copies per-connection or per-watch data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The server-wide summary and configuration.
    pub summary: bool,
    /// One entry per open connection.
    pub connections: bool,
    /// Sessions with their ephemeral paths.
    pub sessions: bool,
    /// The data-table watches by session.
    pub watches: bool,
    /// Facts about the host ([`HostInfo`]).
    pub host: bool,
    /// The data directory's report (read from the file system).
    pub data_dir: bool,
}

/// What `word` needs.
pub fn needs(word: FourLetterWord) -> Needs {
    use FourLetterWord as W;
    let summary = Needs {
        summary: true,
        ..Needs::default()
    };
    match word {
        W::Srvr => summary,
        W::Conf => Needs {
            data_dir: true,
            ..summary
        },
        // The data directory's timings (`fsynctime`, `snapshottime`, …), as `monitor` shows.
        W::Mntr => Needs {
            host: true,
            data_dir: true,
            ..summary
        },
        W::Envi => Needs {
            host: true,
            ..Needs::default()
        },
        W::Stat | W::Cons => Needs {
            connections: true,
            ..summary
        },
        W::Dump => Needs {
            connections: true,
            sessions: true,
            ..summary
        },
        // `wchs` shows the core's running counts, gathered with the summary.
        W::Wchs => summary,
        W::Wchc | W::Wchp => Needs {
            watches: true,
            ..Needs::default()
        },
        W::Dirs => Needs {
            data_dir: true,
            ..Needs::default()
        },
        W::Ruok | W::Isro | W::Gtmk | W::Stmk | W::Crst | W::Srst | W::Hash => Needs::default(),
    }
}

impl Needs {
    /// Whether gathering copies a list that grows with the server (connections, sessions,
    /// watched paths): such words run on the reports' worker, one at a time, and at most
    /// [`gate::PER_ADDRESS`] at once per client address. The others read counters and
    /// settings and never wait for them.
    pub fn is_heavy(self) -> bool {
        self.connections || self.sessions || self.watches
    }
}

/// The words monitoring asks for (`ruok`, `isro`, `srvr`, `mntr`), and `wchs`, which reads
/// the watch table's running counts: answered where they arrive, never after another report,
/// and without waking another thread.
pub fn is_health_check(word: FourLetterWord) -> bool {
    use FourLetterWord as W;
    matches!(word, W::Ruok | W::Isro | W::Srvr | W::Mntr | W::Wchs)
}

/// Gathers what `word` needs (as ensemble member `member` reports) and renders the reply.
/// `ruok` is answered at once, `isro`, `srvr` and `mntr` on the connection's own task
/// ([`is_health_check`]); the other cheap words (counters, settings, host facts) on a
/// blocking thread of their own, so they never queue behind a long report; the heavy words
/// (`dump`, `cons`, `stat`, `wchc`, `wchp`) on the reports' worker, where a long list is
/// copied in chunks and formatted off the async runtime, after taking one of the asking
/// address's turns ([`gate`]). `None` when the server no longer serves, or when `from` waited
/// too long for its turn. With group commit, a word that shows the tree's state
/// ([`shows_state`]) is sent only once every transaction written when it was gathered is
/// synced, so it never shows a change a crash could still undo.
pub(crate) async fn answer(
    shared: std::sync::Arc<Shared>,
    word: FourLetterWord,
    member: MemberId,
    from: std::net::IpAddr,
) -> Option<String> {
    let text = gather_and_render(shared.clone(), word, member, from).await?;
    if shows_state(word) {
        shared.synced_now().await;
    }
    Some(text)
}

/// The words whose answer shows what the transactions changed (the zxid, node and
/// ephemeral counts and lists, watched paths, connections' last zxids): with group commit
/// they wait for the sync of what was written when they were gathered. `ruok`, `isro`,
/// `conf`, `envi`, `dirs`, the trace mask and the counter resets answer at once.
pub fn shows_state(word: FourLetterWord) -> bool {
    use FourLetterWord as W;
    matches!(
        word,
        W::Srvr | W::Stat | W::Cons | W::Dump | W::Wchs | W::Wchc | W::Wchp | W::Mntr | W::Hash
    )
}

async fn gather_and_render(
    shared: std::sync::Arc<Shared>,
    word: FourLetterWord,
    member: MemberId,
    from: std::net::IpAddr,
) -> Option<String> {
    if word == FourLetterWord::Ruok {
        return Some(ruok());
    }
    let needs = needs(word);
    let job = move || {
        let view = gather(&shared, member, needs, now_ms()).ok()?;
        let host = if needs.host {
            host_info()
        } else {
            HostInfo::default()
        };
        let mask = shared.trace_mask.load(std::sync::atomic::Ordering::Relaxed);
        Some(render(word, &view, &host, mask))
    };
    if is_health_check(word) {
        // A few counters under the lock and, for mntr, a few reads of /proc: done here,
        // without waking another thread (on a loaded machine each hop can cost a time slice).
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .ok()
            .flatten();
    }
    if !needs.is_heavy() {
        return worker::run_light(job).await.flatten();
    }
    let Some(_turn) = gate::turn(from).await else {
        tracing::debug!(%from, %word, "no turn for a report within the wait; not answered");
        return None;
    };
    worker::run(job).await.ok().flatten()
}

/// The reply to a four-letter word. `trace_mask` is the current mask (for `stmk`, the one just
/// set).
pub fn render(
    word: FourLetterWord,
    view: &FourLetterView,
    host: &HostInfo,
    trace_mask: i64,
) -> String {
    use FourLetterWord as W;
    if view
        .member
        .as_ref()
        .is_some_and(|m| m.mode.serving() == Serving::NotServing)
    {
        // A member without quorum and without read-only mode runs no server to ask.
        return match word {
            W::Ruok => ruok(),
            W::Isro => "null".to_string(),
            W::Envi => envi(host, view.conf.zookeeper_version),
            W::Gtmk | W::Stmk => trace_mask.to_string(),
            W::Hash => NOT_SERVING.to_string(),
            _ => format!("{NOT_SERVING}\n"),
        };
    }
    match word {
        W::Ruok => ruok(),
        W::Isro => isro(view),
        W::Srvr => srvr(view),
        W::Stat => stat(view),
        W::Cons => cons(view),
        W::Crst => crst(),
        W::Srst => srst(),
        W::Dump => dump(view),
        W::Wchs => wchs(view),
        W::Wchc => wchc(view),
        W::Wchp => wchp(view),
        W::Conf => conf(view),
        W::Envi => envi(host, view.conf.zookeeper_version),
        W::Dirs => dirs(view),
        W::Mntr => mntr(view, host),
        W::Gtmk | W::Stmk => trace_mask.to_string(),
        W::Hash => hash(),
    }
}
