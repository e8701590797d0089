//! The ensemble programs: a seeded generator of session steps (writes, ephemerals, watched
//! reads, syncs) interleaved with faults (member stops and starts, the leader's stop, quorum
//! loss and return, a session left to expire, the leader or a follower cut off from the
//! other members and the heal), and their text form for failure reports.

use std::fmt;

/// Sessions per program.
pub const SESSIONS: usize = 3;
/// Members per ensemble.
pub const MEMBERS: u64 = 3;
/// The nodes a program touches, relative to its root: two levels, so deletes can fail with
/// NOTEMPTY and creates with NONODE.
pub const NODES: [&str; 5] = ["a", "b", "c", "a/x", "a/y"];
/// Paths a children watch is set on (`""` is the program's root).
pub const PARENTS: [&str; 2] = ["", "a"];

/// A small deterministic generator (SplitMix64): the same seed gives the same programs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Which watch a read leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// getData.
    Data,
    /// exists.
    Exists,
    /// getChildren.
    Children,
}

/// What a session does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create {
        node: usize,
        ephemeral: bool,
    },
    SetData {
        node: usize,
        data: u8,
    },
    Delete {
        node: usize,
    },
    Read {
        read: Read,
        node: usize,
        watch: bool,
    },
    Sync,
}

/// What happens to the ensemble (or to a session's client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Stop member `id` (if it runs).
    Stop(u64),
    /// Stop whichever member leads.
    StopLeader,
    /// Start member `id` (if stopped).
    Start(u64),
    /// Start every stopped member.
    StartAll,
    /// The session's client goes away without closing it; the step waits until the
    /// session's timeout has surely passed (only generated while a quorum runs).
    Abandon(usize),
    /// Whichever member leads is cut off from the other two (which keep a quorum); clients
    /// still reach it. Only generated while every member runs and nothing is cut.
    CutLeader,
    /// The lowest-id follower is cut off from the other two, as [`Fault::CutLeader`].
    CutFollower,
    /// What the leader sends the lowest-id follower is lost (the other way still works):
    /// the follower is cut off. Ended by [`Fault::Heal`].
    CutLeaderToFollower,
    /// The cut member joins the others again.
    Heal,
    /// Everything between the clients and a member (the leader, or the lowest-id follower)
    /// is lost without a reset; the members still reach each other. Its sessions move to
    /// another member at once, or (`late`) only after their timeout has surely passed. Only
    /// generated while every member runs and nothing is cut.
    Blackhole { leader: bool, late: bool },
    /// The blackhole ends.
    ClearBlackhole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Op { session: usize, op: Op },
    Fault(Fault),
}

/// A program: its steps; the harness adds the set-up (sessions, each with an anchor
/// ephemeral) and the recovery at the end (every member started, the final state read).
#[derive(Debug, Clone)]
pub struct Program {
    pub steps: Vec<Step>,
}

impl Program {
    pub fn faults(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Fault(_)))
            .count()
    }
}

/// Program `index` of the run with `seed`: independent of the others, so one program can be
/// replayed alone.
pub fn program(seed: u64, index: u64) -> Program {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let len = 10 + rng.below(10) as usize;
    let mut state = Members {
        running: [true; MEMBERS as usize],
        known: true,
        starts: 0,
        cut: false,
        blackholed: false,
    };
    let mut abandoned = [false; SESSIONS];
    // Each session starts with a watch (a data, a children and an exists watch), so changes
    // have watchers from the start.
    let mut steps = vec![
        Step::Op {
            session: 0,
            op: Op::Read {
                read: Read::Data,
                node: 0,
                watch: true,
            },
        },
        Step::Op {
            session: 1,
            op: Op::Read {
                read: Read::Children,
                node: 0,
                watch: true,
            },
        },
        Step::Op {
            session: 2,
            op: Op::Read {
                read: Read::Exists,
                node: 2,
                watch: true,
            },
        },
    ];
    let mut faults = 0;
    for i in 0..len {
        let must = faults == 0 && i + 3 >= len;
        // Without a quorum, operations only show that nothing serves them: end the outage
        // sooner.
        let chance = if state.cut || state.blackholed {
            30
        } else if state.count() * 2 > MEMBERS as usize {
            15
        } else {
            45
        };
        if faults < 3 && (must || rng.chance(chance)) {
            if let Some(f) = state.fault(&mut rng, &abandoned) {
                if let Fault::Abandon(s) = f {
                    abandoned[s] = true;
                }
                steps.push(Step::Fault(f));
                faults += 1;
                continue;
            }
        }
        steps.push(op_step(&mut rng, &abandoned));
    }
    Program { steps }
}

/// The generator's view of the members. After the leader's stop it knows only how many run
/// (it does not know who led); starting every member makes it exact again.
struct Members {
    running: [bool; MEMBERS as usize],
    known: bool,
    /// Member starts cost a JVM start on the ZooKeeper side: at most two per program.
    starts: u32,
    /// A member is cut off (until the heal, nothing else happens to the members).
    cut: bool,
    /// A member's clients are blackholed (until that ends, nothing else happens).
    blackholed: bool,
}

impl Members {
    fn count(&self) -> usize {
        self.running.iter().filter(|r| **r).count()
    }

    fn fault(&mut self, rng: &mut Rng, abandoned: &[bool; SESSIONS]) -> Option<Fault> {
        let up: Vec<u64> = (1..=MEMBERS)
            .filter(|id| self.running[*id as usize - 1])
            .collect();
        let down: Vec<u64> = (1..=MEMBERS)
            .filter(|id| !self.running[*id as usize - 1])
            .collect();
        let live: Vec<usize> = (0..SESSIONS).filter(|s| !abandoned[*s]).collect();
        let count = self.count();
        let quorum = count * 2 > MEMBERS as usize;
        let mut choices: Vec<Fault> = Vec::new();
        if self.cut {
            return Some(Fault::Heal).inspect(|_| self.cut = false);
        }
        if self.blackholed {
            return Some(Fault::ClearBlackhole).inspect(|_| self.blackholed = false);
        }
        // With every member running: a cut three times in ten (the leader, a follower, or
        // what the leader sends a follower), a blackhole twice, otherwise
        // a member stop (or an abandoned session).
        if self.known && count == MEMBERS as usize {
            let (kind, leader, late) = (rng.below(10), rng.chance(50), rng.chance(35));
            if kind < 3 {
                self.cut = true;
                return Some(match kind {
                    0 => Fault::CutLeader,
                    1 => Fault::CutFollower,
                    _ => Fault::CutLeaderToFollower,
                });
            }
            if kind < 5 {
                self.blackholed = true;
                return Some(Fault::Blackhole { leader, late });
            }
        }
        if quorum {
            if self.known {
                choices.extend(up.iter().map(|id| Fault::Stop(*id)));
            }
            choices.push(Fault::StopLeader);
            choices.push(Fault::StopLeader);
            if live.len() > 1 && rng.chance(25) {
                choices.push(Fault::Abandon(rng.pick(&live)));
            }
        }
        if self.starts < 2 && count < MEMBERS as usize {
            if self.known {
                choices.extend(down.iter().map(|id| Fault::Start(*id)));
            }
            if down.len() > 1 || !self.known {
                choices.push(Fault::StartAll);
            }
        }
        if choices.is_empty() {
            return None;
        }
        let f = rng.pick(&choices);
        match f {
            Fault::Stop(id) => self.running[id as usize - 1] = false,
            Fault::Start(id) => {
                self.running[id as usize - 1] = true;
                self.starts += 1;
            }
            Fault::StartAll => {
                self.running = [true; MEMBERS as usize];
                self.known = true;
                self.starts += 1;
            }
            Fault::StopLeader => {
                // Only the count is known now: mark the last running member stopped.
                if let Some(last) = self.running.iter().rposition(|r| *r) {
                    self.running[last] = false;
                }
                self.known = false;
            }
            Fault::CutLeader | Fault::CutFollower | Fault::CutLeaderToFollower => self.cut = true,
            Fault::Blackhole { .. } => self.blackholed = true,
            Fault::Abandon(_) | Fault::Heal | Fault::ClearBlackhole => {}
        }
        Some(f)
    }
}

fn op_step(rng: &mut Rng, abandoned: &[bool; SESSIONS]) -> Step {
    let live: Vec<usize> = (0..SESSIONS).filter(|s| !abandoned[*s]).collect();
    let session = rng.pick(&live);
    // Mostly the top-level nodes, so writes and watches meet.
    let node = if rng.chance(75) {
        rng.below(3) as usize
    } else {
        3 + rng.below(2) as usize
    };
    let op = match rng.below(100) {
        0..=23 => Op::Create {
            node,
            ephemeral: rng.chance(40),
        },
        24..=47 => Op::SetData {
            node,
            data: rng.below(250) as u8 + 1,
        },
        48..=57 => Op::Delete { node },
        58..=72 => Op::Read {
            read: Read::Data,
            node,
            watch: rng.chance(90),
        },
        73..=83 => Op::Read {
            read: Read::Exists,
            node,
            watch: rng.chance(90),
        },
        84..=94 => Op::Read {
            read: Read::Children,
            node: rng.below(PARENTS.len() as u64) as usize,
            watch: rng.chance(90),
        },
        _ => Op::Sync,
    };
    Step::Op { session, op }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Op { session, op } => {
                write!(f, "s{session} ")?;
                match op {
                    Op::Create { node, ephemeral } => write!(
                        f,
                        "create{} ~/{}",
                        if *ephemeral { " -e" } else { "" },
                        NODES[*node]
                    ),
                    Op::SetData { node, data } => write!(f, "set ~/{} {data}", NODES[*node]),
                    Op::Delete { node } => write!(f, "delete ~/{}", NODES[*node]),
                    Op::Read { read, node, watch } => {
                        let (name, path) = match read {
                            Read::Data => ("get", NODES[*node]),
                            Read::Exists => ("exists", NODES[*node]),
                            Read::Children => ("ls", PARENTS[*node]),
                        };
                        let w = if *watch { " -w" } else { "" };
                        write!(f, "{name}{w} ~/{path}")
                    }
                    Op::Sync => write!(f, "sync ~"),
                }
            }
            Step::Fault(Fault::Stop(id)) => write!(f, "stop member {id}"),
            Step::Fault(Fault::StopLeader) => write!(f, "stop the leader"),
            Step::Fault(Fault::Start(id)) => write!(f, "start member {id}"),
            Step::Fault(Fault::StartAll) => write!(f, "start every stopped member"),
            Step::Fault(Fault::Abandon(s)) => write!(f, "s{s}'s client goes away"),
            Step::Fault(Fault::CutLeader) => write!(f, "cut the leader off"),
            Step::Fault(Fault::CutFollower) => write!(f, "cut the lowest follower off"),
            Step::Fault(Fault::CutLeaderToFollower) => {
                write!(f, "lose what the leader sends the lowest follower")
            }
            Step::Fault(Fault::Heal) => write!(f, "heal"),
            Step::Fault(Fault::Blackhole { leader, late }) => write!(
                f,
                "blackhole the {}'s clients, {}",
                if *leader { "leader" } else { "lowest follower" },
                if *late {
                    "sessions move after their timeout"
                } else {
                    "sessions move at once"
                }
            ),
            Step::Fault(Fault::ClearBlackhole) => write!(f, "end the blackhole"),
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.steps.iter().enumerate() {
            writeln!(f, "  {i:>2}: {s}")?;
        }
        Ok(())
    }
}
