//! The zoo.cfg file format: Java properties lines (`key=value`, `key: value` or
//! `key value`; `#` and `!` comments; a trailing backslash continues a line; backslash
//! escapes), read into [`Entry`]s that remember their line. Files are ISO-8859-1, as Java
//! reads them, and are parsed in linear time.

use std::collections::HashMap;

use super::{ConfigError, Entry, Note, Origin};

/// Reads every setting of `text`; `file` names it in messages. A line without a value is an
/// error; a key given twice is a warning (the later one wins, as in ZooKeeper).
pub fn read(file: &str, text: &str) -> Result<(Vec<Entry>, Vec<Note>), ConfigError> {
    // Entries in file order; a key given again empties its earlier slot (kept linear for
    // any number of repeats).
    let mut slots: Vec<Option<Entry>> = Vec::new();
    let mut notes = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, raw)) = lines.next() {
        let origin = Origin::Line {
            file: file.to_string(),
            line: index + 1,
        };
        let mut logical = raw.trim_start().to_string();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        // Trailing backslashes are counted once per physical line, so a long run of them
        // spread over many continuation lines stays linear.
        let mut trailing = trailing_backslashes(&logical);
        while trailing % 2 == 1 {
            logical.pop();
            trailing -= 1;
            match lines.next() {
                Some((_, next)) => {
                    let next = next.trim_start();
                    let own = trailing_backslashes(next);
                    trailing = if own == next.len() {
                        trailing + own
                    } else {
                        own
                    };
                    logical.push_str(next);
                }
                None => break,
            }
        }
        let (key, value) = split(&logical);
        let key = unescape(key);
        let value = unescape(value).trim().to_string();
        if key.is_empty() {
            return Err(ConfigError {
                origin,
                key: None,
                message: format!("the line {logical:?} has no key: expected key=value"),
            });
        }
        if value.is_empty() {
            return Err(ConfigError {
                origin,
                key: Some(key),
                message: "the line has no value: expected key=value".into(),
            });
        }
        if let Some(earlier) = seen.get(&key).and_then(|&at| slots[at].take()) {
            notes.push(
                Note::warn(format!(
                    "{origin}: key {key} was already set at {}; the later value is used, as \
                     ZooKeeper does",
                    earlier.origin
                ))
                .of_kind("keys set again"),
            );
        }
        seen.insert(key.clone(), slots.len());
        slots.push(Some(Entry { origin, key, value }));
    }
    Ok((slots.into_iter().flatten().collect(), notes))
}

/// How many backslashes `line` ends with.
fn trailing_backslashes(line: &str) -> usize {
    line.bytes().rev().take_while(|&b| b == b'\\').count()
}

/// Decodes a file's bytes as ISO-8859-1, as `java.util.Properties.load(InputStream)` does:
/// every byte is the character of the same number, so no byte sequence is refused.
pub fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// Splits a logical line at its first unescaped `=`, `:` or whitespace, as Java properties
/// do: whitespace around the separator belongs to neither side.
fn split(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], &line[i + 1..]),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).map_or(rest, str::trim_start);
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

/// Resolves Java properties escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX`, and `\x` for any
/// other `x` (so `\=`, `\:`, `\\` and `\ ` are the character itself).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String, usize)> {
        let (entries, _) = read("zoo.cfg", text).expect("valid file");
        entries
            .into_iter()
            .map(|e| match e.origin {
                Origin::Line { line, .. } => (e.key, e.value, line),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn separators_comments_and_blank_lines() {
        let text = "# comment\n! also a comment\n\ntickTime=2000\n  initLimit : 10 \n\
                    syncLimit 5\nserver.1=h:2888:3888;2181\nclientPortAddress = 127.0.0.1\n";
        assert_eq!(
            pairs(text),
            vec![
                ("tickTime".into(), "2000".into(), 4),
                ("initLimit".into(), "10".into(), 5),
                ("syncLimit".into(), "5".into(), 6),
                ("server.1".into(), "h:2888:3888;2181".into(), 7),
                ("clientPortAddress".into(), "127.0.0.1".into(), 8),
            ]
        );
    }

    #[test]
    fn continuation_and_escapes() {
        let text = "4lw.commands.whitelist=ruok,\\\n    srvr\ndataDir=C\\:\\\\zk\\u0041\n";
        assert_eq!(
            pairs(text),
            vec![
                ("4lw.commands.whitelist".into(), "ruok,srvr".into(), 1),
                ("dataDir".into(), "C:\\zkA".into(), 3),
            ]
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(
            pairs("a=x\\\\\nb=y\n"),
            vec![("a".into(), "x\\".into(), 1), ("b".into(), "y".into(), 2)]
        );
    }

    #[test]
    fn a_repeated_key_warns_and_the_later_value_wins() {
        let (entries, notes) = read("zoo.cfg", "tickTime=1\nclientPort=1\ntickTime=2\n").unwrap();
        let keys: Vec<_> = entries.iter().map(|e| (&*e.key, &*e.value)).collect();
        assert_eq!(keys, [("clientPort", "1"), ("tickTime", "2")]);
        assert_eq!(notes.len(), 1);
        assert_eq!(
            notes[0].text,
            "zoo.cfg line 3: key tickTime was already set at zoo.cfg line 1; the later value \
             is used, as ZooKeeper does"
        );
    }

    #[test]
    fn long_continuations_and_many_repeats_parse_in_linear_time() {
        // 240 000 lines of three backslashes: one logical line whose trailing run grows with
        // every physical line (re-counting it each time would be quadratic).
        let mut text = String::from("a=x");
        for _ in 0..240_000 {
            text.push_str("\\\\\\\n");
        }
        text.push_str("end\nb=y\n");
        let found = pairs(&text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1.len(), "x".len() + 240_000 + "end".len());
        assert_eq!(found[1], ("b".into(), "y".into(), 240_002));
        // The same key 100 000 times: the last wins.
        let text: String = (0..100_000).map(|i| format!("k={i}\n")).collect();
        let (entries, notes) = read("zoo.cfg", &text).expect("valid");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].value, "99999");
        assert_eq!(notes.len(), 99_999);
    }

    #[test]
    fn latin1_bytes_are_characters() {
        let text = latin1(b"# caf\xe9\ndataDir=/data/\xe9t\xe9\n");
        assert_eq!(
            pairs(&text),
            vec![("dataDir".into(), "/data/\u{e9}t\u{e9}".into(), 2)]
        );
    }

    #[test]
    fn malformed_lines_name_file_line_and_key() {
        let e = read("conf/zoo.cfg", "tickTime=2000\n\nclientPort\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "conf/zoo.cfg line 3: key clientPort: the line has no value: expected key=value"
        );
        let e = read("zoo.cfg", "tickTime=\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("tickTime"));
        let e = read("zoo.cfg", "=2000\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "zoo.cfg line 1: the line \"=2000\" has no key: expected key=value"
        );
    }
}
