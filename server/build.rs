//! Records what the reports and `zkd --version` say about this build: the git commit
//! (`ZKD_BUILD_COMMIT`) and the build date (`ZKD_BUILD_DATE`, `YYYY-MM-DD HH:MM`, UTC).
//!
//! The commit is `git rev-parse HEAD` when this crate sits in its own checkout, else the one
//! `cargo package` wrote into `.cargo_vcs_info.json`, else `unknown`. The date is
//! `ZKD_BUILD_EPOCH` (seconds since 1970) when set, else `SOURCE_DATE_EPOCH` (reproducible
//! builds), else the time this script ran: cargo reruns it when the sources, the manifest or
//! the checked-out commit change. scripts/release.sh sets `ZKD_BUILD_EPOCH` to the commit's
//! date; a variable of zkd's own, because C build scripts (ring's, jemalloc's) rebuild when
//! `SOURCE_DATE_EPOCH` changes, and a per-commit value would rebuild them for every commit.

#[path = "src/reports/civil_date.rs"]
mod civil_date;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-env-changed=ZKD_BUILD_EPOCH");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");

    let commit = git_commit(&manifest_dir)
        .or_else(|| packaged_commit(&manifest_dir))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=ZKD_BUILD_COMMIT={commit}");

    let fixed = ["ZKD_BUILD_EPOCH", "SOURCE_DATE_EPOCH"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().map(|value| (name, value)));
    let epoch = match fixed {
        Some((name, value)) => match value.trim().parse::<u64>() {
            Ok(secs) => secs,
            Err(_) => {
                // A build that asked for a fixed date must not silently get another one.
                eprintln!("{name}={value:?} is not a number of seconds since 1970");
                std::process::exit(1);
            }
        },
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };
    println!("cargo:rustc-env=ZKD_BUILD_DATE={}", utc_minute(epoch));
}

/// Runs git in `dir`; its trimmed standard output when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The checked-out commit, when `dir` is a crate of a zkd checkout (its parent is the top of a
/// git work tree). A crate unpacked somewhere inside another repository is not.
fn git_commit(dir: &Path) -> Option<String> {
    let top = PathBuf::from(git(dir, &["rev-parse", "--show-toplevel"])?);
    let parent = dir.parent()?;
    if top.canonicalize().ok()? != parent.canonicalize().ok()? {
        return None;
    }
    let commit = git(dir, &["rev-parse", "HEAD"])?;
    // Rerun when the commit moves: HEAD itself, the branch it names, and packed refs.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}

/// The commit `cargo package` recorded (`"sha1": "<hex>"` in `.cargo_vcs_info.json`).
fn packaged_commit(dir: &Path) -> Option<String> {
    let info = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let rest = &info[info.find("\"sha1\"")? + "\"sha1\"".len()..];
    let rest = &rest[rest.find('"')? + 1..];
    let sha = &rest[..rest.find('"')?];
    (!sha.is_empty() && sha.bytes().all(|b| b.is_ascii_hexdigit())).then(|| sha.to_string())
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM` in UTC.
fn utc_minute(secs: u64) -> String {
    let minute_of_day = (secs % 86_400) / 60;
    let (year, month, day) = civil_date::civil_from_days((secs / 86_400) as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        minute_of_day / 60,
        minute_of_day % 60
    )
}
