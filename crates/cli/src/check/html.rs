//! `redlatch check --html FILE`: the whole report as one self-contained
//! page (no script, no style sheet or image fetched): the settings, the
//! table, then each distinct drawing of a counter-example as in `--svg`,
//! with a caption saying in words what happened and its timeline as text
//! (one drawing may stand for several violations: each distinct caption
//! and timeline is given, labelled with the violations it tells).

use std::fmt::Write as _;

use super::report::{self, Report, distinct_drawings};
use super::svg::{escape, legend_svg, panel_svg};
use super::verdict::Status;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}\
table{border-collapse:collapse;font-size:13px}\
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\
th:nth-child(-n+2),td:nth-child(-n+2),th:last-child,td:last-child{text-align:left}\
td:last-child{white-space:normal;min-width:16em}\
td.broken{color:#b00000;font-weight:bold}td.expected{color:#8a5a00}td.ok{color:#1d7a2c}\
figure{margin:24px 0;border:1px solid #ccc;padding:8px;max-width:1000px}\
figure svg{max-width:100%;height:auto}\
figcaption .title{font-weight:bold;margin:4px 0}figcaption .what-happened{margin:4px 0}\
pre{font-size:12px;background:#f6f6f6;padding:6px;overflow:auto}";

/// The page.
pub fn render(report: &Report) -> String {
    let shown = distinct_drawings(report);
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    let _ = writeln!(
        out,
        "<title>redlatch check: {} counter-example{}</title>\n<style>{STYLE}</style>\n</head>\n<body>",
        shown.len(),
        if shown.len() == 1 { "" } else { "s" }
    );
    out.push_str("<h1>redlatch check</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"setup\">{} workers, {} ms per run, lease {} ms: {}.</p>",
        report.workers,
        report.duration_ms,
        report.lease_ms,
        if report.promises_kept {
            "every recipe kept what it promises"
        } else {
            "a recipe broke a promise (BROKEN below)"
        }
    );
    table(&mut out, report);
    out.push_str("<h2>Counter-examples</h2>\n");
    if shown.is_empty() {
        out.push_str("<p class=\"none\">No counter-example: no run violated anything.</p>\n");
    } else {
        let _ = writeln!(out, "<div class=\"legend\">\n{}</div>", legend_svg());
    }
    for (index, shown) in shown.iter().enumerate() {
        let number = index + 1;
        let heading = shown.heading();
        let _ = writeln!(
            out,
            "<figure class=\"counter-example\" id=\"example-{number}\">"
        );
        // The caption holds the whole heading; the panel names the cell.
        if let (Some(picture), Some((cell, _))) = (&shown.example.picture, shown.seen.first()) {
            let title = format!("{} under {}", cell.recipe.name(), cell.fault.name());
            out.push_str(&panel_svg(picture, &title, &format!("stopped-{number}")));
        }
        // One drawing may stand for several violations, told alike or not.
        let captions = shown.distinct(|example| example.caption.as_str());
        let _ = write!(
            out,
            "<figcaption><p class=\"title\">{number}. {}</p>",
            escape(&heading)
        );
        for (violations, caption) in &captions {
            let label = if captions.len() > 1 {
                format!("{violations}: ")
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "<p class=\"what-happened\">{}{}</p>",
                escape(&label),
                escape(caption)
            );
        }
        out.push_str("</figcaption>\n");
        let timelines = shown.distinct(|example| example.timeline.as_slice());
        for (violations, timeline) in &timelines {
            let summary = if timelines.len() > 1 {
                format!("timeline ({violations})")
            } else {
                "timeline".to_owned()
            };
            let _ = writeln!(
                out,
                "<details><summary>{}</summary><pre>{}</pre></details>",
                escape(&summary),
                escape(&timeline.join("\n"))
            );
        }
        out.push_str("</figure>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn table(out: &mut String, report: &Report) {
    out.push_str("<table class=\"results\">\n<thead><tr>");
    for name in [
        "recipe",
        "fault",
        "sections",
        "overlaps",
        "lost",
        "stale accepted",
        "stale refused",
        "max gap",
        "fault at",
        "errors",
        "verdict",
    ] {
        let _ = write!(out, "<th>{name}</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for cell in &report.cells {
        let figures = cell.findings.as_ref().map(|findings| &findings.figures);
        let verdict = report::verdict(cell, report);
        let class = match cell.status {
            Status::Broken => "broken",
            Status::Expected => "expected",
            Status::Ok => "ok",
            _ => "other",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td>",
            cell.recipe.name(),
            cell.fault.name()
        );
        for value in [
            report::figure(figures, |f| f.sections),
            report::figure(figures, |f| f.overlaps),
            report::figure(figures, |f| f.lost_updates),
            report::figure(figures, |f| f.stale_accepted),
            report::figure(figures, |f| f.stale_rejected),
            figures.map_or_else(|| "-".to_owned(), report::gap),
            figures.map_or_else(
                || "-".to_owned(),
                |figures| report::fault_at(cell.fault, figures),
            ),
            report::figure(figures, |f| f.errors),
        ] {
            let _ = write!(out, "<td>{}</td>", escape(&value));
        }
        let _ = writeln!(out, "<td class=\"{class}\">{}</td></tr>", escape(&verdict));
    }
    out.push_str("</tbody>\n</table>\n");
}
