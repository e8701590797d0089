//! The history's timeline page: one self-contained HTML file (no external assets) that draws
//! history events on a shared time axis, a lane per session and per member, with the recipe
//! checks' findings marked. Served live on the admin listener (it then reads
//! `/zkd/history`), or written with the events embedded, to open from a file.

use serde_json::Value;

use super::recipe_checks::Finding;

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
