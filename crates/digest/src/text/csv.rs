//! CSV and TSV tables: the header, the first and last rows, and the row and
//! column counts.

use super::{MAX_LINE, Out, clip, count};

/// How many records detection reads.
const SAMPLE_RECORDS: usize = 30;
/// How many bytes detection reads at most.
const SAMPLE_BYTES: usize = 4 << 20;
/// Detection needs at least this many rows after the header.
const MIN_ROWS: usize = 4;
/// How many rows from each end are kept to be shown.
const TAIL_ROWS: usize = 100;
/// Room kept for the closing marker.
const RESERVE: usize = 160;

/// A table's delimiter and column count, as detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Table {
    delimiter: u8,
    columns: usize,
}

/// One record: where it lies in the text (without its line terminator),
/// how many fields it has, and where the next one starts.
#[derive(Debug, Clone, Copy)]
struct Record {
    start: usize,
    end: usize,
    fields: usize,
    next: usize,
}

/// The record starting at `at` (RFC 4180: a field opening with `"` runs to
/// the closing `"`, newlines and doubled quotes included).
fn record(text: &[u8], at: usize, delimiter: u8) -> Option<Record> {
    if at >= text.len() {
        return None;
    }
    let (mut i, mut fields, mut quoted, mut field_start) = (at, 1, false, true);
    while i < text.len() {
        let b = text[i];
        if quoted {
            if b == b'"' {
                if text.get(i + 1) == Some(&b'"') {
                    i += 1;
                } else {
                    quoted = false;
                }
            }
        } else if b == delimiter {
            fields += 1;
            field_start = true;
            i += 1;
            continue;
        } else if b == b'\n' {
            let end = if i > at && text[i - 1] == b'\r' {
                i - 1
            } else {
                i
            };
            return Some(Record {
                start: at,
                end,
                fields,
                next: i + 1,
            });
        } else if b == b'"' && field_start {
            quoted = true;
        }
        field_start = false;
        i += 1;
    }
    Some(Record {
        start: at,
        end: text.len(),
        fields,
        next: text.len(),
    })
}

/// The non-blank records of `text`.
fn records(text: &[u8], delimiter: u8) -> impl Iterator<Item = Record> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        loop {
            let r = record(text, at, delimiter)?;
            at = r.next;
            if !text[r.start..r.end].iter().all(u8::is_ascii_whitespace) {
                return Some(r);
            }
        }
    })
}

/// The table `text` is, if it is one: for a tab, a comma, a semicolon or
/// a pipe, a header of at least two fields (fewer than half of them empty)
/// and at least [`MIN_ROWS`] of the first records, 90% of them with as many
/// fields, at most half of all fields empty, and (for a comma or a
/// semicolon) fewer than half of the fields after one starting with a space,
/// as prose's do. The delimiter giving the most columns wins.
pub(super) fn detect(text: &str) -> Option<Table> {
    // Only the sample is read: a huge single line costs 4 MiB per delimiter.
    let bytes = &text.as_bytes()[..text.floor_char_boundary(SAMPLE_BYTES)];
    let cut = bytes.len() < text.len();
    let mut best: Option<Table> = None;
    for delimiter in [b'\t', b',', b';', b'|'] {
        let mut sample = Vec::new();
        for r in records(bytes, delimiter) {
            // A record running to the end of a cut sample may be cut.
            if (cut && r.next == bytes.len()) || sample.len() == SAMPLE_RECORDS {
                break;
            }
            sample.push(r);
        }
        let Some((header, rows)) = sample.split_first() else {
            continue;
        };
        let columns = header.fields;
        if columns < 2 || rows.len() < MIN_ROWS {
            continue;
        }
        let fields = |r: &Record| split(&text[r.start..r.end], delimiter);
        let empty_header = fields(header)
            .iter()
            .filter(|f| f.trim().is_empty())
            .count();
        if empty_header * 2 >= columns {
            continue;
        }
        let matching = rows.iter().filter(|r| r.fields == columns).count();
        if matching * 10 < rows.len() * 9 {
            continue;
        }
        let (all, empty) = sample.iter().fold((0, 0), |(all, empty), r| {
            let f = fields(r);
            (
                all + f.len(),
                empty + f.iter().filter(|f| f.trim().is_empty()).count(),
            )
        });
        if empty * 2 > all {
            continue;
        }
        // Prose puts a space after its commas and semicolons; tables do not.
        if matches!(delimiter, b',' | b';') {
            let (later, spaced) = sample.iter().fold((0, 0), |(later, spaced), r| {
                let f = fields(r);
                (
                    later + f.len() - 1,
                    spaced + f[1..].iter().filter(|f| f.starts_with(' ')).count(),
                )
            });
            if spaced * 2 >= later {
                continue;
            }
        }
        if best.is_none_or(|b| columns > b.columns) {
            best = Some(Table { delimiter, columns });
        }
    }
    best
}

/// The fields of one record, quotes left in (for detection only).
fn split(record: &str, delimiter: u8) -> Vec<&str> {
    let bytes = record.as_bytes();
    let (mut fields, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'"' {
            quoted = !quoted;
        } else if b == delimiter && !quoted {
            fields.push(&record[start..i]);
            start = i + 1;
        }
    }
    fields.push(&record[start..]);
    fields
}

/// The digest of a table, under `target` bytes.
pub(super) fn digest(text: &str, table: &Table, target: usize) -> String {
    let bytes = text.as_bytes();
    let mut all = records(bytes, table.delimiter);
    let Some(header) = all.next() else {
        return String::new();
    };
    let (mut rows, mut ragged) = (0usize, 0usize);
    let mut head: Vec<Record> = Vec::new();
    let mut tail = std::collections::VecDeque::with_capacity(TAIL_ROWS);
    for r in all {
        rows += 1;
        ragged += usize::from(r.fields != table.columns);
        if head.len() < TAIL_ROWS {
            head.push(r);
        } else {
            if tail.len() == TAIL_ROWS {
                tail.pop_front();
            }
            tail.push_back(r);
        }
    }
    let name = match table.delimiter {
        b'\t' => "TSV (tab-separated)",
        b',' => "CSV (comma-separated)",
        b';' => "CSV (semicolon-separated)",
        _ => "CSV (pipe-separated)",
    };
    let mut out = Out::new(target);
    out.line(&format!(
        "[digest: {name}, {} bytes: a header and {}, {}{}]",
        text.len(),
        count(rows, "row", "rows"),
        count(table.columns, "column", "columns"),
        if ragged > 0 {
            format!(
                "; {} with another column count",
                count(ragged, "row", "rows")
            )
        } else {
            String::new()
        }
    ));
    let limit = target.saturating_sub(RESERVE);

    // The header, in at most a quarter of the budget, cut between fields.
    let header_text = &text[header.start..header.end];
    let header_room = (target / 4).max(MAX_LINE);
    if header_text.len() + 8 <= header_room {
        out.line(&format!("header: {header_text}"));
    } else {
        let fields = split(header_text, table.delimiter);
        let mut shown = String::from("header: ");
        let mut n = 0;
        for f in &fields {
            if shown.len() + f.len() + 48 > header_room {
                break;
            }
            if n > 0 {
                shown.push(char::from(table.delimiter));
            }
            shown.push_str(&clip(f, MAX_LINE));
            n += 1;
        }
        shown.push_str(&format!(
            " …[{} more {}]",
            fields.len() - n,
            if fields.len() - n == 1 {
                "column"
            } else {
                "columns"
            }
        ));
        out.line(&shown);
    }

    // Rows: the first ones in 60% of what is left, the last in the rest.
    let row_text = |r: &Record| clip(&text[r.start..r.end], MAX_LINE * 2);
    let left = limit.saturating_sub(out.len());
    let head_limit = out.len() + left * 3 / 5;
    let mut first = Vec::new();
    let mut used = out.len() + 12;
    for r in &head {
        let line = row_text(r);
        if used + line.len() + 1 > head_limit {
            break;
        }
        used += line.len() + 1;
        first.push(line);
    }
    let shown_head = first.len();
    // The tail never repeats a head row.
    let tail_candidates: Vec<&Record> = if rows <= TAIL_ROWS {
        head[shown_head..].iter().collect()
    } else {
        let from_head = TAIL_ROWS.saturating_sub(tail.len());
        head[shown_head.max(head.len() - from_head)..]
            .iter()
            .chain(tail.iter())
            .collect()
    };
    let mut last = Vec::new();
    used += 12;
    for r in tail_candidates.iter().rev() {
        let line = row_text(r);
        if used + line.len() + 1 > limit {
            break;
        }
        used += line.len() + 1;
        last.push(line);
    }
    last.reverse();
    out.line("first rows:");
    for line in &first {
        out.line(line);
    }
    let left_out = rows - shown_head - last.len();
    if left_out > 0 {
        out.line(&format!("[… {} left out]", count(left_out, "row", "rows")));
    }
    if !last.is_empty() {
        out.line("last rows:");
        for line in &last {
            out.line(line);
        }
    }
    if left_out > 0 {
        out.line(&format!(
            "[digest: {} of {} shown; retrieve_raw has them all]",
            shown_head + last.len(),
            count(rows, "row", "rows")
        ));
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_hold_delimiters_and_newlines() {
        let text = "a,b\n\"x,1\",\"two\nlines\"\n3,4\n";
        let rs: Vec<Record> = records(text.as_bytes(), b',').collect();
        assert_eq!(rs.len(), 3);
        assert_eq!(rs[1].fields, 2);
        assert_eq!(&text[rs[1].start..rs[1].end], "\"x,1\",\"two\nlines\"");
    }

    #[test]
    fn the_delimiter_with_most_columns_wins() {
        let tsv = "name\tnote\tn\n".to_owned() + &"pod-1\ta, b\t3\n".repeat(10);
        assert_eq!(
            detect(&tsv),
            Some(Table {
                delimiter: b'\t',
                columns: 3
            })
        );
    }
}
