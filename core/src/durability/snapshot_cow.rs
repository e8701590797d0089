//! Snapshots taken while the core keeps serving: a [`SnapshotJob`] writes the tree as it
//! was at one zxid, a slice of nodes per call, and requests run between the slices. Before
//! the core changes a node the job has not written yet, the tree hands the node's old
//! version to the job's [`CowLog`] (copy on write), so the file holds exactly the state at
//! the job's zxid however the tree changes meanwhile.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use zkd_protocol::disk::snapshot::SnapshotWriter;
use zkd_protocol::disk::StatPersisted;
use zkd_protocol::Acl;

use crate::data::cow_slot::CowLog;
use crate::data::tree::{AclList, Meta, NIL};
use crate::{data::path, Core};

fn persisted(n: &Meta) -> StatPersisted {
    StatPersisted {
        czxid: n.czxid,
        mzxid: n.mzxid,
        ctime: n.ctime,
        mtime: n.mtime,
        version: n.version,
        cversion: n.child_creates,
        aversion: n.aversion,
        ephemeral_owner: n.owner,
        pzxid: n.pzxid,
    }
}

/// A step of the walk still to take.
enum Pending {
    /// Write this node (then gather its children).
    Node(String),
    /// Gather the names of this node's children, a slice at a time, each slice sorted into
    /// a run of its own; the cursor is [`CowLog::gather`].
    Gather {
        parent: String,
        runs: Vec<Vec<Box<str>>>,
    },
    /// Hand out the gathered names in order, merged from the runs (a name in two runs, a
    /// live child that was also changed, comes out once).
    Merge {
        parent: String,
        runs: Vec<std::vec::IntoIter<Box<str>>>,
        heads: BinaryHeap<Reverse<(Box<str>, usize)>>,
        last: Option<Box<str>>,
    },
}

/// A snapshot being written; see the module comment. Made by [`Core::begin_snapshot`].
pub struct SnapshotJob {
    id: u64,
    zxid: i64,
    writer: Option<SnapshotWriter>,
    /// What is still to write, the next on top.
    stack: Vec<Pending>,
    /// ACL index per list seen (by address; the list is held so the address stays its own).
    by_ptr: HashMap<usize, (i64, AclList)>,
    by_content: HashMap<Bytes, i64>,
    lists: Vec<(i64, AclList)>,
    written: u64,
    most_held: usize,
}

impl SnapshotJob {
    /// The zxid whose state the snapshot holds.
    pub fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Nodes written so far.
    pub fn nodes_written(&self) -> u64 {
        self.written
    }

    /// The file's bytes, once [`Core::snapshot_step`] said [`Step::Done`]: the ACL cache and
    /// the checksum over the whole file, which takes time proportional to the file, so it
    /// is done without holding the core. `None` before then.
    pub fn finish(&mut self) -> Option<Bytes> {
        if !self.stack.is_empty() {
            return None;
        }
        let mut writer = self.writer.take()?;
        writer.acl_cache(self.lists.iter().map(|(i, a)| (*i, &a[..])));
        Some(writer.finish())
    }

    /// The most old node versions kept at once for this job.
    pub fn most_copies_held(&self) -> usize {
        self.most_held
    }

    fn acl_index(&mut self, acl: &AclList) -> i64 {
        let ptr = Arc::as_ptr(acl) as *const Acl as usize;
        if let Some((i, _)) = self.by_ptr.get(&ptr) {
            return *i;
        }
        let key = zkd_protocol::to_bytes(&acl.to_vec());
        let next = self.lists.len() as i64 + 1;
        let lists = &mut self.lists;
        let index = *self.by_content.entry(key).or_insert_with(|| {
            lists.push((next, acl.clone()));
            next
        });
        self.by_ptr.insert(ptr, (index, acl.clone()));
        index
    }
}

/// What one call of [`Core::snapshot_step`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More nodes to write.
    More,
    /// Every node is written: [`SnapshotJob::finish`] makes the file, without the core.
    Done,
}

impl Core {
    /// Starts a snapshot of the state as it is now (sessions, zxid, tree). The tree is then
    /// written by [`Core::snapshot_step`], between requests; a job started later replaces
    /// this one.
    pub fn begin_snapshot(&mut self) -> SnapshotJob {
        let id = self.db.tree.cow.0.as_ref().map_or(0, |c| c.job) + 1;
        self.db.tree.cow.0 = Some(Box::new(CowLog {
            job: id,
            ..CowLog::default()
        }));
        let mut writer = SnapshotWriter::new(-1);
        let mut sessions: Vec<(i64, i32)> = self
            .sessions
            .iter()
            .map(|s| (s.id, s.timeout_ms.clamp(0, i64::from(i32::MAX)) as i32))
            .collect();
        sessions.sort_unstable();
        writer.sessions(&sessions);
        SnapshotJob {
            id,
            zxid: self.db.zxid,
            writer: Some(writer),
            stack: vec![Pending::Node("/".to_string())],
            by_ptr: HashMap::new(),
            by_content: HashMap::new(),
            lists: Vec::new(),
            written: 0,
            most_held: 0,
        }
    }

    /// Writes up to `budget` more nodes of `job` (at least one). Fails when the job was
    /// replaced by a newer one or the tree was replaced.
    pub fn snapshot_step(&mut self, job: &mut SnapshotJob, budget: usize) -> Result<Step, String> {
        let Some(mut cow) = self.db.tree.cow.0.take() else {
            return Err("the snapshot was superseded before it was complete".into());
        };
        if cow.job != job.id {
            self.db.tree.cow.0 = Some(cow);
            return Err("the snapshot was superseded before it was complete".into());
        }
        let Some(mut writer) = job.writer.take() else {
            return Err("the snapshot is already complete".into());
        };
        job.most_held = job.most_held.max(cow.held());
        let result = self.write_slice(&mut cow, job, &mut writer, budget.max(1));
        job.writer = Some(writer);
        if result.is_err() || !job.stack.is_empty() {
            self.db.tree.cow.0 = Some(cow);
            return result.map(|()| Step::More);
        }
        Ok(Step::Done)
    }

    /// Takes up to `budget` units of work: a node written, a child's name gathered, a name
    /// handed out by a merge. However wide a parent, no slice does more: its children are
    /// gathered over as many slices as they need, and handed out one by one.
    fn write_slice(
        &self,
        cow: &mut CowLog,
        job: &mut SnapshotJob,
        writer: &mut SnapshotWriter,
        budget: usize,
    ) -> Result<(), String> {
        let mut left = budget;
        while left > 0 {
            let Some(top) = job.stack.last_mut() else {
                break;
            };
            match top {
                Pending::Node(_) => {
                    let Some(Pending::Node(p)) = job.stack.pop() else {
                        break;
                    };
                    left -= 1;
                    self.write_node(cow, job, writer, p)?;
                }
                Pending::Gather { parent, runs } => {
                    let mut run: Vec<Box<str>> = Vec::new();
                    let mut at = cow.gather.unwrap_or(NIL);
                    while at != NIL && run.len() < left {
                        let (name, next) = self.db.tree.child_at(at);
                        run.push(name.into());
                        at = next;
                    }
                    left = left.saturating_sub(run.len().max(1));
                    run.sort_unstable();
                    runs.push(run);
                    if at != NIL {
                        cow.gather = Some(at);
                        continue;
                    }
                    // Every live child seen: add those that existed at the job's zxid and
                    // have been changed or removed since, then merge.
                    cow.gather = None;
                    let mut runs = std::mem::take(runs);
                    if let Some(mut changed) = cow.changed_children.remove(parent.as_str()) {
                        changed.sort_unstable();
                        runs.push(changed);
                    }
                    let parent = std::mem::take(parent);
                    let mut runs: Vec<_> = runs.into_iter().map(Vec::into_iter).collect();
                    let mut heads = BinaryHeap::with_capacity(runs.len());
                    for (r, run) in runs.iter_mut().enumerate() {
                        if let Some(name) = run.next() {
                            heads.push(Reverse((name, r)));
                        }
                    }
                    *top = Pending::Merge {
                        parent,
                        runs,
                        heads,
                        last: None,
                    };
                }
                Pending::Merge {
                    parent,
                    runs,
                    heads,
                    last,
                } => {
                    left -= 1;
                    let Some(Reverse((name, r))) = heads.pop() else {
                        job.stack.pop();
                        continue;
                    };
                    if let Some(next) = runs[r].next() {
                        heads.push(Reverse((next, r)));
                    }
                    if last.as_deref() == Some(&*name) {
                        continue;
                    }
                    let child = path::join(parent, &name);
                    *last = Some(name);
                    job.stack.push(Pending::Node(child));
                }
            }
        }
        Ok(())
    }

    /// Writes the node at `p` as it was at the job's zxid, then starts gathering its
    /// children.
    fn write_node(
        &self,
        cow: &mut CowLog,
        job: &mut SnapshotJob,
        writer: &mut SnapshotWriter,
        p: String,
    ) -> Result<(), String> {
        let live = self.db.tree.get(&p);
        let (data, acl, stat) = match cow.saved.get(p.as_str()) {
            Some(Some(old)) => (old.data.as_deref(), &old.acl, persisted(&old.bookkeeping())),
            Some(None) => return Ok(()),
            None => {
                let n = live.ok_or_else(|| format!("{p} vanished without a copy"))?;
                (n.data, n.acl, persisted(&n))
            }
        };
        let index = job.acl_index(acl);
        let stored = if p == "/" { "" } else { p.as_str() };
        writer.node(stored, data, index, &stat);
        job.written += 1;
        // Written: later changes to it need no copy, and its old version is done with. Its
        // children at the job's zxid are the live ones that existed then and those changed
        // or removed since (kept in `changed_children` until the gathering ends).
        cow.saved.remove(p.as_str());
        let first = self.db.tree.first_child(&p).unwrap_or(NIL);
        let w = cow.written.get_or_insert_with(String::new);
        w.clear();
        w.push_str(&p);
        if first == NIL && !cow.changed_children.contains_key(p.as_str()) {
            return Ok(());
        }
        cow.gather = Some(first);
        job.stack.push(Pending::Gather {
            parent: p,
            runs: Vec::new(),
        });
        Ok(())
    }

    /// Stops `job` (when it is abandoned): the tree keeps no more old versions for it.
    pub fn end_snapshot(&mut self, job: &SnapshotJob) {
        if self.db.tree.cow.0.as_ref().is_some_and(|c| c.job == job.id) {
            self.db.tree.cow.0 = None;
        }
    }
}
