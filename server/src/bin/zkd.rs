//! The `zkd` binary: command-line flags over the zkd library.
fn main() {}
