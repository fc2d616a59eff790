//! Small inline SVG charts (no scripts, no external files): lines and stacked areas over hours.

use std::fmt::Write;

const W: f64 = 560.0;
const H: f64 = 254.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 30.0;
/// More points than this are thinned (evenly) before drawing.
const MAX_POINTS: usize = 720;

/// One line or layer: (hours, value) points.
pub struct Series<'a> {
    pub name: &'a str,
    pub color: &'a str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// A "nice" step (1, 2 or 5 × 10^k) giving at most `max_ticks` ticks up to `max`.
fn nice_step(max: f64, max_ticks: usize) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / max_ticks as f64;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

fn hour_step(x_max: f64) -> f64 {
    [0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 12.0, 24.0].into_iter().find(|s| x_max / s <= 8.0).unwrap_or(48.0)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let step = points.len().div_ceil(MAX_POINTS);
    let mut out: Vec<(f64, f64)> = points.iter().step_by(step).copied().collect();
    if let Some(last) = points.last() {
        if out.last() != Some(last) {
            out.push(*last);
        }
    }
    out
}

struct Frame {
    x_max: f64,
    y_max: f64,
}

impl Frame {
    fn x(&self, h: f64) -> f64 {
        LEFT + (W - LEFT - RIGHT) * (h / self.x_max.max(1e-9))
    }

    fn y(&self, v: f64) -> f64 {
        TOP + (H - TOP - BOTTOM) * (1.0 - (v / self.y_max.max(1e-9)).clamp(0.0, 1.0))
    }
}

fn open(out: &mut String, title: &str, frame: &Frame, y_fmt: &dyn Fn(f64) -> String) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="{t}" class="chart">"#,
        t = esc(title)
    );
    let _ = write!(out, r#"<text x="{LEFT}" y="18" class="ct">{}</text>"#, esc(title));
    let step = nice_step(frame.y_max, 5);
    let mut v = 0.0;
    while v <= frame.y_max + 1e-9 {
        let y = frame.y(v);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e7eb"/><text x="{:.1}" y="{:.1}" class="yt">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            esc(&y_fmt(v))
        );
        v += step;
    }
    let hs = hour_step(frame.x_max);
    let mut h = 0.0;
    while h <= frame.x_max + 1e-9 {
        let x = frame.x(h);
        let label = if h.fract() == 0.0 { format!("{h:.0}h") } else { format!("{}m", (h * 60.0).round()) };
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#9ca3af"/><text x="{x:.1}" y="{:.1}" class="xt">{label}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 4.0,
            H - BOTTOM + 17.0
        );
        h += hs;
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#6b7280"/>"##,
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM
    );
}

/// The legend, on its own row under the title: a line sample for lines (dashed when the series
/// is), a swatch for areas.
fn legend(out: &mut String, series: &[Series<'_>], areas: bool) {
    let mut x = LEFT;
    for s in series {
        if areas {
            let _ = write!(out, r#"<rect x="{x:.1}" y="26" width="12" height="10" fill="{c}"/>"#, c = s.color);
        } else {
            let dash = if s.dashed { r#" stroke-dasharray="5 3""# } else { "" };
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" y1="31" x2="{:.1}" y2="31" stroke="{c}" stroke-width="2.5"{dash}/>"#,
                x + 18.0,
                c = s.color
            );
        }
        let label_x = x + if areas { 16.0 } else { 22.0 };
        let _ = write!(out, r#"<text x="{label_x:.1}" y="35" class="lg">{}</text>"#, esc(s.name));
        x = label_x + 7.0 * s.name.chars().count() as f64 + 16.0;
    }
}

fn path(frame: &Frame, points: &[(f64, f64)]) -> String {
    let mut d = String::new();
    for (i, (h, v)) in thin(points).iter().enumerate() {
        let _ = write!(d, "{}{:.1},{:.1}", if i == 0 { "M" } else { "L" }, frame.x(*h), frame.y(*v));
    }
    d
}

fn y_max_of(series: &[Series<'_>], stacked: bool) -> f64 {
    if stacked {
        let n = series.iter().map(|s| s.points.len()).max().unwrap_or(0);
        (0..n).map(|i| series.iter().filter_map(|s| s.points.get(i)).map(|p| p.1).sum::<f64>()).fold(0.0, f64::max)
    } else {
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max)
    }
}

/// The y axis top: the data's maximum (or `y_max`), rounded up to a tick.
fn axis_top(data_max: f64) -> f64 {
    let step = nice_step(data_max, 5);
    ((data_max / step).ceil() * step).max(step)
}

/// Lines over time. `y_max` forces the scale (to compare charts), else the data's maximum.
pub fn lines(
    title: &str,
    series: &[Series<'_>],
    x_max: f64,
    y_max: Option<f64>,
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    let frame = Frame { x_max, y_max: axis_top(y_max.unwrap_or_else(|| y_max_of(series, false))) };
    let mut out = String::new();
    open(&mut out, title, &frame, y_fmt);
    for s in series {
        let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
        let _ = write!(
            out,
            r#"<path d="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            path(&frame, &s.points),
            s.color
        );
    }
    legend(&mut out, series, false);
    out.push_str("</svg>");
    out
}

/// Stacked areas over time, bottom layer first.
pub fn stacked(
    title: &str,
    layers: &[Series<'_>],
    x_max: f64,
    y_max: Option<f64>,
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    let frame = Frame { x_max, y_max: axis_top(y_max.unwrap_or_else(|| y_max_of(layers, true))) };
    let mut out = String::new();
    open(&mut out, title, &frame, y_fmt);
    let n = layers.iter().map(|s| s.points.len()).max().unwrap_or(0);
    let mut base: Vec<(f64, f64)> =
        (0..n).map(|i| (layers.iter().find_map(|s| s.points.get(i)).map_or(0.0, |p| p.0), 0.0)).collect();
    for s in layers {
        let top: Vec<(f64, f64)> =
            base.iter().enumerate().map(|(i, (h, b))| (*h, b + s.points.get(i).map_or(0.0, |p| p.1))).collect();
        let mut outline = thin(&top);
        let mut back = thin(&base);
        back.reverse();
        outline.extend(back);
        let mut d = String::new();
        for (i, (h, v)) in outline.iter().enumerate() {
            let _ = write!(d, "{}{:.1},{:.1}", if i == 0 { "M" } else { "L" }, frame.x(*h), frame.y(*v));
        }
        let _ = write!(out, r#"<path d="{d}Z" fill="{}" fill-opacity="0.85" stroke="none"/>"#, s.color);
        base = top;
    }
    legend(&mut out, layers, true);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_and_axes() {
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
        assert_eq!(axis_top(93.0), 100.0);
        assert_eq!(axis_top(0.0), 1.0);
        assert_eq!(hour_step(24.0), 3.0);
        assert_eq!(hour_step(2.0), 0.25);
    }

    #[test]
    fn charts_are_svg_with_escaped_text() {
        let s = Series { name: "a<b", color: "#000", dashed: false, points: vec![(0.0, 1.0), (1.0, 2.0)] };
        let svg = lines("x & y", &[s], 1.0, None, &|v| format!("{v}"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("x &amp; y") && svg.contains("a&lt;b"));
        let layers = [
            Series { name: "spot", color: "#0a0", dashed: false, points: vec![(0.0, 1.0), (1.0, 3.0)] },
            Series { name: "on-demand", color: "#00a", dashed: false, points: vec![(0.0, 1.0), (1.0, 1.0)] },
        ];
        assert_eq!(y_max_of(&layers, true), 4.0);
        assert!(stacked("nodes", &layers, 1.0, None, &|v| format!("{v}")).contains("Z\""));
    }
}
