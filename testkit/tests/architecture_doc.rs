//! docs/architecture.md names only what exists: every file path, every `module::item` and
//! every `Type::member` it quotes is looked up in the workspace's sources.
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

/// Every span in backticks of a Markdown text (code blocks are skipped).
fn spans(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
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
