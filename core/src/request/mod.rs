//! Request handling, one stage per file: `decode` (header, opcode and body, the read-only and
//! fault checks), `execute` (the request run against the tree), `txn` (write transactions) and
//! `frame` (reply frames in parts).

pub(crate) mod execute;
pub mod frame;
pub(crate) mod txn;

#[cfg(test)]
mod conformance_tests;
