//! How `tessera admin` renders answers for people: aligned tables, and cells for sizes,
//! durations, absent values and yes/no. No HTTP and no API shapes here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Columns padded to their widest cell, two spaces apart; no header line if `headers` is empty.
pub(super) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(super) fn render(&self) -> String {
        let lines: Vec<&Vec<String>> = std::iter::once(&self.headers)
            .filter(|h| !h.is_empty())
            .chain(&self.rows)
            .collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in &lines {
            for (w, cell) in widths.iter_mut().zip(line.iter()) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in lines {
            let mut text = String::new();
            for (cell, w) in line.iter().zip(&widths) {
                text.push_str(&format!("{cell:<w$}  "));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A value that may be absent, as a cell: `-` when absent.
pub(super) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// `1234567` → `1,234,567`: counts people read at a glance.
pub(super) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate or other float, rounded, with [`grouped`] digits.
pub(super) fn grouped_f(x: f64) -> String {
    if x.is_finite() && x >= 0.0 {
        grouped(x.round() as u64)
    } else {
        "-".into()
    }
}

pub(super) fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

pub(super) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// [`human_bytes`] of a size that may be absent (`-`).
pub(super) fn opt_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| "-".into(), human_bytes)
}

pub(super) fn human_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match () {
        _ if d > 0 => format!("{d}d{h}h"),
        _ if h > 0 => format!("{h}h{m:02}m"),
        _ if m > 0 => format!("{m}m{s:02}s"),
        _ => format!("{s}s"),
    }
}

/// Time since `start_unix`.
pub(super) fn uptime(start_unix: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    human_duration(now.saturating_sub(start_unix))
}

/// A serialized enum's name as the API spells it (`"prefer-replica"`, `"online"`).
pub(super) fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_columns_to_the_widest_cell() {
        let mut t = Table::new(&["ID", "ADDR"]);
        t.row(vec!["1".into(), "127.0.0.1:7001".into()]);
        t.row(vec!["12".into(), "h:1".into()]);
        assert_eq!(t.render(), "ID  ADDR\n1   127.0.0.1:7001\n12  h:1\n");
    }

    #[test]
    fn table_without_headers_has_no_header_line_and_no_trailing_spaces() {
        let mut t = Table::new(&[]);
        t.row(vec!["0-511".into(), "→ group 1".into(), String::new()]);
        t.row(vec!["512".into(), "→ unassigned".into(), "(x)".into()]);
        assert_eq!(t.render(), "0-511  → group 1\n512    → unassigned  (x)\n");
    }

    #[test]
    fn table_counts_characters_not_bytes() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["→→".into(), "x".into()]);
        assert_eq!(t.render(), "A   B\n→→  x\n");
    }

    #[test]
    fn short_rows_leave_the_last_columns_empty() {
        let mut t = Table::new(&["A", "B", "C"]);
        t.row(vec!["1".into()]);
        assert_eq!(t.render(), "A  B  C\n1\n");
    }

    #[test]
    fn counts_are_grouped_in_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(9_900), "9,900");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped_f(2006.4), "2,006");
        assert_eq!(grouped_f(f64::NAN), "-");
    }

    #[test]
    fn sizes_and_durations_read_like_a_human_wrote_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024 + 512 * 1024), "3.5 MiB");
        assert_eq!(opt_bytes(None), "-");
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(3 * 3600 + 5 * 60 + 1), "3h05m");
        assert_eq!(human_duration(2 * 86_400 + 3600), "2d1h");
    }
}
