use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Method;

/// What the LLM second chance cost for one payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmUsage {
    /// The model that ran.
    pub model: String,
    /// Prompt tokens, the cached ones included.
    pub input_tokens: u64,
    /// Of those, tokens billed at the cached-input price.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
    /// The provider reported no usage (a timeout, an answer without
    /// `usage`): the tokens and cost are the call's reserved worst case.
    #[serde(default)]
    pub worst_case: bool,
}

/// One digested payload, as telemetry records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestEvent {
    /// How it was shrunk.
    pub method: String,
    /// Its size.
    pub raw_bytes: u64,
    /// The digest's size.
    pub digest_bytes: u64,
    /// The LLM's usage, when it ran (also when it failed after being billed).
    pub llm: Option<LlmUsage>,
    /// The LLM path was skipped because the session's cost ceiling could
    /// not cover the call's worst case.
    pub ceiling_reached: bool,
    /// The LLM ran but made no summary (an error, a timeout).
    #[serde(default)]
    pub llm_failed: bool,
    /// The LLM's summary was dropped: it was not smaller than the structural digest.
    #[serde(default)]
    pub llm_not_smaller: bool,
}

impl DigestEvent {
    /// An event for a payload shrunk by `method`.
    pub fn new(method: Method, raw_bytes: usize, digest_bytes: usize) -> DigestEvent {
        DigestEvent {
            method: method.as_str().to_owned(),
            raw_bytes: raw_bytes as u64,
            digest_bytes: digest_bytes as u64,
            llm: None,
            ceiling_reached: false,
            llm_failed: false,
            llm_not_smaller: false,
        }
    }
}

/// `digest_methods`: per-method call counts and cumulative bytes saved, in
/// the spec's shape: every method of [`Method::ALL`] is listed, at zero until
/// it is used, so a reader can tell "never used" from "unknown". Keyed by
/// [`Method::as_str`]; an event under a name this version does not know (a
/// store written by a newer one) is counted under that name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestMethods {
    /// Calls per method.
    pub counts: BTreeMap<String, u64>,
    /// Bytes saved per method.
    pub bytes_saved: BTreeMap<String, u64>,
}

impl Default for DigestMethods {
    fn default() -> DigestMethods {
        let zeros: BTreeMap<String, u64> = Method::ALL
            .iter()
            .map(|m| (m.as_str().to_owned(), 0))
            .collect();
        DigestMethods {
            counts: zeros.clone(),
            bytes_saved: zeros,
        }
    }
}

/// `digest_savings`: the session-cumulative view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DigestSavings {
    /// Payloads shrunk without the LLM.
    pub structural_calls: u64,
    /// Payloads the LLM summarized.
    pub agentic_calls: u64,
    /// Tokens the parent model did not have to read (bytes saved / 4).
    pub parent_tokens_saved: u64,
    /// Tokens the LLM read (the cached ones included).
    pub subagent_input_tokens: u64,
    /// Of those, tokens billed at the cached-input price.
    pub subagent_cached_input_tokens: u64,
    /// Tokens the LLM wrote.
    pub subagent_output_tokens: u64,
    /// What the LLM cost, in US dollars (failed calls included).
    pub subagent_cost_usd: f64,
    /// Payloads that skipped the LLM because the cost ceiling could not
    /// cover the call's worst case.
    pub ceiling_skips: u64,
    /// LLM calls that made no summary (an error, a timeout).
    pub subagent_failures: u64,
    /// LLM summaries dropped for not being smaller than the structural digest.
    pub subagent_not_smaller: u64,
    /// LLM calls recorded at their reserved worst case, the provider having
    /// reported no usage (a timeout, an answer without `usage`).
    pub subagent_worst_case_calls: u64,
}

/// A session's digest telemetry, in the spec's shapes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Per-method counts and bytes saved.
    pub digest_methods: DigestMethods,
    /// The cumulative view.
    pub digest_savings: DigestSavings,
}

impl Usage {
    /// Adds one event.
    pub fn record(&mut self, event: &DigestEvent) {
        let saved = event.raw_bytes.saturating_sub(event.digest_bytes);
        *self
            .digest_methods
            .counts
            .entry(event.method.clone())
            .or_default() += 1;
        *self
            .digest_methods
            .bytes_saved
            .entry(event.method.clone())
            .or_default() += saved;
        let s = &mut self.digest_savings;
        if event.method == Method::LlmFallback.as_str() {
            s.agentic_calls += 1;
        } else {
            s.structural_calls += 1;
        }
        s.parent_tokens_saved += saved / 4;
        if let Some(llm) = &event.llm {
            s.subagent_input_tokens += llm.input_tokens;
            s.subagent_cached_input_tokens += llm.cached_input_tokens;
            s.subagent_output_tokens += llm.output_tokens;
            s.subagent_cost_usd += llm.cost_usd;
            s.subagent_worst_case_calls += u64::from(llm.worst_case);
        }
        s.ceiling_skips += u64::from(event.ceiling_reached);
        s.subagent_failures += u64::from(event.llm_failed);
        s.subagent_not_smaller += u64::from(event.llm_not_smaller);
    }

    /// What the LLM has cost this session so far.
    pub fn spent_usd(&self) -> f64 {
        self.digest_savings.subagent_cost_usd
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn every_method_is_listed_at_zero_and_any_name_counts() {
        let mut usage = Usage::default();
        let empty = serde_json::to_value(&usage).unwrap();
        let zeros: serde_json::Map<String, Value> = Method::ALL
            .iter()
            .map(|m| (m.as_str().to_owned(), json!(0)))
            .collect();
        assert_eq!(
            empty["digest_methods"],
            json!({"counts": zeros, "bytes_saved": zeros})
        );
        assert_eq!(zeros.len(), 7, "{zeros:?}");
        // Every savings field is there, at zero, before anything happened.
        let savings = empty["digest_savings"].as_object().unwrap();
        let fields: Vec<&str> = savings.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            [
                "structural_calls",
                "agentic_calls",
                "parent_tokens_saved",
                "subagent_input_tokens",
                "subagent_cached_input_tokens",
                "subagent_output_tokens",
                "subagent_cost_usd",
                "ceiling_skips",
                "subagent_failures",
                "subagent_not_smaller",
                "subagent_worst_case_calls",
            ]
        );
        assert!(
            savings.values().all(|v| v.as_f64() == Some(0.0)),
            "{savings:?}"
        );
        usage.record(&DigestEvent::new(Method::StructuralJson, 1000, 100));
        // A method this crate does not know yet is counted like any other.
        let mut future = DigestEvent::new(Method::Passthrough, 800, 200);
        future.method = "structural_diff".to_owned();
        usage.record(&future);
        let shown = serde_json::to_value(&usage).unwrap();
        let methods = &shown["digest_methods"];
        assert_eq!(methods["counts"]["structural_json"], 1);
        assert_eq!(methods["counts"]["structural_diff"], 1);
        assert_eq!(methods["counts"]["passthrough"], 0);
        assert_eq!(methods["bytes_saved"]["structural_json"], 900);
        assert_eq!(methods["bytes_saved"]["structural_diff"], 600);
        assert_eq!(methods["bytes_saved"]["llm_fallback"], 0);
        // A name this version does not know is counted under it.
        let mut newer = DigestEvent::new(Method::Passthrough, 500, 100);
        newer.method = "structural_yaml".to_owned();
        usage.record(&newer);
        assert_eq!(usage.digest_methods.counts["structural_yaml"], 1);
        assert_eq!(usage.digest_methods.counts.len(), Method::ALL.len() + 1);
        assert_eq!(shown["digest_savings"]["structural_calls"], 2);
    }

    #[test]
    fn an_event_of_an_older_version_still_reads() {
        let old = r#"{"method":"llm_fallback","raw_bytes":9000,"digest_bytes":100,
            "llm":{"model":"m","input_tokens":10,"output_tokens":5,"cost_usd":0.5},
            "ceiling_reached":false}"#;
        let event: DigestEvent = serde_json::from_str(old).unwrap();
        let llm = event.llm.as_ref().unwrap();
        assert_eq!((llm.cached_input_tokens, llm.worst_case), (0, false));
        assert!(!event.llm_failed && !event.llm_not_smaller);
    }
}
