//! Runs one of client-tests/python's kazoo check scripts and insists that every check passed.

use zkd_server::Server;

use crate::ensemble::member_addr;

/// Runs `python/<script>` with `args` (at most `limit_s` seconds) and fails unless it exits 0
/// and prints `passed` (a line such as "4 passed, 0 failed"); prints what it printed.
pub async fn run(script: &str, args: Vec<String>, limit_s: u32, passed: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(script);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("timeout")
            .args(["-k", "5", &limit_s.to_string(), &python])
            .arg(script)
            .args(args)
            .output()
    })
    .await
    .expect("blocking task")
    .unwrap_or_else(|e| {
        panic!("cannot run python3 with kazoo: {e}; run scripts/install-test-deps.sh")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains(passed),
        "kazoo checks failed ({}); if kazoo is missing, run scripts/install-test-deps.sh\n{stdout}\n{stderr}",
        out.status
    );
}

/// [`run`] with the arguments the three-member ensemble scripts take: the admin listener's
/// address, then each member's client address.
pub async fn run_on_ensemble(server: &Server, script: &str, limit_s: u32, passed: &str) {
    let mut args = vec![server.admin_addr().expect("admin").to_string()];
    args.extend((1..=3).map(|id| member_addr(server, id).to_string()));
    run(script, args, limit_s, passed).await;
}
