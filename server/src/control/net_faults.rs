//! Network faults on client connections as control operations: add a rule (a blackhole,
//! lost replies or added latency, on one session's connection, a client address, a member,
//! or all of them), list, remove and clear them. A change takes effect at once on the open
//! connections it concerns, and on every connection accepted later.

use std::net::SocketAddr;

use super::ControlError;
use crate::engine::net_faults::{matched_counts, Touched};
use crate::engine::Shared;

pub use crate::engine::net_faults::{
    ClientAddr, NetFault, NetFaultRule, NetFaultStatus, MAX_LATENCY_MS, MAX_NET_FAULTS,
};

/// Adds a rule; its id. A rule naming a session holds the connection that session has now
/// (refused when it has none); one naming a member needs an ensemble that has it.
pub(crate) fn add(shared: &Shared, rule: NetFaultRule) -> Result<u64, ControlError> {
    rule.check().map_err(ControlError::BadNetFault)?;
    shared.record_control("net_fault_add", 0, &format!("{rule:?}"));
    let now = shared.now();
    shared.change_net_faults(|state| {
        if let Some(m) = rule.member {
            let members = state.members.as_ref().ok_or(ControlError::NotAnEnsemble)?;
            if !members.contains(m) {
                return Err(ControlError::NoSuchMember(m));
            }
        }
        let conn = match rule.session {
            None => None,
            Some(sid) => {
                let report = state.core.sessions_report_for(&[sid], now);
                let s = report.first().ok_or(ControlError::NoSuchSession(sid))?;
                match (s.conn, s.peer) {
                    (Some(c), Some(peer)) => Some((c, peer)),
                    _ => return Err(ControlError::NotConnected(sid)),
                }
            }
        };
        let entry = state
            .net_faults
            .add(rule, conn)
            .map_err(ControlError::TooManyFaults)?;
        tracing::info!(id = entry.id, rule = ?entry.rule, "network fault added");
        Ok((entry.id, Touched::Entries(vec![entry])))
    })?
}

/// Every rule, with the open connections it matches now.
pub(crate) fn list(shared: &Shared) -> Result<Vec<NetFaultStatus>, ControlError> {
    Ok(shared.with_state(|state| {
        let counts = matched_counts(state);
        state
            .net_faults
            .entries()
            .iter()
            .zip(counts)
            .map(|(e, connections)| NetFaultStatus {
                id: e.id,
                rule: e.rule.clone(),
                connection: e.conn.map(|(_, peer): (_, SocketAddr)| peer),
                connections,
            })
            .collect()
    })?)
}

/// Removes one rule (healing what it did: the connections it silenced are closed).
pub(crate) fn remove(shared: &Shared, id: u64) -> Result<(), ControlError> {
    shared.record_control("net_fault_remove", 0, &format!("id={id}"));
    shared.change_net_faults(|state| {
        let entry = state
            .net_faults
            .remove(id)
            .ok_or(ControlError::NoSuchNetFault(id))?;
        tracing::info!(id, "network fault removed");
        Ok(((), Touched::Entries(vec![entry])))
    })?
}

/// Removes every rule; how many there were.
pub(crate) fn clear(shared: &Shared) -> Result<usize, ControlError> {
    shared.record_control("net_faults_clear", 0, "");
    shared.change_net_faults(|state| {
        let removed = state.net_faults.clear().len();
        if removed > 0 {
            tracing::info!(removed, "network faults cleared");
        }
        Ok::<_, ControlError>((removed, Touched::All))
    })?
}
