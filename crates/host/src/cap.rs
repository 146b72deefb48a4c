//! `max_result_bytes`: the bound on a whole result as the caller receives it.

use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, ResourceContents};

/// Room kept for the marker that says what was cut.
const MARKER_ROOM: usize = 400;

/// Bounds `result` to `max` bytes as serialized (text blocks, embedded
/// resources, images and audio, and `structuredContent` all count), with a
/// marker block saying what was cut and how much.
///
/// Content blocks are kept in order while they fit; the first text (or
/// embedded text resource) that does not fit is cut on a character boundary
/// to the room left; a binary block (image, audio, blob) that does not fit is
/// left out whole, and so is the structured content, which is weighed after
/// the content blocks (they are what hosts show the model). A result already
/// within `max` comes back unchanged.
pub fn cap_result(mut result: CallToolResult, max: usize) -> CallToolResult {
    if within_by_bound(&mut result, max) {
        return result;
    }
    let total = json_len(&result);
    if total <= max {
        return result;
    }
    let structured = result.structured_content.take();
    let blocks = std::mem::take(&mut result.content);
    let mut budget = max.saturating_sub(json_len(&result) + MARKER_ROOM);
    let mut cuts = Cuts::default();
    for mut block in blocks {
        let size = json_len(&block) + 1;
        if size <= budget {
            budget -= size;
            result.content.push(block);
            continue;
        }
        // The text is taken out (not copied) to weigh the rest of the block.
        match text_of(&mut block).map(std::mem::take) {
            Some(mut text) => {
                let shell = json_len(&block) + 1;
                if budget > shell {
                    let end = fit_json_str(&text, budget - shell);
                    cuts.text_bytes += text.len() - end;
                    text.truncate(end);
                    budget = 0;
                    if let Some(slot) = text_of(&mut block) {
                        *slot = text;
                    }
                    result.content.push(block);
                } else {
                    cuts.text_bytes += text.len();
                }
            }
            None => {
                cuts.binary_blocks += 1;
                cuts.binary_bytes += size - 1;
            }
        }
    }
    if let Some(structured) = structured {
        let size = json_len(&structured) + 20;
        if size <= budget {
            result.structured_content = Some(structured);
        } else {
            cuts.structured_bytes = Some(size - 20);
        }
    }
    result
        .content
        .push(ContentBlock::text(cuts.marker(total, max)));
    result
}

/// The most bytes a text, serialized as a JSON string, may take to be kept
/// whole by [`cap_result`] at `max` as the first block of `result` once its
/// texts and structured content are replaced by it (the blocks without text
/// that follow it may be left out, but not it). `result` is weighed with
/// its content and structured content taken out, and given back as it was.
pub(crate) fn first_text_room(result: &mut CallToolResult, max: usize) -> usize {
    let content = std::mem::take(&mut result.content);
    let structured = result.structured_content.take();
    let shell = json_len(&*result);
    // Room for the marker only where there is something after it to cut.
    let marker = if content.iter().any(|c| text_only(c).is_none()) {
        MARKER_ROOM
    } else {
        0
    };
    result.content = content;
    result.structured_content = structured;
    // The block around an empty text, less that text's `""`, and its comma.
    let block = json_len(&ContentBlock::text(String::new())).saturating_sub(2) + 1;
    max.saturating_sub(shell + marker + block)
}

/// A text block's text (not an embedded resource's: the digest keeps those).
fn text_only(block: &ContentBlock) -> Option<&str> {
    block.as_text().map(|t| t.text.as_str())
}

/// What the cap left out.
#[derive(Debug, Default)]
struct Cuts {
    text_bytes: usize,
    binary_blocks: usize,
    binary_bytes: usize,
    structured_bytes: Option<usize>,
}

impl Cuts {
    fn marker(&self, total: usize, max: usize) -> String {
        let mut parts = Vec::new();
        if self.text_bytes > 0 {
            parts.push(format!("{} bytes of text cut", self.text_bytes));
        }
        if self.binary_blocks > 0 {
            parts.push(format!(
                "{} binary block(s) ({} bytes) left out",
                self.binary_blocks, self.binary_bytes
            ));
        }
        if let Some(bytes) = self.structured_bytes {
            parts.push(format!("structuredContent ({bytes} bytes) left out"));
        }
        format!(
            "[core-agent: the result was {total} bytes, over max_result_bytes ({max}): {}]",
            parts.join("; ")
        )
    }
}

/// The text a block carries, for cutting: a text block's, or an embedded
/// text resource's.
fn text_of(block: &mut ContentBlock) -> Option<&mut String> {
    match block {
        ContentBlock::Text(t) => Some(&mut t.text),
        ContentBlock::Resource(r) => match &mut r.resource {
            ResourceContents::TextResourceContents { text, .. } => Some(text),
            _ => None,
        },
        _ => None,
    }
}

/// Whether an upper bound of the result's serialized size, found without
/// escaping its texts, is already within `max`: the result is weighed with
/// its texts taken out (not copied; put back after), and each text counted
/// at [`MAX_ESCAPE`] bytes per byte. Most results are far under the cap, and
/// this spares scanning their texts; a result the bound cannot clear is
/// weighed exactly.
fn within_by_bound(result: &mut CallToolResult, max: usize) -> bool {
    let text_bytes: usize = result
        .content
        .iter_mut()
        .filter_map(|b| text_of(b).map(|t| t.len()))
        .sum();
    let Some(texts_bound) = text_bytes.checked_mul(MAX_ESCAPE) else {
        return false;
    };
    if texts_bound > max {
        return false;
    }
    let texts: Vec<String> = result
        .content
        .iter_mut()
        .filter_map(|b| text_of(b).map(std::mem::take))
        .collect();
    // Each text left `""` behind: what remains is the result's shell.
    let shell = json_len(&*result);
    for (slot, text) in result.content.iter_mut().filter_map(text_of).zip(texts) {
        *slot = text;
    }
    shell.saturating_add(texts_bound) <= max
}

/// The most bytes one byte of a string takes in JSON: a control character
/// other than `\n`, `\r`, `\t`, `\b`, `\f` becomes `\u00XX`.
const MAX_ESCAPE: usize = 6;

/// The length of `value` serialized as JSON, counted without building it.
pub(crate) fn json_len(value: &impl serde::Serialize) -> usize {
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// A writer that only counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The longest prefix of `text` (ending on a character boundary) whose JSON
/// string escaping takes at most `budget` bytes, as a byte offset.
pub(crate) fn fit_json_str(text: &str, budget: usize) -> usize {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        let cost = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if used + cost > budget {
            return i;
        }
        used += cost;
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use core_agent_mcp_transport::model::{EmbeddedResource, ImageContent};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_small_result_is_unchanged() {
        let r = CallToolResult::success(vec![ContentBlock::text("hello")]);
        assert_eq!(cap_result(r.clone(), 1000), r);
    }

    #[test]
    fn the_whole_serialized_result_is_bounded() {
        let big_text = "line with \"quotes\" and\nnewlines ".repeat(20_000);
        let cases: Vec<(&str, CallToolResult)> = vec![
            (
                "text",
                CallToolResult::success(vec![ContentBlock::text(big_text.clone())]),
            ),
            ("structured", {
                let mut r = CallToolResult::success(vec![ContentBlock::text("summary")]);
                r.structured_content = Some(
                    json!({"items": (0..20_000).map(|i| json!({"id": i})).collect::<Vec<_>>()}),
                );
                r
            }),
            (
                "resource",
                CallToolResult::success(vec![ContentBlock::Resource(EmbeddedResource::new(
                    ResourceContents::text(big_text.clone(), "file:///big.txt"),
                ))]),
            ),
            (
                "image",
                CallToolResult::success(vec![
                    ContentBlock::Image(ImageContent::new("A".repeat(300_000), "image/png")),
                    ContentBlock::text("caption"),
                ]),
            ),
        ];
        for max in [1_000, 8_000, 131_072] {
            for (what, r) in &cases {
                let capped = cap_result(r.clone(), max);
                let len = json_len(&capped);
                assert!(len <= max, "{what}: {len} > {max}");
                let marker = capped.content.last().and_then(|c| c.as_text()).unwrap();
                assert!(
                    marker.text.starts_with("[core-agent: the result was "),
                    "{what}: {}",
                    marker.text
                );
                // The marker says exactly what was cut.
                let said = match *what {
                    "text" | "resource" => "bytes of text cut",
                    "structured" => "structuredContent (",
                    _ => "1 binary block(s) (",
                };
                assert!(marker.text.contains(said), "{what}: {}", marker.text);
            }
        }
        // Kept parts are whole or a prefix; the small text beside a dropped image survives.
        let capped = cap_result(cases[3].1.clone(), 8_000);
        assert_eq!(capped.content[0].as_text().unwrap().text, "caption");
        let capped = cap_result(cases[1].1.clone(), 8_000);
        assert_eq!(capped.content[0].as_text().unwrap().text, "summary");
        assert_eq!(capped.structured_content, None);
        let capped = cap_result(cases[0].1.clone(), 8_000);
        assert!(big_text.starts_with(&capped.content[0].as_text().unwrap().text));
    }

    /// Results whose texts escape to 1 to 6 bytes a byte, beside blocks
    /// without text and structured content.
    fn escaping_results() -> Vec<CallToolResult> {
        let mixed = "\u{1}\u{1f}\"quoted\"\\ and é€😀\n\t".repeat(40);
        let mut full = CallToolResult::success(vec![
            ContentBlock::text(mixed.clone()),
            ContentBlock::Image(ImageContent::new("AAAA", "image/png")),
            ContentBlock::Resource(EmbeddedResource::new(ResourceContents::text(
                "\t\u{0}x".repeat(40),
                "file:///a.txt",
            ))),
            ContentBlock::text("plain"),
        ]);
        full.structured_content = Some(json!({"k": "v\u{1}", "n": [1, 2]}));
        vec![
            full,
            CallToolResult::success(vec![ContentBlock::text(mixed)]),
            CallToolResult::error(vec![ContentBlock::text("\u{0}".repeat(500))]),
            CallToolResult::success(vec![ContentBlock::text("")]),
            CallToolResult::success(Vec::new()),
        ]
    }

    #[test]
    fn the_size_bound_is_never_under_the_size_and_puts_texts_back() {
        for r in escaping_results() {
            let exact = serde_json::to_vec(&r).unwrap().len();
            assert_eq!(json_len(&r), exact, "counted, not built, the same");
            let mut weighed = r.clone();
            for max in [0, exact / 2, exact - 1, exact, exact + 1, 7 * exact] {
                if within_by_bound(&mut weighed, max) {
                    assert!(exact <= max, "{exact} > {max}: {r:?}");
                }
                assert_eq!(weighed, r, "every text back in its block");
            }
            // The bound is at most the shell plus six bytes a text byte.
            assert!(within_by_bound(&mut weighed, 7 * exact), "{r:?}");
        }
    }

    #[test]
    fn a_result_is_cut_exactly_when_it_is_over_the_cap() {
        for r in escaping_results() {
            let exact = json_len(&r);
            for max in [exact, exact + 1, 7 * exact] {
                assert_eq!(cap_result(r.clone(), max), r, "{max}");
            }
            if r.content.is_empty() {
                continue;
            }
            let cut = cap_result(r.clone(), exact - 1);
            assert_ne!(cut, r);
            let marker = cut.content.last().and_then(|c| c.as_text()).unwrap();
            assert!(
                marker.text.starts_with(&format!(
                    "[core-agent: the result was {exact} bytes, over max_result_bytes ({})",
                    exact - 1
                )),
                "{}",
                marker.text
            );
        }
    }

    #[test]
    fn fitting_counts_json_escapes() {
        assert_eq!(fit_json_str("abc", 3), 3);
        assert_eq!(fit_json_str("a\"c", 3), 2);
        assert_eq!(fit_json_str("é", 1), 0);
        assert_eq!(fit_json_str("a\u{1}", 6), 1);
        assert_eq!(fit_json_str("a\u{1}", 7), 2);
    }
}
