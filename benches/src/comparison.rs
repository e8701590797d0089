//! The result of a side-by-side comparison as data: one row per figure with the values of
//! every round on both servers, how it groups into plot series, its CSV form, and the check
//! of one target against it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::report::{num, Table};
use crate::util::{median, BenchResult};
use crate::{Better, Figures};

/// One figure's values on both servers, one per round.
#[derive(Debug, Clone)]
pub struct Row {
    pub item: String,
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub zkd: Samples,
    pub zookeeper: Samples,
    /// The plot series the row belongs to and its x there, when it is plotted.
    pub series: Option<String>,
    pub x: Option<f64>,
}

/// One server's values of a figure: one per round, or every sample of every round for figures
/// that carry samples (then the median is over all of them), each with its round.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub values: Vec<f64>,
    /// The round (from 1) of each value.
    pub rounds: Vec<usize>,
}

impl Row {
    /// A figure with no values yet.
    fn new(item: String, name: String, unit: String, better: Better) -> Row {
        Row {
            item,
            name,
            unit,
            better,
            series: None,
            x: None,
            zkd: Samples::default(),
            zookeeper: Samples::default(),
        }
    }
    pub fn zkd_median(&self) -> f64 {
        median(&self.zkd.values)
    }
    pub fn zk_median(&self) -> f64 {
        median(&self.zookeeper.values)
    }
    /// The median of both columns' values together (for rows whose two columns measure the
    /// same thing, such as a floor measured next to each server).
    pub fn pooled_median(&self) -> f64 {
        let all: Vec<f64> = self
            .zkd
            .values
            .iter()
            .chain(&self.zookeeper.values)
            .copied()
            .collect();
        median(&all)
    }
    /// zkd / ZooKeeper of the medians.
    pub fn ratio(&self) -> f64 {
        self.zkd_median() / self.zk_median()
    }
    /// Rounds with a value on each server.
    pub fn runs(&self) -> (usize, usize) {
        let distinct = |r: &[usize]| {
            let mut r = r.to_vec();
            r.dedup();
            r.len()
        };
        (distinct(&self.zkd.rounds), distinct(&self.zookeeper.rounds))
    }
    /// Adds `value` measured in `round` (from 1) on `server` (0 = zkd).
    fn push(&mut self, server: usize, round: usize, value: f64) {
        let side = if server == 0 {
            &mut self.zkd
        } else {
            &mut self.zookeeper
        };
        side.values.push(value);
        side.rounds.push(round);
    }
}

/// Everything a comparison produced.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub errors: Vec<String>,
    pub zkd_cmd: String,
    pub zk_cmd: String,
    pub rounds: usize,
    pub elapsed: Duration,
    /// This process's RLIMIT_NOFILE soft limit (servers spawned by it inherit it).
    pub fd_soft_limit: u64,
    /// Wall time spent per group (all rounds, both servers, server start-ups included).
    pub timings: Vec<(String, Duration)>,
}

impl Comparison {
    /// Adds the figures of one run (`server` 0 = zkd, 1 = ZooKeeper).
    pub(crate) fn add(&mut self, server: usize, figs: &Figures, round: usize) {
        for f in &figs.figures {
            let row = match self
                .rows
                .iter_mut()
                .position(|r| r.item == f.item && r.name == f.name)
            {
                Some(i) => &mut self.rows[i],
                None => {
                    self.rows.push(Row {
                        series: f.series.clone(),
                        x: f.x,
                        ..Row::new(f.item.clone(), f.name.clone(), f.unit.to_string(), f.better)
                    });
                    self.rows.last_mut().expect("just pushed")
                }
            };
            if f.samples.is_empty() {
                row.push(server, round + 1, f.value);
            }
            for &v in &f.samples {
                row.push(server, round + 1, v);
            }
        }
        for n in &figs.notes {
            self.notes.push(format!(
                "round {} {}: {n}",
                round + 1,
                ["zkd", "zookeeper"][server]
            ));
        }
    }

    /// Adds `spent` to the time of `group`.
    pub(crate) fn time(&mut self, group: &str, spent: Duration) {
        match self.timings.iter_mut().find(|(g, _)| g == group) {
            Some((_, t)) => *t += spent,
            None => self.timings.push((group.to_string(), spent)),
        }
    }

    pub fn find(&self, item: &str, name: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.item == item && r.name.starts_with(name))
    }

    /// The side-by-side table.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "item",
            "figure",
            "unit",
            "zkd",
            "ZooKeeper",
            "zkd/ZK",
            "runs",
        ]);
        for r in &self.rows {
            t.row(vec![
                r.item.clone(),
                r.name.clone(),
                r.unit.clone(),
                num(r.zkd_median()),
                num(r.zk_median()),
                num(r.ratio()),
                {
                    let (a, b) = r.runs();
                    format!("{a}/{b}")
                },
            ]);
        }
        t
    }
}

/// Rows grouped for plots: series → [(x, zkd, zk)].
pub fn series(c: &Comparison, name: &str) -> BTreeMap<String, Vec<(f64, f64, f64)>> {
    let mut m: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for r in c.rows.iter().filter(|r| r.name == name) {
        if let (Some(s), Some(x)) = (&r.series, r.x) {
            m.entry(s.clone())
                .or_default()
                .push((x, r.zkd_median(), r.zk_median()));
        }
    }
    for v in m.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    m
}

/// Values of one figure of the throughput items, per series (throughput bars).
pub fn bars(c: &Comparison, name: &str) -> Vec<(String, f64, f64)> {
    c.rows
        .iter()
        .filter(|r| r.name == name && r.x.is_none() && r.item.starts_with("throughput "))
        .map(|r| {
            (
                r.series.clone().unwrap_or_else(|| r.item.clone()),
                r.zkd_median(),
                r.zk_median(),
            )
        })
        .collect()
}

/// Reads the raw values `write_outputs` stored in `compare.csv` back (to redraw the plots
/// and tables without measuring again).
pub fn from_csv(text: &str) -> BenchResult<Comparison> {
    let mut c = Comparison::default();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f = split_csv(line);
        let f: Vec<&str> = f.iter().map(String::as_str).collect();
        let [item, name, unit, server, round, value] = f[..] else {
            return Err(format!("line {}: expected 6 fields: {line:?}", i + 1));
        };
        let value: f64 = value.parse().map_err(|e| format!("line {}: {e}", i + 1))?;
        let round: usize = round.parse().map_err(|e| format!("line {}: {e}", i + 1))?;
        c.rounds = c.rounds.max(round);
        let (series, x) = series_of(item);
        let idx = match c.rows.iter().position(|r| r.item == item && r.name == name) {
            Some(i) => i,
            None => {
                let (item, name, unit) = (item.to_string(), name.to_string(), unit.to_string());
                let better = better_of(&unit, &name);
                c.rows.push(Row {
                    series,
                    x,
                    ..Row::new(item, name, unit, better)
                });
                c.rows.len() - 1
            }
        };
        c.rows[idx].push(usize::from(server != "zkd"), round, value);
    }
    Ok(c)
}

/// Which way is better for a figure read back from a CSV, which keeps no direction: rates
/// and the sessions a server holds up, higher; times, sizes and CPU per unit of work, lower;
/// counts and cores in use, neither.
fn better_of(unit: &str, name: &str) -> Better {
    match unit {
        "ops/s" => Better::Higher,
        "us" | "ms" | "s" | "B" | "MiB" => Better::Lower,
        _ if name == "max concurrent sessions" => Better::Higher,
        _ => Better::Neither,
    }
}

/// A CSV field, quoted when it holds a comma or a quote.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Splits one CSV line, honouring quotes.
fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().expect("never empty").push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out
}

/// Plot series and x of an item name as the benchmarks build them.
fn series_of(item: &str) -> (Option<String>, Option<f64>) {
    let words: Vec<&str> = item.split(' ').collect();
    match words[..] {
        ["herd", n, mode] => (
            Some(mode.to_string()),
            n.strip_prefix("N=").and_then(|v| v.parse().ok()),
        ),
        [series @ ("fanout" | "floor"), w] => (
            Some(series.into()),
            w.strip_prefix("W=").and_then(|v| v.parse().ok()),
        ),
        ["throughput", w, _] => (Some(w.to_string()), None),
        ["throughput", w, _, cpus] if cpus.starts_with("cpus=") => {
            (Some(format!("{w} {cpus}")), None)
        }
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip() {
        let fields = ["a, b", "plain", "say \"hi\"", ""];
        let line = fields.map(csv_field).join(",");
        assert_eq!(split_csv(&line), fields);
    }

    #[test]
    fn samples_are_pooled_over_rounds_and_keep_their_round() {
        let mut c = Comparison::default();
        let fig = |value: f64, samples: &[f64]| Figures {
            figures: vec![crate::Figure {
                samples: samples.to_vec(),
                ..crate::Figure::new("herd N=100 predecessor", "t", "ms", value, Better::Lower)
            }],
            notes: Vec::new(),
        };
        // Round medians 1, 2 and 9 (median 2); all samples pooled: median 3.
        c.add(0, &fig(1.0, &[1.0, 1.0, 3.0]), 0);
        c.add(0, &fig(2.0, &[2.0, 3.0, 4.0]), 1);
        c.add(0, &fig(9.0, &[9.0, 9.0, 3.0]), 2);
        c.add(1, &fig(6.0, &[]), 0);
        let row = &c.rows[0];
        assert_eq!(row.zkd_median(), 3.0);
        assert_eq!(row.zk_median(), 6.0);
        assert_eq!(row.runs(), (3, 1));
        assert_eq!(row.zkd.rounds, [1, 1, 1, 2, 2, 2, 3, 3, 3]);
    }

    #[test]
    fn series_from_items() {
        assert_eq!(
            series_of("herd N=5000 predecessor"),
            (Some("predecessor".into()), Some(5000.0))
        );
        assert_eq!(series_of("throughput get 64x8"), (Some("get".into()), None));
        assert_eq!(series_of("footprint"), (None, None));
        assert_eq!(
            series_of("throughput get 64x8 cpus=0,1"),
            (Some("get cpus=0,1".into()), None)
        );
        assert_eq!(series_of("durable set 100B 16x8"), (None, None));
    }
}

/// A target: a ratio bound on one figure.
#[derive(Debug, Clone)]
pub struct TargetCheck {
    pub target: String,
    pub bound: String,
    pub measured: Option<f64>,
    pub met: Option<bool>,
}

impl TargetCheck {
    /// The zkd/ZooKeeper ratio of `row` (when measured) checked with `ok`.
    pub(crate) fn ratio(
        target: String,
        row: Option<&Row>,
        bound: String,
        ok: impl Fn(f64) -> bool,
    ) -> Self {
        let measured = row.map(Row::ratio).filter(|v| v.is_finite());
        TargetCheck {
            target,
            bound,
            measured,
            met: measured.map(ok),
        }
    }
}
