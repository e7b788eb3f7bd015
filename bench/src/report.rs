//! Tables of figures: each figure next to the raw limit measured in the same run, their ratio, and the target with
//! PASS/MISS. Misses are reported, not fatal: the figures are the product, and a CI box may be noisy.

use std::fmt::Write as _;
use std::time::Duration;

/// A target and whether the figure meets it.
#[derive(Debug)]
pub struct Target {
    text: String,
    pass: bool,
}

impl Target {
    /// `value ≥ bound`.
    pub fn at_least(value: f64, bound: f64, what: &str) -> Target {
        Target { text: format!("{what} ≥ {bound}"), pass: value >= bound }
    }

    /// `value ≤ bound`.
    pub fn at_most(value: f64, bound: f64, what: &str) -> Target {
        Target { text: format!("{what} ≤ {bound}"), pass: value <= bound }
    }

    /// A duration no longer than `bound`.
    pub fn within(value: Duration, bound: Duration) -> Target {
        Target { text: format!("≤ {}", dur(bound)), pass: value <= bound }
    }
}

#[derive(Debug)]
struct Row {
    figure: String,
    ours: String,
    raw: String,
    ratio: String,
    target: Option<Target>,
}

/// One table: a titled list of rows.
#[derive(Debug)]
pub struct Table {
    title: String,
    /// Headers of the two figure columns.
    columns: [String; 2],
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>) -> Table {
        Table::with_columns(title, "fencelock", "raw limit")
    }

    /// A table whose two figure columns compare something else than fencelock with the raw limit.
    pub fn with_columns(title: impl Into<String>, ours: &str, theirs: &str) -> Table {
        Table { title: title.into(), columns: [ours.into(), theirs.into()], rows: Vec::new(), notes: Vec::new() }
    }

    /// A figure with its raw counterpart; `ratio` is printed as given (callers choose the direction).
    pub fn row(&mut self, figure: &str, ours: String, raw: String, ratio: Option<f64>, target: Option<Target>) {
        let ratio = ratio.map_or_else(String::new, |r| format!("{r:.2}"));
        self.rows.push(Row { figure: figure.to_string(), ours, raw, ratio, target });
    }

    /// A figure that has no raw counterpart.
    pub fn plain(&mut self, figure: &str, ours: String, target: Option<Target>) {
        self.row(figure, ours, String::new(), None, target);
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// Number of targets missed.
    pub fn misses(&self) -> usize {
        self.rows.iter().filter(|r| r.target.as_ref().is_some_and(|t| !t.pass)).count()
    }

    pub fn render(&self) -> String {
        let mut out = format!("{}\n", self.title);
        let [ours, theirs] = &self.columns;
        let _ = writeln!(out, "  {:<34} {ours:>14} {theirs:>14} {:>7}  target", "figure", "ratio");
        for r in &self.rows {
            let target = r
                .target
                .as_ref()
                .map_or_else(String::new, |t| format!("{:<18} {}", t.text, if t.pass { "PASS" } else { "MISS" }));
            let line = format!("  {:<34} {:>14} {:>14} {:>7}  {target}", r.figure, r.ours, r.raw, r.ratio);
            let _ = writeln!(out, "{}", line.trim_end());
        }
        for n in &self.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        out
    }
}

/// A duration in the unit that keeps three significant digits readable.
pub fn dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A rate in operations per second.
pub fn rate(r: f64) -> String {
    format!("{r:.0}/s")
}

/// A byte count in MB (10^6 bytes, the unit of the targets).
pub fn mb(bytes: i64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
