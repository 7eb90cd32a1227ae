//! What the lab prints: the text report (a timeline shared by several
//! violations shown once, a fenced recipe's story told to its refused
//! write, when the fault came and how many calls failed) and `--html`,
//! rendered in headless Chromium.
//!
//! Two workers: with only one other worker, the paused holder's overtaker
//! is also the one whose update it overwrites, so one stretch of the run
//! is an overlap, a stale write and a lost update at once.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{
    cell, check, check_text, distinct_timelines, figure, heading_names, shown_violations, turn,
    words,
};

/// The text report's parts: the settings line, the table, each
/// counter-example (heading, caption, timeline), the closing line.
struct Text {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    examples: Vec<Vec<String>>,
}

fn parse(text: &str) -> Text {
    let blocks: Vec<&str> = text.split("\n\n").collect();
    assert!(blocks.len() >= 3, "settings, table, closing line: {text}");
    let mut table = blocks[1].lines();
    let header = table
        .next()
        .expect("the table's header")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let rows = table
        .map(|row| row.split_whitespace().map(str::to_owned).collect())
        .collect();
    let examples = blocks[2..blocks.len() - 1]
        .iter()
        .map(|block| block.lines().map(str::to_owned).collect())
        .collect();
    Text {
        header,
        rows,
        examples,
    }
}

impl Text {
    /// Column `name` of the row for `recipe` under `fault`.
    fn column(&self, recipe: &str, fault: &str, name: &str) -> &str {
        let index = self
            .header
            .iter()
            .position(|column| column == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.header));
        let row = self
            .rows
            .iter()
            .find(|row| row[0] == recipe && row[1] == fault)
            .unwrap_or_else(|| panic!("no row {recipe} × {fault} in {:?}", self.rows));
        &row[index]
    }
}

const VIOLATIONS: [&str; 4] = ["Overlap", "LostUpdate", "StaleWrite", "Stuck"];

#[test]
fn a_timeline_shared_by_several_violations_is_shown_once_and_the_table_says_when_the_fault_came_and_how_many_calls_failed()
 {
    let (code, text) = check_text(&words(
        "--recipe set-nx-px --fault pause-client --workers 2 --duration 3s",
    ));
    assert_eq!(code, 0, "{text}");
    let report = parse(&text);

    // "fault-at": when the pause took effect (armed 0.3 s in), in seconds,
    // with a count when there were several; "errors": failed calls.
    let fault_at = report.column("set-nx-px", "pause-client", "fault-at");
    let first = fault_at
        .split('×')
        .next()
        .and_then(|seconds| seconds.strip_suffix('s'))
        .and_then(|seconds| seconds.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("fault-at {fault_at:?} is not seconds"));
    assert!((0.3..3.0).contains(&first), "fault at {first} s: {text}");
    let errors = report.column("set-nx-px", "pause-client", "errors");
    assert!(errors.parse::<u64>().is_ok(), "errors {errors:?}: {text}");

    // The paused holder's write overwrote its overtaker's update: an
    // overlap, a lost update and a stale write, each named in a heading...
    let named: Vec<&str> = VIOLATIONS
        .into_iter()
        .filter(|violation| {
            report
                .examples
                .iter()
                .any(|example| example[0].contains(&format!("{violation} (")))
        })
        .collect();
    for violation in ["Overlap", "LostUpdate", "StaleWrite"] {
        assert!(named.contains(&violation), "{violation} not named: {text}");
    }
    // ...but no timeline printed twice: a heading names every violation
    // its timeline shows, and says how many.
    for (index, example) in report.examples.iter().enumerate() {
        for later in &report.examples[index + 1..] {
            assert_ne!(
                example[1..],
                later[1..],
                "printed twice, under {:?} and {:?}",
                example[0],
                later[0]
            );
        }
        let count = VIOLATIONS
            .iter()
            .filter(|violation| example[0].contains(&format!("{violation} (")))
            .count();
        if count > 1 {
            assert!(
                example[0].ends_with(&format!("the same timeline, seen {count} times")),
                "{:?}",
                example[0]
            );
        }
    }
}

#[test]
fn a_fenced_recipes_timeline_ends_with_the_refused_write() {
    let (code, text) = check_text(&[
        "--recipe",
        "redlatch-fenced",
        "--fault",
        "pause-client",
        "--workers",
        "2",
        // The pause lasts 1.25 s from when it takes effect (0.3 s in, later
        // on a busy machine): room for the late write inside the run.
        "--duration",
        "4s",
    ]);
    assert_eq!(code, 0, "{text}");
    let report = parse(&text);
    let overlap = report
        .examples
        .iter()
        .find(|example| example[0].starts_with("redlatch-fenced under pause-client: Overlap"))
        .unwrap_or_else(|| panic!("no overlap shown: {text}"));
    let last = overlap.last().expect("a timeline");
    assert!(
        last.contains("REJECTED"),
        "the story stops before the fence refuses the paused holder's write: {overlap:#?}"
    );
    // The refused writer is the one that was overtaken: another worker
    // acquired after it stopped.
    let writer = last.split_whitespace().nth(1).expect("who wrote");
    let stopped = overlap
        .iter()
        .position(|line| {
            line.split_whitespace().nth(1) == Some(writer) && line.contains("stops itself")
        })
        .unwrap_or_else(|| panic!("{writer} never stopped: {overlap:#?}"));
    assert!(
        overlap[stopped..]
            .iter()
            .any(|line| line.contains("acquired the lock") && !line.contains(writer)),
        "{overlap:#?}"
    );
    assert!(
        overlap[1].contains("refused by the fence"),
        "the caption says so: {:?}",
        overlap[1]
    );
}

/// Chromium, installed with `scripts/ensure-chromium` when missing.
fn chromium() -> Result<PathBuf, String> {
    let find = || {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
    };
    if let Some(path) = find() {
        return Ok(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ensure-chromium");
    eprintln!("Chromium missing: running {}", script.display());
    let installed = Command::new("bash").arg(&script).status();
    find().ok_or_else(|| format!("{} gave {installed:?}", script.display()))
}

/// Renders `page` in headless Chromium at `width`×`height` into a PNG.
fn screenshot(chromium: &Path, page: &Path, width: u32, height: u32) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("temp dir");
    let png = dir.path().join("report.png");
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-dev-shm-usage",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium took over 120 s to take a screenshot");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "chromium: {status}");
    std::fs::read(&png).expect("chromium wrote no screenshot")
}

#[test]
fn the_html_report_draws_each_counter_example_once_with_a_caption_and_renders_in_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("report.html");
    let page_arg = page.to_string_lossy().into_owned();
    let (code, report) = check(&[
        "--recipe",
        "set-nx-px",
        "--recipe",
        "redlatch-fenced",
        "--fault",
        "pause-client",
        "--workers",
        "2",
        "--duration",
        "4s",
        "--html",
        &page_arg,
    ]);
    assert_eq!(code, 0, "{report}");
    let fenced = cell(&report, "redlatch-fenced", "pause-client");
    assert!(figure(fenced, "stale_rejected") > 0, "{fenced}");

    // Structure: well-formed, self-contained, the table with its columns,
    // one figure per distinct counter-example: a drawing and a caption.
    let html = std::fs::read_to_string(&page).expect("the HTML file");
    let xml = html.trim_start_matches("<!DOCTYPE html>");
    let document = roxmltree::Document::parse(xml).expect("well-formed markup");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "html");
    for node in root.descendants().filter(|node| node.is_element()) {
        let tag = node.tag_name().name();
        assert!(
            !["script", "link", "img", "iframe"].contains(&tag),
            "fetches or runs something: <{tag}>"
        );
        assert!(
            node.attribute("src").is_none() && node.attribute("href").is_none(),
            "refers outside the page: <{tag}>"
        );
    }
    let headers: Vec<&str> = root
        .descendants()
        .filter(|node| node.has_tag_name("th"))
        .filter_map(|node| node.text())
        .collect();
    for column in ["recipe", "fault", "fault at", "errors", "verdict"] {
        assert!(headers.contains(&column), "{column} missing: {headers:?}");
    }
    let rows = root
        .descendants()
        .filter(|node| node.has_tag_name("tr"))
        .count();
    assert_eq!(rows, 3, "a header and one row per cell");
    let figures: Vec<roxmltree::Node> = root
        .descendants()
        .filter(|node| node.has_tag_name("figure"))
        .collect();
    // One figure per distinct drawing: several violations in one stretch
    // of a run are drawn once, the figure's title naming them all.
    assert!(
        !figures.is_empty() && figures.len() <= distinct_timelines(&report),
        "{html}"
    );
    let drawings: Vec<String> = figures
        .iter()
        .filter_map(|figure| figure.children().find(|node| node.has_tag_name("svg")))
        .map(|svg| {
            // The same drawing but for its hatching pattern's id.
            let text = &xml[svg.range()];
            let id = svg
                .descendants()
                .find(|node| node.has_tag_name("pattern"))
                .and_then(|pattern| pattern.attribute("id"))
                .unwrap_or_default();
            text.replace(id, "pattern")
        })
        .collect();
    for (index, drawing) in drawings.iter().enumerate() {
        assert!(
            !drawings[index + 1..].contains(drawing),
            "figure {} is drawn twice",
            index + 1
        );
    }
    let titles: Vec<String> = figures
        .iter()
        .filter_map(|figure| {
            figure
                .descendants()
                .find(|node| node.attribute("class") == Some("title"))
                .and_then(|node| node.text())
                // "2. RECIPE under FAULT: ..."
                .and_then(|title| title.split_once(". "))
                .map(|(_, heading)| heading.to_owned())
        })
        .collect();
    assert_eq!(titles.len(), figures.len(), "{titles:?}");
    for (recipe, fault, violation) in shown_violations(&report) {
        assert!(
            titles
                .iter()
                .any(|title| heading_names(title, &recipe, &fault, &violation)),
            "{recipe} under {fault}: {violation} has no figure: {titles:?}"
        );
    }
    let text = |node: roxmltree::Node| -> String {
        node.descendants()
            .filter_map(|node| node.text())
            .collect::<Vec<_>>()
            .join("")
    };
    let mut captions = Vec::new();
    for figure in &figures {
        assert!(
            figure.children().any(|node| node.has_tag_name("svg")),
            "a figure without its drawing: {}",
            text(*figure)
        );
        let caption = figure
            .children()
            .find(|node| node.has_tag_name("figcaption"))
            .map(text)
            .expect("a figcaption");
        captions.push(caption);
    }
    // The captions say in words what happened.
    let fenced_caption = captions
        .iter()
        .find(|caption| caption.contains("redlatch-fenced under pause-client: Overlap"))
        .unwrap_or_else(|| panic!("no fenced overlap: {captions:#?}"));
    for words in [
        "was stopped at",
        "past the lease it was granted at acquisition",
        "still believed it held the lock",
        "refused by the fence",
    ] {
        assert!(
            fenced_caption.contains(words),
            "{words:?}: {fenced_caption}"
        );
    }
    let plain_caption = captions
        .iter()
        .find(|caption| caption.contains("set-nx-px under pause-client"))
        .unwrap_or_else(|| panic!("no set-nx-px example: {captions:#?}"));
    assert!(
        plain_caption.contains("a value it had not read: an update is lost"),
        "{plain_caption}"
    );

    // The page renders: a screenshot of the right size that is not blank.
    let chromium = match chromium() {
        Ok(path) => path,
        Err(reason) if std::env::var_os("CI").is_none() => {
            eprintln!(
                "skipped the screenshot: Chromium is missing and could not be installed ({reason})"
            );
            return;
        }
        Err(reason) => panic!("Chromium is missing and could not be installed: {reason}"),
    };
    let (width, height) = (1100, 1400);
    let png = {
        let _turn = turn();
        screenshot(&chromium, &page, width, height)
    };
    let mut reader = png::Decoder::new(Cursor::new(png))
        .read_info()
        .expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a sane size")];
    let info = reader.next_frame(&mut pixels).expect("a frame");
    assert_eq!((info.width, info.height), (width, height));
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{info:?}");
    let samples = info.color_type.samples();
    assert!(samples >= 3, "{info:?}");
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    for pixel in pixels[..info.buffer_size()].chunks_exact(samples) {
        let rgb = [pixel[0], pixel[1], pixel[2]];
        colours.insert(rgb);
        if rgb != [255, 255, 255] {
            inked += 1;
        }
    }
    let total = (width * height) as usize;
    assert!(
        colours.len() >= 32,
        "{} colours: blank or nearly",
        colours.len()
    );
    // Text, the table and the drawings: well over 1% of the page.
    assert!(inked * 100 > total, "{inked} of {total} pixels not white");
    // The drawings' colours are there: the holders' blue, the writes' green.
    let near = |target: [u8; 3]| {
        colours
            .iter()
            .any(|colour| colour.iter().zip(target).all(|(a, b)| a.abs_diff(b) <= 40))
    };
    assert!(near([0x4a, 0x7f, 0xd4]), "no holder's bar drawn");
    assert!(near([0x2a, 0x9d, 0x3a]), "no accepted write drawn");
}
