//! Comparing a running figure the state keeps (a count, a table of counts) with the same
//! figure counted again from the state, for the invariant checks.

/// `Ok` when a running figure the state keeps equals the one just counted from the state;
/// else names the figure (`what`) and gives both values.
pub(crate) fn kept_as_counted<T: PartialEq + std::fmt::Debug>(
    what: &str,
    kept: &T,
    counted: &T,
) -> Result<(), String> {
    if kept == counted {
        Ok(())
    } else {
        Err(format!("{what}: kept {kept:?}, counted {counted:?}"))
    }
}
