//! `redlatch check --svg FILE`: every counter-example drawn as a timeline,
//! one panel each, the way Jepsen draws its histories. A lane per worker:
//! a solid bar while it believed it held the lock, a dashed outline for the
//! lease it was granted at acquisition, hatching while it was stopped, a
//! mark for each write (accepted, accepted over an update it had not read,
//! refused for an old token), and a numbered red line for each thing the
//! lab did, explained under the panel.

use std::fmt::Write as _;

use super::picture::{Picture, WriteMark};
use super::report::{Report, distinct_drawings};

const WIDTH: f64 = 1000.0;
const PLOT_LEFT: f64 = 60.0;
const PLOT_RIGHT: f64 = 980.0;
const LANE: f64 = 28.0;
const TITLE: f64 = 30.0;
const AXIS: f64 = 22.0;
const NOTE: f64 = 15.0;
const GAP: f64 = 24.0;
const LEGEND: f64 = 56.0;

/// The whole document: a legend, then one panel per distinct drawing (a
/// stretch of a run that shows several violations is drawn once).
pub fn render(report: &Report) -> String {
    let mut body = String::new();
    let mut y = LEGEND;
    let mut panels = 0;
    for shown in distinct_drawings(report) {
        let Some(picture) = &shown.example.picture else {
            continue;
        };
        y = panel(&mut body, picture, &shown.heading(), y, "stopped") + GAP;
        panels += 1;
    }
    if panels == 0 {
        let _ = writeln!(
            body,
            r#"<text x="10" y="{y}" font-size="13">No counter-example: no run violated anything.</text>"#,
        );
        y += 20.0;
    }
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y}" viewBox="0 0 {WIDTH} {y}" font-family="sans-serif">"#
    );
    svg.push_str(&defs("stopped"));
    legend(&mut svg, "stopped");
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    svg
}

/// The legend alone, as an `<svg>` element (for `--html`).
pub fn legend_svg() -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{LEGEND}" viewBox="0 0 {WIDTH} {LEGEND}" font-family="sans-serif" role="img" aria-label="legend">"#
    );
    svg.push_str(&defs("stopped-legend"));
    legend(&mut svg, "stopped-legend");
    svg.push_str("</svg>\n");
    svg
}

/// One panel alone, as an `<svg>` element (for `--html`); `id` names its
/// hatching pattern, unique within the page.
pub fn panel_svg(picture: &Picture, title: &str, id: &str) -> String {
    let mut body = String::new();
    let bottom = panel(&mut body, picture, title, 0.0, id) + 8.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{bottom}" viewBox="0 0 {WIDTH} {bottom}" font-family="sans-serif" role="img" aria-label="{}">"#,
        escape(title)
    );
    svg.push_str(&defs(id));
    svg.push_str(&body);
    svg.push_str("</svg>\n");
    svg
}

fn defs(pattern: &str) -> String {
    format!(
        r##"<defs><pattern id="{pattern}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#999"/></pattern></defs>
<rect width="100%" height="100%" fill="white"/>
"##
    )
}

fn legend(svg: &mut String, pattern: &str) {
    let _ = writeln!(
        svg,
        r##"<g font-size="11"><rect x="10" y="8" width="24" height="10" fill="#4a7fd4"/><text x="40" y="17">believes it holds the lock</text>
<rect x="200" y="8" width="24" height="10" fill="none" stroke="#4a7fd4" stroke-dasharray="3,2"/><text x="230" y="17">lease granted at acquisition (renewals may extend it)</text>
<rect x="530" y="8" width="24" height="10" fill="url(#{pattern})"/><text x="560" y="17">stopped (SIGSTOP)</text>
<circle cx="16" cy="34" r="4" fill="#2a9d3a"/><text x="26" y="38">write accepted</text>
<circle cx="136" cy="34" r="5" fill="#f08c00" stroke="black"/><text x="146" y="38">accepted over an update it had not read (lost update)</text>
<path d="M452,30 l8,8 m0,-8 l-8,8" stroke="#d62828" stroke-width="2"/><text x="466" y="38">refused (old fencing token)</text>
<line x1="650" y1="28" x2="650" y2="40" stroke="#d62828" stroke-dasharray="4,2"/><text x="656" y="38">what the lab did (numbered below each panel)</text></g>"##
    );
}

/// Draws one panel at `top`; returns its bottom.
fn panel(out: &mut String, picture: &Picture, title: &str, top: f64, pattern: &str) -> f64 {
    let span = (picture.to_ms - picture.from_ms).max(1.0);
    let x = |ms: f64| {
        PLOT_LEFT
            + (ms.clamp(picture.from_ms, picture.to_ms) - picture.from_ms) / span
                * (PLOT_RIGHT - PLOT_LEFT)
    };
    let _ = writeln!(
        out,
        r#"<g><text x="10" y="{}" font-size="{:.1}" font-weight="bold">{}</text>"#,
        top + 18.0,
        title_size(title),
        escape(title)
    );
    let axis_y = top + TITLE;
    let lanes_top = axis_y + AXIS;
    let lanes_bottom = lanes_top + LANE * picture.lanes.len().max(1) as f64;
    let _ = writeln!(
        out,
        r##"<line x1="{PLOT_LEFT}" y1="{axis_y}" x2="{PLOT_RIGHT}" y2="{axis_y}" stroke="#444"/>"##
    );
    for tick in ticks(picture.from_ms, picture.to_ms) {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{axis_y}" x2="{0:.1}" y2="{1}" stroke="#ddd"/><text x="{0:.1}" y="{2}" font-size="10" text-anchor="middle">{3:+.3}s</text>"##,
            x(tick),
            lanes_bottom,
            axis_y + 14.0,
            tick / 1000.0
        );
    }
    for (row, lane) in picture.lanes.iter().enumerate() {
        let y = lanes_top + LANE * row as f64;
        let mid = y + LANE / 2.0;
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-size="12">w{}</text>"#,
            mid + 4.0,
            lane.worker
        );
        for &(from, to, lease_end) in &lane.holds {
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#4a7fd4" stroke-dasharray="3,2"/>"##,
                x(from),
                y + 4.0,
                (x(lease_end) - x(from)).max(1.0),
                LANE - 8.0
            );
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#4a7fd4" fill-opacity="0.8"/>"##,
                x(from),
                y + 8.0,
                (x(to) - x(from)).max(1.0),
                LANE - 16.0
            );
        }
        for &(from, to) in &lane.stopped {
            let _ = writeln!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="url(#{pattern})"/>"#,
                x(from),
                y + 8.0,
                (x(to) - x(from)).max(1.0),
                LANE - 16.0
            );
        }
        for &(at, mark) in &lane.writes {
            let cx = x(at);
            let _ = match mark {
                WriteMark::Accepted => writeln!(
                    out,
                    r##"<circle cx="{cx:.1}" cy="{mid:.1}" r="4" fill="#2a9d3a"/>"##
                ),
                WriteMark::LostAnother => writeln!(
                    out,
                    r##"<circle cx="{cx:.1}" cy="{mid:.1}" r="5" fill="#f08c00" stroke="black"/>"##
                ),
                WriteMark::Refused => writeln!(
                    out,
                    r##"<path d="M{:.1},{:.1} l8,8 m0,-8 l-8,8" stroke="#d62828" stroke-width="2"/>"##,
                    cx - 4.0,
                    mid - 4.0
                ),
            };
        }
    }
    let mut bottom = lanes_bottom + 6.0;
    for (number, (at, what)) in picture.faults.iter().enumerate() {
        let number = number + 1;
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#d62828" stroke-dasharray="4,2"/><text x="{3:.1}" y="{4}" font-size="10" fill="#d62828">{number}</text>"##,
            x(*at),
            axis_y,
            lanes_bottom,
            x(*at) + 2.0,
            axis_y + AXIS - 2.0
        );
        bottom += NOTE;
        let _ = writeln!(
            out,
            r##"<text x="{PLOT_LEFT}" y="{bottom}" font-size="11" fill="#d62828">{number}. {:+.3}s lab: {}</text>"##,
            at / 1000.0,
            escape(what)
        );
    }
    out.push_str("</g>\n");
    bottom
}

/// The title's font size: 14, smaller for a heading that names several
/// violations, so that it fits the panel's width (a bold sans-serif
/// character is about 0.62 of its size wide).
fn title_size(title: &str) -> f64 {
    let room = WIDTH - 20.0;
    (room / (0.62 * title.chars().count().max(1) as f64)).clamp(9.0, 14.0)
}

/// About eight round tick positions (ms) between `from` and `to`.
fn ticks(from: f64, to: f64) -> Vec<f64> {
    let span = (to - from).max(1.0);
    let raw = span / 8.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(raw);
    let mut tick = (from / step).ceil() * step;
    let mut out = Vec::new();
    while tick <= to && out.len() < 20 {
        out.push(tick);
        tick += step;
    }
    out
}

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        let ticks = ticks(340.0, 2400.0);
        assert!(ticks.len() >= 4 && ticks.len() <= 20, "{ticks:?}");
        assert!(ticks.iter().all(|tick| (340.0..=2400.0).contains(tick)));
        assert!(ticks.iter().all(|tick| tick % 100.0 == 0.0), "{ticks:?}");
    }

    #[test]
    fn a_long_title_gets_a_smaller_font_to_fit() {
        assert_eq!(
            title_size("set-nx-px under pause-client: Overlap (expected)"),
            14.0
        );
        let long = "setnx-getset under partition: Overlap (expected), LostUpdate (expected), \
                    StaleWrite (expected) — the same stretch of the run, seen 3 times";
        let size = title_size(long);
        assert!((9.0..14.0).contains(&size), "{size}");
        assert!(0.62 * size * long.chars().count() as f64 <= WIDTH - 20.0);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
