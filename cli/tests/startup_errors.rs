//! Settings the binary refuses at start-up: exit code 2 and a sentence naming the problem.

use std::process::{Command, Output};

fn zkd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zkd"))
        .args(args)
        .output()
        .expect("zkd runs")
}

fn refused(args: &[&str], says: &str) {
    let out = zkd(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

#[test]
fn session_timeout_below_one_tick() {
    refused(
        &["--port", "0", "--min-session-timeout", "0"],
        "minimum session timeout (0 ms) is below one tick (2000 ms)",
    );
    refused(
        &[
            "--port",
            "0",
            "--tick-time",
            "500",
            "--min-session-timeout",
            "499",
        ],
        "minimum session timeout (499 ms) is below one tick (500 ms)",
    );
}

#[test]
fn unknown_four_letter_word() {
    refused(&["--port", "0", "--4lw-whitelist", "ruok,nope"], "nope");
}
