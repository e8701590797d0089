//! The client listeners of a simulated ensemble's members: installing the membership and
//! starting each member's accept loop (tagging its connections with the member's id) under a
//! stop token that is a child of the server's shutdown token. Stopping and starting a member
//! again is a control operation ([`crate::control::members`]).

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{accept_loop, Transport};
use crate::config::{ElectionTiming, EnsembleConfig};
use crate::engine::ensemble::{MemberId, MemberSpec, Membership, Timing};
use crate::engine::listeners::Running;
use crate::engine::Shared;

/// Installs the membership `config` describes (with ZooKeeper's timing for `tick_time`, if
/// it asks for it) and starts each member's accept loop on its
/// bound listener.
pub(crate) fn start_all(
    shared: &Arc<Shared>,
    listeners: Vec<(MemberId, TcpListener)>,
    config: &EnsembleConfig,
    tick_time: std::time::Duration,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let mut specs = Vec::with_capacity(listeners.len());
    for (id, l) in &listeners {
        specs.push(MemberSpec {
            id: *id,
            addr: l.local_addr()?,
            observer: config.members.iter().any(|m| m.id == *id && m.observer),
        });
    }
    let mut membership = Membership::new(specs, config.read_only);
    membership.set_limits(config.init_limit, config.sync_limit);
    if config.election_timing == ElectionTiming::ZooKeeper {
        let tick_ms = i64::try_from(tick_time.as_millis()).unwrap_or(i64::MAX);
        membership.set_timing(Timing::zookeeper(tick_ms, config.sync_limit));
    }
    membership.keep_in(config.membership_dir.clone());
    let now = shared.now();
    shared
        .with_state(|state| {
            // The first leader starts epoch 1 (or the one after the data directory's), as a
            // quorum peer does even alone; only a standalone server stays in epoch 0.
            state.new_epoch(now);
            state
                .core
                .set_local_sessions(config.local_sessions, config.local_sessions_upgrading);
            state
                .core
                .install_ensemble_at(membership.specs(), config.kept_version, now.wall);
            membership.set_config_text(state.core.ensemble_config_text().unwrap_or_default());
            state.members = Some(membership);
        })
        .map_err(|_| std::io::Error::other("the server failed while starting"))?;
    for (id, listener) in listeners {
        spawn(shared, id, listener, shutdown);
    }
    Ok(())
}

/// Starts member `id`'s accept loop on `listener`.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    id: MemberId,
    listener: TcpListener,
    shutdown: &CancellationToken,
) {
    let stop = shutdown.child_token();
    let task = tokio::spawn(accept_loop(
        listener,
        shared.clone(),
        stop.clone(),
        Transport::Plain,
        id,
    ));
    shared.listeners.lock().insert(id, Running { stop, task });
}
