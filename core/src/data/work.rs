//! A count of the elements the core copies or visits (node records, list entries, bytes of
//! encoded lists), kept only in the core's own unit tests: they check that every step's work
//! stays within a constant times its input and output. Outside those tests it costs nothing.

#[cfg(test)]
thread_local! {
    static DONE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` elements copied or visited.
#[inline]
pub(crate) fn add(n: usize) {
    #[cfg(test)]
    DONE.with(|d| d.set(d.get().saturating_add(n as u64)));
    #[cfg(not(test))]
    let _ = n;
}

/// The elements counted on this thread since the last call (and starts counting afresh).
#[cfg(test)]
pub(crate) fn take() -> u64 {
    DONE.with(|d| d.replace(0))
}
