//! The pages a newcomer reads say only what is so. docs/architecture.md names only what
//! exists (every file path, `module::item` and `Type::member` it quotes is looked up in the
//! workspace's sources) and its hop lists follow the calls in the order the code makes them;
//! every relative link of README.md, docs/*.md and the crates' READMEs points at a file and
//! heading that exist; README.md is a short landing page with its commands and downloads on
//! its first screen.
//!
//! What is checked, for each span in backticks:
//! - a path with a `/` or a file name ending in `.rs`, `.sh`, `.py`, `.md` or `.toml`: a path
//!   with a `/` must exist relative to the repository root; a bare file name must exist
//!   somewhere in the repository;
//! - a crate name `zkd-…`: some Cargo.toml declares that package;
//! - a Rust path `a::b` (arguments in parentheses are dropped): when `a` is a type (CamelCase),
//!   `b` is a method, field or variant inside one of `a`'s own blocks (`struct`, `enum`,
//!   `trait`, `impl`); when `a` is a module, `b` is defined in that module's file or folder (a
//!   function, type, constant, macro or submodule). `std::` paths are not looked up.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: two levels above this crate's manifest (`testkit/`).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit has a parent folder")
        .to_path_buf()
}

/// Every file below `dir`, skipping build output, version control and installed packages.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if matches!(
            name.as_str(),
            "target" | ".git" | "node_modules" | "bench-results"
        ) || name.starts_with(".venv")
        {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// One Rust source file: its path relative to the root and its text.
struct Source {
    rel: String,
    text: String,
}

struct Workspace {
    root: PathBuf,
    files: Vec<String>,
    sources: Vec<Source>,
    packages: Vec<String>,
}

impl Workspace {
    fn load(root: &Path) -> Workspace {
        let mut all = Vec::new();
        walk(root, &mut all);
        let rel = |p: &Path| {
            p.strip_prefix(root)
                .unwrap_or(p)
                .to_string_lossy()
                .replace('\\', "/")
        };
        let mut sources = Vec::new();
        let mut packages = Vec::new();
        for path in &all {
            if path.extension().is_some_and(|e| e == "rs") {
                if let Ok(text) = fs::read_to_string(path) {
                    sources.push(Source {
                        rel: rel(path),
                        text,
                    });
                }
            } else if path.file_name().is_some_and(|n| n == "Cargo.toml") {
                let text = fs::read_to_string(path).unwrap_or_default();
                for line in text.lines() {
                    if let Some(name) = line.trim().strip_prefix("name = \"") {
                        packages.push(name.trim_end_matches('"').to_string());
                    }
                }
            }
        }
        Workspace {
            root: root.to_path_buf(),
            files: all.iter().map(|p| rel(p)).collect(),
            sources,
            packages,
        }
    }

    /// Sources whose file is the module `name` (`name.rs`, `name/mod.rs`, a crate whose lib is
    /// `name`) or lies in its folder.
    fn module_sources(&self, name: &str) -> Vec<&Source> {
        let crate_dir = self.crate_dir_of_lib(name);
        self.sources
            .iter()
            .filter(|s| {
                let rooted = format!("/{}", s.rel);
                let r = rooted.as_str();
                r.ends_with(&format!("/{name}.rs"))
                    || r.contains(&format!("/{name}/"))
                    || crate_dir
                        .as_deref()
                        .is_some_and(|d| r.starts_with(&format!("/{d}/src/")))
            })
            .collect()
    }

    /// The folder of the crate whose library is called `lib` (`zkd_core` → `core`).
    fn crate_dir_of_lib(&self, lib: &str) -> Option<String> {
        let package = lib.replace('_', "-");
        self.files
            .iter()
            .filter(|f| f.ends_with("Cargo.toml"))
            .find(|f| {
                fs::read_to_string(self.root.join(f)).is_ok_and(|t| {
                    t.lines()
                        .any(|l| l.trim() == format!("name = \"{package}\""))
                })
            })
            .map(|f| {
                f.trim_end_matches("Cargo.toml")
                    .trim_end_matches('/')
                    .to_string()
            })
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

fn is_type_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().any(|c| c.is_ascii_lowercase())
}

/// Whether a line (trimmed) defines `name` as an item of a module.
fn defines_item(line: &str, name: &str) -> bool {
    let line = line
        .trim_start_matches("pub(crate) ")
        .trim_start_matches("pub(super) ")
        .trim_start_matches("pub ");
    let line = line
        .trim_start_matches("async ")
        .trim_start_matches("const fn ")
        .trim_start_matches("unsafe ");
    for kw in [
        "fn ", "struct ", "enum ", "trait ", "type ", "mod ", "const ", "static ", "use ",
    ] {
        if let Some(rest) = line.strip_prefix(kw) {
            if kw == "use " {
                // A re-export: `pub use a::b::{c, name};` or `pub use a::name;`.
                return rest
                    .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .any(|w| w == name);
            }
            return starts_with_word(rest, name);
        }
    }
    line.strip_prefix("macro_rules! ")
        .is_some_and(|rest| starts_with_word(rest, name))
}

fn starts_with_word(text: &str, word: &str) -> bool {
    text.strip_prefix(word)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
}

/// The blocks (as line ranges of one file) that belong to type `ty`: its definition and its
/// `impl` blocks, each up to the closing brace at the opening line's indentation.
fn type_blocks<'a>(text: &'a str, ty: &str) -> Vec<Vec<&'a str>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let bare = trimmed
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        let opens = ["struct ", "enum ", "trait "].iter().any(|kw| {
            bare.strip_prefix(kw)
                .is_some_and(|r| starts_with_word(r, ty))
        }) || (bare.starts_with("impl") && impl_target(bare) == Some(ty));
        if !opens {
            continue;
        }
        let mut block = vec![*line];
        if trimmed.ends_with(';') {
            blocks.push(block);
            continue;
        }
        for next in &lines[i + 1..] {
            block.push(next);
            let t = next.trim_start();
            if next.len() - t.len() == indent && t.starts_with('}') {
                break;
            }
        }
        blocks.push(block);
    }
    blocks
}

/// The type an `impl` line is for: `impl<T> Trait for Type<T> {` → `Type`.
fn impl_target(line: &str) -> Option<&str> {
    let head = line.split('{').next()?.trim();
    let head = head.split(" where ").next()?;
    let after = match head.rfind(" for ") {
        Some(i) => &head[i + 5..],
        None => {
            let rest = head.strip_prefix("impl")?;
            // Skip the impl's own generic parameters.
            let rest = rest.trim_start();
            if let Some(stripped) = rest.strip_prefix('<') {
                let mut depth = 1;
                let mut end = 0;
                for (i, c) in stripped.char_indices() {
                    match c {
                        '<' => depth += 1,
                        '>' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                &stripped[end..]
            } else {
                rest
            }
        }
    };
    let name = after.trim().trim_start_matches("dyn ");
    let name = name.rsplit("::").next()?;
    name.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
}

/// Whether `member` is a method, field or variant of type `ty` somewhere in the workspace.
fn type_has_member(ws: &Workspace, ty: &str, member: &str) -> bool {
    ws.sources.iter().any(|s| {
        type_blocks(&s.text, ty).iter().any(|block| {
            block.iter().skip(1).any(|line| {
                let t = line
                    .trim_start()
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub ");
                let t = t.trim_start_matches("async ").trim_start_matches("const ");
                t.strip_prefix("fn ")
                    .is_some_and(|r| starts_with_word(r, member))
                    || t.strip_prefix("type ")
                        .is_some_and(|r| starts_with_word(r, member))
                    || (starts_with_word(t, member)
                        && t[member.len()..]
                            .trim_start()
                            .starts_with([':', ',', '(', '{', '=']))
            })
        })
    })
}

/// Whether module `module` (a file, folder or crate) defines `item`.
fn module_has_item(ws: &Workspace, module: &str, item: &str) -> bool {
    let sources = ws.module_sources(module);
    if sources.is_empty() {
        return false;
    }
    sources.iter().any(|s| {
        s.rel.ends_with(&format!("/{module}/{item}.rs"))
            || s.rel.contains(&format!("/{module}/{item}/"))
            || s.text.lines().any(|l| defines_item(l.trim_start(), item))
    })
}

/// Checks one backticked span; `Err` says what is missing.
fn check_span(ws: &Workspace, span: &str) -> Result<bool, String> {
    let span = span.trim();
    let file_like = [".rs", ".sh", ".py", ".md", ".toml"]
        .iter()
        .any(|e| span.ends_with(e));
    let path_chars = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
    };
    if path_chars(span) && (span.contains('/') || file_like) && !span.starts_with('/') {
        if span.contains('/') {
            let trimmed = span.trim_end_matches('/');
            return if ws.root.join(trimmed).exists() {
                Ok(true)
            } else {
                Err(format!("path `{span}` does not exist"))
            };
        }
        return if ws.files.iter().any(|f| f.rsplit('/').next() == Some(span)) {
            Ok(true)
        } else {
            Err(format!("no file is named `{span}`"))
        };
    }
    if span.starts_with("zkd-") && is_ident(&span.replace('-', "_")) {
        return if ws.packages.iter().any(|p| p == span) {
            Ok(true)
        } else {
            Err(format!("no crate is named `{span}`"))
        };
    }
    let path = span.split('(').next().unwrap_or(span).trim();
    if !path.contains("::") || path.starts_with("std::") {
        return Ok(false);
    }
    let segments: Vec<&str> = path.split("::").collect();
    if !segments.iter().all(|s| is_ident(s)) {
        return Ok(false);
    }
    let (parent, last) = (segments[segments.len() - 2], segments[segments.len() - 1]);
    let found = if is_type_name(parent) {
        type_has_member(ws, parent, last)
    } else {
        module_has_item(ws, parent, last)
    };
    if found {
        Ok(true)
    } else {
        Err(format!("`{span}`: `{parent}` has no `{last}`"))
    }
}

/// The lines of a Markdown text outside its fenced code blocks.
fn prose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut in_block = false;
    markdown.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            return false;
        }
        !in_block
    })
}

/// Every span in backticks of a Markdown text (code blocks are skipped).
fn spans(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(markdown) {
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push(inside.to_string());
        }
    }
    out
}

/// The problems of a document: one line per name that does not exist, and how many were checked.
fn problems(ws: &Workspace, markdown: &str) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut checked = 0;
    for span in spans(markdown) {
        match check_span(ws, &span) {
            Ok(true) => checked += 1,
            Ok(false) => {}
            Err(e) => bad.push(e),
        }
    }
    (bad, checked)
}

#[test]
fn every_name_in_the_architecture_notes_exists() {
    let root = repo_root();
    let ws = Workspace::load(&root);
    let doc = fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let (bad, checked) = problems(&ws, &doc);
    println!("{checked} names checked");
    assert!(checked >= 40, "only {checked} names were checked");
    assert!(
        bad.is_empty(),
        "docs/architecture.md names what does not exist:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_refuses_names_that_do_not_exist() {
    let root = repo_root();
    let ws = Workspace::load(&root);
    let doc = "A made-up file `server/src/no_such_file.rs`, a made-up method \
               `Server::no_such_method`, a module item `net::no_such_item`, a crate \
               `zkd-nothing`, and real ones: `Server::start`, `Config::admin_port`, \
               `protocol/src/`, `zkd-protocol`.";
    let (bad, checked) = problems(&ws, doc);
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert_eq!(checked, 4);
}

// ---------------------------------------------------------------------------------------------
// Links: every relative link of the Markdown pages points at a file that exists, and an
// anchor, when given, at one of that file's headings.

/// The anchor GitHub gives a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown text's headings (code blocks skipped; a repeated heading gets
/// `-1`, `-2`, … as on GitHub).
fn anchors(markdown: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#');
        if !text.starts_with(' ') {
            continue;
        }
        let base = slug(text);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.push(anchor);
    }
    out
}

/// The targets of a Markdown text's links and images, outside code blocks and code spans.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(markdown) {
        // Drop code spans: every other piece between backticks.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

/// `a/b/../c` → `a/c`; `None` when the path climbs above the root.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The broken links of the Markdown file `rel` (relative to the root) whose text is `markdown`;
/// `read` gives another file's text by its path relative to the root (`None`: no such file).
fn link_problems(rel: &str, markdown: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    let mut bad = Vec::new();
    for target in link_targets(markdown) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let (file, text) = if path.is_empty() {
            (rel.to_string(), Some(markdown.to_string()))
        } else {
            let Some(file) = normalize(&format!("{dir}/{path}")) else {
                bad.push(format!("{rel}: link `{target}` leaves the repository"));
                continue;
            };
            let text = read(&file);
            (file, text)
        };
        let Some(text) = text else {
            bad.push(format!("{rel}: link `{target}`: no file `{file}`"));
            continue;
        };
        if let Some(anchor) = anchor {
            if file.ends_with(".md") && !anchors(&text).iter().any(|a| a == anchor) {
                bad.push(format!(
                    "{rel}: link `{target}`: `{file}` has no heading `#{anchor}`"
                ));
            }
        }
    }
    bad
}

/// Reads a Markdown file of the repository by its relative path; anything else that exists
/// reads as empty.
fn read_in(root: &Path) -> impl Fn(&str) -> Option<String> + '_ {
    move |rel: &str| {
        let path = root.join(rel);
        if !path.exists() {
            None
        } else if rel.ends_with(".md") {
            fs::read_to_string(path).ok()
        } else {
            // A folder, an image: its existence is what counts.
            Some(String::new())
        }
    }
}

#[test]
fn every_relative_link_of_the_guides_points_at_what_exists() {
    let root = repo_root();
    let ws = Workspace::load(&root);
    let read = read_in(&root);
    let pages: Vec<&String> = ws
        .files
        .iter()
        .filter(|f| {
            f.ends_with(".md")
                && (!f.contains('/') || f.starts_with("docs/") || f.ends_with("/README.md"))
        })
        .collect();
    assert!(pages.iter().any(|p| *p == "README.md"));
    assert!(pages.len() >= 12, "only {} pages found", pages.len());
    let mut bad = Vec::new();
    let mut links = 0;
    for page in &pages {
        let text = fs::read_to_string(root.join(page)).expect("a page");
        links += link_targets(&text).len();
        bad.extend(link_problems(page, &text, &read));
    }
    println!("{} pages, {links} links checked", pages.len());
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_link_check_refuses_missing_files_and_headings() {
    let root = repo_root();
    let read = read_in(&root);
    let page =
        "A [guide](docs/no-such-guide.md), a [heading](docs/persistence.md#no-such-heading), \
                a [local one](#nowhere), a `[code span](not/checked.md)`, and good ones: \
                [persistence](docs/persistence.md#sync-policy---fsync), [here](#a-heading), \
                [web](https://example.org/x.md), [a folder](server/).\n\n## A heading\n";
    let bad = link_problems("README.md", page, &read);
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(
        bad[0].contains("no file `docs/no-such-guide.md`"),
        "{bad:?}"
    );
    assert!(bad[1].contains("no heading `#no-such-heading`"), "{bad:?}");
    assert!(bad[2].contains("`#nowhere`"), "{bad:?}");
    assert_eq!(
        anchors("# A\n## Sync policy (`--fsync`)\n## A\n```\n# not a heading\n```\n"),
        ["a", "sync-policy---fsync", "a-1"]
    );
}

// ---------------------------------------------------------------------------------------------
// The README's first screen.

/// The README's run and test commands, kept byte for byte (CI and scripts/test.sh rely on
/// the test command).
const RUN_COMMAND: &str = "```sh\ncargo run --release -p zkd -- --port 2181\n```";
const TEST_COMMAND: &str = "```sh\nscripts/test.sh\n```";
/// What the three downloads are called (the binary's tarball, the wheel, the jar).
const DOWNLOADS: [&str; 3] = ["-x86_64-linux.tar.gz", ".whl", "zkd-testing-"];

/// What is wrong with a README as a landing page.
fn landing_problems(readme: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let lines = readme.lines().count();
    if lines > 260 {
        bad.push(format!(
            "README.md has {lines} lines; a landing page has at most 260"
        ));
    }
    let first: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    for (what, needle) in [
        ("the run command", RUN_COMMAND),
        ("the test command", TEST_COMMAND),
    ]
    .into_iter()
    .chain(DOWNLOADS.iter().map(|d| ("a download", *d)))
    {
        if !first.contains(needle) {
            bad.push(format!("the first 40 lines lack {what} ({needle:?})"));
        }
    }
    bad
}

#[test]
fn the_readme_is_a_landing_page_with_commands_and_downloads_first() {
    let root = repo_root();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let bad = landing_problems(&readme);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_landing_check_refuses_a_long_readme_and_a_late_command() {
    let good = fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let late = format!("{}{good}", "padding\n".repeat(40));
    let bad = landing_problems(&late);
    assert_eq!(bad.len(), 5, "{bad:?}");
    let long = format!("{good}{}", "more\n".repeat(300));
    assert_eq!(landing_problems(&long).len(), 1);
    let edited = good.replace("--port 2181\n```", "--port 2182\n```");
    assert!(landing_problems(&edited)[0].contains("run command"));
}

// ---------------------------------------------------------------------------------------------
// The hop lists: each hop's function is defined in the hop's file, and the functions are
// called in the order of the list. For consecutive hops N and N+1, the function of hop N
// calls that of hop N+1 (directly or through functions it calls), or an earlier hop's
// function calls hop N's function (or one that does) on a line before one that calls hop
// N+1's: a return to the caller, which goes on with the next hop. Calls are found by name in
// the text of the bodies (a `self.f(`, `x.f(`, `T::f(` or `f(`), so a call is recognised
// whatever the receiver's type, but it must come in the right place in the right body.

/// One function of the sources: where it is, the type whose `impl` it is in, its body.
struct FnDef {
    file: String,
    ty: Option<String>,
    name: String,
    body: Vec<String>,
}

/// Every function of the non-test sources, with its body's lines (signature first).
fn functions(ws: &Workspace) -> Vec<FnDef> {
    let mut out = Vec::new();
    for s in &ws.sources {
        if s.rel.contains("/tests/") || s.rel.ends_with("tests.rs") || s.rel.starts_with("fuzz/") {
            continue;
        }
        let lines: Vec<&str> = s.text.lines().collect();
        let mut impls: Vec<(usize, String)> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            // A test module written inline ends what is indexed of the file.
            let inline_tests = lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("mod ") && next.ends_with('{'));
            if indent == 0 && trimmed.starts_with("#[cfg(test)]") && inline_tests {
                break;
            }
            impls.retain(|(at, _)| *at < indent || (*at == indent && !trimmed.starts_with('}')));
            if trimmed.starts_with("impl") && trimmed.ends_with('{') {
                if let Some(ty) = impl_target(trimmed) {
                    impls.push((indent, ty.to_string()));
                }
                continue;
            }
            let bare = trimmed
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .trim_start_matches("async ")
                .trim_start_matches("const ")
                .trim_start_matches("unsafe ");
            let Some(rest) = bare.strip_prefix("fn ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let mut body = vec![line.to_string()];
            if !trimmed.ends_with(';') {
                for next in &lines[i + 1..] {
                    body.push(next.to_string());
                    let t = next.trim_start();
                    if next.len() - t.len() == indent && t.starts_with('}') {
                        break;
                    }
                }
            }
            let ty = impls
                .last()
                .filter(|(at, _)| *at < indent)
                .map(|(_, t)| t.clone());
            out.push(FnDef {
                file: s.rel.clone(),
                ty,
                name,
                body,
            });
        }
    }
    out
}

/// A call found in a line: the name called and what stood before it.
struct Call {
    name: String,
    on_self: bool,
    qualifier: Option<String>,
    /// The variable or accessor a method is called on (`shared` in `self.shared().f(`).
    receiver: Option<String>,
}

/// The calls of one line of code (comments skipped).
fn calls(line: &str) -> Vec<Call> {
    let code = line.split("//").next().unwrap_or("");
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let name = &code[start..i];
            let turbofish = code[i..].starts_with("::<");
            if !(code[i..].starts_with('(') || turbofish) {
                continue;
            }
            let before = &code[..start];
            let on_self = before.ends_with("self.") || before.ends_with("Self::");
            let qualifier = before.strip_suffix("::").map(|b| {
                b.rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
                    .to_string()
            });
            let receiver = before.strip_suffix('.').map(|b| {
                b.trim_end_matches("()")
                    .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
                    .to_string()
            });
            out.push(Call {
                name: name.to_string(),
                on_self,
                qualifier,
                receiver,
            });
        } else {
            i += 1;
        }
    }
    out
}

/// A hop's function: `Type::method` or `module::function`.
#[derive(Clone, Debug, PartialEq)]
struct Target {
    owner: String,
    name: String,
}

impl Target {
    fn parse(span: &str) -> Option<Target> {
        let (owner, name) = span.trim().trim_end_matches("()").rsplit_once("::")?;
        let owner = owner.rsplit("::").next()?;
        (is_ident(owner) && is_ident(name)).then(|| Target {
            owner: owner.to_string(),
            name: name.to_string(),
        })
    }

    /// Whether `call`, made in a function of type `caller` (if any), may be a call of this
    /// target: the name matches, a path names the owner, `self.f(` is in the owner's own
    /// code, and a method called on an expression's result (`Pin::new(x).f(`) is not counted.
    fn matches(&self, call: &Call, caller: Option<&str>) -> bool {
        call.name == self.name
            && call
                .qualifier
                .as_deref()
                .is_none_or(|q| q == self.owner || q == "Self" || q.is_empty())
            && (!call.on_self || !is_type_name(&self.owner) || caller == Some(self.owner.as_str()))
            && call.receiver.as_deref() != Some("")
    }

    fn text(&self) -> String {
        format!("{}::{}", self.owner, self.name)
    }
}

struct Calls<'a> {
    ws: &'a Workspace,
    defs: Vec<FnDef>,
    by_name: HashMap<String, Vec<usize>>,
    /// Whether a function reaches a target, once known.
    reach: RefCell<HashMap<(usize, String), bool>>,
}

impl<'a> Calls<'a> {
    fn new(ws: &'a Workspace) -> Calls<'a> {
        let defs = functions(ws);
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, d) in defs.iter().enumerate() {
            by_name.entry(d.name.clone()).or_default().push(i);
        }
        Calls {
            ws,
            defs,
            by_name,
            reach: RefCell::new(HashMap::new()),
        }
    }

    /// The definitions of a hop's function.
    fn defs_of(&self, t: &Target) -> Vec<usize> {
        let in_module: Vec<String> = if is_type_name(&t.owner) {
            Vec::new()
        } else {
            self.ws
                .module_sources(&t.owner)
                .iter()
                .map(|s| s.rel.clone())
                .collect()
        };
        self.by_name
            .get(&t.name)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| {
                let d = &self.defs[i];
                d.ty.as_deref() == Some(t.owner.as_str()) || in_module.contains(&d.file)
            })
            .collect()
    }

    /// The functions a call in `from` may run: a method of the same type for `self.f(`,
    /// otherwise every function of that name when there are at most two (a name defined in
    /// many places, such as `new` or `get`, is not followed).
    fn callees(&self, from: usize, call: &Call) -> Vec<usize> {
        // Methods of the standard traits (a future's `poll`, `fmt`, `drop`, …) may be any
        // type's: such a call is not followed unless made on `self`.
        if !call.on_self && STD_TRAIT_METHODS.contains(&call.name.as_str()) {
            return Vec::new();
        }
        let named = self.by_name.get(&call.name).cloned().unwrap_or_default();
        if call.on_self {
            let ty = self.defs[from].ty.as_deref();
            let same: Vec<usize> = named
                .iter()
                .copied()
                .filter(|&i| ty.is_some() && self.defs[i].ty.as_deref() == ty)
                .collect();
            if !same.is_empty() {
                return same;
            }
        }
        // `shared.f(` or `self.shared().f(`: the method of the type named like the receiver.
        if let Some(r) = call.receiver.as_deref().filter(|r| !r.is_empty()) {
            let typed: Vec<usize> = named
                .iter()
                .copied()
                .filter(|&i| {
                    self.defs[i]
                        .ty
                        .as_deref()
                        .is_some_and(|ty| ty.to_lowercase() == r.replace('_', ""))
                })
                .collect();
            if !typed.is_empty() {
                return typed;
            }
        }
        if named.len() <= 2 {
            named
        } else {
            Vec::new()
        }
    }

    /// Whether a line of function `f` calls `t`, or a function that does.
    fn line_reaches(&self, f: usize, line: &str, t: &Target) -> bool {
        calls(line).iter().any(|call| {
            t.matches(call, self.defs[f].ty.as_deref())
                || self
                    .callees(f, call)
                    .into_iter()
                    .any(|g| g != f && self.reaches(g, t))
        })
    }

    /// Whether function `f` calls `t`, or a function that does.
    fn reaches(&self, f: usize, t: &Target) -> bool {
        let key = (f, t.text());
        if let Some(&known) = self.reach.borrow().get(&key) {
            return known;
        }
        let yes = self.search(f, t, &mut vec![f]);
        self.reach.borrow_mut().insert(key, yes);
        yes
    }

    /// A depth-first search of the calls below `g` for `t`, each function looked at once.
    fn search(&self, g: usize, t: &Target, visited: &mut Vec<usize>) -> bool {
        for line in self.defs[g].body.iter().skip(1) {
            for call in calls(line) {
                if t.matches(&call, self.defs[g].ty.as_deref()) {
                    return true;
                }
                for h in self.callees(g, &call) {
                    let known = self.reach.borrow().get(&(h, t.text())).copied();
                    match known {
                        Some(true) => return true,
                        Some(false) => {}
                        None => {
                            if !visited.contains(&h) {
                                visited.push(h);
                                if self.search(h, t, visited) {
                                    return true;
                                }
                            }
                        }
                    }
                }
            }
        }
        false
    }

    /// The first line of `f`'s body (after its signature) that reaches `t`.
    fn first_line(&self, f: usize, t: &Target) -> Option<usize> {
        self.defs[f]
            .body
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, line)| self.line_reaches(f, line, t))
            .map(|(i, _)| i)
    }

    /// Whether function `f` first reaches `a` and later `b`: the first line that reaches `b`
    /// comes after the first that reaches `a`, or is the same line and one of its calls does
    /// the same.
    fn precedes(&self, f: usize, a: &Target, b: &Target, depth: usize) -> bool {
        let (Some(i), Some(j)) = (self.first_line(f, a), self.first_line(f, b)) else {
            return false;
        };
        if j != i {
            return j > i;
        }
        depth > 0
            && calls(&self.defs[f].body[i]).iter().any(|call| {
                self.callees(f, call)
                    .into_iter()
                    .any(|g| g != f && self.precedes(g, a, b, depth - 1))
            })
    }
}

/// Names of standard trait methods, which a call on another value is not taken to mean.
const STD_TRAIT_METHODS: [&str; 14] = [
    "poll", "next", "fmt", "drop", "clone", "from", "into", "deref", "eq", "hash", "call", "read",
    "write", "flush",
];

/// How deep `Calls::precedes` looks into a line that reaches both hops.
const DEPTH: usize = 12;

/// One hop of a list: its name, the files it names and its function.
#[derive(Clone, Debug)]
struct Hop {
    hop: String,
    files: Vec<String>,
    function: Target,
}

/// The hop lists of a page: every table whose header has `hop`, `file` and `function`; a row
/// whose file is "as above" stands for the first list's hops up to its own.
fn hop_lists(markdown: &str) -> Result<Vec<Vec<Hop>>, String> {
    let mut lists: Vec<Vec<Hop>> = Vec::new();
    let mut current: Option<Vec<Hop>> = None;
    for line in markdown.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            if let Some(list) = current.take() {
                lists.push(list);
            }
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() >= 3 && cells[..3] == ["hop", "file", "function"] {
            current = Some(Vec::new());
            continue;
        }
        let Some(list) = current.as_mut() else {
            continue;
        };
        if cells.len() < 3 || cells[0].starts_with("---") {
            continue;
        }
        let function = Target::parse(cells[2].trim_matches('`'))
            .ok_or_else(|| format!("hop {}: `{}` is not a function", cells[0], cells[2]))?;
        if cells[1] == "as above" {
            let first = lists.first().ok_or("an \"as above\" row before any list")?;
            let upto: usize = cells[0]
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("hop {}: no range", cells[0]))?;
            list.extend(first.iter().take(upto).cloned());
            list.push(Hop {
                hop: cells[0].to_string(),
                files: Vec::new(),
                function,
            });
            continue;
        }
        let files = cells[1]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        list.push(Hop {
            hop: cells[0].to_string(),
            files,
            function,
        });
    }
    if let Some(list) = current {
        lists.push(list);
    }
    Ok(lists)
}

/// What is wrong with a hop list: a function not in its hop's files, or a hop not called after
/// the one before it.
fn hop_problems(c: &Calls, hops: &[Hop]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut defs = Vec::new();
    for h in hops {
        let found = c.defs_of(&h.function);
        let in_files: Vec<usize> = found
            .iter()
            .copied()
            .filter(|&i| h.files.is_empty() || h.files.contains(&c.defs[i].file))
            .collect();
        if in_files.is_empty() {
            bad.push(format!(
                "hop {}: `{}` is not defined in {:?} (found in {:?})",
                h.hop,
                h.function.text(),
                h.files,
                found.iter().map(|&i| &c.defs[i].file).collect::<Vec<_>>()
            ));
        }
        defs.push(in_files);
    }
    if !bad.is_empty() {
        return bad;
    }
    for n in 0..hops.len().saturating_sub(1) {
        let (a, b) = (&hops[n].function, &hops[n + 1].function);
        let calls_next = defs[n].iter().any(|&f| c.reaches(f, b));
        let returns_to_caller = (0..n)
            .rev()
            .any(|m| defs[m].iter().any(|&f| c.precedes(f, a, b, DEPTH)));
        if !calls_next && !returns_to_caller {
            bad.push(format!(
                "hop {} (`{}`) does not follow hop {} (`{}`): neither it nor an earlier hop's \
                 function calls it after the other",
                hops[n + 1].hop,
                b.text(),
                hops[n].hop,
                a.text()
            ));
        }
    }
    bad
}

#[test]
fn the_hops_of_the_request_paths_are_called_in_their_order() {
    let root = repo_root();
    let ws = Workspace::load(&root);
    let c = Calls::new(&ws);
    let doc = fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let lists = hop_lists(&doc).expect("the hop tables");
    assert_eq!(lists.len(), 2, "a getData path and a setData path");
    assert!(lists.iter().all(|l| l.len() >= 8), "{lists:?}");
    let bad: Vec<String> = lists.iter().flat_map(|l| hop_problems(&c, l)).collect();
    assert!(bad.is_empty(), "docs/architecture.md:\n{}", bad.join("\n"));
}

#[test]
fn the_hop_check_refuses_wrong_files_and_wrong_orders() {
    let root = repo_root();
    let ws = Workspace::load(&root);
    let c = Calls::new(&ws);
    // The problems the check finds in a hop table of these rows.
    let problems = |rows: &str| {
        let doc = format!("| hop | file | function | what |\n|---|---|---|---|\n{rows}");
        hop_problems(&c, &hop_lists(&doc).expect("a table").remove(0))
    };
    // The one problem it finds in them.
    let problem = |rows: &str| {
        let mut bad = problems(rows);
        assert_eq!(bad.len(), 1, "{bad:?}");
        bad.remove(0)
    };
    // The order as the code has it passes: decode calls route, which calls execute; decode
    // sends the reply after route returns.
    let good = problems(
        "| 1 | `core/src/decode.rs` | `Core::decode` | |\n\
         | 2 | `core/src/ensemble/lag.rs` | `Core::route` | |\n\
         | 3 | `core/src/request/execute.rs` | `Core::execute` | |\n\
         | 4 | `core/src/lib.rs` | `Core::send` | |\n",
    );
    assert_eq!(good, Vec::<String>::new());
    // The reply placed in execute.rs: `Core::send` is not defined there.
    let bad = problem(
        "| 1 | `core/src/request/execute.rs` | `Core::execute` | |\n\
         | 2 | `core/src/request/execute.rs` | `Core::send` | |\n",
    );
    assert!(bad.contains("not defined in"), "{bad}");
    // Writing placed before feeding: the connection's task feeds what it read (through
    // `Conn::poll_read`) on a line before the one that writes, and writing feeds nothing.
    let bad = problem(
        "| 1 | `server/src/net/conn.rs` | `Conn::poll_serve` | |\n\
         | 2 | `server/src/net/conn.rs` | `Conn::poll_write` | |\n\
         | 3 | `server/src/engine/mod.rs` | `Shared::requests` | |\n",
    );
    assert!(
        bad.contains("hop 3 (`Shared::requests`) does not follow hop 2"),
        "{bad}"
    );
    // A write logged before its checks: execute decides the setData on an earlier line than
    // it commits (and so publishes) it, so the log cannot come first.
    let bad = problem(
        "| 1 | `core/src/request/execute.rs` | `Core::execute` | |\n\
         | 2 | `core/src/durability/txn_record.rs` | `Core::publish` | |\n\
         | 3 | `core/src/request/txn.rs` | `Core::decide_set_data` | |\n",
    );
    assert!(bad.contains("`Core::decide_set_data`"), "{bad}");
}
