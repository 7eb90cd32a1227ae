//! Results as Markdown tables (for docs/BENCHMARKS.md) or JSON.

use serde::Serialize;

/// One measure's output: a heading, a line on how it was measured, tables,
/// and notes computed from the figures (goals met or not).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub title: String,
    pub method: String,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
}

/// A table of already formatted cells.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub headers: Vec<String>,
    /// `true` for each right-aligned (numeric) column.
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table whose first column is text and the others numbers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            numeric: (0..headers.len()).map(|i| i > 0).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn markdown(&self) -> String {
        let escape = |cell: &str| cell.replace('|', "\\|");
        let mut text = format!(
            "| {} |\n",
            self.headers
                .iter()
                .map(|h| escape(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let aligns: Vec<&str> = self
            .numeric
            .iter()
            .map(|n| if *n { "---:" } else { "---" })
            .collect();
        text.push_str(&format!("|{}|\n", aligns.join("|")));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
            text.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        text
    }
}

impl Section {
    pub fn new(title: impl Into<String>, method: impl Into<String>) -> Section {
        Section {
            title: title.into(),
            method: method.into(),
            tables: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn markdown(&self) -> String {
        let mut text = format!("### {}\n\n{}\n\n", self.title, self.method);
        for table in &self.tables {
            text.push_str(&table.markdown());
            text.push('\n');
        }
        for note in &self.notes {
            text.push_str(&format!("- {note}\n"));
        }
        if !self.notes.is_empty() {
            text.push('\n');
        }
        text
    }
}

/// Replaces the text between the two markers of `document` with `body`.
pub fn splice(document: &str, begin: &str, end: &str, body: &str) -> Result<String, String> {
    let start = document
        .find(begin)
        .ok_or_else(|| format!("marker {begin} not found"))?
        + begin.len();
    let stop = document[start..]
        .find(end)
        .ok_or_else(|| format!("marker {end} not found after {begin}"))?
        + start;
    Ok(format!(
        "{}\n{}\n{}",
        &document[..start],
        body.trim_end(),
        &document[stop..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_between_markers() {
        let doc = "intro\n<!-- a -->\nold\n<!-- b -->\noutro\n";
        let out = splice(doc, "<!-- a -->", "<!-- b -->", "new\n").unwrap();
        assert_eq!(out, "intro\n<!-- a -->\nnew\n<!-- b -->\noutro\n");
        assert!(splice(doc, "<!-- x -->", "<!-- b -->", "").is_err());
    }

    #[test]
    fn markdown_table_aligns_numbers_right() {
        let mut table = Table::new(&["what", "n"]);
        table.row(vec!["a|b".into(), "1".into()]);
        assert_eq!(
            table.markdown(),
            "| what | n |\n|---|---:|\n| a\\|b | 1 |\n"
        );
    }
}
