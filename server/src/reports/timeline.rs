//! The history's timeline page: one self-contained HTML file (no external assets) that draws
//! history events on a shared time axis, a lane per session and per member, with the recipe
//! checks' findings marked. Served live on the admin listener (it then reads
//! `/zkd/history`), or written with the events embedded, to open from a file.

use serde_json::Value;

use super::recipe_checks::{self, Finding};
use crate::engine::history::{HistoryFilter, MAX_READ};
use crate::engine::{CoreFailed, Shared};

/// The page; without embedded events it reads them from the admin listener it came from.
pub const PAGE: &str = include_str!("../admin/web/timeline.html");

/// Where the embedded events go.
const SLOT: &str = "<!--ZKD-EMBEDDED-->";

/// JSON made safe inside a `<script>` element: `<` occurs in JSON only inside strings, where
/// `\u003c` means the same, so no path or address can end the element or open a comment.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// The page with `jsonl` (history events as JSON Lines), the `findings` and the number of
/// events the ring had dropped embedded, to be saved and opened from a file.
pub fn embedded_page(jsonl: &str, findings: &[Finding], dropped: u64) -> String {
    let findings = Value::Array(findings.iter().map(Finding::to_json).collect()).to_string();
    let block = format!(
        "<script type=\"application/x-ndjson\" id=\"zkd-history\">{}</script>\n\
         <script type=\"application/json\" id=\"zkd-findings\">{}</script>\n\
         <script type=\"text/plain\" id=\"zkd-dropped\">{dropped}</script>",
        script_safe(jsonl),
        script_safe(&findings),
    );
    PAGE.replacen(SLOT, &block, 1)
}

/// A test's window of the history: every event after `after_seq` (the ring holds a bounded
/// number), as JSON Lines and as values, with the number of events the ring had dropped.
pub(crate) struct Window {
    pub(crate) jsonl: String,
    pub(crate) events: Vec<Value>,
    pub(crate) dropped: u64,
}

impl Window {
    /// Reads the window from the server's history, a page at a time.
    pub(crate) fn read(shared: &Shared, after_seq: u64) -> Result<Window, CoreFailed> {
        let mut filter = HistoryFilter {
            after_seq: Some(after_seq),
            ..HistoryFilter::default()
        };
        let mut w = Window {
            jsonl: String::new(),
            events: Vec::new(),
            dropped: 0,
        };
        loop {
            let (events, summary) = shared.history(&filter)?;
            w.dropped = summary.dropped;
            for e in &events {
                let line = e.to_json();
                // The history writes well-formed JSON; a line that did not parse would only
                // be left out of the checks.
                if let Ok(v) = serde_json::from_str(&line) {
                    w.events.push(v);
                }
                w.jsonl.push_str(&line);
                w.jsonl.push('\n');
            }
            match events.last() {
                Some(last) if events.len() >= MAX_READ => filter.after_seq = Some(last.seq),
                _ => return Ok(w),
            }
        }
    }

    /// What the recipe checks find in it.
    pub(crate) fn findings(&self) -> Vec<Finding> {
        recipe_checks::check_all(&self.events)
    }

    /// The timeline page with it embedded.
    pub(crate) fn page(&self, findings: &[Finding]) -> String {
        embedded_page(&self.jsonl, findings, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_path_cannot_leave_its_script_element() {
        let line =
            r#"{"seq":1,"kind":"request","path":"/x</script><script>alert(1)</script><!--"}"#;
        let page = embedded_page(line, &[], 0);
        assert_eq!(
            page.matches("<script").count(),
            PAGE.matches("<script").count() + 3
        );
        assert!(!page.contains("<script>alert"));
        let start = page.find("id=\"zkd-history\">").unwrap() + "id=\"zkd-history\">".len();
        let end = start + page[start..].find("</script>").unwrap();
        let back: Value = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(back["path"], "/x</script><script>alert(1)</script><!--");
        assert!(
            PAGE.contains(SLOT),
            "the page has a slot for embedded events"
        );
    }
}
