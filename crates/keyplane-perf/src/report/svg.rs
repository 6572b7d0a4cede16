//! Hand-written SVG charts for the report: line charts (linear or log axes)
//! and grouped bar charts, at most [`MAX_SERIES`] series, the legend in its
//! own column right of the plotting area, the caption below it.
//!
//! The output carries class names that the tests read back: one
//! `<g class="series" data-name="…">` per series, `<rect class="plot-area">`,
//! `<rect class="legend-box">`, `<text class="axis-label x">` / `y`.

use std::fmt::Write as _;

/// Most series one chart may draw.
pub const MAX_SERIES: usize = 8;

/// One named series of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points; for bar charts `x` is the category index.
    pub points: Vec<(f64, f64)>,
    /// Baselines and reference curves are drawn dashed.
    pub dashed: bool,
}

impl Series {
    /// A solid series.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: false }
    }
    /// A dashed series (a baseline, a paper's published curve, a formula).
    pub fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: true }
    }
}

/// Chart kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Lines with markers.
    Lines,
    /// Grouped bars, one group per category label (x = 0, 1, …).
    Bars(Vec<String>),
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label with its unit.
    pub x_label: String,
    /// Y axis label with its unit.
    pub y_label: String,
    /// Logarithmic x axis (line charts).
    pub x_log: bool,
    /// Logarithmic y axis.
    pub y_log: bool,
    /// X tick labels as counts (1K, 250K, 4M) rather than plain numbers.
    pub x_counts: bool,
    /// Lines or bars.
    pub kind: Kind,
    /// The data.
    pub series: Vec<Series>,
    /// Text under the plot (machine, scale, what is measured).
    pub caption: String,
}

const W: f64 = 980.0;
const PLOT_X: f64 = 84.0;
const PLOT_Y: f64 = 46.0;
const PLOT_W: f64 = 600.0;
const PLOT_H: f64 = 360.0;
const LEGEND_X: f64 = PLOT_X + PLOT_W + 24.0;
const LEGEND_W: f64 = W - LEGEND_X - 10.0;

/// Okabe–Ito colours (distinguishable with colour-blindness), then two more.
const COLOURS: [&str; 8] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C564B"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A plain tick label: at most 3 significant digits, no SI prefix.
pub fn plain(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{:.*}", (-(a.log10().floor()) as usize) + 2, v)
    } else {
        format!("{v:.0e}")
    };
    if s.contains('.') && !s.contains('e') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// A count label: 500, 2K, 250K, 1M, 1.5M, 2G (decimal prefixes).
pub fn count(v: f64) -> String {
    let (d, suf) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "K")
    } else {
        (1.0, "")
    };
    format!("{}{suf}", plain(v / d))
}

/// "Nice" linear ticks covering `[lo, hi]`.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= 7.0).unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() * step;
    let mut t = Vec::new();
    let mut x = start;
    while x <= hi + step * 1e-9 {
        t.push(if x.abs() < step * 1e-9 { 0.0 } else { x });
        x += step;
    }
    t
}

/// Log ticks: powers of ten, with 2 and 5 multiples when the range is short.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mults: &[f64] = if b - a <= 2 {
        &[1.0, 2.0, 5.0]
    } else if b - a <= 4 {
        &[1.0, 3.0]
    } else {
        &[1.0]
    };
    let step = if b - a > 8 { 2 } else { 1 };
    let mut t = Vec::new();
    let mut e = a;
    while e <= b {
        for m in mults {
            let v = m * 10f64.powi(e);
            if v >= lo * 0.999 && v <= hi * 1.001 {
                t.push(v);
            }
        }
        e += step;
    }
    t
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(vals: impl Iterator<Item = f64>, log: bool, zero: bool) -> Self {
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for v in vals.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if lo > hi {
            (lo, hi) = (if log { 1.0 } else { 0.0 }, 1.0);
        }
        if log {
            if hi / lo < 1.5 {
                (lo, hi) = (lo / 1.5, hi * 1.5);
            }
            Axis { lo: lo / 1.15, hi: hi * 1.15, log }
        } else {
            if zero && lo >= 0.0 {
                lo = 0.0;
            }
            if hi - lo < 1e-12 {
                hi = lo + 1.0;
            }
            let pad = (hi - lo) * 0.06;
            let lo = if zero && lo == 0.0 { 0.0 } else { lo - pad };
            Axis { lo, hi: hi + pad, log }
        }
    }
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log { log_ticks(self.lo, self.hi) } else { linear_ticks(self.lo, self.hi) }
    }
}

/// Wraps text to lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in text.split('\n') {
        let mut cur = String::new();
        for word in para.split_whitespace() {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
                lines.push(std::mem::take(&mut cur));
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        lines.push(cur);
    }
    lines
}

fn marker(out: &mut String, shape: usize, x: f64, y: f64, colour: &str) {
    let _ = match shape % 5 {
        0 => writeln!(out, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.6" fill="{colour}"/>"#),
        1 => writeln!(out, r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{colour}"/>"#, x - 3.5, y - 3.5),
        2 => writeln!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{colour}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 3.5,
            x - 4.5,
            y + 3.5
        ),
        3 => writeln!(
            out,
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="{colour}"/>"#,
            y - 4.5,
            x + 4.5,
            y + 4.5,
            x - 4.5
        ),
        _ => writeln!(
            out,
            r#"<path d="M{:.1},{:.1} L{:.1},{:.1} M{:.1},{:.1} L{:.1},{:.1}" stroke="{colour}" stroke-width="2"/>"#,
            x - 4.0,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0,
            y + 4.0,
            x + 4.0,
            y - 4.0
        ),
    };
}

/// Renders the chart. `Err` when it has no data or too many series.
pub fn render(c: &Chart) -> Result<String, String> {
    let series: Vec<&Series> = c.series.iter().filter(|s| !s.points.is_empty()).collect();
    if series.is_empty() {
        return Err("no data".into());
    }
    if series.len() > MAX_SERIES {
        return Err(format!("{} series (at most {MAX_SERIES})", series.len()));
    }
    let bars = match &c.kind {
        Kind::Bars(cats) => Some(cats.clone()),
        Kind::Lines => None,
    };
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let xa = match &bars {
        Some(cats) => Axis { lo: -0.5, hi: cats.len() as f64 - 0.5, log: false },
        None => Axis::new(pts().map(|p| p.0), c.x_log, false),
    };
    let ya = Axis::new(pts().map(|p| p.1), c.y_log, true);
    let px = |v: f64| PLOT_X + xa.frac(v) * PLOT_W;
    let py = |v: f64| PLOT_Y + PLOT_H - ya.frac(v) * PLOT_H;
    let caption = wrap(&c.caption, 150);
    let h = PLOT_Y + PLOT_H + 62.0 + 15.0 * caption.len() as f64 + 8.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h:.0}" viewBox="0 0 {W} {h:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text class="title" x="{}" y="26" font-size="17" font-weight="bold">{}</text>"#,
        PLOT_X,
        esc(&c.title)
    );
    let _ = writeln!(
        o,
        r##"<rect class="plot-area" x="{PLOT_X}" y="{PLOT_Y}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#888"/>"##
    );
    // Grid and ticks.
    let _ = writeln!(o, r##"<g class="ticks" font-size="11" fill="#333">"##);
    for t in ya.ticks() {
        let y = py(t);
        let _ = writeln!(
            o,
            r##"<line x1="{PLOT_X}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            PLOT_X + PLOT_W,
            PLOT_X - 6.0,
            y + 4.0,
            plain(t)
        );
    }
    match &bars {
        Some(cats) => {
            for (i, cat) in cats.iter().enumerate() {
                let x = px(i as f64);
                for (j, line) in wrap(cat, 14).iter().enumerate() {
                    let _ = writeln!(
                        o,
                        r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                        PLOT_Y + PLOT_H + 15.0 + 12.0 * j as f64,
                        esc(line)
                    );
                }
            }
        }
        None => {
            let mut xt = xa.ticks();
            // Discrete x values (sizes, widths, rates) label themselves when few.
            let mut xs: Vec<f64> = pts().map(|p| p.0).collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            if xs.len() <= 9 {
                xt = xs;
            }
            for t in xt {
                let x = px(t);
                let _ = writeln!(
                    o,
                    r##"<line x1="{x:.1}" x2="{x:.1}" y1="{PLOT_Y}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                    PLOT_Y + PLOT_H,
                    PLOT_Y + PLOT_H + 16.0,
                    if c.x_counts { count(t) } else { plain(t) }
                );
            }
        }
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(
        o,
        r#"<text class="axis-label x" x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
        PLOT_X + PLOT_W / 2.0,
        PLOT_Y + PLOT_H + 44.0,
        esc(&format!("{}{}", c.x_label, if c.x_log { " (log scale)" } else { "" }))
    );
    let _ = writeln!(
        o,
        r#"<text class="axis-label y" x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        22.0,
        PLOT_Y + PLOT_H / 2.0,
        22.0,
        PLOT_Y + PLOT_H / 2.0,
        esc(&format!("{}{}", c.y_label, if c.y_log { " (log scale)" } else { "" }))
    );
    // Data, clipped to the plotting area.
    let _ = writeln!(
        o,
        r#"<clipPath id="plot"><rect x="{PLOT_X}" y="{PLOT_Y}" width="{PLOT_W}" height="{PLOT_H}"/></clipPath>"#
    );
    let nser = series.len() as f64;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(o, r#"<g class="series" data-name="{}" clip-path="url(#plot)">"#, esc(&s.name));
        if bars.is_some() {
            let group = 0.8 * PLOT_W / (xa.hi - xa.lo);
            let bw = group / nser;
            let base = if ya.log { ya.lo } else { ya.lo.max(0.0) };
            for &(x, y) in &s.points {
                if !(y.is_finite() && (!ya.log || y > 0.0)) {
                    continue;
                }
                let x0 = px(x) - group / 2.0 + bw * i as f64;
                let (y0, y1) = (py(y), py(base));
                let _ = writeln!(
                    o,
                    r#"<rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{colour}"{}/>"#,
                    bw.max(1.0) - 1.0,
                    (y1 - y0).max(0.5),
                    if s.dashed { r#" fill-opacity="0.45" stroke="black" stroke-dasharray="3,2""# } else { "" }
                );
            }
        } else {
            let mut p: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!xa.log || *x > 0.0) && (!ya.log || *y > 0.0))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            if p.len() > 1 {
                let d: Vec<String> = p.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
                let _ = writeln!(
                    o,
                    r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{}/>"#,
                    d.join(" "),
                    if s.dashed { r#" stroke-dasharray="6,4""# } else { "" }
                );
            }
            for &(x, y) in &p {
                marker(&mut o, i, px(x), py(y), colour);
            }
        }
        let _ = writeln!(o, "</g>");
    }
    // Legend, in its own column right of the plot.
    let mut rows: Vec<Vec<String>> = series.iter().map(|s| wrap(&s.name, 30)).collect();
    rows.iter_mut().for_each(|r| r.truncate(3));
    let lh: f64 = rows.iter().map(|r| 15.0 * r.len() as f64 + 6.0).sum::<f64>() + 10.0;
    let _ = writeln!(o, r#"<g class="legend" font-size="12">"#);
    let _ = writeln!(
        o,
        r##"<rect class="legend-box" x="{LEGEND_X}" y="{PLOT_Y}" width="{LEGEND_W}" height="{lh:.1}" fill="white" stroke="#bbb"/>"##
    );
    let mut y = PLOT_Y + 16.0;
    for (i, (s, lines)) in series.iter().zip(&rows).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        if bars.is_some() {
            let _ = writeln!(
                o,
                r#"<rect x="{:.1}" y="{:.1}" width="18" height="9" fill="{colour}"{}/>"#,
                LEGEND_X + 8.0,
                y - 8.0,
                if s.dashed { r#" fill-opacity="0.45" stroke="black" stroke-dasharray="3,2""# } else { "" }
            );
        } else {
            let _ = writeln!(
                o,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}" stroke-width="2"{}/>"#,
                LEGEND_X + 6.0,
                LEGEND_X + 30.0,
                y - 4.0,
                y - 4.0,
                if s.dashed { r#" stroke-dasharray="6,4""# } else { "" }
            );
            marker(&mut o, i, LEGEND_X + 18.0, y - 4.0, colour);
        }
        for (j, l) in lines.iter().enumerate() {
            let _ = writeln!(o, r#"<text x="{:.1}" y="{:.1}">{}</text>"#, LEGEND_X + 36.0, y + 15.0 * j as f64, esc(l));
        }
        y += 15.0 * lines.len() as f64 + 6.0;
    }
    let _ = writeln!(o, "</g>");
    let _ = writeln!(o, r##"<g class="caption" font-size="11.5" fill="#333">"##);
    for (j, l) in caption.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text class="caption" x="12" y="{:.1}">{}</text>"#,
            PLOT_Y + PLOT_H + 70.0 + 15.0 * j as f64,
            esc(l)
        );
    }
    let _ = writeln!(o, "</g>\n</svg>");
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_have_no_double_prefixes() {
        assert_eq!(plain(100.0), "100");
        assert_eq!(plain(2.5), "2.5");
        assert_eq!(plain(0.05), "0.05");
        assert_eq!(count(1e6), "1M");
        assert_eq!(count(250_000.0), "250K");
        assert_eq!(count(1.5e6), "1.5M");
        assert_eq!(count(512.0), "512");
        let t = linear_ticks(0.0, 37.0);
        assert!(t.len() >= 4 && t.len() <= 8, "{t:?}");
        assert_eq!(t[0], 0.0);
        let l = log_ticks(0.9, 1100.0);
        assert!(l.contains(&1.0) && l.contains(&1000.0), "{l:?}");
    }

    #[test]
    fn too_many_series_or_none_is_refused() {
        let mut c = Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_log: false,
            y_log: false,
            x_counts: false,
            kind: Kind::Lines,
            series: vec![],
            caption: String::new(),
        };
        assert!(render(&c).is_err());
        c.series = (0..9).map(|i| Series::new(format!("s{i}"), vec![(1.0, i as f64)])).collect();
        assert!(render(&c).unwrap_err().contains("9 series"));
        c.series.truncate(8);
        let svg = render(&c).unwrap();
        assert_eq!(svg.matches(r#"class="series""#).count(), 8);
    }
}
