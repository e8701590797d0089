//! `zkd datadir check DIR`: reads a data directory as a start would, changes nothing, and
//! reports file by file what it holds; exit 1 when a start would refuse it (damage), 2 when
//! DIR is not a data directory.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct DatadirArgs {
    #[command(subcommand)]
    op: Op,
}

#[derive(Subcommand, Debug)]
enum Op {
    /// Check every snapshot and log a start would read (nothing is changed); exit 1 on
    /// damage, naming the file and offset.
    Check {
        /// The data directory (the one given to --data-dir; its files are in DIR/version-2).
        dir: PathBuf,
        /// The jute.maxbuffer the server runs with: a log entry longer than twice this is
        /// damage, as for ZooKeeper's reader.
        #[arg(long, value_name = "BYTES", default_value_t = 0xfffff,
              value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
        jute_maxbuffer: u64,
    },
}

pub fn run(args: DatadirArgs) -> ExitCode {
    let Op::Check {
        dir,
        jute_maxbuffer,
    } = args.op;
    let check = match zkd_server::check_data_dir(&dir, jute_maxbuffer) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zkd datadir check: {e}");
            return ExitCode::from(2);
        }
    };
    for line in &check.findings {
        println!("{line}");
    }
    match check.damage {
        None => {
            println!(
                "ok: {} loads to zxid 0x{:x} with {} nodes",
                dir.display(),
                check.zxid,
                check.nodes
            );
            ExitCode::SUCCESS
        }
        Some(damage) => {
            println!("damaged: {damage}");
            eprintln!("zkd datadir check: {} is damaged", dir.display());
            ExitCode::FAILURE
        }
    }
}
