//! Fault rules of the test control plane: matched on each request in the core's one order
//! (opcode, path prefix, session), each with an action and an optional count.

use zkd_protocol::{OpCode, Request};

use crate::ConnId;

/// What a matching rule does to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this ZooKeeper error code; nothing is applied.
    Error(i32),
    /// Close the connection without applying the request.
    DropBefore,
    /// Apply the request, then close the connection before the reply is written.
    DropAfter,
    /// Apply the request and answer it, but hold the reply (and everything after it on that
    /// connection) this many milliseconds.
    Delay(u64),
    /// Apply the request and send no reply; the connection stays open.
    NoResponse,
}

/// A fault rule. Unset criteria match anything; requests without a path (ping excepted)
/// match only rules without `path_prefix`. Pings, auth and SASL packets are matched only by
/// a rule naming their opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    pub action: FaultAction,
    /// Request opcode (1 create, 4 getData, 14 multi, ...). A create opcode matches every
    /// kind of create, a getChildren opcode both getChildren forms.
    pub opcode: Option<i32>,
    /// Matches requests whose path (any sub-op's path, for a multi) starts with this string.
    pub path_prefix: Option<String>,
    /// Matches requests of this session only.
    pub session: Option<i64>,
    /// How many times the rule fires before it is spent; `None` = until removed.
    pub count: Option<u64>,
}

/// A rule as reported: its id, how often it fired, and how many firings remain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultStatus {
    pub id: u64,
    pub rule: FaultRule,
    pub fired: u64,
    /// `None` = unlimited.
    pub remaining: Option<u64>,
}

/// Most rules held at once, spent ones included, so memory stays bounded.
pub const MAX_FAULT_RULES: usize = 1024;

/// The rule table.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<FaultStatus>,
    next_id: u64,
}

impl Faults {
    pub fn add(&mut self, rule: FaultRule) -> Result<u64, String> {
        if self.rules.len() >= MAX_FAULT_RULES {
            return Err(format!(
                "there are already {MAX_FAULT_RULES} fault rules; delete some first"
            ));
        }
        self.next_id += 1;
        let id = self.next_id;
        self.rules.push(FaultStatus {
            id,
            remaining: rule.count,
            rule,
            fired: 0,
        });
        Ok(id)
    }

    pub fn list(&self) -> Vec<FaultStatus> {
        self.rules.clone()
    }

    /// Removes every rule; returns how many there were.
    pub fn clear(&mut self) -> usize {
        std::mem::take(&mut self.rules).len()
    }

    /// Removes one rule; false if there is none with that id.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.rules.len() != before
    }

    /// Removes the rules `pred` selects.
    pub fn remove_where(&mut self, pred: impl Fn(&FaultStatus) -> bool) {
        self.rules.retain(|r| !pred(r));
    }

    /// The action of the first live rule matching this request, counting the firing.
    pub fn check(&mut self, op: i32, req: &Request, session: i64) -> Option<FaultAction> {
        if self.rules.is_empty() {
            return None;
        }
        let paths = req.paths();
        let quiet = OpCode::from_i32(op).is_some_and(|o| o.info().background);
        let rule = self.rules.iter_mut().find(|r| {
            r.remaining != Some(0)
                && match r.rule.opcode {
                    Some(o) => family(o) == family(op),
                    None => !quiet,
                }
                && r.rule.session.is_none_or(|s| s == session)
                && r.rule
                    .path_prefix
                    .as_deref()
                    .is_none_or(|pre| paths.iter().any(|p| p.starts_with(pre)))
        })?;
        rule.fired += 1;
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        Some(rule.rule.action)
    }
}

/// Opcodes a rule treats as one: every kind of create (create, create2, createContainer,
/// createTTL) and both getChildren forms, since clients pick among them freely.
fn family(op: i32) -> i32 {
    OpCode::from_i32(op).map_or(op, |o| o.family() as i32)
}

/// An outbox that swallows every frame for one connection (the request whose reply a
/// `drop-after` or `no-response` rule suppresses) and passes everything else on.
pub struct Muted<'a> {
    pub inner: &'a mut dyn crate::Outbox,
    pub conn: ConnId,
}

impl crate::Outbox for Muted<'_> {
    fn send(&mut self, conn: ConnId, frame: bytes::Bytes, release: crate::Release) {
        if conn != self.conn {
            self.inner.send(conn, frame, release);
        }
    }

    fn send_frame(&mut self, conn: ConnId, frame: crate::Frame, release: crate::Release) {
        if conn != self.conn {
            self.inner.send_frame(conn, frame, release);
        }
    }

    fn close(&mut self, conn: ConnId, release: crate::Release) {
        self.inner.close(conn, release);
    }

    fn delay(&mut self, conn: ConnId, ms: u64, release: crate::Release) {
        self.inner.delay(conn, ms, release);
    }

    fn fact(&mut self, fact: crate::Fact<'_>) {
        self.inner.fact(fact);
    }
}
