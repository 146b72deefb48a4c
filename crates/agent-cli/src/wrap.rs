use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use core_agent_digest::{DigestEvent, RawRecord, Settings, Store, route};
use core_agent_mcp_transport::model::{CallToolResult, ContentBlock};

/// The digest wrap of one session: where large results are shrunk before
/// the caller sees them, and where their raw payloads are kept.
pub struct DigestWrap {
    /// The router's settings (threshold, bounds).
    pub settings: Settings,
    /// Where raw payloads and telemetry go.
    pub store: Arc<dyn Store>,
    /// The session the telemetry and payloads belong to.
    pub session: String,
    counter: AtomicU64,
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
            counter: AtomicU64::new(0),
        }
    }

    /// Digests `result` if its payload is over the threshold: the payload is
    /// the text blocks joined by newlines when they hold JSON, else the
    /// structured content when there is some, else the text (prose). The raw payload is stored whole; the result then carries the
    /// synthetic `{"digest", "raw_bytes", "method", "call_id"}` instead.
    /// Never fails: if the store cannot keep the payload, the result passes
    /// untouched.
    pub fn apply(&self, mut result: CallToolResult, server: &str, tool: &str) -> CallToolResult {
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        let json_text = matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['));
        let payload = match &result.structured_content {
            Some(structured) if !json_text => structured.to_string(),
            _ => text,
        };
        let Some(digested) = route(&payload, &self.settings) else {
            return result;
        };
        let n = self.counter.fetch_add(1, Ordering::SeqCst) + 1;
        let call_id = format!("{}-{n}", self.session);
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
        if self.store.put(record).is_err() {
            return result;
        }
        let envelope = digested.envelope(&call_id);
        let _ = self.store.record(
            &self.session,
            &DigestEvent::new(digested.method, digested.raw_bytes, envelope.len()),
        );
        result.content.retain(|c| c.as_text().is_none());
        result.content.insert(0, ContentBlock::text(envelope));
        result.structured_content = None;
        result
    }
}
