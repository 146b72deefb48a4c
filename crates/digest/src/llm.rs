//! The LLM second chance: a [`Summarizer`] seam, what its use costs, and the
//! bounds that keep that cost known before a call starts.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// A boxed future, as [`Summarizer::summarize`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the summarizer is told before the payload (the system message).
pub const INSTRUCTION: &str = "You compress tool results for another model. Keep every identifier, name, status, number, URL and error exactly; drop repetition and boilerplate. Answer with the compressed content only.";

/// Tokens a chat request may add to its messages' text (roles, separators,
/// the template's special tokens), counted in its worst case.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 64;

/// The input bound of the second chance by default (`agentic_wrap_llm_max_input_bytes`).
pub const DEFAULT_MAX_INPUT_BYTES: usize = 256 * 1024;

/// What the LLM is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The payload to summarize, already bounded ([`bound_input`]).
    pub payload: &'a str,
    /// The model to use.
    pub model: &'a str,
    /// The size the summary should stay under, in bytes.
    pub target_bytes: usize,
    /// The most tokens the answer may have (`max_tokens`).
    pub max_output_tokens: u64,
}

impl<'a> SummaryRequest<'a> {
    /// A request for a summary of `payload` under `target_bytes`, with an
    /// answer of at most `target_bytes / 4` tokens (64 at least).
    pub fn new(payload: &'a str, model: &'a str, target_bytes: usize) -> SummaryRequest<'a> {
        SummaryRequest {
            payload,
            model,
            target_bytes,
            max_output_tokens: (target_bytes / 4).max(64) as u64,
        }
    }

    /// The user message: the target, then the payload.
    pub fn user_message(&self) -> String {
        format!("{}{}", self.preamble(), self.payload)
    }

    /// What the user message says before the payload.
    fn preamble(&self) -> String {
        format!("Compress this to under {} bytes:\n\n", self.target_bytes)
    }

    /// The most input tokens this request can be billed: one per byte of
    /// its messages (a token of a byte-level BPE or of a SentencePiece
    /// tokenizer with byte fallback covers at least one byte), plus
    /// [`MESSAGE_OVERHEAD_TOKENS`]. No tokenizer is known, so this is what
    /// a reservation counts.
    pub fn worst_case_input_tokens(&self) -> u64 {
        let bytes = INSTRUCTION.len() + self.preamble().len() + self.payload.len();
        bytes as u64 + MESSAGE_OVERHEAD_TOKENS
    }

    /// The most this request can be billed: every input token at the input
    /// price (none cached) and `max_output_tokens` at the output price.
    pub fn worst_case(&self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.worst_case_input_tokens(),
            cached_input_tokens: 0,
            output_tokens: self.max_output_tokens,
        }
    }
}

/// `payload` cut to at most `max` bytes: its head and its tail (each on a
/// character boundary), with a marker between them naming what was cut.
/// A payload within `max` is returned as it is.
pub fn bound_input(payload: &str, max: usize) -> Cow<'_, str> {
    if payload.len() <= max {
        return Cow::Borrowed(payload);
    }
    let head_end = payload.floor_char_boundary(max / 2);
    let tail_start = payload.ceil_char_boundary(payload.len() - (max - max / 2));
    let tail_start = tail_start.max(head_end);
    Cow::Owned(format!(
        "{}\n[core-agent: bytes {head_end}..{tail_start} of this {}-byte payload ({} bytes) were cut before summarizing; only its head and tail are shown]\n{}",
        &payload[..head_end],
        payload.len(),
        tail_start - head_end,
        &payload[tail_start..]
    ))
}

/// The tokens of one call, as billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    /// Prompt tokens, the cached ones included (`prompt_tokens`).
    pub input_tokens: u64,
    /// Of those, tokens read from the provider's prompt cache
    /// (`prompt_tokens_details.cached_tokens`), billed at the cached price.
    pub cached_input_tokens: u64,
    /// Completion tokens (`completion_tokens`).
    pub output_tokens: u64,
}

/// What the provider billed for a call, as far as is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billed {
    /// The provider reported this usage.
    Reported(TokenUsage),
    /// Nothing: the request never reached the provider, or it answered an
    /// error that reports no usage.
    Nothing,
    /// Unknown: the call timed out or broke off after the request was sent,
    /// or the answer carried no usage. The wrap then records the call's
    /// worst case ([`SummaryRequest::worst_case`]).
    Unknown,
}

/// What the LLM returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The summary text.
    pub text: String,
    /// What it was billed.
    pub billed: Billed,
}

/// Why a summary could not be made. The digest falls back to the
/// structural result whatever the reason; the kind tells an operator what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SummaryError {
    /// The endpoint could not be reached, or the answer broke off.
    #[error("the LLM endpoint could not be reached: {0}")]
    Transport(String),
    /// The endpoint answered with an HTTP error.
    #[error("the LLM endpoint answered HTTP {status}")]
    Http {
        /// The status code.
        status: u16,
    },
    /// The answer was not a usable completion.
    #[error("the LLM answer is unusable: {0}")]
    BadAnswer(String),
    /// The summarizer could not be set up.
    #[error("the LLM client cannot be set up: {0}")]
    Setup(String),
}

/// A call that made no summary, and what it was billed all the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct SummaryFailure {
    /// Why there is no summary.
    pub error: SummaryError,
    /// What the provider billed for it.
    pub billed: Billed,
}

impl SummaryFailure {
    /// A failure the provider billed nothing for.
    pub fn unbilled(error: SummaryError) -> SummaryFailure {
        SummaryFailure {
            error,
            billed: Billed::Nothing,
        }
    }
}

/// Summarizes a payload the structural pruner could not shrink enough: an
/// OpenAI-compatible chat-completions client in the host, a fake in tests.
pub trait Summarizer: Send + Sync {
    /// Summarizes `request.payload`; an `Err` says why it could not, and
    /// what the provider billed anyway (the digest then falls back to the
    /// structural result).
    fn summarize<'a>(
        &'a self,
        request: SummaryRequest<'a>,
    ) -> BoxFuture<'a, Result<Summary, SummaryFailure>>;
}

/// Prices of one model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Cached input tokens.
    pub cached_input: f64,
    /// Output tokens.
    pub output: f64,
}

/// Model → price. [`Pricing::default`] knows the spec's small-tier model.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    prices: BTreeMap<String, Price>,
}

/// The model used when nothing chooses one.
pub const DEFAULT_MODEL: &str = "gemini-3.5-flash-lite";

impl Default for Pricing {
    fn default() -> Self {
        let mut prices = BTreeMap::new();
        prices.insert(
            DEFAULT_MODEL.to_owned(),
            Price {
                input: 0.30,
                cached_input: 0.03,
                output: 2.50,
            },
        );
        Pricing { prices }
    }
}

impl Pricing {
    /// Sets (or replaces) a model's price.
    pub fn set(&mut self, model: &str, price: Price) {
        self.prices.insert(model.to_owned(), price);
    }

    /// The price of `model`; an unknown model is priced like the default
    /// one, so a ceiling still bites.
    pub fn price(&self, model: &str) -> Price {
        self.prices
            .get(model)
            .or_else(|| self.prices.get(DEFAULT_MODEL))
            .copied()
            .unwrap_or(Price {
                input: 0.30,
                cached_input: 0.03,
                output: 2.50,
            })
    }

    /// The cost of `input_tokens` (none cached) and `output_tokens` in US dollars.
    pub fn cost(&self, model: &str, input_tokens: u64, output_tokens: u64) -> f64 {
        self.cost_of(
            model,
            &TokenUsage {
                input_tokens,
                cached_input_tokens: 0,
                output_tokens,
            },
        )
    }

    /// The cost of a call's usage in US dollars: its cached input tokens at
    /// the cached-input price, the rest of its input at the input price,
    /// its output at the output price.
    pub fn cost_of(&self, model: &str, usage: &TokenUsage) -> f64 {
        let p = self.price(model);
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        (uncached as f64 * p.input
            + cached as f64 * p.cached_input
            + usage.output_tokens as f64 * p.output)
            / 1_000_000.0
    }
}

/// The model for the LLM path: the MCP-specific choice
/// (`--mcp-agentic-wrap-model` / `agentic_wrap_model`), then the general
/// small model (`--agentic-small-model`), then [`DEFAULT_MODEL`].
pub fn choose_model<'a>(mcp_model: Option<&'a str>, small_model: Option<&'a str>) -> &'a str {
    mcp_model.or(small_model).unwrap_or(DEFAULT_MODEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_the_model_chain() {
        let pricing = Pricing::default();
        let cost = pricing.cost(DEFAULT_MODEL, 1_000_000, 100_000);
        assert!((cost - (0.30 + 0.25)).abs() < 1e-9, "{cost}");
        assert_eq!(pricing.price("unknown"), pricing.price(DEFAULT_MODEL));
        assert_eq!(choose_model(Some("a"), Some("b")), "a");
        assert_eq!(choose_model(None, Some("b")), "b");
        assert_eq!(choose_model(None, None), DEFAULT_MODEL);
    }

    #[test]
    fn cached_input_tokens_are_billed_at_the_cached_price() {
        let pricing = Pricing::default();
        let usage = TokenUsage {
            input_tokens: 1_000_000,
            cached_input_tokens: 800_000,
            output_tokens: 0,
        };
        // 200 000 × $0.30/M + 800 000 × $0.03/M
        let cost = pricing.cost_of(DEFAULT_MODEL, &usage);
        assert!((cost - (0.06 + 0.024)).abs() < 1e-12, "{cost}");
        // More cached than prompt tokens (a confused provider): never negative.
        let odd = TokenUsage {
            cached_input_tokens: 2_000_000,
            ..usage
        };
        assert!((pricing.cost_of(DEFAULT_MODEL, &odd) - 0.03).abs() < 1e-12);
    }

    #[test]
    fn the_worst_case_counts_a_token_per_byte_and_every_output_token() {
        let payload = "x".repeat(10_000);
        let request = SummaryRequest::new(&payload, "m", 8000);
        assert_eq!(request.max_output_tokens, 2000);
        let worst = request.worst_case();
        let messages = INSTRUCTION.len() + request.user_message().len();
        assert_eq!(
            worst.input_tokens,
            messages as u64 + MESSAGE_OVERHEAD_TOKENS
        );
        assert_eq!(worst.output_tokens, 2000);
        assert_eq!(SummaryRequest::new("x", "m", 10).max_output_tokens, 64);
    }

    #[test]
    fn a_bounded_input_keeps_its_head_and_tail_and_names_the_cut() {
        assert_eq!(bound_input("short", 10), "short");
        let payload = format!("{}{}{}", "h".repeat(100), "m".repeat(1000), "t".repeat(100));
        let bounded = bound_input(&payload, 200);
        let (head, rest) = bounded.split_once('\n').unwrap();
        let (marker, tail) = rest.split_once('\n').unwrap();
        assert_eq!(head, "h".repeat(100));
        assert_eq!(tail, "t".repeat(100));
        assert_eq!(
            marker,
            "[core-agent: bytes 100..1100 of this 1200-byte payload (1000 bytes) were cut before summarizing; only its head and tail are shown]"
        );
        // On character boundaries, never over the bound.
        let wide = "é".repeat(1000);
        let bounded = bound_input(&wide, 101);
        let kept: usize = bounded.split('\n').step_by(2).map(str::len).sum();
        assert!(kept <= 101, "{kept}");
        assert!(bounded.starts_with("éé") && bounded.ends_with("éé"));
    }
}
