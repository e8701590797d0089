//! Four-letter words: which words exist and what each needs ([`Needs`]), which are answered
//! by default, and dispatch to the pure formatters in [`format`] over the plain data in
//! [`report`]. See docs/protocol.md for the wire behaviour.

pub mod format;
pub mod metrics;
mod monitor_keys;
pub mod report;
pub(crate) mod worker;

use zkd_protocol::FourLetterWord;

use crate::core::Serving;

pub use format::*;
pub use report::*;

/// The version every report shows. The `3.8.4` prefix is what clients and tools parse (kazoo's
/// `server_version()` takes the digits before the first `-`); then, in ZooKeeper's
/// `<version>-<revision>, built on <date> UTC` shape, zkd's version, commit and build date.
pub const VERSION: &str = concat!(
    "3.8.4-zkd-",
    env!("CARGO_PKG_VERSION"),
    "-",
    env!("ZKD_BUILD_COMMIT"),
    ", built on ",
    env!("ZKD_BUILD_DATE"),
    " UTC"
);

/// The git commit this build was made from (`unknown` when built outside a checkout from an
/// unrecorded source); recorded by the build script.
pub const BUILD_COMMIT: &str = env!("ZKD_BUILD_COMMIT");

/// When this build was made, `YYYY-MM-DD HH:MM` in UTC (`ZKD_BUILD_EPOCH` or
/// `SOURCE_DATE_EPOCH` when the build set one); recorded by the build script.
pub const BUILD_DATE: &str = env!("ZKD_BUILD_DATE");

/// ZooKeeper's default trace mask (`gtmk` on a fresh server).
pub const DEFAULT_TRACE_MASK: i64 = 306;

/// Connection expiry buckets are this wide, and a connection that has not completed its
/// handshake is expired after this long (`zookeeper.nio.sessionlessCnxnTimeout`).
pub const SESSIONLESS_CNXN_TIMEOUT_MS: i64 = 10_000;

/// The words answered without `--4lw-whitelist`: they name no znode path, session id or
/// client address, and change nothing. `srvr`, `mntr`, `wchs` and `dirs` show only counts and
/// sizes; `conf` the settings; `ruok`, `isro`, `gtmk` and `hash` fixed answers. Left out:
/// `stat` and `cons` (client addresses, session ids), `dump` (sessions and their ephemeral
/// paths), `wchc`/`wchp` (watched paths and sessions), `envi` (host name, user, working
/// directory), and `crst`/`srst`/`stmk`, which change state.
pub const DEFAULT_WORDS: [FourLetterWord; 9] = [
    FourLetterWord::Ruok,
    FourLetterWord::Isro,
    FourLetterWord::Srvr,
    FourLetterWord::Mntr,
    FourLetterWord::Wchs,
    FourLetterWord::Dirs,
    FourLetterWord::Conf,
    FourLetterWord::Gtmk,
    FourLetterWord::Hash,
];

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
        W::Mntr => Needs {
            host: true,
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
        W::Wchs | W::Wchc | W::Wchp => Needs {
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

/// Gathers what `word` needs (as ensemble member `member` reports) and renders the reply, on
/// the reports' worker: a long list (`dump`, `cons`, `wchc` of a large server) is copied in
/// chunks and formatted off the async runtime. `None` when the server no longer serves.
pub(crate) async fn answer(
    shared: std::sync::Arc<crate::net::Shared>,
    word: FourLetterWord,
    member: crate::ensemble::MemberId,
) -> Option<String> {
    worker::run(move || {
        let needs = needs(word);
        let view = gather(&shared, member, needs, crate::net::now_ms()).ok()?;
        let host = if needs.host {
            crate::net::host_info()
        } else {
            HostInfo::default()
        };
        let mask = shared.trace_mask.load(std::sync::atomic::Ordering::Relaxed);
        Some(render(word, &view, &host, mask))
    })
    .await
    .ok()
    .flatten()
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
            W::Envi => envi(host),
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
        W::Envi => envi(host),
        W::Dirs => dirs(view),
        W::Mntr => mntr(view, host),
        W::Gtmk | W::Stmk => trace_mask.to_string(),
        W::Hash => hash(),
    }
}
