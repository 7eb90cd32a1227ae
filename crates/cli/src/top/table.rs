//! `top`'s table: human units, natural order, and columns sized so that no
//! header or number is ever cut (names and holders are shortened with an
//! ellipsis instead). The plain-text form for a pipe or a log uses it, and
//! so does the terminal view.

use std::cmp::Ordering;
use std::time::Duration;

use super::row::TopLock;

/// How `top` orders the locks (`--sort`, the `s` key cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// By name, numbers in names compared as numbers (`a:2` before `a:10`).
    Name,
    /// Shortest lease left first (no expiry last).
    Ttl,
    /// Most waiters first.
    Waiters,
    /// Most acquisitions per second first.
    Rate,
}

impl SortKey {
    /// The next key, for the `s` key.
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Name => SortKey::Ttl,
            SortKey::Ttl => SortKey::Waiters,
            SortKey::Waiters => SortKey::Rate,
            SortKey::Rate => SortKey::Name,
        }
    }

    /// Its name, as `--sort` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Ttl => "ttl",
            SortKey::Waiters => "waiters",
            SortKey::Rate => "rate",
        }
    }
}

/// Sorts `locks` by `key`, ties by name in natural order.
pub fn sort(locks: &mut [TopLock], key: SortKey) {
    locks.sort_by(|a, b| {
        let first = match key {
            SortKey::Name => Ordering::Equal,
            SortKey::Ttl => match (a.lock.ttl, b.lock.ttl) {
                (Some(a), Some(b)) => a.cmp(&b),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            },
            SortKey::Waiters => b.waiters.cmp(&a.waiters),
            SortKey::Rate => rate_of(b).total_cmp(&rate_of(a)),
        };
        first.then_with(|| natural(&a.lock.name, &b.lock.name))
    });
}

fn rate_of(lock: &TopLock) -> f64 {
    lock.acquisitions_per_s.unwrap_or(-1.0)
}

/// Compares names as people do: runs of digits by their value, so that
/// `many:2` comes before `many:10`; the rest character by character.
pub fn natural(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.chars().next(), b.chars().next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let (da, ra) = split_digits(a);
                let (db, rb) = split_digits(b);
                let (va, vb) = (da.trim_start_matches('0'), db.trim_start_matches('0'));
                let order = va
                    .len()
                    .cmp(&vb.len())
                    .then_with(|| va.cmp(vb))
                    // Equal values: fewer leading zeros first, for a stable order.
                    .then_with(|| da.len().cmp(&db.len()));
                if order != Ordering::Equal {
                    return order;
                }
                (a, b) = (ra, rb);
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(&y);
                }
                (a, b) = (&a[x.len_utf8()..], &b[y.len_utf8()..]);
            }
        }
    }
}

fn split_digits(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(end)
}

/// A duration people read at a glance: `850ms`, `18.5s`, `2m03s`, `1h02m`,
/// `3d04h`. Never more than one decimal, never cut.
pub fn human_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    // Whole seconds rounded, so that 59.99 s is 1m00s, not 0m59s.
    let secs = u64::try_from(ms.saturating_add(500) / 1000).unwrap_or(u64::MAX);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 59_950 {
        format!("{:.1}s", duration.as_secs_f64())
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else if secs < 86_400 {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    } else {
        format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600)
    }
}

/// A rate with a unit prefix: `0.5`, `12`, `1.2k`, `15k`, `3.4M`.
pub fn human_rate(rate: f64) -> String {
    let (value, unit) = if rate >= 999_950.0 {
        (rate / 1e6, "M")
    } else if rate >= 999.5 {
        (rate / 1e3, "k")
    } else {
        (rate, "")
    };
    if value < 9.95 && !(unit.is_empty() && value == value.trunc()) {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.0}{unit}")
    }
}

/// Which column a cell is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Name,
    Kind,
    Waiters,
    Ttl,
    Bar,
    Token,
    Rate,
    Wait,
    Holders,
}

impl Column {
    fn header(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::Kind => "kind",
            Column::Waiters => "waiters",
            Column::Ttl => "ttl",
            Column::Bar => "",
            Column::Token => "token",
            Column::Rate => "acq/s",
            Column::Wait => "wait",
            Column::Holders => "holders",
        }
    }

    /// Numbers align right.
    fn right(self) -> bool {
        matches!(
            self,
            Column::Waiters | Column::Ttl | Column::Token | Column::Rate | Column::Wait
        )
    }
}

/// Width of the TTL bar, in cells.
const BAR: usize = 12;
/// The bar is drawn only from this width on: below, the numbers need the room.
const BAR_FROM: usize = 120;
/// Names are never shortened below this (holders give way first).
const NAME_MIN: usize = 12;
/// Holders are never shortened below this.
const HOLDERS_MIN: usize = 12;

/// The table laid out for `width` columns (`None`: as wide as it needs):
/// the header line and one line per lock, each at most `width` wide when
/// the numbers fit at all. Numbers and headers are whole; names and holders
/// are shortened with `…`.
pub struct Layout {
    /// The header line.
    pub header: String,
    /// One line per lock, in the order given.
    pub rows: Vec<String>,
}

/// Lays out `locks` (already sorted) for a screen `width` wide.
/// `longest_ttl` scales the TTL bar.
pub fn layout(locks: &[TopLock], width: Option<usize>, longest_ttl: Duration) -> Layout {
    let with_bar = width.is_some_and(|width| width >= BAR_FROM);
    let columns: Vec<Column> = [
        Column::Name,
        Column::Kind,
        Column::Waiters,
        Column::Ttl,
        Column::Bar,
        Column::Token,
        Column::Rate,
        Column::Wait,
        Column::Holders,
    ]
    .into_iter()
    .filter(|column| *column != Column::Bar || with_bar)
    .collect();
    let cells: Vec<Vec<String>> = locks
        .iter()
        .map(|lock| {
            columns
                .iter()
                .map(|column| cell(lock, *column, longest_ttl))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([column.header().len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    if let Some(width) = width {
        fit(&columns, &mut widths, width);
    }
    let line = |texts: &[String]| -> String {
        let mut out = String::new();
        for (i, column) in columns.iter().enumerate() {
            let text = shorten(&texts[i], widths[i]);
            let pad = widths[i].saturating_sub(text.chars().count());
            if i > 0 {
                out.push(' ');
            }
            if column.right() {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(&text);
            } else {
                out.push_str(&text);
                // The last column needs no padding.
                if i + 1 < columns.len() {
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
        }
        out
    };
    let header: Vec<String> = columns
        .iter()
        .map(|column| column.header().to_owned())
        .collect();
    Layout {
        header: line(&header),
        rows: cells.iter().map(|row| line(row)).collect(),
    }
}

/// Narrows the name and holders columns (only those) until the line fits.
fn fit(columns: &[Column], widths: &mut [usize], width: usize) {
    let total = |widths: &[usize]| widths.iter().sum::<usize>() + widths.len().saturating_sub(1);
    let at = |wanted: Column| columns.iter().position(|column| *column == wanted);
    let (Some(name), Some(holders)) = (at(Column::Name), at(Column::Holders)) else {
        return;
    };
    let over = total(widths).saturating_sub(width);
    if over == 0 {
        return;
    }
    // Holders give way first, down to their minimum, then the name.
    let holders_floor = HOLDERS_MIN.min(widths[holders]);
    let from_holders = over.min(widths[holders] - holders_floor);
    widths[holders] -= from_holders;
    let over = over - from_holders;
    let name_floor = NAME_MIN.min(widths[name]);
    widths[name] -= over.min(widths[name] - name_floor);
    // Still too wide: let the holders go down to their header.
    let over = total(widths).saturating_sub(width);
    let floor = Column::Holders.header().len();
    widths[holders] -= over.min(widths[holders].saturating_sub(floor));
}

/// `text` cut to `width` characters, `…` marking the cut.
pub fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

fn cell(lock: &TopLock, column: Column, longest_ttl: Duration) -> String {
    let dash = || "-".to_owned();
    match column {
        Column::Name => crate::names::shown(&lock.lock.name),
        Column::Kind => lock.kind.to_owned(),
        Column::Waiters => lock.waiters.to_string(),
        Column::Ttl => lock
            .lock
            .ttl
            .map_or_else(|| ttl_missing(lock), human_duration),
        Column::Bar => bar(lock.lock.ttl, longest_ttl),
        Column::Token => lock.lock.token.map_or_else(dash, |token| token.to_string()),
        Column::Rate => lock.acquisitions_per_s.map_or_else(dash, human_rate),
        Column::Wait => {
            if lock.longest_wait_ms == 0 {
                dash()
            } else {
                human_duration(Duration::from_millis(lock.longest_wait_ms))
            }
        }
        Column::Holders => lock.holders_text(),
    }
}

fn ttl_missing(lock: &TopLock) -> String {
    if lock.lock.held { "none" } else { "-" }.to_owned()
}

/// The lease left, as a bar scaled to the longest TTL seen.
fn bar(ttl: Option<Duration>, longest: Duration) -> String {
    let Some(ttl) = ttl else {
        return "·".repeat(BAR);
    };
    let longest = longest.as_millis().max(1);
    let filled = usize::try_from(ttl.as_millis() * BAR as u128 / longest)
        .unwrap_or(BAR)
        .min(BAR);
    format!("{}{}", "█".repeat(filled), "░".repeat(BAR - filled))
}

/// The refresh as plain text (a pipe or a log): every column whole.
pub fn render(locks: &[TopLock]) -> String {
    let layout = layout(locks, None, Duration::from_millis(1));
    let mut out = layout.header;
    if layout.rows.is_empty() {
        out.push_str("\n(no lock held)");
    }
    for row in layout.rows {
        out.push('\n');
        out.push_str(&row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_with_numbers_as_numbers() {
        let mut names = vec!["many:10", "many:2", "many:1", "a", "many:02", "many:x"];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(
            names,
            ["a", "many:1", "many:2", "many:02", "many:10", "many:x"]
        );
    }

    #[test]
    fn durations_and_rates_in_human_units() {
        let ms = Duration::from_millis;
        assert_eq!(human_duration(ms(850)), "850ms");
        assert_eq!(human_duration(ms(18_470)), "18.5s");
        assert_eq!(human_duration(ms(59_990)), "1m00s");
        assert_eq!(human_duration(ms(123_000)), "2m03s");
        assert_eq!(human_duration(ms(3_599_700)), "1h00m");
        assert_eq!(human_duration(ms(3_720_000)), "1h02m");
        assert_eq!(human_duration(ms(3 * 86_400_000 + 4 * 3_600_000)), "3d04h");
        assert_eq!(human_rate(0.5), "0.5");
        assert_eq!(human_rate(3.0), "3");
        assert_eq!(human_rate(12.34), "12");
        assert_eq!(human_rate(1_234.0), "1.2k");
        assert_eq!(human_rate(15_400.0), "15k");
        assert_eq!(human_rate(3_400_000.0), "3.4M");
    }

    #[test]
    fn shortening_marks_the_cut() {
        assert_eq!(shorten("orders", 10), "orders");
        assert_eq!(shorten("orders:nightly", 8), "orders:…");
    }
}
