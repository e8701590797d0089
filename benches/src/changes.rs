//! Two comparisons of the same machine set against each other: every figure of zkd before
//! and after a change (two `compare.csv` files), with ZooKeeper's own change beside it so
//! that a machine that moved between the runs shows, and the figures of zkd that got worse
//! by more than a given share.

use crate::comparison::{Comparison, Row};
use crate::report::{num, Table};
use crate::Better;

/// One figure in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub item: String,
    pub name: String,
    pub unit: String,
    pub better: Better,
    /// zkd's median before and after.
    pub zkd: (f64, f64),
    /// ZooKeeper's median before and after (for a floor row: the floor's, pooled over both
    /// servers' turns).
    pub other: (f64, f64),
    /// Whether the row measures the machine (a floor), not zkd.
    pub floor: bool,
}

impl Change {
    /// zkd after / before.
    pub fn zkd_change(&self) -> f64 {
        self.zkd.1 / self.zkd.0
    }

    /// ZooKeeper's (or the floor's) after / before.
    pub fn other_change(&self) -> f64 {
        self.other.1 / self.other.0
    }

    /// How much worse zkd got, as a share (0.25 = 25 % worse; negative or zero when it got
    /// better or stayed), in the figure's direction; `None` for figures with no direction
    /// and for floors.
    pub fn worse_by(&self) -> Option<f64> {
        let c = self.zkd_change();
        if self.floor || !c.is_finite() {
            return None;
        }
        match self.better {
            Better::Lower => Some(c - 1.0),
            Better::Higher => Some(1.0 / c - 1.0),
            Better::Neither => None,
        }
    }
}

/// The figures the two comparisons share, in the order of `after`.
pub fn changes(before: &Comparison, after: &Comparison) -> Vec<Change> {
    after
        .rows
        .iter()
        .filter_map(|a| {
            let b = before
                .rows
                .iter()
                .find(|b| b.item == a.item && b.name == a.name)?;
            let floor = a.item.starts_with("floor ");
            let other = |r: &Row| {
                if floor {
                    r.pooled_median()
                } else {
                    r.zk_median()
                }
            };
            Some(Change {
                item: a.item.clone(),
                name: a.name.clone(),
                unit: a.unit.clone(),
                better: a.better,
                zkd: (b.zkd_median(), a.zkd_median()),
                other: (other(b), other(a)),
                floor,
            })
        })
        .collect()
}

/// The table of every shared figure, and the lines naming zkd's figures worse by more than
/// `threshold` (0.10 = 10 %).
pub fn report(changes: &[Change], threshold: f64) -> String {
    let mut t = Table::new(&[
        "item",
        "figure",
        "unit",
        "zkd before",
        "zkd after",
        "after/before",
        "ZooKeeper after/before",
        "worse",
    ]);
    for c in changes {
        let (zkd_before, zkd_after) = if c.floor {
            ("(floor)".to_string(), "(floor)".to_string())
        } else {
            (num(c.zkd.0), num(c.zkd.1))
        };
        let worse = match c.worse_by() {
            Some(w) if w > threshold => format!("{:.0} %", w * 100.0),
            _ => String::new(),
        };
        t.row(vec![
            c.item.clone(),
            c.name.clone(),
            c.unit.clone(),
            zkd_before,
            zkd_after,
            if c.floor {
                String::new()
            } else {
                num(c.zkd_change())
            },
            num(c.other_change()),
            worse,
        ]);
    }
    let worse: Vec<&Change> = changes
        .iter()
        .filter(|c| c.worse_by().is_some_and(|w| w > threshold))
        .collect();
    let mut out = t.render();
    out.push_str(&format!(
        "\n{} of {} figures of zkd are more than {:.0} % worse after than before{}\n",
        worse.len(),
        changes.iter().filter(|c| c.worse_by().is_some()).count(),
        threshold * 100.0,
        if worse.is_empty() { "." } else { ":" }
    ));
    for c in worse {
        out.push_str(&format!(
            "  {} {}: {} -> {} {} (ZooKeeper or the floor after/before: {})\n",
            c.item,
            c.name,
            num(c.zkd.0),
            num(c.zkd.1),
            c.unit,
            num(c.other_change())
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparison::from_csv;

    const HEAD: &str = "item,figure,unit,server,round,value\n";

    fn run(lines: &str) -> Comparison {
        from_csv(&format!("{HEAD}{lines}")).unwrap()
    }

    #[test]
    fn worse_follows_each_figures_direction() {
        let before = run("t get,ops/s,ops/s,zkd,1,100\n\
             t get,ops/s,ops/s,zookeeper,1,10\n\
             t get,latency p50,us,zkd,1,100\n\
             t get,latency p50,us,zookeeper,1,500\n\
             t get,server CPU (cores),,zkd,1,1\n\
             footprint,max concurrent sessions,,zkd,1,1000\n\
             only before,ops/s,ops/s,zkd,1,1\n");
        let after = run("t get,ops/s,ops/s,zkd,1,80\n\
             t get,ops/s,ops/s,zookeeper,1,8\n\
             t get,latency p50,us,zkd,1,105\n\
             t get,latency p50,us,zookeeper,1,500\n\
             t get,server CPU (cores),,zkd,1,2\n\
             footprint,max concurrent sessions,,zkd,1,1000\n");
        let c = changes(&before, &after);
        assert_eq!(c.len(), 4, "only the figures both runs have");
        // 100 -> 80 ops/s is 25 % worse (it takes 1.25 times as long per operation).
        assert!((c[0].worse_by().unwrap() - 0.25).abs() < 1e-9);
        assert!((c[0].other_change() - 0.8).abs() < 1e-9);
        assert!((c[1].worse_by().unwrap() - 0.05).abs() < 1e-9);
        assert_eq!(c[2].worse_by(), None, "cores in use have no direction");
        assert_eq!(c[3].worse_by(), Some(0.0));
        let text = report(&c, 0.10);
        assert!(text.contains("1 of 3 figures of zkd are more than 10 % worse"));
        assert!(
            text.contains("  t get ops/s: 100.0 -> 80.00 ops/s"),
            "{text}"
        );
        assert!(!text.contains("  t get latency p50"));
    }

    #[test]
    fn floor_rows_are_the_machine_not_zkd() {
        let before = run("floor tokio get 64x8,ops/s,ops/s,zkd,1,100\n\
             floor tokio get 64x8,ops/s,ops/s,zookeeper,1,120\n");
        let after = run("floor tokio get 64x8,ops/s,ops/s,zkd,1,50\n\
             floor tokio get 64x8,ops/s,ops/s,zookeeper,1,70\n");
        let c = changes(&before, &after);
        assert!(c[0].floor);
        assert_eq!(c[0].worse_by(), None);
        assert!((c[0].other_change() - 0.5454545454545454).abs() < 1e-9);
        assert!(report(&c, 0.10).contains("0 of 0 figures"));
    }
}
