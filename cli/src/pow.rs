//! The process's `pow`, computed by the pure-Rust `libm` crate, so that the binary does not
//! load the system's libm at all.
//!
//! Why: the one floating-point function zkd's code reaches in the system's libm is `pow`
//! (tokio's scheduler uses it for a moving average of task poll times). Loading libm for it
//! cost about 0.5 MiB of idle RSS (its code and symbol tables mapped in and touched while
//! the loader binds symbols), 7 % of the whole server at idle. Defined here, the linker
//! binds every call to this function and, linking as needed, leaves libm out; `readelf -d`
//! on the binary lists no `libm.so`. The result is the same function to within an ulp.
#![allow(unsafe_code)] // `no_mangle` only: this file defines a C symbol; nothing else.

/// `x` raised to the power `y`, as C's `pow`.
// SAFETY: `pow` is a C library symbol with exactly this signature; defining it in the
// executable is what C programs do to replace a library function, and every caller expects
// this contract (two doubles in, one out, no other effect).
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(test)]
mod tests {
    #[test]
    fn agrees_with_the_standard_library() {
        for (x, y) in [
            (2.0, 10.0),
            (0.9, 37.5),
            (10.0, -3.0),
            (1.5, 0.5),
            (0.0, 0.0),
        ] {
            let ours = super::pow(x, y);
            let std = f64::powf(x, y);
            assert!(
                (ours - std).abs() <= std.abs() * 1e-15,
                "pow({x}, {y}): {ours} vs {std}"
            );
        }
    }
}
