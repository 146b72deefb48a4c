//! `retrieve_raw`: a digested result's raw payload, a page at a time.

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};

use crate::cap::fit_json_str;
use crate::host::Published;
use crate::pipeline::restricted;
use crate::session::Session;
use crate::tools::{self, Handler, HostTool, RETRIEVE_RAW};
use crate::{Error, Result};

/// `retrieve_raw`'s declaration: read-only, gated, and there only while the
/// digest is on.
pub(crate) const TOOL: HostTool = HostTool {
    name: RETRIEVE_RAW,
    description: || "Get back the raw payload of a digested result: pass the `call_id` from the digest; add a JSON `pointer` (such as /items/42) to get just that part. A payload larger than the result limit comes back in pages: the answer then ends with {\"offset\", \"returned_bytes\", \"total_bytes\", \"next_offset\"}; call again with `offset` set to `next_offset` for the next page.",
    schema: || {
        json!({"type": "object", "properties": {
            "call_id": {"type": "string", "description": "The call_id of the digest."},
            "pointer": {"type": "string", "description": "Optional JSON pointer into the payload, such as /items/42."},
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset of the page to return (default 0)."},
            "length": {"type": "integer", "minimum": 1, "description": "Most bytes to return (default: as many as the result limit allows)."}
        }, "required": ["call_id"]})
    },
    read_only: true,
    gated: true,
    needs_digest: true,
    handler: Handler::RetrieveRaw,
};

impl Session {
    /// `retrieve_raw {call_id, pointer?, offset?, length?}`: the raw payload
    /// of one of this session's digests (or the part at a JSON pointer), to a
    /// caller whose trust level may call the tool that produced it. A payload
    /// over the producing server's `max_result_bytes` comes back a page at a
    /// time, with the offset of the next page.
    pub(crate) fn retrieve_raw(
        &self,
        published: &Published,
        arguments: &JsonObject,
        level: TrustLevel,
    ) -> Result<CallToolResult> {
        let bad = |message: String| Error::BadArguments {
            name: tools::RETRIEVE_RAW.to_owned(),
            message,
        };
        let Some(digest) = &self.digest else {
            return Err(bad("the digest is off, so nothing was stored".to_owned()));
        };
        let call_id = arguments
            .get("call_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("pass {\"call_id\": \"…\"} from a digest".to_owned()))?;
        let not_here = || {
            let mut message = format!("no raw payload is stored under `{call_id}` in this session");
            if let Ok(Some(evicted)) = digest.store.evicted() {
                message.push_str(&format!(
                    "; the in-memory store has dropped its {} oldest payloads ({} bytes) to keep \
                     memory under its budget of {} bytes, so it may be one of them; a session \
                     database keeps every payload",
                    evicted.payloads, evicted.bytes, evicted.budget
                ));
                if let Some(note) = &digest.note {
                    message.push_str(&format!(" ({note})"));
                }
            }
            bad(message)
        };
        let record = digest
            .store
            .get(call_id)
            .map_err(|e| bad(e.to_string()))?
            .filter(|r| r.session_id == digest.session || self.owns(&r.session_id))
            .ok_or_else(not_here)?;
        // The payload is as restricted as the tool that produced it.
        match published
            .catalog
            .entries()
            .iter()
            .find(|e| e.server == record.server && e.tool == record.tool)
        {
            Some(entry) if entry.allows(level) => {}
            Some(entry) => return Err(restricted(&entry.name, level, &entry.trust_levels)),
            // A survey tool's: readable by the levels that may call the tool.
            None if record.server == tools::HOST_SERVER
                && tools::host_tool(&record.tool, true, true)
                    .is_some_and(|t| t.survey().is_some())
                && self
                    .host
                    .survey_access()
                    .and_then(|a| a.levels(&record.tool))
                    .is_some_and(|levels| levels.contains(&level)) => {}
            // A resource read's: readable by the levels the server's
            // resources are offered to.
            None if record.tool.starts_with(crate::context::READ_RESOURCE)
                && self
                    .host
                    .offers_to(&record.server, level, crate::Offered::Resources) => {}
            None => {
                return Err(bad(format!(
                    "`{call_id}` came from `{}` of server `{}`, which is not in the catalog now",
                    record.tool, record.server
                )));
            }
        }
        let text = match arguments.get("pointer").and_then(Value::as_str) {
            Some(pointer) => core_agent_digest::extract(&record.payload, pointer).map_err(bad)?,
            None => record.payload,
        };
        let number = |key: &str| -> Result<Option<usize>> {
            match arguments.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| bad(format!("`{key}` must be a whole number of bytes"))),
            }
        };
        let page = Page::of(
            &text,
            number("offset")?.unwrap_or(0),
            number("length")?,
            self.host.limits(&record.server).max_result_bytes,
        )
        .map_err(bad)?;
        if page.start == 0 && page.end == text.len() {
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]));
        }
        let about = json!({
            "call_id": call_id,
            "offset": page.start,
            "returned_bytes": page.end - page.start,
            "total_bytes": text.len(),
            "next_offset": (page.end < text.len()).then_some(page.end),
        });
        Ok(CallToolResult::success(vec![
            ContentBlock::text(text[page.start..page.end].to_owned()),
            ContentBlock::text(about.to_string()),
        ]))
    }
}

/// One page of a raw payload: the bytes `start..end` of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Room kept in a page's result for its JSON framing and the paging note.
pub(crate) const PAGE_FRAMING: usize = 1024;

impl Page {
    /// The page of `text` from `offset` (moved back to a character
    /// boundary), at most `length` bytes, and small enough that the result
    /// carrying it, JSON-escaped, stays within `max_result_bytes`.
    pub(crate) fn of(
        text: &str,
        offset: usize,
        length: Option<usize>,
        max_result_bytes: usize,
    ) -> std::result::Result<Page, String> {
        if offset > text.len() {
            return Err(format!(
                "`offset` {offset} is past the end of the payload ({} bytes)",
                text.len()
            ));
        }
        if length == Some(0) {
            return Err("`length` must be at least 1".to_owned());
        }
        let start = text.floor_char_boundary(offset);
        let budget = max_result_bytes.saturating_sub(PAGE_FRAMING).max(1);
        let rest = &text[start..];
        let mut end = start + fit_json_str(rest, budget);
        if let Some(length) = length {
            let want = text.floor_char_boundary((start + length).min(text.len()));
            end = end.min(want);
        }
        if end == start && start < text.len() {
            // One character always fits.
            end = start + rest.chars().next().map_or(0, char::len_utf8);
        }
        Ok(Page { start, end })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_the_payload_and_respect_the_bound() {
        let text = "a\"é".repeat(100_000);
        let mut offset = 0;
        let mut pages = 0;
        while offset < text.len() {
            let page = Page::of(&text, offset, None, 16_384).unwrap();
            assert_eq!(page.start, offset);
            assert!(page.end > page.start);
            let escaped = serde_json::to_string(&text[page.start..page.end]).unwrap();
            assert!(
                escaped.len() <= 16_384 - PAGE_FRAMING + 2,
                "{}",
                escaped.len()
            );
            offset = page.end;
            pages += 1;
        }
        assert!(pages > 1);
        // A caller's length is honoured, on a character boundary.
        let page = Page::of(&text, 0, Some(2), 16_384).unwrap();
        assert_eq!((page.start, page.end), (0, 2));
        let page = Page::of(&text, 3, Some(1), 16_384).unwrap();
        assert_eq!(
            (page.start, page.end),
            (2, 4),
            "moved back into the é, whole"
        );
        assert!(Page::of(&text, text.len() + 1, None, 16_384).is_err());
        assert!(Page::of(&text, 0, Some(0), 16_384).is_err());
        let small = Page::of("short", 0, None, 131_072).unwrap();
        assert_eq!((small.start, small.end), (0, 5));
    }
}
