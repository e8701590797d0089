//! The `zkd` binary: `zkd [FLAGS]` runs the server; subcommands (`zkd ctl ...`) act on a
//! running one. Each subcommand lives in its own module and is one variant of [`Command`].

#![deny(unsafe_code)]

mod alloc;
mod config_file;
mod ctl;
mod ctl_client;
mod datadir;
mod gen_certs;
mod history;
mod kept_membership;
mod members;
mod net_faults;
mod pow;
mod serve;
mod snapshot;
mod trim;
mod zoocfg;

use std::process::ExitCode;
use std::sync::LazyLock;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// An in-memory coordination server that speaks the ZooKeeper client protocol.
#[derive(Parser, Debug)]
#[command(name = "zkd", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    serve: serve::ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Control a running zkd through its admin listener (sessions, expiry, faults, clock), or
    /// make throwaway certificates for the secure port (gen-certs).
    Ctl(ctl::CtlArgs),
    /// Offline snapshot tools: print a snapshot file, or make one from a JSON fixture.
    Snapshot(snapshot::SnapshotArgs),
    /// Offline data directory tools: check one for damage without changing it.
    Datadir(datadir::DatadirArgs),
}

/// What `zkd --version` prints after the name: the version, the commit and the build date
/// (the same commit and date the four-letter words and the admin reports show).
static VERSION_LINE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} (commit {}, built on {} UTC)",
        env!("CARGO_PKG_VERSION"),
        zkd_server::BUILD_COMMIT,
        zkd_server::BUILD_DATE
    )
});

/// The server's flags alone, without the subcommands: what starting the server parses first,
/// so that it neither builds every subcommand's arguments nor touches their code (which would
/// stay resident for the server's lifetime). Anything it does not take as a plain server
/// command line (a subcommand, `--help`, `--version`, an error) goes to [`Cli`], which
/// decides and words every message.
#[derive(Parser, Debug)]
#[command(name = "zkd")]
struct ServeOnly {
    #[command(flatten)]
    serve: serve::ServeArgs,
}

fn main() -> ExitCode {
    if let Ok(matches) = ServeOnly::command().try_get_matches() {
        if let Ok(cli) = ServeOnly::from_arg_matches(&matches) {
            return serve::run(cli.serve, &matches);
        }
    }
    let matches = Cli::command().version(VERSION_LINE.as_str()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cli.command {
        Some(Command::Ctl(args)) => ctl::run(args),
        Some(Command::Snapshot(args)) => snapshot::run(args),
        Some(Command::Datadir(args)) => datadir::run(args),
        None => serve::run(cli.serve, &matches),
    }
}
