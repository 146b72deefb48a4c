use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use core_agent_digest::{
    DigestEvent, Digested, LlmUsage, Method, Pricing, RawRecord, Settings, Store, Summarizer,
    SummaryRequest, route,
};
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
    /// The LLM second chance, when enabled.
    pub llm: Option<LlmPath>,
    counter: AtomicU64,
    /// Held from the ceiling check until the cost is recorded, so
    /// concurrent calls cannot overspend the ceiling together.
    spending: tokio::sync::Mutex<()>,
}

/// The LLM second chance: who summarizes, with which model, at what price,
/// and up to what spend per session.
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
            counter: AtomicU64::new(0),
            spending: tokio::sync::Mutex::new(()),
        }
    }

    /// The same wrap with the LLM second chance.
    pub fn with_llm(mut self, llm: LlmPath) -> DigestWrap {
        self.llm = Some(llm);
        self
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
        if digested.method == Method::StructuralJson
            && digested.digest.len() < self.settings.threshold
        {
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

    /// Digests `result` if its payload is over the threshold: the payload is
    /// the text blocks joined by newlines when they hold JSON, else the
    /// structured content when there is some, else the text (prose). The raw
    /// payload is stored whole; the result then carries the synthetic
    /// `{"digest", "raw_bytes", "method", "call_id"}` instead. With the LLM
    /// path on, a payload still over the threshold is summarized.
    /// Never fails: if the store cannot keep the payload, the result passes
    /// untouched.
    pub async fn apply(
        &self,
        mut result: CallToolResult,
        server: &str,
        tool: &str,
    ) -> CallToolResult {
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
        let record_payload = record.payload.clone();
        if self.store.put(record).is_err() {
            return result;
        }
        let mut event = DigestEvent::new(digested.method, digested.raw_bytes, 0);
        // Held until the cost is recorded, so concurrent calls cannot
        // overspend the ceiling together.
        let _spending = match self.llm {
            Some(_) => Some(self.spending.lock().await),
            None => None,
        };
        let digested = self
            .second_chance(&record_payload, digested, &mut event)
            .await;
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
