//! The random seeds (SASL nonces, hash keys) come from the getrandom system call itself, so
//! zkd started where there is no `/dev` (a chroot, a bare container) still gets them and
//! logs no warning. Run as root: the test makes a mount namespace whose `/dev` is an empty
//! tmpfs and traces the system calls with strace.

use std::io::{BufRead, BufReader, Read as _};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn seeds_come_from_the_getrandom_system_call_without_dev() {
    let uid = Command::new("id").arg("-u").output().expect("id runs");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "this test must run as root: it mounts an empty /dev in a mount namespace of its own \
         (unshare --mount) to show that zkd needs no /dev/urandom"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").expect("users");
    let trace = dir.path().join("trace.txt");
    let script = format!(
        "mount -t tmpfs none /dev && test ! -e /dev/urandom && exec strace -f -qq \
         -e trace=getrandom,openat,open -o '{}' '{}' --port 0 --sasl-users '{}'",
        trace.display(),
        env!("CARGO_BIN_EXE_zkd"),
        users.display()
    );
    // A process group of its own: strace and the zkd it traces are stopped together.
    let mut child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare runs (util-linux)");
    let group = child.id().to_string();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    let started = line.starts_with("zkd listening on ");
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
    let _ = child.wait();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(started, "zkd did not start without /dev: {line:?} {stderr}");
    assert!(
        !stderr.contains("predictable") && !stderr.contains("no system random source"),
        "{stderr}"
    );
    // strace writes its file as the traced process goes; give it a moment to close.
    let deadline = Instant::now() + Duration::from_secs(5);
    let calls = loop {
        let text = std::fs::read_to_string(&trace).unwrap_or_default();
        if text.contains("getrandom(") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The 16-byte SASL nonce seed and the 32-byte hash keys, each filled by the system call.
    for len in [16, 32] {
        assert!(
            calls
                .lines()
                .any(|l| l.contains("getrandom(") && l.ends_with(&format!(", {len}, 0) = {len}"))),
            "no {len}-byte getrandom call: {calls}"
        );
    }
    assert!(
        !calls.contains("/dev/urandom") && !calls.contains("/dev/random"),
        "a random device was opened: {calls}"
    );
}
