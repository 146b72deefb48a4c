use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use core_agent_digest::{
    DigestEvent, Digested, LlmUsage, Method, Pricing, RawRecord, Settings, Store, Summarizer,
    SummaryRequest, new_call_id, route,
};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// The digest wrap of one session: where large results are shrunk before
/// the caller sees them, and where their raw payloads are kept.
pub struct DigestWrap {
    /// The router's settings (threshold, bounds).
    pub settings: Settings,
    /// Where raw payloads and telemetry go.
    pub store: Arc<dyn Store>,
    /// The session the telemetry and payloads belong to.
    pub session: String,
    /// The LLM second chance, when enabled.
    pub llm: Option<LlmPath>,
    /// Held from the ceiling check until the cost is recorded, so
    /// concurrent calls cannot overspend the ceiling together.
    spending: tokio::sync::Mutex<()>,
}

/// The LLM second chance: who summarizes, with which model, at what price,
/// and up to what spend per session.
#[derive(Clone)]
pub struct LlmPath {
    /// The summarizer.
    pub summarizer: Arc<dyn Summarizer>,
    /// The model to ask for.
    pub model: String,
    /// Turns usage into cost.
    pub pricing: Pricing,
    /// The session stops using the LLM once it has spent this many US dollars.
    pub cost_ceiling: Option<f64>,
    /// How long one summary may take.
    pub timeout: Duration,
}

impl DigestWrap {
    /// A wrap for `session`, storing into `store`.
    pub fn new(
        settings: Settings,
        store: Arc<dyn Store>,
        session: impl Into<String>,
    ) -> DigestWrap {
        DigestWrap {
            settings,
            store,
            session: session.into(),
            llm: None,
            spending: tokio::sync::Mutex::new(()),
        }
    }

    /// The same wrap with the LLM second chance.
    pub fn with_llm(mut self, llm: LlmPath) -> DigestWrap {
        self.llm = Some(llm);
        self
    }

    /// Whether the router's result goes to the LLM second chance: the LLM
    /// path is on, and the router did not get the payload structurally under
    /// the threshold. A text digest (diff, log, table, JSON Lines) never
    /// does: it is bounded already, and a summary would lose what it keeps
    /// whole (a diff's every file).
    fn wants_second_chance(&self, digested: &Digested) -> bool {
        self.llm.is_some()
            && match digested.method {
                Method::StructuralJson => digested.digest.len() >= self.settings.threshold,
                method => !method.is_structural(),
            }
    }

    /// The LLM second chance, for a payload the router could not get under
    /// the threshold. Any failure, or a reached ceiling, leaves the
    /// router's result; the call never fails because of the digest.
    async fn second_chance(
        &self,
        payload: &str,
        digested: Digested,
        event: &mut DigestEvent,
    ) -> Digested {
        let Some(llm) = &self.llm else {
            return digested;
        };
        if !self.wants_second_chance(&digested) {
            return digested;
        }
        let spent = self
            .store
            .usage(&self.session)
            .map(|u| u.spent_usd())
            .unwrap_or(0.0);
        if llm.cost_ceiling.is_some_and(|ceiling| spent >= ceiling) {
            event.ceiling_reached = true;
            return digested;
        }
        let request = SummaryRequest {
            payload,
            model: &llm.model,
            target_bytes: self.settings.threshold,
        };
        match tokio::time::timeout(llm.timeout, llm.summarizer.summarize(request)).await {
            Ok(Ok(summary)) => {
                event.llm = Some(LlmUsage {
                    model: llm.model.clone(),
                    input_tokens: summary.input_tokens,
                    output_tokens: summary.output_tokens,
                    cost_usd: llm.pricing.cost(
                        &llm.model,
                        summary.input_tokens,
                        summary.output_tokens,
                    ),
                });
                Digested {
                    digest: summary.text,
                    raw_bytes: digested.raw_bytes,
                    method: Method::LlmFallback,
                }
            }
            Ok(Err(why)) => {
                tracing::warn!(
                    "the LLM second chance failed, keeping the {} digest: {why}",
                    digested.method
                );
                digested
            }
            Err(_) => {
                tracing::warn!(
                    "the LLM second chance timed out, keeping the {} digest",
                    digested.method
                );
                digested
            }
        }
    }

    /// Digests `result` if its payload is over the threshold. The payload is
    /// what the model would have been shown (see [`payload_of`]). The raw
    /// payload is stored whole under a new `call_id`, unique across runs;
    /// the result then carries the synthetic
    /// `{"digest", "raw_bytes", "method", "call_id"}` in place of its text and
    /// structured content. With the LLM path on, a payload still over the
    /// threshold is summarized.
    /// Never fails: if the store cannot keep the payload, the result passes
    /// untouched (or, when its one text was moved into the record, with the
    /// digest in that text's place, without a `call_id`, saying why).
    pub async fn apply(
        &self,
        mut result: CallToolResult,
        server: &str,
        tool: &str,
    ) -> CallToolResult {
        if under_threshold(&result, self.settings.threshold) {
            return result;
        }
        // A result of one text is digested from that text, moved out of its
        // block rather than copied (a result of tens of MiB is held once):
        // `at` says which block, to put it back if need be.
        let (at, payload) = match sole_text(&mut result) {
            Some((at, text)) => (Some(at), text),
            None => match payload_of(&result) {
                Some(payload) => (None, payload),
                None => return result,
            },
        };
        let Some(digested) = route(&payload, &self.settings) else {
            put_back(&mut result, at, payload);
            return result;
        };
        let call_id = new_call_id();
        let created_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let record = RawRecord {
            call_id: call_id.clone(),
            session_id: self.session.clone(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            created_ms,
            payload,
        };
        // The second chance reads the payload after the store has taken
        // it; it is copied only when there will be one.
        let llm_payload = self
            .wants_second_chance(&digested)
            .then(|| record.payload.clone());
        if let Err(e) = self.store.put(record) {
            tracing::warn!("the digest is skipped for this result: {e}");
            // The text went into the record: the digest stands in for it.
            put_back(
                &mut result,
                at,
                format!(
                    "{}\n[core-agent: the raw payload ({} bytes) could not be stored: {e}]",
                    digested.digest, digested.raw_bytes
                ),
            );
            return result;
        }
        let mut event = DigestEvent::new(digested.method, digested.raw_bytes, 0);
        // Held until the cost is recorded, so concurrent calls cannot
        // overspend the ceiling together.
        let _spending = match self.llm {
            Some(_) => Some(self.spending.lock().await),
            None => None,
        };
        let digested = match &llm_payload {
            Some(payload) => self.second_chance(payload, digested, &mut event).await,
            None => digested,
        };
        let envelope = digested.envelope(&call_id);
        event.method = digested.method.as_str().to_owned();
        event.digest_bytes = envelope.len() as u64;
        let _ = self.store.record(&self.session, &event);
        result.content.retain(|c| c.as_text().is_none());
        result.content.insert(0, ContentBlock::text(envelope));
        result.structured_content = None;
        result
    }
}

/// The payload of a result as the model would have seen it, or `None` when
/// it has nothing to digest (no text and no structured content).
///
/// Text blocks are what MCP hosts show the model, so prose text wins: a file
/// that `server-filesystem` returns as text and as `{"content": "<the file>"}`
/// is digested as the text. The structured content is used when the text is
/// JSON (it is then the same data, already parsed by the server) or absent,
/// except when it only wraps that very text (FastMCP's `{"result": "<text>"}`
/// for a tool returning a JSON string).
pub fn payload_of(result: &CallToolResult) -> Option<String> {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let text = texts.join("\n");
    let has_text = !text.trim().is_empty();
    match (&result.structured_content, has_text) {
        (None, false) => None,
        (Some(structured), false) => Some(structured.to_string()),
        (Some(structured), true) if is_json(&text) && !wraps(structured, &text) => {
            Some(structured.to_string())
        }
        (_, true) => Some(text),
    }
}

/// The text of a result whose payload is its one text block (no structured
/// content, one non-blank text), moved out of that block, and the block's
/// index; the block stays, empty, for [`put_back`].
fn sole_text(result: &mut CallToolResult) -> Option<(usize, String)> {
    if result.structured_content.is_some() {
        return None;
    }
    let mut texts = result
        .content
        .iter_mut()
        .enumerate()
        .filter_map(|(i, c)| match c {
            ContentBlock::Text(t) => Some((i, t)),
            _ => None,
        });
    let (at, only) = texts.next()?;
    if texts.next().is_some() || only.text.trim().is_empty() {
        return None;
    }
    Some((at, std::mem::take(&mut only.text)))
}

/// Puts `text` into the text block at `at` that [`sole_text`] emptied
/// (nothing to do when the payload was not moved).
fn put_back(result: &mut CallToolResult, at: Option<usize>, text: String) {
    if let Some(ContentBlock::Text(block)) = at.and_then(|at| result.content.get_mut(at)) {
        block.text = text;
    }
}

/// Whether `result` is known, without building its payload, to be under
/// `threshold` (so not digested): with no structured content, the payload is
/// its texts joined by newlines.
fn under_threshold(result: &CallToolResult, threshold: usize) -> bool {
    if result.structured_content.is_some() {
        return false;
    }
    let (count, bytes) = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .fold((0usize, 0usize), |(n, len), t| (n + 1, len + t.text.len()));
    bytes + count.saturating_sub(1) < threshold
}

/// Whether `text` is one JSON object or array.
fn is_json(text: &str) -> bool {
    matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['))
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Whether `structured` is an object of one string field holding `text`.
fn wraps(structured: &Value, text: &str) -> bool {
    structured
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.values().all(|v| v.as_str() == Some(text)))
}

impl std::fmt::Debug for DigestWrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestWrap")
            .field("settings", &self.settings)
            .field("session", &self.session)
            .field("llm", &self.llm)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for LlmPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmPath")
            .field("model", &self.model)
            .field("pricing", &self.pricing)
            .field("cost_ceiling", &self.cost_ceiling)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(texts: &[&str], structured: Option<Value>) -> CallToolResult {
        let mut r = CallToolResult::success(texts.iter().map(|t| ContentBlock::text(*t)).collect());
        r.structured_content = structured;
        r
    }

    #[tokio::test]
    async fn a_payload_is_digested_from_the_threshold_on() {
        let store = Arc::new(core_agent_digest::MemoryStore::new());
        let settings = Settings {
            threshold: 100,
            ..Settings::default()
        };
        let wrap = DigestWrap::new(settings, store, "s");
        let digested = |r: &CallToolResult| {
            r.content
                .first()
                .and_then(|c| c.as_text())
                .is_some_and(|t| t.text.contains("\"call_id\""))
        };
        // Texts are joined by a newline: 49 + 1 + 49 bytes is under, one more is not.
        let under = result(&[&"a".repeat(49), &"b".repeat(49)], None);
        assert_eq!(wrap.apply(under.clone(), "srv", "t").await, under);
        let at = result(&[&"a".repeat(50), &"b".repeat(49)], None);
        assert!(digested(&wrap.apply(at, "srv", "t").await));
        // Structured content is weighed as JSON: `{"k":"…"}` is 8 bytes more.
        let structured = result(&[], Some(json!({"k": "c".repeat(92)})));
        assert!(digested(&wrap.apply(structured, "srv", "t").await));
        let structured = result(&[], Some(json!({"k": "c".repeat(91)})));
        assert_eq!(wrap.apply(structured.clone(), "srv", "t").await, structured);
        // Blank text has nothing to digest, whatever its size.
        let blank = result(&[&" ".repeat(500)], None);
        assert_eq!(wrap.apply(blank.clone(), "srv", "t").await, blank);
    }

    /// A store that refuses every payload.
    #[derive(Debug)]
    struct Full;

    impl core_agent_digest::Store for Full {
        fn put(&self, _: RawRecord) -> core_agent_digest::Result<()> {
            Err(core_agent_digest::Error::Store {
                message: "disk full".into(),
            })
        }
        fn get(&self, _: &str) -> core_agent_digest::Result<Option<RawRecord>> {
            Ok(None)
        }
        fn record(&self, _: &str, _: &DigestEvent) -> core_agent_digest::Result<()> {
            Ok(())
        }
        fn usage(&self, _: &str) -> core_agent_digest::Result<core_agent_digest::Usage> {
            Ok(core_agent_digest::Usage::default())
        }
        fn sessions(&self) -> core_agent_digest::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn claim(&self, _: &str, _: &str) -> core_agent_digest::Result<()> {
            Ok(())
        }
        fn owner(&self, _: &str) -> core_agent_digest::Result<Option<String>> {
            Ok(None)
        }
    }

    #[tokio::test]
    async fn a_sole_text_the_store_refuses_becomes_its_digest_in_place() {
        let settings = Settings {
            threshold: 100,
            ..Settings::default()
        };
        let wrap = DigestWrap::new(settings, Arc::new(Full), "s");
        let image = ContentBlock::image("aGk=", "image/png");
        let mut big = result(&[&"line of prose\n".repeat(50)], None);
        big.content.insert(0, image.clone());
        let out = wrap.apply(big, "srv", "t").await;
        // The image stays first; the text's block holds the digest and why.
        assert_eq!(out.content.len(), 2, "{out:?}");
        assert_eq!(out.content[0], image);
        let text = &out.content[1].as_text().unwrap().text;
        assert!(
            text.ends_with("could not be stored: raw store: disk full]"),
            "{text}"
        );
        assert!(!text.contains("call_id"), "{text}");
    }

    #[test]
    fn the_payload_is_what_the_model_would_have_seen() {
        let file = "# README\n\nprose, not JSON";
        let list = r#"[{"id": 1}, {"id": 2}]"#;
        let cases = [
            // server-filesystem: the file as text and as {"content": …}.
            (
                result(&[file], Some(json!({"content": file}))),
                Some(file.to_owned()),
            ),
            // FastMCP `str`: the text and {"result": …}.
            (
                result(&[file], Some(json!({"result": file}))),
                Some(file.to_owned()),
            ),
            // JSON text beside structured content: the structured content.
            (
                result(&["{\"items\": [1, 2]}"], Some(json!({"items": [1, 2, 3]}))),
                Some(r#"{"items":[1,2,3]}"#.to_owned()),
            ),
            // A JSON string wrapped by FastMCP: the text itself.
            (
                result(&[list], Some(json!({"result": list}))),
                Some(list.to_owned()),
            ),
            // Text that merely starts like JSON is prose.
            (
                result(&["[link](http://x) prose"], Some(json!({"content": "x"}))),
                Some("[link](http://x) prose".to_owned()),
            ),
            (
                result(&[], Some(json!({"a": 1}))),
                Some(r#"{"a":1}"#.to_owned()),
            ),
            (result(&["a", "b"], None), Some("a\nb".to_owned())),
            (result(&[], None), None),
        ];
        for (r, want) in cases {
            assert_eq!(payload_of(&r), want, "{r:?}");
        }
    }
}
