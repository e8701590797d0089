//! SVG plots of a comparison: the herd experiment against N on log-log axes (zkd and
//! ZooKeeper, herd and predecessor watching, on one chart), fan-out against W next to the
//! floor, and throughput bars.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::comparison::{bars, series, Comparison};
use crate::util::BenchResult;

const ZKD_HERD: RGBColor = RGBColor(31, 119, 180);
const ZKD_PRED: RGBColor = RGBColor(23, 190, 207);
const ZK_HERD: RGBColor = RGBColor(214, 39, 40);
const ZK_PRED: RGBColor = RGBColor(255, 127, 14);
const FLOOR: RGBColor = RGBColor(90, 90, 90);
const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);
const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);

/// One line on a chart.
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    pub triangle: bool,
    /// Stroke width; zkd's lines are drawn wider and first, so that where both servers
    /// give the same value (bytes, counts) both lines stay visible.
    pub width: u32,
}

/// Writes every plot the comparison has data for; returns the files written.
pub fn write_plots(c: &Comparison, dir: &Path) -> BenchResult<Vec<PathBuf>> {
    let mut out = Vec::new();
    for (file, name, title, unit) in [
        (
            "herd-quiet.svg",
            "time until all quiet",
            "Leader failure: time until all candidates are quiet",
            "ms",
        ),
        (
            "herd-bytes.svg",
            "server bytes per failure",
            "Leader failure: bytes sent by the server",
            "bytes",
        ),
        (
            "herd-leader.svg",
            "time until next leader knows",
            "Leader failure: time until the next leader knows",
            "ms",
        ),
    ] {
        let lines = herd_lines(c, name);
        if lines.iter().all(|l| l.points.is_empty()) {
            continue;
        }
        let path = dir.join(file);
        log_log(
            &path,
            title,
            "candidates N",
            &format!("{name} ({unit})"),
            &lines,
        )?;
        out.push(path);
    }
    let fan = fanout_lines(c);
    if fan.iter().any(|l| !l.points.is_empty()) {
        let path = dir.join("fanout.svg");
        log_log(
            &path,
            "One change to W watchers: time until the last is notified",
            "watchers W",
            "time until last watcher notified (ms)",
            &fan,
        )?;
        out.push(path);
    }
    let b = bars(c, "ops/s");
    if !b.is_empty() {
        let path = dir.join("throughput.svg");
        let title = c
            .rows
            .iter()
            .find(|r| r.name == "ops/s" && r.item.starts_with("throughput "))
            .map(|r| {
                // `throughput get 64x8` or `throughput get 64x8 cpus=0,1`.
                let shape = r.item.split(' ').nth(2).unwrap_or("");
                match shape.split_once('x') {
                    Some((c, w)) => format!("Throughput: {c} sessions x {w} requests in flight"),
                    None => "Throughput".to_string(),
                }
            })
            .unwrap_or_default();
        bar_chart(&path, &title, "ops/s", &b)?;
        out.push(path);
    }
    Ok(out)
}

fn herd_lines(c: &Comparison, name: &str) -> Vec<Line> {
    let s = series(c, name);
    let mut lines = Vec::new();
    for (mode, zkd_color, zk_color, triangle) in [
        ("herd", ZKD_HERD, ZK_HERD, false),
        ("predecessor", ZKD_PRED, ZK_PRED, true),
    ] {
        let pts = s.get(mode).cloned().unwrap_or_default();
        let keep = |v: f64| v.is_finite() && v > 0.0;
        let servers = [("zkd", zkd_color, 5), ("ZooKeeper", zk_color, 2)];
        for (k, (server, color, width)) in servers.into_iter().enumerate() {
            let value = |p: &(f64, f64, f64)| if k == 0 { p.1 } else { p.2 };
            lines.push(Line {
                label: format!("{server}, {mode}"),
                points: pts
                    .iter()
                    .filter(|p| keep(value(p)))
                    .map(|p| (p.0, value(p)))
                    .collect(),
                color,
                triangle,
                width,
            });
        }
    }
    lines
}

/// zkd and ZooKeeper fan-out, and the floor (both columns of the floor rows are the floor).
fn fanout_lines(c: &Comparison) -> Vec<Line> {
    let s = series(c, "time until last watcher notified");
    let keep = |v: &f64| v.is_finite() && *v > 0.0;
    let pts = |series: &str, pick: fn(&(f64, f64, f64)) -> f64| -> Vec<(f64, f64)> {
        s.get(series)
            .map(|v| {
                v.iter()
                    .map(|p| (p.0, pick(p)))
                    .filter(|p| keep(&p.1))
                    .collect()
            })
            .unwrap_or_default()
    };
    vec![
        Line {
            label: "zkd".into(),
            points: pts("fanout", |p| p.1),
            color: ZKD_HERD,
            triangle: false,
            width: 5,
        },
        Line {
            label: "ZooKeeper".into(),
            points: pts("fanout", |p| p.2),
            color: ZK_HERD,
            triangle: false,
            width: 2,
        },
        Line {
            label: "floor (one write per socket)".into(),
            points: pts("floor", |p| (p.1 + p.2) / 2.0),
            color: FLOOR,
            triangle: true,
            width: 2,
        },
    ]
}

/// Powers of ten enclosing `lo..hi`.
fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let lo = 10f64.powf(lo.max(1e-9).log10().floor());
    let mut hi = 10f64.powf(hi.max(1e-9).log10().ceil());
    if hi <= lo {
        hi = lo * 10.0;
    }
    (lo, hi)
}

/// A log-log line chart.
pub fn log_log(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> BenchResult<()> {
    let all: Vec<(f64, f64)> = lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .collect();
    if all.is_empty() {
        return Err(format!("{}: nothing to plot", path.display()));
    }
    let (x0, x1) = decades(
        all.iter().map(|p| p.0).fold(f64::INFINITY, f64::min),
        all.iter().map(|p| p.0).fold(0.0, f64::max),
    );
    let (y0, y1) = decades(
        all.iter().map(|p| p.1).fold(f64::INFINITY, f64::min),
        all.iter().map(|p| p.1).fold(0.0, f64::max),
    );
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()
        .map_err(|e| err(&e))?;
    for l in lines.iter().filter(|l| !l.points.is_empty()) {
        let color = l.color;
        let style = ShapeStyle::from(&color).stroke_width(l.width);
        let size = 2 + l.width as i32;
        chart
            .draw_series(LineSeries::new(l.points.clone(), style))
            .map_err(|e| err(&e))?
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        if l.triangle {
            chart
                .draw_series(
                    l.points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, size + 1, color.filled())),
                )
                .map_err(|e| err(&e))?;
        } else {
            chart
                .draw_series(
                    l.points
                        .iter()
                        .map(|&p| Circle::new(p, size, color.filled())),
                )
                .map_err(|e| err(&e))?;
        }
    }
    finish(&mut chart, &root, SeriesLabelPosition::UpperLeft, path)
}

/// Grouped bars: per category, zkd and ZooKeeper.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    data: &[(String, f64, f64)],
) -> BenchResult<()> {
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    let ymax = data
        .iter()
        .flat_map(|d| [d.1, d.2])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * 1.15;
    let n = data.len();
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let labels: Vec<String> = data.iter().map(|d| d.0.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax.max(1.0))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .bold_line_style(GRID_BOLD)
        .light_line_style(WHITE)
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|v| {
            let i = v.floor() as usize;
            if (v - v.floor() - 0.5).abs() < 1e-6 && i < labels.len() {
                labels[i].clone()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| short(*v))
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(&e))?;
    for (k, (label, color)) in [("zkd", ZKD_HERD), ("ZooKeeper", ZK_HERD)]
        .into_iter()
        .enumerate()
    {
        let rects = data.iter().enumerate().filter_map(move |(i, d)| {
            let v = if k == 0 { d.1 } else { d.2 };
            v.is_finite().then(|| {
                let x0 = i as f64 + 0.1 + 0.4 * k as f64;
                Rectangle::new([(x0, 0.0), (x0 + 0.38, v)], color.filled())
            })
        });
        chart
            .draw_series(rects)
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    finish(&mut chart, &root, SeriesLabelPosition::UpperRight, path)
}

/// Draws the legend at `legend` and writes the file.
fn finish<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    legend: SeriesLabelPosition,
    path: &Path,
) -> BenchResult<()> {
    let err = |e: &dyn std::fmt::Display| format!("plotting {}: {e}", path.display());
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))
}

/// Axis labels: 1, 10, 100, 1k, 10k, 1M; decimals below 1.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_decades() {
        assert_eq!(short(10000.0), "10k");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(1_500_000.0), "1.5M");
        assert_eq!(decades(3.0, 250.0), (1.0, 1000.0));
        assert_eq!(decades(10.0, 10.0), (10.0, 100.0));
    }

    #[test]
    fn writes_svgs() {
        let dir = std::env::temp_dir().join(format!("zkd-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lines = vec![Line {
            label: "a".into(),
            points: vec![(10.0, 1.0), (100.0, 30.0), (1000.0, 900.0)],
            color: ZKD_HERD,
            triangle: false,
            width: 2,
        }];
        log_log(&dir.join("l.svg"), "t", "x", "y", &lines).unwrap();
        bar_chart(
            &dir.join("b.svg"),
            "t",
            "ops/s",
            &[("get".into(), 100.0, 50.0)],
        )
        .unwrap();
        let svg = std::fs::read_to_string(dir.join("l.svg")).unwrap();
        assert!(svg.contains("<svg"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
