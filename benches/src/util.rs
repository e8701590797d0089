//! Small helpers: statistics, formatting, unique paths, request shorthands.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use zkd_protocol::{DeleteRequest, Request};
use zkd_testkit::raw::{RawClient, Reply};

/// Every benchmark error is a message saying what went wrong.
pub type BenchResult<T> = Result<T, String>;

/// The `q`-quantile (0..=1) of sorted values, nearest rank; 0 for no values.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median of unsorted values (the mean of the two middle ones for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A name no other run of any bench on this machine uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "/zkd-bench-{prefix}-{}-{}-{:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos % (1 << 40)
    )
}

/// A fresh directory under `base`, named after `prefix` (as the test kit's temporary
/// directories, but under a base of the caller's choosing: the disk being measured).
pub fn fresh_dir(base: &std::path::Path, prefix: &str) -> std::io::Result<std::path::PathBuf> {
    let name = unique(prefix);
    let dir = base.join(name.trim_start_matches('/'));
    std::fs::create_dir_all(base)?;
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// A create request with the open ACL.
pub fn create(path: &str, data: Option<Bytes>, flags: i32) -> Request {
    zkd_testkit::raw::create(path, data, flags)
}

/// A delete request for any version.
pub fn delete(path: String) -> Request {
    Request::Delete(DeleteRequest { path, version: -1 })
}

/// Opens a set-up session and creates a fresh node named after `prefix` with `data`;
/// returns the session and the node's path. `what` names the node in errors.
pub async fn session_with_node(
    addr: SocketAddr,
    prefix: &str,
    data: Option<Bytes>,
    limit: Duration,
    what: &str,
) -> BenchResult<(RawClient, String)> {
    let admin = RawClient::connect(addr, crate::pool::SESSION_TIMEOUT_MS)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let path = unique(prefix);
    call_ok(
        &admin,
        &create(&path, data, 0),
        limit,
        &format!("creating {what}"),
    )
    .await?;
    Ok((admin, path))
}

/// Sends a request, waits at most `limit` for the reply and insists on `err == 0`.
pub async fn call_ok(
    client: &RawClient,
    req: &Request,
    limit: Duration,
    what: &str,
) -> BenchResult<Reply> {
    let reply = tokio::time::timeout(limit, client.call(req))
        .await
        .map_err(|_| format!("{what}: no reply within {limit:?}"))?
        .map_err(|e| format!("{what}: {e}"))?;
    if reply.err != 0 {
        return Err(format!("{what}: error code {}", reply.err));
    }
    Ok(reply)
}

/// `1234567` → `1.23 M`, for counts in progress lines and tables.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_median() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile_sorted(&v, 0.5), 500.0);
        assert_eq!(quantile_sorted(&v, 0.99), 990.0);
        assert_eq!(quantile_sorted(&v, 0.999), 999.0);
        assert_eq!(quantile_sorted(&v, 1.0), 1000.0);
        assert_eq!(quantile_sorted(&[], 0.5), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn unique_names_differ() {
        assert_ne!(unique("x"), unique("x"));
    }
}
