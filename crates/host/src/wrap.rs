use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use core_agent_digest::{
    Billed, DigestEvent, Digested, LlmUsage, Method, Pricing, RawRecord, Settings, Store,
    Summarizer, SummaryRequest, TokenUsage, bound_input, fit, new_call_id, route,
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
    /// Said in each synthetic response, as its `"note"`: what the caller
    /// should know about keeping the raw payloads (the front end's words,
    /// such as how to keep them past the process).
    pub note: Option<String>,
    /// US dollars reserved by the second chances in flight: each reserves
    /// its worst case under this lock before it starts and releases it
    /// once its real cost is recorded, so concurrent calls cannot overspend
    /// the ceiling together. Held only to reserve and to release, never
    /// across a call.
    in_flight: Mutex<f64>,
    /// A payload of this session went into the store.
    stored: AtomicBool,
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
    /// The session's spend never passes this many US dollars: a summary
    /// starts only when the ceiling covers its worst case.
    pub cost_ceiling: Option<f64>,
    /// How long one summary may take.
    pub timeout: Duration,
    /// The most bytes of a payload the LLM is shown: a larger one is cut
    /// to its head and tail, with a marker naming the cut
    /// (`agentic_wrap_llm_max_input_bytes`, default 256 KiB).
    pub max_input_bytes: usize,
}

/// The worst case of one second chance, reserved against the session's
/// ceiling until its real cost is recorded (released when dropped).
struct Reservation<'a> {
    in_flight: &'a Mutex<f64>,
    usd: f64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *in_flight = (*in_flight - self.usd).max(0.0);
    }
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
            note: None,
            in_flight: Mutex::new(0.0),
            stored: AtomicBool::new(false),
        }
    }

    /// The same wrap, saying `note` in each synthetic response.
    pub fn with_note(mut self, note: Option<String>) -> DigestWrap {
        self.note = note;
        self
    }

    /// The same wrap with the LLM second chance.
    pub fn with_llm(mut self, llm: LlmPath) -> DigestWrap {
        self.llm = Some(llm);
        self
    }

    /// Whether a payload of this session went into the store.
    pub(crate) fn stored(&self) -> bool {
        self.stored.load(Ordering::Relaxed)
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

    /// Reserves `worst` US dollars of the session's ceiling, or says why
    /// not: the spend recorded so far, the reservations in flight and this
    /// one must stay within the ceiling. Without a ceiling, always granted.
    fn reserve(&self, llm: &LlmPath, worst: f64) -> Result<Reservation<'_>, String> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(ceiling) = llm.cost_ceiling {
            let spent = self
                .store
                .usage(&self.session)
                .map(|u| u.spent_usd())
                .map_err(|e| {
                    format!("the session's spend so far cannot be read ({e}), so the ${ceiling} ceiling cannot be checked")
                })?;
            if spent + *in_flight + worst > ceiling {
                return Err(format!(
                    "the session's ${ceiling} ceiling cannot cover this call's worst case of ${worst:.6} (${spent:.6} spent, ${:.6} reserved by calls in flight)",
                    *in_flight
                ));
            }
        }
        *in_flight += worst;
        Ok(Reservation {
            in_flight: &self.in_flight,
            usd: worst,
        })
    }

    /// The LLM second chance, for a payload the router could not get under
    /// the threshold: the payload, bounded to `max_input_bytes`, is
    /// summarized under a reservation of the call's worst case. Any failure,
    /// a ceiling that cannot cover the worst case, or a summary not smaller
    /// than the router's digest leaves the router's result; the call never
    /// fails because of the digest. The event records what the call was
    /// billed (its worst case when the provider reported nothing); the
    /// reservation returned is to be dropped once the event is recorded.
    async fn second_chance(
        &self,
        payload: &str,
        digested: Digested,
        event: &mut DigestEvent,
    ) -> (Digested, Option<Reservation<'_>>) {
        let Some(llm) = &self.llm else {
            return (digested, None);
        };
        let input = bound_input(payload, llm.max_input_bytes);
        // The summary is asked to beat both the threshold and the router.
        let target = self.settings.threshold.min(digested.digest.len());
        let request = SummaryRequest::new(&input, &llm.model, target);
        let worst = request.worst_case();
        let worst_usd = llm.pricing.cost_of(&llm.model, &worst);
        let reservation = match self.reserve(llm, worst_usd) {
            Ok(reservation) => reservation,
            Err(why) => {
                tracing::info!(
                    "the LLM second chance is skipped, keeping the {} digest: {why}",
                    digested.method
                );
                event.ceiling_reached = true;
                return (digested, None);
            }
        };
        let (text, billed) = match tokio::time::timeout(
            llm.timeout,
            llm.summarizer.summarize(request),
        )
        .await
        {
            Ok(Ok(summary)) => (Some(summary.text), summary.billed),
            Ok(Err(failure)) => {
                tracing::warn!(
                    "the LLM second chance failed, keeping the {} digest: {}",
                    digested.method,
                    failure.error
                );
                (None, failure.billed)
            }
            Err(_) => {
                tracing::warn!(
                    "the LLM second chance timed out after {} s, keeping the {} digest; its worst case (${worst_usd:.6}) is recorded as spent",
                    llm.timeout.as_secs_f64(),
                    digested.method
                );
                (None, Billed::Unknown)
            }
        };
        event.llm = match billed {
            Billed::Reported(usage) => Some(llm_usage(llm, usage, false)),
            Billed::Unknown => Some(llm_usage(llm, worst, true)),
            Billed::Nothing => None,
        };
        let Some(text) = text else {
            event.llm_failed = true;
            return (digested, Some(reservation));
        };
        let summarized = Digested {
            digest: text,
            raw_bytes: digested.raw_bytes,
            method: Method::LlmFallback,
        };
        // Compared as the model would read them, in the envelope.
        if summarized.envelope("").len() >= digested.envelope("").len() {
            tracing::info!(
                "the LLM summary ({} bytes) is not smaller than the {} digest ({} bytes); keeping the digest",
                summarized.digest.len(),
                digested.method,
                digested.digest.len()
            );
            event.llm_not_smaller = true;
            return (digested, Some(reservation));
        }
        (summarized, Some(reservation))
    }

    /// [`DigestWrap::apply_within`] with no cap on the result.
    pub async fn apply(&self, result: CallToolResult, server: &str, tool: &str) -> CallToolResult {
        self.apply_within(result, server, tool, usize::MAX).await
    }

    /// Digests `result` if its payload is over the threshold. The payload is
    /// what the model would have been shown (see [`payload_of`]). The raw
    /// payload is stored whole under a new `call_id`, unique across runs;
    /// the result then carries the synthetic
    /// `{"digest", "raw_bytes", "method", "call_id"}` (and the wrap's
    /// `note`, if any) in place of its text and structured content. With the
    /// LLM path on, a payload still over the threshold is summarized.
    /// The synthetic response is made to fit whole in a result capped at
    /// `max_result_bytes` ([`crate::cap_result`] never cuts it): a digest
    /// too large for the room is made again, more tightly
    /// ([`core_agent_digest::fit`]), and a summary too large for it is cut.
    /// Never fails: if the store cannot keep the payload, the result passes
    /// untouched (or, when its one text was moved into the record, with the
    /// digest in that text's place, without a `call_id`, saying why).
    pub async fn apply_within(
        &self,
        result: CallToolResult,
        server: &str,
        tool: &str,
        max_result_bytes: usize,
    ) -> CallToolResult {
        self.digest_within(result, server, tool, max_result_bytes)
            .await
            .0
    }

    /// [`DigestWrap::apply_within`], saying whether the result was digested
    /// (its text replaced by the synthetic response); when it was not, its
    /// blocks come back as they were.
    pub(crate) async fn digest_within(
        &self,
        mut result: CallToolResult,
        server: &str,
        tool: &str,
        max_result_bytes: usize,
    ) -> (CallToolResult, bool) {
        if under_threshold(&result, self.settings.threshold) {
            return (result, false);
        }
        // A result of one text is digested from that text, moved out of its
        // block rather than copied (a result of tens of MiB is held once):
        // `at` says which block, to put it back if need be.
        let (at, payload) = match sole_text(&mut result) {
            Some((at, text)) => (Some(at), text),
            None => match payload_of(&result) {
                Some(payload) => (None, payload),
                None => return (result, false),
            },
        };
        let Some(digested) = route(&payload, &self.settings) else {
            put_back(&mut result, at, payload);
            return (result, false);
        };
        let call_id = new_call_id();
        let room = crate::cap::first_text_room(&mut result, max_result_bytes);
        let fits = |d: &Digested| {
            crate::cap::json_len(&d.envelope_with_note(&call_id, self.note.as_deref())) <= room
        };
        let digested = fit(&payload, digested, &self.settings, fits);
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
            return (result, false);
        }
        self.stored.store(true, Ordering::Relaxed);
        let mut event = DigestEvent::new(digested.method, digested.raw_bytes, 0);
        let (digested, reservation) = match &llm_payload {
            Some(payload) => {
                let (digested, reservation) =
                    self.second_chance(payload, digested, &mut event).await;
                (fit(payload, digested, &self.settings, fits), reservation)
            }
            None => (digested, None),
        };
        let envelope = digested.envelope_with_note(&call_id, self.note.as_deref());
        event.method = digested.method.as_str().to_owned();
        event.digest_bytes = envelope.len() as u64;
        crate::observe::note_digest(crate::observe::DigestedResult {
            method: event.method.clone(),
            raw_bytes: event.raw_bytes,
            digest_bytes: event.digest_bytes,
        });
        let _ = self.store.record(&self.session, &event);
        // The cost is in the store now: the reservation may go.
        drop(reservation);
        result.content.retain(|c| c.as_text().is_none());
        result.content.insert(0, ContentBlock::text(envelope));
        result.structured_content = None;
        (result, true)
    }
}

/// The telemetry of a call billed `usage` (its worst case when `worst_case`).
fn llm_usage(llm: &LlmPath, usage: TokenUsage, worst_case: bool) -> LlmUsage {
    LlmUsage {
        model: llm.model.clone(),
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: llm.pricing.cost_of(&llm.model, &usage),
        worst_case,
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
            .field("note", &self.note)
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
            .field("max_input_bytes", &self.max_input_bytes)
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
        let settings = Settings::default().with_threshold(100);
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
        assert!(!wrap.stored(), "nothing digested, nothing stored");
        let at = result(&[&"a".repeat(50), &"b".repeat(49)], None);
        assert!(digested(&wrap.apply(at, "srv", "t").await));
        assert!(wrap.stored());
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
        fn append(&self, entry: core_agent_digest::Entry<'_>) -> core_agent_digest::Result<()> {
            match entry {
                core_agent_digest::Entry::Payload(_) => Err(core_agent_digest::Error::Store {
                    message: "disk full".into(),
                }),
                _ => Ok(()),
            }
        }
        fn get(&self, _: &str) -> core_agent_digest::Result<Option<RawRecord>> {
            Ok(None)
        }
        fn session_records(
            &self,
        ) -> core_agent_digest::Result<Vec<core_agent_digest::SessionRecord>> {
            Ok(Vec::new())
        }
    }

    #[tokio::test]
    async fn a_sole_text_the_store_refuses_becomes_its_digest_in_place() {
        let settings = Settings::default().with_threshold(100);
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
        assert!(!wrap.stored(), "nothing went into the store");
    }

    /// A summarizer that says it started, then waits for a permit of its
    /// gate before answering what `answer` makes of the request.
    struct Gated {
        calls: std::sync::atomic::AtomicUsize,
        started: tokio::sync::mpsc::UnboundedSender<()>,
        gate: Arc<tokio::sync::Semaphore>,
        seen: std::sync::Mutex<Vec<String>>,
        answer: fn(
            &SummaryRequest<'_>,
        )
            -> Result<core_agent_digest::Summary, core_agent_digest::SummaryFailure>,
    }

    impl Summarizer for Gated {
        fn summarize<'a>(
            &'a self,
            request: SummaryRequest<'a>,
        ) -> core_agent_digest::BoxFuture<
            'a,
            Result<core_agent_digest::Summary, core_agent_digest::SummaryFailure>,
        > {
            Box::pin(async move {
                self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.seen.lock().unwrap().push(request.payload.to_owned());
                let _ = self.started.send(());
                let _permit = self.gate.acquire().await.unwrap();
                (self.answer)(&request)
            })
        }
    }

    /// An answer billed exactly the request's worst case.
    fn billed_worst_case(
        request: &SummaryRequest<'_>,
    ) -> Result<core_agent_digest::Summary, core_agent_digest::SummaryFailure> {
        Ok(core_agent_digest::Summary {
            text: "short summary".to_owned(),
            billed: Billed::Reported(request.worst_case()),
        })
    }

    struct Harness {
        wrap: Arc<DigestWrap>,
        store: Arc<core_agent_digest::MemoryStore>,
        fake: Arc<Gated>,
        started: tokio::sync::mpsc::UnboundedReceiver<()>,
        gate: Arc<tokio::sync::Semaphore>,
    }

    /// A wrap (threshold 2000) whose second chance is a [`Gated`] fake
    /// answering with `answer`; `open` permits are given at once.
    fn harness(
        answer: fn(
            &SummaryRequest<'_>,
        )
            -> Result<core_agent_digest::Summary, core_agent_digest::SummaryFailure>,
        open: usize,
        tune: impl FnOnce(&mut LlmPath),
    ) -> Harness {
        let (tx, started) = tokio::sync::mpsc::unbounded_channel();
        let gate = Arc::new(tokio::sync::Semaphore::new(open));
        let fake = Arc::new(Gated {
            calls: Default::default(),
            started: tx,
            gate: gate.clone(),
            seen: Default::default(),
            answer,
        });
        let mut llm = LlmPath {
            summarizer: fake.clone(),
            model: "m".to_owned(),
            pricing: Pricing::default(),
            cost_ceiling: None,
            timeout: Duration::from_secs(600),
            max_input_bytes: core_agent_digest::DEFAULT_MAX_INPUT_BYTES,
        };
        tune(&mut llm);
        let store = Arc::new(core_agent_digest::MemoryStore::new());
        let settings = Settings::default().with_threshold(2000);
        let wrap = Arc::new(DigestWrap::new(settings, store.clone(), "s").with_llm(llm));
        Harness {
            wrap,
            store,
            fake,
            started,
            gate,
        }
    }

    /// 3000 bytes of prose: passed through whole, so over the threshold.
    fn prose() -> CallToolResult {
        result(&[&"line of prose, long. ".repeat(150)], None)
    }

    fn method_of(r: &CallToolResult) -> String {
        let envelope: Value = serde_json::from_str(&r.content[0].as_text().unwrap().text).unwrap();
        envelope["method"].as_str().unwrap().to_owned()
    }

    /// `future`, or a failure naming what hung (a guard, not a measure).
    async fn or_hang<F: std::future::Future>(what: &str, future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(60), future)
            .await
            .unwrap_or_else(|_| panic!("{what} hangs"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_digests_never_spend_past_the_ceiling() {
        // Each call's worst case, as the wrap reserves it.
        let payload = payload_of(&prose()).unwrap();
        let worst = SummaryRequest::new(&payload, "m", 2000).worst_case();
        let worst_usd = Pricing::default().cost_of("m", &worst);
        // The ceiling covers two reservations, not three.
        let mut h = harness(billed_worst_case, 0, |llm| {
            llm.cost_ceiling = Some(2.5 * worst_usd)
        });
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..6 {
            let wrap = h.wrap.clone();
            calls.spawn(async move { wrap.apply(prose(), "srv", "t").await });
        }
        // Four are refused at once, while the two admitted ones wait in the LLM.
        let mut methods = Vec::new();
        for _ in 0..4 {
            let done = or_hang("a refused digest", calls.join_next()).await;
            methods.push(method_of(&done.unwrap().unwrap()));
        }
        assert_eq!(methods, ["passthrough"; 4]);
        for _ in 0..2 {
            or_hang("an admitted call", h.started.recv()).await;
        }
        assert_eq!(h.fake.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        h.gate.add_permits(2);
        while let Some(done) = or_hang("an admitted digest", calls.join_next()).await {
            methods.push(method_of(&done.unwrap()));
        }
        assert_eq!(methods[4..], ["llm_fallback", "llm_fallback"]);
        // Settled at their real cost (here their worst case), and no more
        // calls once the spend leaves no room for another worst case.
        let usage = h.store.usage("s").unwrap();
        let s = &usage.digest_savings;
        assert!(
            (s.subagent_cost_usd - 2.0 * worst_usd).abs() < 1e-12,
            "{s:?}"
        );
        assert!(s.subagent_cost_usd <= 2.5 * worst_usd);
        assert_eq!(s.ceiling_skips, 4);
        assert_eq!(
            method_of(&h.wrap.apply(prose(), "srv", "t").await),
            "passthrough"
        );
        assert_eq!(h.fake.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(
            *h.wrap.in_flight.lock().unwrap(),
            0.0,
            "every reservation released"
        );
    }

    #[tokio::test]
    async fn a_call_whose_worst_case_the_ceiling_cannot_cover_never_starts() {
        let h = harness(billed_worst_case, 1, |llm| llm.cost_ceiling = Some(1e-6));
        assert_eq!(
            method_of(&h.wrap.apply(prose(), "srv", "t").await),
            "passthrough"
        );
        assert_eq!(h.fake.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
        let usage = h.store.usage("s").unwrap();
        assert_eq!(usage.digest_savings.ceiling_skips, 1);
        assert_eq!(usage.digest_savings.subagent_cost_usd, 0.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_structural_digest_completes_while_a_summary_is_in_flight() {
        let mut h = harness(billed_worst_case, 0, |_| {});
        let wrap = h.wrap.clone();
        let slow = tokio::spawn(async move { wrap.apply(prose(), "srv", "t").await });
        or_hang("the summary's start", h.started.recv()).await;
        // JSON the pruner gets under the threshold: no second chance, and no wait.
        let items: Vec<Value> = (0..300).map(|i| json!({"id": i})).collect();
        let json = result(&[], Some(json!({"items": items})));
        let done = or_hang(
            "a structural digest beside a summary in flight",
            h.wrap.apply(json, "srv", "t"),
        )
        .await;
        assert_eq!(method_of(&done), "structural_json");
        assert!(!slow.is_finished());
        h.gate.add_permits(1);
        let summarized = or_hang("the summary", slow).await.unwrap();
        assert_eq!(method_of(&summarized), "llm_fallback");
    }

    #[tokio::test]
    async fn a_summary_not_smaller_than_the_digest_is_dropped_but_billed() {
        let h = harness(
            |request| {
                Ok(core_agent_digest::Summary {
                    text: format!("{} and more", request.payload),
                    billed: Billed::Reported(TokenUsage {
                        input_tokens: 900,
                        cached_input_tokens: 0,
                        output_tokens: 800,
                    }),
                })
            },
            1,
            |_| {},
        );
        let out = h.wrap.apply(prose(), "srv", "t").await;
        assert_eq!(method_of(&out), "passthrough");
        let s = h.store.usage("s").unwrap().digest_savings;
        assert_eq!((s.subagent_not_smaller, s.agentic_calls), (1, 0));
        assert_eq!(
            (s.subagent_input_tokens, s.subagent_output_tokens),
            (900, 800)
        );
        assert!((s.subagent_cost_usd - Pricing::default().cost("m", 900, 800)).abs() < 1e-12);
    }

    #[tokio::test]
    async fn a_failed_call_is_billed_as_reported_and_a_timed_out_one_at_its_worst_case() {
        // An error answer that reports usage is billed for it.
        let h = harness(
            |_| {
                Err(core_agent_digest::SummaryFailure {
                    error: core_agent_digest::SummaryError::Http { status: 500 },
                    billed: Billed::Reported(TokenUsage {
                        input_tokens: 1000,
                        cached_input_tokens: 400,
                        output_tokens: 10,
                    }),
                })
            },
            1,
            |_| {},
        );
        assert_eq!(
            method_of(&h.wrap.apply(prose(), "srv", "t").await),
            "passthrough"
        );
        let s = h.store.usage("s").unwrap().digest_savings;
        assert_eq!(
            (s.subagent_failures, s.subagent_cached_input_tokens),
            (1, 400)
        );
        // 600 × $0.30/M + 400 × $0.03/M + 10 × $2.50/M
        assert!((s.subagent_cost_usd - 0.000217).abs() < 1e-12, "{s:?}");
        assert_eq!(s.subagent_worst_case_calls, 0);

        // An error that billed nothing costs nothing.
        let h = harness(
            |_| {
                Err(core_agent_digest::SummaryFailure::unbilled(
                    core_agent_digest::SummaryError::Http { status: 400 },
                ))
            },
            1,
            |_| {},
        );
        h.wrap.apply(prose(), "srv", "t").await;
        let s = h.store.usage("s").unwrap().digest_savings;
        assert_eq!((s.subagent_failures, s.subagent_cost_usd), (1, 0.0));

        // A call that never answers: its reserved worst case is recorded.
        let h = harness(billed_worst_case, 0, |llm| {
            llm.timeout = Duration::from_millis(20)
        });
        assert_eq!(
            method_of(&h.wrap.apply(prose(), "srv", "t").await),
            "passthrough"
        );
        let payload = payload_of(&prose()).unwrap();
        let worst = SummaryRequest::new(&payload, "m", 2000).worst_case();
        let s = h.store.usage("s").unwrap().digest_savings;
        assert_eq!((s.subagent_failures, s.subagent_worst_case_calls), (1, 1));
        assert_eq!(s.subagent_input_tokens, worst.input_tokens);
        assert_eq!(s.subagent_output_tokens, worst.output_tokens);
        assert!((s.subagent_cost_usd - Pricing::default().cost_of("m", &worst)).abs() < 1e-12);
    }

    #[tokio::test]
    async fn the_llm_is_shown_at_most_max_input_bytes_of_a_payload() {
        let h = harness(billed_worst_case, 1, |llm| llm.max_input_bytes = 1000);
        let big = format!("HEAD {} TAIL", "middle words ".repeat(1000));
        let out = h.wrap.apply(result(&[&big], None), "srv", "t").await;
        assert_eq!(method_of(&out), "llm_fallback");
        let seen = h.fake.seen.lock().unwrap()[0].clone();
        let (head, rest) = seen.split_once('\n').unwrap();
        let (marker, tail) = rest.split_once('\n').unwrap();
        assert!(
            head.starts_with("HEAD ") && tail.ends_with(" TAIL"),
            "{seen}"
        );
        assert_eq!(head.len() + tail.len(), 1000);
        assert_eq!(
            marker,
            format!(
                "[core-agent: bytes 500..{} of this {}-byte payload ({} bytes) were cut before summarizing; only its head and tail are shown]",
                big.len() - 500,
                big.len(),
                big.len() - 1000
            )
        );
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
