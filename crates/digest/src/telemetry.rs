use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Method;

/// What the LLM second chance cost for one payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmUsage {
    /// The model that ran.
    pub model: String,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
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
    /// The LLM path was skipped because the session reached its cost ceiling.
    pub ceiling_reached: bool,
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
        }
    }
}

/// `digest_methods`: per-method call counts and cumulative bytes saved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DigestMethods {
    /// Calls per method.
    pub counts: BTreeMap<String, u64>,
    /// Bytes saved per method.
    pub bytes_saved: BTreeMap<String, u64>,
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
    /// Tokens the LLM read.
    pub subagent_input_tokens: u64,
    /// Tokens the LLM wrote.
    pub subagent_output_tokens: u64,
    /// What the LLM cost, in US dollars.
    pub subagent_cost_usd: f64,
    /// Payloads that skipped the LLM because the cost ceiling was reached.
    pub ceiling_skips: u64,
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
            s.subagent_output_tokens += llm.output_tokens;
            s.subagent_cost_usd += llm.cost_usd;
        }
        if event.ceiling_reached {
            s.ceiling_skips += 1;
        }
    }

    /// What the LLM has cost this session so far.
    pub fn spent_usd(&self) -> f64 {
        self.digest_savings.subagent_cost_usd
    }
}
