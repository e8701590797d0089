//! Plain-text tables with aligned columns.

/// A table of strings; numeric-looking cells are right-aligned.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with two spaces between columns and a rule under the header.
    pub fn render(&self) -> String {
        let cols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0; cols];
        for r in self.rows.iter().chain([&self.header]) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |r: &[String]| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                let pad = width[i] - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                if i > 0 && looks_numeric(c) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < r.len() {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.header);
        out.push('\n');
        let total: usize = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// The same table as Markdown.
    pub fn markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        // Right-align the columns whose cells are all numbers (or n/a).
        let numeric = |i: usize| {
            !self.rows.is_empty()
                && self
                    .rows
                    .iter()
                    .all(|r| r.get(i).is_some_and(|c| looks_numeric(c) || c == "n/a"))
        };
        let mut out = format!(
            "| {} |\n|{}\n",
            self.header
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | "),
            (0..self.header.len())
                .map(|i| if numeric(i) { "---:|" } else { "---|" })
                .collect::<String>()
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

fn looks_numeric(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty()
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '.')
        && s.chars().any(|c| c.is_ascii_digit())
}

/// A number with about four significant digits.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned() {
        let mut t = Table::new(&["name", "value"]);
        t.row(vec!["a".into(), "1".into()]);
        t.row(vec!["longer".into(), "12345".into()]);
        let s = t.render();
        assert_eq!(
            s,
            "name    value\n-------------\na           1\nlonger  12345\n"
        );
        assert!(t.markdown().starts_with("| name | value |\n|---|---:|\n"));
    }

    #[test]
    fn numbers() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(1.23456), "1.235");
        assert_eq!(num(0.012345), "0.0123");
        assert_eq!(num(f64::NAN), "n/a");
    }
}
