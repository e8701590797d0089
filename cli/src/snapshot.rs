//! `zkd snapshot`: offline tools for snapshot files in ZooKeeper's format — `dump` prints one
//! (zkd's or ZooKeeper's) as JSON or as a tree listing, `convert` turns a JSON fixture into
//! one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use zkd_core::{Core, FixtureKind, TreeEntry};
use zkd_server::{fixture, Config};

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    op: Op,
}

#[derive(Subcommand, Debug)]
enum Op {
    /// Print a snapshot file (`version-2/snapshot.<zxid>`, written by zkd or ZooKeeper).
    Dump {
        /// The snapshot file.
        path: PathBuf,
        /// `json` (the fixture format, with Stats and sessions) or `tree` (one line per node).
        #[arg(long, value_enum, default_value_t = Format::Tree)]
        format: Format,
    },
    /// Turn a JSON fixture (the `--seed` format) into a snapshot file.
    Convert {
        /// The JSON fixture.
        json: PathBuf,
        /// Where to write: a file, or an existing directory to use as a data directory
        /// (the snapshot goes to DIR/version-2/snapshot.<zxid>).
        out: PathBuf,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Tree,
}

pub fn run(args: SnapshotArgs) -> ExitCode {
    let result = match args.op {
        Op::Dump { path, format } => dump(&path, format),
        Op::Convert { json, out } => convert(&json, &out),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zkd snapshot: {e}");
            ExitCode::FAILURE
        }
    }
}

fn new_core() -> Core {
    Core::new(Config::default().core_config(), 0)
}

/// The zxid in a `snapshot.<hex>` file name, if it has one.
fn zxid_from_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let hex = name.strip_prefix("snapshot.")?;
    u64::from_str_radix(hex, 16).ok().map(|z| z as i64)
}

fn dump(path: &Path, format: Format) -> Result<(), String> {
    let image = zkd_server::read_snapshot_file(path)
        .map_err(|e| format!("{} is not a readable snapshot: {e}", path.display()))?;
    let zxid = zxid_from_name(path).unwrap_or_else(|| {
        image
            .nodes
            .iter()
            .map(|n| n.stat.mzxid.max(n.stat.pzxid))
            .max()
            .unwrap_or(0)
    });
    let mut core = new_core();
    core.import_snapshot(&image, zxid, 0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let entries = core.export_tree(true);
    match format {
        Format::Json => {
            let mut doc = fixture::to_json(&entries);
            doc["zxid"] = json!(format!("0x{zxid:x}"));
            doc["sessions"] = image
                .sessions
                .iter()
                .map(|(id, t)| json!({"id": format!("0x{id:x}"), "timeout_ms": t}))
                .collect();
            let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
            println!("{text}");
        }
        Format::Tree => {
            println!(
                "snapshot {} (zxid 0x{zxid:x}, {} sessions, {} nodes below the root \
                 outside /zookeeper)",
                path.display(),
                image.sessions.len(),
                entries.len()
            );
            println!("/");
            for e in &entries {
                println!("{}", tree_line(e));
            }
        }
    }
    Ok(())
}

fn tree_line(e: &TreeEntry) -> String {
    let depth = e.node.path.matches('/').count();
    let name = e.node.path.rsplit('/').next().unwrap_or("");
    let data = match &e.node.data {
        None => "null".to_string(),
        Some(d) => match std::str::from_utf8(d) {
            Ok(t) if t.chars().count() <= 60 => format!("{t:?}"),
            Ok(t) => format!(
                "{:?}… ({} bytes)",
                t.chars().take(60).collect::<String>(),
                d.len()
            ),
            Err(_) => format!("<{} bytes>", d.len()),
        },
    };
    let mut tags = Vec::new();
    match e.node.kind {
        FixtureKind::Container => tags.push("container".to_string()),
        FixtureKind::Ttl(ttl) => tags.push(format!("ttl {ttl} ms")),
        FixtureKind::Persistent => {}
    }
    if let Some(owner) = e.ephemeral_owner {
        tags.push(format!("ephemeral of 0x{owner:x}"));
    }
    let open =
        e.node.acl.len() == 1 && e.node.acl[0].perms == 31 && e.node.acl[0].id.scheme == "world";
    if !open {
        let acl: Vec<String> = e
            .node
            .acl
            .iter()
            .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, a.perms))
            .collect();
        tags.push(format!("acl {}", acl.join(",")));
    }
    tags.push(format!("v{}", e.stat.version));
    format!(
        "{}{name} = {data}  [{}]",
        "  ".repeat(depth),
        tags.join(", ")
    )
}

fn convert(json_path: &Path, out: &Path) -> Result<(), String> {
    let nodes = fixture::read_file(json_path)?;
    let mut core = new_core();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    core.apply_fixture(&nodes, now)
        .map_err(|e| format!("{}: {e}", json_path.display()))?;
    let (zxid, bytes) = core.export_snapshot();
    let dest = if out.is_dir() {
        let dir = out.join("version-2");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        dir.join(format!("snapshot.{:x}", zxid as u64))
    } else {
        out.to_path_buf()
    };
    std::fs::write(&dest, &bytes).map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    println!(
        "wrote {} ({} nodes, zxid 0x{zxid:x}, {} bytes)",
        dest.display(),
        nodes.len(),
        bytes.len()
    );
    Ok(())
}
