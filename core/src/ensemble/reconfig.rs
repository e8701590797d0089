//! Dynamic reconfiguration (`reconfig`, opcode 16) of the simulated ensemble, run in the
//! one order like every write: the checks in ZooKeeper's order, the new membership written
//! to `/zookeeper/config` in the same transaction (its version is the transaction's zxid),
//! and the new membership left for the engine to apply ([`Core::take_reconfig`]; see
//! docs/protocol.md, "Dynamic reconfiguration").

use std::collections::BTreeSet;

use bytes::Bytes;
use zkd_protocol::disk::{txn_type, SetDataTxn, TxnBody};
use zkd_protocol::{perms, ErrorCode, Id, ReconfigRequest, Stat};

use super::servers::{config_text, next_servers, ServerSpec, Servers};
use crate::request::txn::header;
use crate::{auth::acl, Core, Now, Outbox};

/// The node holding the configuration.
pub(crate) const CONFIG_NODE: &str = "/zookeeper/config";

/// What the core knows of an ensemble's configuration.
#[derive(Clone, Debug, Default)]
pub(crate) struct DynamicConfig {
    servers: Servers,
    /// The configuration's version: 0 for a static one, else the zxid that made it.
    version: i64,
    /// Members running and synced with the leader (for the new configuration's quorum).
    running: BTreeSet<u64>,
    /// A committed membership the engine has not applied yet.
    pending: Option<Servers>,
}

impl Core {
    /// Installs an ensemble's configuration in `/zookeeper/config` (call it after the first
    /// leader's [`Core::new_epoch`]). With reconfiguration off the configuration is static:
    /// version 0, the node's zxid 0. With it on, ZooKeeper's first leader gives the static
    /// configuration the zxid of its epoch's start as version, and the node that mzxid.
    /// Every member starts running.
    pub fn install_ensemble(&mut self, servers: Vec<ServerSpec>, wall_ms: i64) {
        self.install_ensemble_at(servers, None, wall_ms);
    }

    /// [`Core::install_ensemble`] for a membership a reconfig made before a restart, kept
    /// with its version (`Some(version)`, the zxid of that reconfig): the configuration
    /// keeps that version, as ZooKeeper's does when it starts from its dynamic file.
    pub fn install_ensemble_at(
        &mut self,
        servers: Vec<ServerSpec>,
        kept_version: Option<i64>,
        wall_ms: i64,
    ) {
        let servers: Servers = servers.into_iter().map(|s| (s.id, s)).collect();
        let version = match kept_version {
            Some(v) => v,
            None if self.cfg.reconfig_enabled => self.db.zxid,
            None => 0,
        };
        let text = config_text(&servers, version);
        if let Some(node) = self.db.tree.set_data(CONFIG_NODE, Some(text.as_bytes())) {
            node.version = -1;
            node.mtime = wall_ms;
            node.mzxid = version;
        }
        self.dynamic = Some(DynamicConfig {
            running: servers.keys().copied().collect(),
            servers,
            version,
            pending: None,
        });
    }

    /// The members now running (the others cannot count for a new configuration's quorum).
    pub fn set_running_members(&mut self, running: impl IntoIterator<Item = u64>) {
        if let Some(d) = &mut self.dynamic {
            d.running = running.into_iter().collect();
        }
    }

    /// Whether a reconfig committed a membership the engine has not applied yet.
    pub fn reconfig_pending(&self) -> bool {
        self.dynamic.as_ref().is_some_and(|d| d.pending.is_some())
    }

    /// The membership a reconfig just committed, once: the engine applies it (who votes,
    /// who leads, who serves) before the core's lock is released.
    pub fn take_reconfig(&mut self) -> Option<Vec<ServerSpec>> {
        let d = self.dynamic.as_mut()?;
        d.pending.take().map(|s| s.into_values().collect())
    }

    /// The version of the ensemble's configuration (0 for a static one, else the zxid of
    /// the reconfig that made it), on an ensemble.
    pub fn ensemble_config_version(&self) -> Option<i64> {
        self.dynamic.as_ref().map(|d| d.version)
    }

    /// The ensemble's configuration text (`/zookeeper/config`'s data), on an ensemble.
    pub fn ensemble_config_text(&self) -> Option<String> {
        let d = self.dynamic.as_ref()?;
        Some(config_text(&d.servers, d.version))
    }

    /// Runs a reconfig request as ZooKeeper's leader does, in its order of checks:
    /// RECONFIGDISABLED without `reconfigEnabled`, UNIMPLEMENTED on a standalone server,
    /// BADVERSION when `curConfigId` is neither -1 nor the current version, the new
    /// membership's own errors (BADARGUMENTS, MARSHALLINGERROR), BADARGUMENTS for fewer
    /// than two voting members, NEWCONFIGNOQUORUM unless a majority of the new voting
    /// members runs, and NOAUTH without WRITE on `/zookeeper/config` (only a superuser has
    /// it: the node's ACL is read-only for everyone). Returns the new configuration text and
    /// the node's Stat.
    pub(crate) fn reconfig(
        &mut self,
        session: i64,
        xid: i32,
        ids: &[Id],
        r: &ReconfigRequest,
        now: Now,
        out: &mut dyn Outbox,
    ) -> Result<(Bytes, Stat), ErrorCode> {
        if !self.cfg.reconfig_enabled {
            return Err(ErrorCode::ReconfigDisabled);
        }
        let d = self.dynamic.as_ref().ok_or(ErrorCode::Unimplemented)?;
        if r.cur_config_id != -1 && r.cur_config_id != d.version {
            return Err(ErrorCode::BadVersion);
        }
        let next = next_servers(
            &d.servers,
            r.joining_servers.as_deref(),
            r.leaving_servers.as_deref(),
            r.new_members.as_deref(),
        )?;
        let voters: Vec<u64> = next
            .values()
            .filter(|s| !s.observer)
            .map(|s| s.id)
            .collect();
        if voters.len() < 2 {
            return Err(ErrorCode::BadArguments);
        }
        let synced = voters.iter().filter(|id| d.running.contains(id)).count();
        if 2 * synced <= voters.len() {
            return Err(ErrorCode::NewConfigNoQuorum);
        }
        let node = self.db.tree.get(CONFIG_NODE).ok_or(ErrorCode::NoNode)?;
        if !acl::allowed(node.acl, perms::WRITE, ids) {
            return Err(ErrorCode::NoAuth);
        }
        let zxid = self.db.zxid;
        let text = Bytes::from(config_text(&next, zxid));
        // ZooKeeper writes the configuration with version -1, so the node's version stays
        // -1; its mzxid and mtime are the transaction's.
        let body = TxnBody::Reconfig(SetDataTxn {
            path: CONFIG_NODE.into(),
            data: Some(text.clone()),
            version: -1,
        });
        let h = header(session, xid, zxid, now.wall, txn_type::RECONFIG);
        let applied = self.commit(&h, &body, now, out);
        let stat = applied.stats.first().unwrap_or_default();
        if let Some(d) = &mut self.dynamic {
            d.version = zxid;
            d.servers = next.clone();
            d.pending = Some(next);
        }
        Ok((text, stat))
    }
}
