//! Link options of the `zkd` binary (not of the libraries, tests or build tools).
//!
//! `-z pack-relative-relocs` stores the binary's pointer fix-ups (about 7 900 of them) as a
//! compact bitmap instead of a 24-byte record each, so the loader reads a few KiB at start
//! instead of about 190 KiB: less of the file resident while the server idles. The C library
//! must be able to load such a binary (glibc 2.36 or later): the linker records that need in
//! the binary, so an older one refuses to start it with a clear message rather than
//! misbehaving.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
}
