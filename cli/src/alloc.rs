//! The process allocator: jemalloc, tuned so that memory freed after a burst (replies queued
//! for clients that do not read, large requests) goes back to the OS within about a second.
//!
//! Why: with glibc's malloc, and with mimalloc, most of the memory freed after such a burst
//! stayed resident (measured: 30 non-reading clients left 130 MiB behind for good), because
//! it is freed on other threads than it was allocated on and an idle server makes no further
//! calls that would trim it. jemalloc's background thread purges unused pages on its own
//! schedule, whatever the server does. Only the binary chooses an allocator; the library
//! leaves that to whoever embeds it.

use tikv_jemalloc_ctl::{background_thread, max_background_threads, Access, AsName};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Options jemalloc reads once, when it starts (before `main`):
/// - `percpu_arena:percpu`: one arena per CPU, a thread allocating from its CPU's, instead of
///   four per CPU each taken by the next new thread. The runtime runs one worker thread per
///   CPU, so each still mostly has an arena of its own, without the main thread's arena
///   lying idle beside theirs (measured: about 100 KiB less resident at idle on two CPUs).
/// - `tcache_nslots_small_max:64`: a thread caches at most 64 freed blocks of a small size
///   class (200 by default) before returning them to its arena: the caches' arrays are
///   smaller (about 30 KiB less resident per thread that allocates).
const CONF: &[u8] = b"percpu_arena:percpu,tcache_nslots_small_max:64\0";

/// jemalloc's `malloc_conf` (a C string it looks up by this name, under the prefix this
/// build of jemalloc gives its symbols).
#[allow(unsafe_code)] // `export_name` only: this defines the C symbol jemalloc reads.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &u8 = &CONF[0];

/// How long freed pages may stay resident before the background thread returns them.
const DECAY_MS: isize = 1000;

/// Turns on the background purging thread and a short decay. Call once, early (before the
/// runtime's threads start, so that every arena gets the short decay).
pub fn tune() -> Result<(), String> {
    let set = |key: &'static [u8], v: isize| {
        key.name()
            .write(v)
            .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(&key[..key.len() - 1])))
    };
    // Arenas created from now on, and arena 0 (the only one so far).
    set(b"arenas.dirty_decay_ms\0", DECAY_MS)?;
    set(b"arenas.muzzy_decay_ms\0", 0)?;
    set(b"arena.0.dirty_decay_ms\0", DECAY_MS)?;
    set(b"arena.0.muzzy_decay_ms\0", 0)?;
    // One purging thread serves every arena; more would only hold stacks and caches.
    max_background_threads::write(1).map_err(|e| format!("max_background_threads: {e}"))?;
    background_thread::write(true).map_err(|e| format!("background_thread: {e}"))
}
