//! Sessions: id and password generation, timeout negotiation, and expiry on tick boundaries
//! (docs/protocol.md, "Handshake" and "Sessions and zxids").

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::data::keyed::KeyedMap;
use crate::ConnId;

/// One client session.
#[derive(Debug)]
pub struct Session {
    pub id: i64,
    pub passwd: [u8; 16],
    pub timeout_ms: i64,
    pub expires_at: i64,
    pub conn: Option<ConnId>,
    pub ephemerals: BTreeSet<Box<str>>,
    /// When the client was last heard from (session-clock ms).
    pub last_heard: i64,
}

/// All live sessions, bucketed by expiry time.
#[derive(Debug)]
pub struct Sessions {
    /// Boxed: spare slots of the table cost a pointer each, not a whole session.
    map: KeyedMap<i64, Box<Session>>,
    buckets: BTreeMap<i64, HashSet<i64>>,
    next_id: i64,
    /// The next id of sessions created through ensemble members other than server id 1.
    next_by_server: HashMap<u64, i64>,
    start_ms: i64,
    tick_ms: i64,
}

/// The end of the tick in which a session heard from at `now` with `timeout` expires.
fn expiry_bucket(tick_ms: i64, now: i64, timeout: i64) -> i64 {
    ((now + timeout) / tick_ms + 1) * tick_ms
}

/// The first session id of a server started at `start_ms` (server id 1).
pub fn initial_session_id(start_ms: i64) -> i64 {
    server_session_id(1, start_ms)
}

/// The first session id server `server` (1..=255) hands out when started at `start_ms`: the
/// server id in the top byte, as ZooKeeper's session trackers do.
fn server_session_id(server: u64, start_ms: i64) -> i64 {
    let id = (((server & 0xFF) as i64) << 56) | ((start_ms & 0xFF_FFFF_FFFF) << 16);
    if id == i64::MIN {
        id + 1
    } else {
        id
    }
}

/// The session password: 16 bytes of Java's `Random` seeded with `id ^ 0xB3415C00`.
pub fn password(id: i64) -> [u8; 16] {
    const MULT: i64 = 0x5DEE_CE66D;
    const MASK: i64 = (1 << 48) - 1;
    let mut seed = ((id ^ 0xB341_5C00) ^ MULT) & MASK;
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(4) {
        seed = (seed.wrapping_mul(MULT).wrapping_add(0xB)) & MASK;
        let v = (seed >> 16) as i32;
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = (v >> (8 * i)) as u8;
        }
    }
    out
}

impl Sessions {
    pub fn new(start_ms: i64, tick_ms: i64) -> Sessions {
        Sessions {
            map: KeyedMap::default(),
            buckets: BTreeMap::new(),
            next_id: initial_session_id(start_ms),
            next_by_server: HashMap::new(),
            start_ms,
            tick_ms: tick_ms.max(1),
        }
    }

    /// Changes the expiry rounding (1 = exact expiry). Only before any session exists.
    pub fn set_granularity(&mut self, ms: i64) {
        if self.map.is_empty() {
            self.tick_ms = ms.max(1);
        }
    }

    /// The expiry bucket for activity at `now`: the next tick multiple strictly after now+timeout.
    fn bucket(&self, now: i64, timeout: i64) -> i64 {
        expiry_bucket(self.tick_ms, now, timeout)
    }

    pub fn create(&mut self, timeout_ms: i64, now: i64) -> &mut Session {
        self.create_on(1, timeout_ms, now)
    }

    /// Creates a session through server (ensemble member) `server`, whose id goes into the
    /// session id's top byte; 0 and 1 both mean the standalone server's sequence.
    pub fn create_on(&mut self, server: u64, timeout_ms: i64, now: i64) -> &mut Session {
        let start_ms = self.start_ms;
        let next = match server {
            0 | 1 => &mut self.next_id,
            s => self
                .next_by_server
                .entry(s)
                .or_insert_with(|| server_session_id(s, start_ms)),
        };
        // Sessions restored from disk may hold ids this counter would hand out.
        while self.map.contains_key(next) {
            *next = next.wrapping_add(1);
        }
        let id = *next;
        *next = next.wrapping_add(1);
        let expires_at = self.bucket(now, timeout_ms);
        self.buckets.entry(expires_at).or_default().insert(id);
        self.map.entry(id).or_insert_with(|| {
            Box::new(Session {
                id,
                passwd: password(id),
                timeout_ms,
                expires_at,
                conn: None,
                ephemerals: BTreeSet::new(),
                last_heard: now,
            })
        })
    }

    /// Re-creates a session read from disk (same id, same password), expiring `timeout_ms`
    /// after `now`. New ids handed out later skip it.
    pub fn restore(&mut self, id: i64, timeout_ms: i64, now: i64) {
        self.remove(id);
        let saved = std::mem::replace(&mut self.next_id, id);
        self.create(timeout_ms, now);
        self.next_id = saved;
    }

    pub fn get(&self, id: i64) -> Option<&Session> {
        self.map.get(&id).map(|s| &**s)
    }

    pub fn get_mut(&mut self, id: i64) -> Option<&mut Session> {
        self.map.get_mut(&id).map(|s| &mut **s)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.map.values().map(|s| &**s)
    }

    /// Records activity: moves the session to the bucket for `now + timeout`.
    pub fn touch(&mut self, id: i64, now: i64) {
        if let Some(s) = self.map.get_mut(&id) {
            s.last_heard = now;
        }
        self.restart_deadline(id, now);
    }

    /// Moves the session to the bucket for `now + timeout` without counting it as heard
    /// from: what a newly elected leader does with every session it takes over.
    pub fn restart_deadline(&mut self, id: i64, now: i64) {
        let tick_ms = self.tick_ms;
        let Some(s) = self.map.get_mut(&id) else {
            return;
        };
        let new = expiry_bucket(tick_ms, now, s.timeout_ms);
        let old = s.expires_at;
        if old == new {
            return;
        }
        s.expires_at = new;
        if let Some(b) = self.buckets.get_mut(&old) {
            b.remove(&id);
            if b.is_empty() {
                self.buckets.remove(&old);
            }
        }
        self.buckets.entry(new).or_default().insert(id);
    }

    /// Changes the timeout (on reconnect) and touches.
    pub fn set_timeout(&mut self, id: i64, timeout_ms: i64, now: i64) {
        if let Some(s) = self.map.get_mut(&id) {
            s.timeout_ms = timeout_ms;
        }
        self.touch(id, now);
    }

    pub fn remove(&mut self, id: i64) -> Option<Session> {
        let s = self.map.remove(&id)?;
        if let Some(b) = self.buckets.get_mut(&s.expires_at) {
            b.remove(&id);
            if b.is_empty() {
                self.buckets.remove(&s.expires_at);
            }
        }
        Some(*s)
    }

    /// Ids of sessions whose bucket time is at or before `now`.
    pub fn expired(&self, now: i64) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .buckets
            .range(..=now)
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The earliest bucket time, if any session exists.
    pub fn next_expiry(&self) -> Option<i64> {
        self.buckets.keys().next().copied()
    }

    /// The earliest bucket time holding a session `pred` accepts.
    pub fn next_expiry_of(&self, pred: impl Fn(i64) -> bool) -> Option<i64> {
        self.buckets
            .iter()
            .find(|(_, ids)| ids.iter().any(|id| pred(*id)))
            .map(|(at, _)| *at)
    }
}

impl Sessions {
    /// Checks that the expiry buckets and the session map agree (for invariant checks).
    pub fn check_consistency(&self) -> Result<(), String> {
        for (at, ids) in &self.buckets {
            if ids.is_empty() {
                return Err(format!("empty expiry bucket at {at}"));
            }
            for id in ids {
                match self.map.get(id) {
                    None => return Err(format!("bucket {at} holds unknown session 0x{id:x}")),
                    Some(s) if s.expires_at != *at => {
                        return Err(format!(
                            "session 0x{id:x} in bucket {at} but expires at {}",
                            s.expires_at
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        for (id, s) in &self.map {
            if s.id != *id {
                return Err(format!("session 0x{id:x} stored under another id"));
            }
            if !self
                .buckets
                .get(&s.expires_at)
                .is_some_and(|b| b.contains(id))
            {
                return Err(format!("session 0x{id:x} missing from its expiry bucket"));
            }
            if s.expires_at % self.tick_ms != 0 {
                return Err(format!("session 0x{id:x} expires off a tick boundary"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_matches_the_reference_vector() {
        let pw = password(0x0100_0007_7236_0000);
        let hex: String = pw.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "48c1a8bc352d765c66a9cbd5060d9335");
    }

    #[test]
    fn expiry_is_on_tick_boundaries() {
        let mut s = Sessions::new(0, 2000);
        let id = s.create(4000, 1000).id;
        assert_eq!(s.get(id).map(|s| s.expires_at), Some(6000));
        assert!(s.expired(5999).is_empty());
        assert_eq!(s.expired(6000), vec![id]);
        s.touch(id, 2500);
        assert_eq!(s.get(id).map(|s| s.expires_at), Some(8000));
        assert!(s.expired(6000).is_empty());
        assert!(s.remove(id).is_some());
        assert_eq!(s.next_expiry(), None);
    }

    #[test]
    fn ids_follow_the_layout() {
        let id = initial_session_id(0x0007_7236);
        assert_eq!(id, 0x0100_0007_7236_0000);
    }
}
