//! Rate limits and budgets per identity: calls per minute, result bytes per
//! minute and calls in flight, keyed on who calls (a static token's name,
//! a signed-in caller's issuer and subject), never on the session, so that
//! opening new sessions resets nothing.
//!
//! Calls per minute and result bytes per minute are each a GCRA (the
//! generic cell rate algorithm, a token bucket kept as one instant): a
//! caller may spend a minute's worth at once, then as fast as it refills.
//! Result bytes are counted as the answer is sent, so the call that spends
//! the last of them ends and the next waits. Limits are per replica.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use core_agent_mcp_config::TrustLevel;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};

use crate::Caller;

/// One limit: none, or at most this many (per minute, or at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit.
    Unlimited,
    /// At most this many.
    Max(u64),
}

impl Limit {
    fn max(self) -> Option<u64> {
        match self {
            Limit::Unlimited => None,
            Limit::Max(n) => Some(n),
        }
    }
}

/// What one caller may spend; each limit `None` where it is not set here
/// (it falls back: token, then trust level, then the level's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budget {
    /// `calls_per_minute`: `tools/call` requests.
    pub calls_per_minute: Option<Limit>,
    /// `result_bytes_per_minute`: bytes of the answers to them.
    pub result_bytes_per_minute: Option<Limit>,
    /// `concurrent_calls`: `tools/call` requests being answered at once.
    pub concurrent_calls: Option<Limit>,
}

impl Budget {
    /// Every limit set to `limit`.
    pub fn all(limit: Limit) -> Budget {
        Budget {
            calls_per_minute: Some(limit),
            result_bytes_per_minute: Some(limit),
            concurrent_calls: Some(limit),
        }
    }

    /// `calls_per_minute`.
    #[must_use]
    pub fn with_calls_per_minute(mut self, limit: Option<Limit>) -> Budget {
        self.calls_per_minute = limit;
        self
    }

    /// `result_bytes_per_minute`.
    #[must_use]
    pub fn with_result_bytes_per_minute(mut self, limit: Option<Limit>) -> Budget {
        self.result_bytes_per_minute = limit;
        self
    }

    /// `concurrent_calls`.
    #[must_use]
    pub fn with_concurrent_calls(mut self, limit: Option<Limit>) -> Budget {
        self.concurrent_calls = limit;
        self
    }

    /// Each limit this one leaves unset, taken from `fallback`.
    #[must_use]
    pub fn or(self, fallback: Budget) -> Budget {
        Budget {
            calls_per_minute: self.calls_per_minute.or(fallback.calls_per_minute),
            result_bytes_per_minute: self
                .result_bytes_per_minute
                .or(fallback.result_bytes_per_minute),
            concurrent_calls: self.concurrent_calls.or(fallback.concurrent_calls),
        }
    }

    /// Whether every limit is unset or [`Limit::Unlimited`].
    pub fn is_unlimited(&self) -> bool {
        [
            self.calls_per_minute,
            self.result_bytes_per_minute,
            self.concurrent_calls,
        ]
        .iter()
        .all(|l| l.is_none_or(|l| l == Limit::Unlimited))
    }
}

/// The rate limits of `gateway.rate_limits` (per trust level) and
/// `gateway.tokens.<name>.rate_limits` (per token), over the defaults of
/// [`RateLimits::default_for`]. Built by
/// [`GatewayConfig::parse`](crate::GatewayConfig::parse), or from
/// [`RateLimits::default`] (the defaults alone) with the `with_*` methods:
///
/// ```
/// use core_agent_gateway::{Budget, Caller, Limit, RateLimits};
/// use core_agent_mcp_config::TrustLevel;
///
/// let limits = RateLimits::default()
///     .with_level(TrustLevel::User, Budget::default().with_calls_per_minute(Some(Limit::Max(100))))
///     .with_token("ci", Budget::all(Limit::Unlimited));
/// let user = limits.budget(&Caller::new("alice", TrustLevel::User));
/// assert_eq!(user.calls_per_minute, Some(Limit::Max(100)));
/// assert!(limits.budget(&Caller::new("ci", TrustLevel::Public)).is_unlimited());
/// assert!(limits.budget(&Caller::new("me", TrustLevel::Creator)).is_unlimited());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimits {
    /// Set per trust level, over [`RateLimits::default_for`].
    pub levels: Vec<(TrustLevel, Budget)>,
    /// Set per static token (by name), over its trust level's.
    pub tokens: Vec<(String, Budget)>,
}

impl RateLimits {
    /// `public` callers: 60 calls and 16 MiB of results a minute, 4 calls
    /// at once.
    pub const PUBLIC: Budget = Budget {
        calls_per_minute: Some(Limit::Max(60)),
        result_bytes_per_minute: Some(Limit::Max(16 * 1024 * 1024)),
        concurrent_calls: Some(Limit::Max(4)),
    };
    /// `user` callers: 600 calls and 256 MiB of results a minute, 16 calls
    /// at once.
    pub const USER: Budget = Budget {
        calls_per_minute: Some(Limit::Max(600)),
        result_bytes_per_minute: Some(Limit::Max(256 * 1024 * 1024)),
        concurrent_calls: Some(Limit::Max(16)),
    };

    /// The default limits of a trust level: [`RateLimits::PUBLIC`],
    /// [`RateLimits::USER`], and none for `agent` and `creator`.
    pub fn default_for(level: TrustLevel) -> Budget {
        match level {
            TrustLevel::Public => RateLimits::PUBLIC,
            TrustLevel::User => RateLimits::USER,
            TrustLevel::Agent | TrustLevel::Creator => Budget::all(Limit::Unlimited),
        }
    }

    /// Sets `budget` for `level` (its unset limits keep the default).
    #[must_use]
    pub fn with_level(mut self, level: TrustLevel, budget: Budget) -> RateLimits {
        self.levels.retain(|(l, _)| *l != level);
        self.levels.push((level, budget));
        self
    }

    /// Sets `budget` for the static token `name` (its unset limits keep
    /// its trust level's).
    #[must_use]
    pub fn with_token(mut self, name: impl Into<String>, budget: Budget) -> RateLimits {
        let name = name.into();
        self.tokens.retain(|(n, _)| *n != name);
        self.tokens.push((name, budget));
        self
    }

    /// What `caller` may spend, every limit set: its claims' (a
    /// `gateway.oauth.trust` rule's `rate_limits`), else its token's, else
    /// its level's, else the level's default.
    pub fn budget(&self, caller: &Caller) -> Budget {
        let token = match caller.identity {
            None => self
                .tokens
                .iter()
                .find(|(name, _)| *name == caller.name)
                .map(|(_, b)| *b),
            Some(_) => None,
        };
        let level = self
            .levels
            .iter()
            .find(|(l, _)| *l == caller.trust_level)
            .map(|(_, b)| *b);
        caller
            .rate_limits
            .unwrap_or_default()
            .or(token.unwrap_or_default())
            .or(level.unwrap_or_default())
            .or(RateLimits::default_for(caller.trust_level))
    }
}

/// Why a call was refused: which limit, and when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `calls_per_minute` spent.
    Calls { limit: u64, retry: Duration },
    /// `result_bytes_per_minute` spent.
    Bytes { limit: u64, retry: Duration },
    /// `concurrent_calls` in flight.
    Concurrent { limit: u64 },
}

impl Refused {
    /// The `limit` label of `/metrics` and the audit trail.
    pub(crate) fn limit(&self) -> &'static str {
        match self {
            Refused::Calls { .. } => "calls_per_minute",
            Refused::Bytes { .. } => "result_bytes_per_minute",
            Refused::Concurrent { .. } => "concurrent_calls",
        }
    }

    /// Whole seconds to wait, at least 1.
    pub(crate) fn retry_after(&self) -> u64 {
        let wait = match self {
            Refused::Calls { retry, .. } | Refused::Bytes { retry, .. } => *retry,
            Refused::Concurrent { .. } => Duration::from_secs(1),
        };
        wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.is_zero()))
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seconds = self.retry_after();
        match self {
            Refused::Calls { limit, .. } => write!(
                f,
                "this caller made its {limit} tool calls of the minute (gateway.rate_limits calls_per_minute); retry in {seconds} s"
            ),
            Refused::Bytes { limit, .. } => write!(
                f,
                "this caller received its {limit} bytes of tool results of the minute (gateway.rate_limits result_bytes_per_minute); retry in {seconds} s"
            ),
            Refused::Concurrent { limit } => write!(
                f,
                "this caller already has {limit} tool calls in flight (gateway.rate_limits concurrent_calls); retry when one ends"
            ),
        }
    }
}

/// One caller's windows: the theoretical arrival times of the two GCRAs
/// (nanoseconds since [`Limiter::epoch`]) and its calls in flight.
#[derive(Debug, Default)]
struct Window {
    calls_at: u64,
    bytes_at: u64,
    in_flight: u64,
}

/// Callers' windows, swept of those at rest when they double.
#[derive(Debug, Default)]
struct Windows {
    by_caller: HashMap<String, Window>,
    sweep_at: usize,
}

/// Fewer windows than this are never swept.
const SWEEP_FLOOR: usize = 64;

const MINUTE: u64 = 60_000_000_000;

/// The limiter of one gateway replica.
#[derive(Debug)]
pub(crate) struct Limiter {
    limits: RateLimits,
    epoch: Instant,
    windows: Mutex<Windows>,
}

/// A call admitted: counts it in flight and its answer's bytes until dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    owner: String,
    bytes_per_minute: Option<u64>,
    bytes: u64,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let now = self.limiter.now();
        let mut windows = self.limiter.lock();
        if let Some(window) = windows.by_caller.get_mut(&self.owner) {
            window.in_flight = window.in_flight.saturating_sub(1);
            if let Some(per_minute) = self.bytes_per_minute {
                let cost = spread(self.bytes, per_minute);
                window.bytes_at = window.bytes_at.max(now).saturating_add(cost);
            }
        }
    }
}

/// Nanoseconds of a minute that `amount` of `per_minute` stands for.
fn spread(amount: u64, per_minute: u64) -> u64 {
    let nanos = u128::from(amount) * u128::from(MINUTE) / u128::from(per_minute.max(1));
    u64::try_from(nanos).unwrap_or(u64::MAX)
}

impl Limiter {
    pub(crate) fn new(limits: RateLimits) -> Limiter {
        Limiter {
            limits,
            epoch: Instant::now(),
            windows: Mutex::default(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What `caller` may spend; `None` when nothing limits it.
    pub(crate) fn budget(&self, caller: &Caller) -> Option<Budget> {
        let budget = self.limits.budget(caller);
        (!budget.is_unlimited()).then_some(budget)
    }

    /// Admits one call of `owner` under `budget` at `now` (nanoseconds since
    /// the epoch), or says which limit refuses it (nothing is spent then).
    fn admit_at(
        self: &Arc<Self>,
        owner: &str,
        budget: &Budget,
        now: u64,
    ) -> Result<Permit, Refused> {
        let calls = budget.calls_per_minute.and_then(Limit::max);
        let bytes = budget.result_bytes_per_minute.and_then(Limit::max);
        let concurrent = budget.concurrent_calls.and_then(Limit::max);
        let mut windows = self.lock();
        if !windows.by_caller.contains_key(owner) {
            if windows.by_caller.len() >= windows.sweep_at.max(SWEEP_FLOOR) {
                windows
                    .by_caller
                    .retain(|_, w| w.in_flight > 0 || w.calls_at > now || w.bytes_at > now);
                windows.sweep_at = windows.by_caller.len().saturating_mul(2);
            }
            windows
                .by_caller
                .insert(owner.to_owned(), Window::default());
        }
        let window = windows
            .by_caller
            .get_mut(owner)
            .ok_or(Refused::Concurrent { limit: 0 })?;
        if let Some(limit) = concurrent
            && window.in_flight >= limit
        {
            return Err(Refused::Concurrent { limit });
        }
        // Up to a minute of debt is allowed; past it, wait until under.
        if let Some(limit) = bytes
            && window.bytes_at >= now.saturating_add(MINUTE)
        {
            let retry = window.bytes_at - now.saturating_add(MINUTE);
            return Err(Refused::Bytes {
                limit,
                retry: Duration::from_nanos(retry.max(1)),
            });
        }
        if let Some(limit) = calls {
            let at = window.calls_at.max(now).saturating_add(spread(1, limit));
            if at > now.saturating_add(MINUTE) {
                return Err(Refused::Calls {
                    limit,
                    retry: Duration::from_nanos(at - now.saturating_add(MINUTE)),
                });
            }
            window.calls_at = at;
        }
        window.in_flight += 1;
        Ok(Permit {
            limiter: self.clone(),
            owner: owner.to_owned(),
            bytes_per_minute: bytes,
            bytes: 0,
        })
    }

    /// [`Limiter::admit_at`] now.
    pub(crate) fn admit(self: &Arc<Self>, owner: &str, budget: &Budget) -> Result<Permit, Refused> {
        self.admit_at(owner, budget, self.now())
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().by_caller.len()
    }
}

/// Whether `body` may be a JSON-RPC `tools/call` request: parsed (the
/// method's name may be written with escapes, `tools\/call`), and counted as
/// one unless it parses as a request of another method (a body that does
/// not parse, or names its method twice, counts: the limit errs on the side
/// of the caller paying).
fn is_tool_call(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
    }
    match serde_json::from_slice::<Probe>(body) {
        Ok(Probe { method: Some(m) }) => m == "tools/call",
        // A response to the server's own request (an elicitation's answer).
        Ok(Probe { method: None }) => false,
        Err(_) => true,
    }
}

/// Checks a request of `caller` against its rate limits, before it is
/// accepted: a POST whose body is a `tools/call` takes a [`Permit`] (kept
/// until its answer is sent: give it to [`metered`]), or is answered 429
/// with `Retry-After`, counted in `/metrics` and the audit trail. Any other
/// request, or a caller nothing limits, passes as it came.
pub(crate) async fn admit(
    limiter: &Arc<Limiter>,
    gateway: &crate::Gateway,
    caller: &Caller,
    remote: Option<std::net::IpAddr>,
    max_body_bytes: usize,
    request: Request,
) -> Result<(Request, Option<Permit>), Response> {
    if request.method() != http::Method::POST {
        return Ok((request, None));
    }
    let Some(budget) = limiter.budget(caller) else {
        return Ok((request, None));
    };
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                axum::Json(serde_json::json!({
                    "error": format!("the request body is larger than {max_body_bytes} bytes, or was cut off; send a smaller one")
                })),
            )
                .into_response());
        }
    };
    let call = is_tool_call(&bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    if !call {
        return Ok((request, None));
    }
    match limiter.admit(&caller.owner(), &budget) {
        Ok(permit) => Ok((request, Some(permit))),
        Err(refused) => {
            let options = &gateway.inner.options;
            if let Some(metrics) = &options.metrics {
                metrics.rate_limited(refused.limit());
            }
            if let Some(audit) = &options.audit {
                audit.rate_limited(caller, remote, refused.limit(), &refused.to_string());
            }
            let seconds = refused.retry_after();
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                axum::Json(serde_json::json!({
                    "error": refused.to_string(),
                    "limit": refused.limit(),
                    "retry_after_secs": seconds,
                })),
            )
                .into_response();
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            Err(response)
        }
    }
}

/// `response` with `permit` held until its body is sent, counting its bytes.
pub(crate) fn metered(response: Response, permit: Option<Permit>) -> Response {
    let Some(mut permit) = permit else {
        return response;
    };
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            if let Ok(data) = &chunk {
                permit.bytes = permit.bytes.saturating_add(data.len() as u64);
            }
            chunk
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn limiter() -> Arc<Limiter> {
        Arc::new(Limiter::new(RateLimits::default()))
    }

    fn calls(n: u64) -> Budget {
        Budget::default().with_calls_per_minute(Some(Limit::Max(n)))
    }

    #[test]
    fn a_minutes_calls_pass_at_once_then_one_per_share_of_the_minute() {
        let limiter = limiter();
        let budget = calls(6);
        for _ in 0..6 {
            drop(limiter.admit_at("pub", &budget, 0).unwrap());
        }
        let refused = limiter.admit_at("pub", &budget, 0).unwrap_err();
        assert_eq!(
            refused,
            Refused::Calls {
                limit: 6,
                retry: Duration::from_secs(10)
            }
        );
        assert_eq!(refused.retry_after(), 10);
        assert!(refused.to_string().contains("retry in 10 s"), "{refused}");
        // Another caller is not touched.
        drop(limiter.admit_at("creator", &budget, 0).unwrap());
        // Nothing was spent by the refusal: one more passes 10 s later.
        assert!(limiter.admit_at("pub", &budget, 9 * SECOND).is_err());
        drop(limiter.admit_at("pub", &budget, 10 * SECOND).unwrap());
        assert!(limiter.admit_at("pub", &budget, 10 * SECOND).is_err());
        // A quiet minute gives the whole minute back.
        for _ in 0..6 {
            drop(limiter.admit_at("pub", &budget, 80 * SECOND).unwrap());
        }
    }

    #[test]
    fn calls_in_flight_are_bounded_until_their_answers_are_sent() {
        let limiter = limiter();
        let budget = Budget::default().with_concurrent_calls(Some(Limit::Max(2)));
        let one = limiter.admit_at("pub", &budget, 0).unwrap();
        let _two = limiter.admit_at("pub", &budget, 0).unwrap();
        assert_eq!(
            limiter.admit_at("pub", &budget, 0).unwrap_err(),
            Refused::Concurrent { limit: 2 }
        );
        drop(one);
        assert!(limiter.admit_at("pub", &budget, 0).is_ok());
    }

    #[test]
    fn result_bytes_are_a_minutes_debt_then_wait() {
        let limiter = limiter();
        let budget = Budget::default().with_result_bytes_per_minute(Some(Limit::Max(600)));
        // A 300-byte answer: half the minute spent; still admitted.
        let mut permit = limiter.admit_at("pub", &budget, 0).unwrap();
        permit.bytes = 300;
        drop(permit);
        let mut permit = limiter.admit_at("pub", &budget, 0).unwrap();
        // The call that passes the budget ends; the next waits.
        permit.bytes = 900;
        drop(permit);
        // (An answer's bytes count from when it ends: the real clock, a
        // moment after this test's 0.)
        let refused = limiter.admit_at("pub", &budget, 0).unwrap_err();
        let Refused::Bytes { limit: 600, retry } = refused else {
            panic!("{refused:?}");
        };
        assert!(retry >= Duration::from_secs(60) && retry < Duration::from_secs(61));
        assert!(limiter.admit_at("pub", &budget, 59 * SECOND).is_err());
        assert!(limiter.admit_at("pub", &budget, 61 * SECOND).is_ok());
    }

    #[test]
    fn limits_fall_back_from_token_to_level_to_default() {
        let limits = RateLimits::default()
            .with_level(TrustLevel::Public, calls(5))
            .with_token(
                "bot",
                Budget::default().with_concurrent_calls(Some(Limit::Max(1))),
            )
            .with_token("me", calls(3));
        let public = |name: &str| limits.budget(&Caller::new(name, TrustLevel::Public));
        assert_eq!(public("anyone").calls_per_minute, Some(Limit::Max(5)));
        assert_eq!(
            public("anyone").result_bytes_per_minute,
            RateLimits::PUBLIC.result_bytes_per_minute
        );
        assert_eq!(public("bot").calls_per_minute, Some(Limit::Max(5)));
        assert_eq!(public("bot").concurrent_calls, Some(Limit::Max(1)));
        let creator = Caller::new("me", TrustLevel::Creator);
        assert_eq!(
            limits.budget(&creator).calls_per_minute,
            Some(Limit::Max(3))
        );
        assert!(
            limits
                .budget(&Caller::new("other", TrustLevel::Creator))
                .is_unlimited()
        );
        let limiter = Limiter::new(limits);
        assert!(
            limiter
                .budget(&Caller::new("x", TrustLevel::Agent))
                .is_none()
        );
        assert!(
            limiter
                .budget(&Caller::new("x", TrustLevel::User))
                .is_some()
        );
    }

    #[test]
    fn the_limiter_remembers_callers_at_rest_a_bounded_number_of_times() {
        let limiter = limiter();
        let budget = calls(60);
        for i in 0..10_000u64 {
            // Each caller's one call is back at rest a second later.
            drop(
                limiter
                    .admit_at(&format!("caller-{i}"), &budget, i * 2 * SECOND)
                    .unwrap(),
            );
        }
        assert!(limiter.held() <= 2 * SWEEP_FLOOR, "{}", limiter.held());
    }

    #[test]
    fn only_a_tools_call_is_counted() {
        assert!(is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#
        ));
        assert!(!is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#
        ));
        assert!(!is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tools/call"}}"#
        ));
        // The method's name written with escapes is still a call.
        assert!(is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}"#
        ));
        assert!(is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools\u002fcall","params":{"name":"x"}}"#
        ));
        // What cannot be read for sure counts: not JSON, a method named twice.
        assert!(is_tool_call(b"not json"));
        assert!(is_tool_call(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}"#
        ));
        // An answer to the server's own request is not a call.
        assert!(!is_tool_call(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    }
}
