//! A guard for Rust tests: [`Server::history_guard`] notes where the history stands, and
//! when the test panics while the guard is alive, the test's window of the history is written
//! as `<name>.history.jsonl` and a self-contained timeline `<name>.history.html` (with what
//! the recipe checks find) under the build directory, and the paths are printed.

use std::path::PathBuf;

use crate::reports::timeline::Window;
use crate::Server;

/// Writes the history of a test that panics; see [`Server::history_guard`].
pub struct HistoryGuard<'a> {
    server: &'a Server,
    name: String,
    mark: u64,
    dir: Option<PathBuf>,
}

impl Server {
    /// A guard that, if the thread panics while it is alive, writes what the history
    /// recorded since this call to `<dir>/<name>.history.jsonl` and its timeline to
    /// `<dir>/<name>.history.html`, and prints both paths and the recipe checks' findings to
    /// standard error. `<dir>` is `$ZKD_HISTORY_DIR`, else `zkd-history` in the build
    /// directory (`$CARGO_TARGET_DIR`, or the nearest `target` directory above the working
    /// directory), else in the system's temporary directory.
    pub fn history_guard(&self, name: &str) -> HistoryGuard<'_> {
        let mark = self
            .history_summary()
            .ok()
            .and_then(|s| s.seqs)
            .map(|(_, last)| last)
            .unwrap_or(0);
        HistoryGuard {
            server: self,
            name: name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect(),
            mark,
            dir: None,
        }
    }
}

impl HistoryGuard<'_> {
    /// Writes into `dir` instead.
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Writes the history now (what a panic does): returns the two files written.
    pub fn write(&self) -> std::io::Result<(PathBuf, PathBuf, Vec<String>)> {
        let window = Window::read(&self.server.shared, self.mark).map_err(|_| {
            std::io::Error::other("the server's core failed: its history cannot be read")
        })?;
        let findings = window.findings();
        let dir = self.dir.clone().unwrap_or_else(default_dir);
        std::fs::create_dir_all(&dir)?;
        let jsonl = dir.join(format!("{}.history.jsonl", self.name));
        let html = dir.join(format!("{}.history.html", self.name));
        std::fs::write(&jsonl, &window.jsonl)?;
        std::fs::write(&html, window.page(&findings))?;
        let said = findings
            .iter()
            .map(|f| format!("{}: {}", f.check, f.summary))
            .collect();
        Ok((jsonl, html, said))
    }
}

impl Drop for HistoryGuard<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        match self.write() {
            Ok((jsonl, html, findings)) => {
                eprintln!(
                    "zkd history of {} (JSON Lines): {}",
                    self.name,
                    jsonl.display()
                );
                eprintln!("zkd timeline: {}", html.display());
                for f in findings {
                    eprintln!("zkd recipe check: {f}");
                }
            }
            Err(e) => eprintln!("zkd history of {} could not be written: {e}", self.name),
        }
    }
}

/// `$ZKD_HISTORY_DIR`, else `zkd-history` under the build directory.
fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ZKD_HISTORY_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let cwd = std::env::current_dir().ok()?;
            cwd.ancestors()
                .map(|a| a.join("target"))
                .find(|t| t.is_dir())
        })
        .unwrap_or_else(std::env::temp_dir);
    target.join("zkd-history")
}
