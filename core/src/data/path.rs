//! Znode path rules (docs/protocol.md, "Paths"): validation and parent/child splitting.

/// Whether `path` is a valid znode path. A path of printable ASCII (the usual kind) is
/// checked a byte at a time without branching per byte; any other is checked character by
/// character.
pub fn is_valid(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    if path.len() == 1 {
        return true;
    }
    // A trailing `/` leaves an empty last component, refused here.
    if path[1..].split('/').any(|c| matches!(c, "" | "." | "..")) {
        return false;
    }
    let printable = path
        .bytes()
        .fold(true, |ok, b| ok & (b > 0x1f) & (b < 0x7f));
    printable || path.chars().all(|c| !is_forbidden_char(c))
}

/// Characters a path may not contain. Anything above U+FFFF is refused because the Java
/// server checks UTF-16 units and surrogates are forbidden.
fn is_forbidden_char(c: char) -> bool {
    let c = c as u32;
    c <= 0x1f
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

/// The literal parent of a path: everything before the last `/` (so `/a` gives the empty
/// string, which stands for the root). `None` when there is no `/`.
pub fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

/// The last component of a path.
pub fn name(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// Maps the empty-string alias of the root to `/`.
pub fn canonical(path: &str) -> &str {
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

/// Joins a parent path and a child name.
pub fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The path and every ancestor up to the root, innermost first.
pub fn with_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let cur = next?;
        next = if cur == "/" {
            None
        } else {
            parent(cur).map(canonical)
        };
        Some(cur)
    })
}

/// Paths that may never be deleted.
pub fn is_system(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_matches_the_reference_examples() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/a/...",
            "/a/.x",
            "/a-b_c",
            "/ü",
            "/\u{e000}x".replace('\u{e000}', "z").as_str(),
        ] {
            assert!(is_valid(ok), "{ok:?} should be valid");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/a/.",
            "/a/..",
            "/a\u{1}",
            "/a\0",
            "/\u{1F600}",
            "/\u{e000}",
            "/\u{fffd}",
            "/\u{7f}",
        ] {
            assert!(!is_valid(bad), "{bad:?} should be invalid");
        }
    }

    /// The rules spelled out one at a time, to check the fast version against.
    fn plainly_valid(path: &str) -> bool {
        if path == "/" {
            return true;
        }
        path.starts_with('/')
            && !path.ends_with('/')
            && path[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && path.chars().all(|c| !is_forbidden_char(c))
    }

    proptest::proptest! {
        #[test]
        fn fast_validation_agrees_with_the_rules(
            path in "/?([a./]|\\.\\.|\u{1}|\u{7f}|\u{85}|ü|\u{e000}|\u{fff5}|\u{1F600}){0,8}"
        ) {
            proptest::prop_assert_eq!(is_valid(&path), plainly_valid(&path), "{:?}", path);
        }
    }

    #[test]
    fn parent_and_ancestors() {
        assert_eq!(parent("/a"), Some(""));
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("a"), None);
        assert_eq!(name("/a/b"), "b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        let v: Vec<_> = with_ancestors("/a/b/c").collect();
        assert_eq!(v, ["/a/b/c", "/a/b", "/a", "/"]);
        assert_eq!(with_ancestors("/").collect::<Vec<_>>(), ["/"]);
    }
}
