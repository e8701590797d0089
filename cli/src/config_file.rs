//! `zkd --config FILE` and `zkd --env-config`: reads the ZooKeeper configuration, logs what
//! it says about it, and prints the start-up lines container tooling waits for.

use std::io::Write;
use std::path::Path;

use clap::parser::ValueSource;
use zkd_server::MemberMode;
use zkd_server::{Config, Server};

use crate::zoocfg::{self, Level, Mode, Origin};

/// Applies `--config FILE` (`config_file`) or `--env-config` (`env_config`) to `config`
/// (flags on the command line win) and logs the notes. `Ok(None)` when neither was given.
pub fn apply(
    config_file: Option<&Path>,
    env_config: bool,
    matches: &clap::ArgMatches,
    config: &mut Config,
) -> Result<Option<Mode>, zoocfg::ConfigError> {
    let (mode, settings, source) = if let Some(path) = config_file {
        let settings = zoocfg::read_file(path)?;
        (
            Mode::File,
            settings,
            Origin::Source(path.display().to_string()),
        )
    } else if env_config {
        let settings = zoocfg::read_env(std::env::vars())?;
        (Mode::Env, settings, Origin::Source("--env-config".into()))
    } else {
        return Ok(None);
    };
    let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let jaas = zoocfg::jaas_from_jvm_flags(std::env::vars());
    let notes = zoocfg::apply(&settings, mode, &source, &given, jaas, config)?;
    for note in notes {
        match note.level {
            Level::Info => tracing::info!("{}", note.text),
            Level::Warn => tracing::warn!("{}", note.text),
        }
    }
    if config.admin_port.is_some() && !config.admin_bind.is_loopback() {
        tracing::warn!(
            "the control plane (--admin-port) is bound to {}: whoever reaches it can end \
             sessions",
            config.admin_bind
        );
    }
    Ok(Some(mode))
}

/// The lines ZooKeeper 3.8 logs once it serves, which container tooling waits for:
/// `binding to port` (one per client listener), `Started AdminServer` (when the AdminServer
/// is on) and `PrepRequestProcessor (sid:N) started` (N is 0 on a standalone server, the
/// leader's id on an ensemble, as each ZooKeeper logs it). Printed to stdout, where the
/// images log.
pub fn print_zookeeper_lines(out: &mut impl Write, server: &Server, secure_only: bool) {
    let members = server.members().unwrap_or_default();
    let plain: Vec<std::net::SocketAddr> = match (&*members, secure_only) {
        (_, true) => Vec::new(),
        ([], false) => vec![server.local_addr()],
        (members, false) => members.iter().map(|m| m.client_addr).collect(),
    };
    for addr in plain.into_iter().chain(server.secure_addr()) {
        let _ = writeln!(out, "binding to port {}/{}", addr.ip(), addr);
    }
    if let Some(admin) = server.admin_server_addr() {
        let _ = writeln!(
            out,
            "Started AdminServer on address {}, port {} and command URL /commands",
            admin.ip(),
            admin.port()
        );
    }
    let sid = members
        .iter()
        .find(|m| m.mode == MemberMode::Leader)
        .map_or(0, |m| m.id);
    let _ = writeln!(
        out,
        "PrepRequestProcessor (sid:{sid}) started, reconfigEnabled={}",
        server.reconfig_enabled()
    );
}
