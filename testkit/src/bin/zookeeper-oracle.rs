//! `zookeeper-oracle start|stop|status DIR`: runs the test kit's Apache ZooKeeper launcher by
//! hand, leaving the server running in the background (see `scripts/zookeeper-oracle.sh`).

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use zkd_testkit::oracle::Launcher;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [cmd, dir] if cmd == "start" => start(Path::new(dir)),
        [cmd, dir] if cmd == "stop" => stop(Path::new(dir)),
        [cmd, dir] if cmd == "status" => status(Path::new(dir)),
        _ => {
            eprintln!("usage: zookeeper-oracle start|stop|status DIR");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts a server whose files live in `dir`; prints `HOST:PORT` and writes `dir/pid` and
/// `dir/addr`. `PORT=N` forces the port.
fn start(dir: &Path) -> Result<(), String> {
    if let Some((pid, addr)) = running(dir) {
        return Err(format!("already running (pid {pid}) on {addr}"));
    }
    let port = match std::env::var("PORT") {
        Ok(p) if !p.is_empty() => Some(p.parse().map_err(|e| format!("PORT={p:?}: {e}"))?),
        _ => None,
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = std::fs::remove_dir_all(dir.join("data"));
    let oracle = Launcher::new().detached().start_in(&dir, port)?;
    let addr = oracle.addr();
    let pid = oracle.detach();
    std::fs::write(dir.join("pid"), format!("{pid}\n"))
        .and_then(|()| std::fs::write(dir.join("addr"), format!("{addr}\n")))
        .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    println!("{addr}");
    Ok(())
}

/// Stops the server started in `dir`: TERM, then KILL after five seconds.
fn stop(dir: &Path) -> Result<(), String> {
    let pid = read_pid(dir).ok_or_else(|| format!("no pid file in {}", dir.display()))?;
    if alive(pid) {
        signal(pid, "TERM");
        for _ in 0..100 {
            if !alive(pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if alive(pid) {
            signal(pid, "KILL");
        }
    }
    let _ = std::fs::remove_file(dir.join("pid"));
    let _ = std::fs::remove_file(dir.join("addr"));
    println!("stopped (pid {pid})");
    Ok(())
}

/// Prints `HOST:PORT` when the server of `dir` runs; fails otherwise.
fn status(dir: &Path) -> Result<(), String> {
    match running(dir) {
        Some((_, addr)) => {
            println!("{addr}");
            Ok(())
        }
        None => Err("not running".to_string()),
    }
}

fn running(dir: &Path) -> Option<(u32, String)> {
    let pid = read_pid(dir)?;
    let addr = std::fs::read_to_string(dir.join("addr")).ok()?;
    alive(pid).then(|| (pid, addr.trim().to_string()))
}

fn read_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the process exists (and is not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}
