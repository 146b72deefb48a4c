//! What a session tells an [`Observer`] about each call it decided: the
//! verdict and the rule behind it, how the call ended, how long it took,
//! how large its result was and whether it was digested. An audit trail and
//! metrics are observers; the host keeps nothing of it.

use std::cell::Cell;
use std::time::Duration;

use core_agent_mcp_transport::model::{CallToolResult, JsonObject};
use core_agent_permissions::{Answer, Rule};

use crate::Error;

/// Told about every call of the sessions it is given to
/// ([`SessionOptions::with_observer`](crate::SessionOptions::with_observer)),
/// once the call ended (refused calls included). Called on the call's task:
/// an implementation must be quick and never block (hand slow work, such as
/// writing a file, to a task or a thread of its own).
pub trait Observer: Send + Sync {
    /// One call ended.
    fn observe(&self, call: &CallRecord<'_>);

    /// Whether it reads [`CallRecord::arguments`] and
    /// [`CallRecord::result_bytes`] (yes, by default). One that answers
    /// no gets `None` in both, and the session neither copies a call's
    /// arguments nor measures its result for it.
    fn wants_payloads(&self) -> bool {
        true
    }
}

/// What was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A tool (`tools/call`), a server's or a host tool.
    Tool,
    /// A resource read (`resources/read`).
    Resource,
    /// A prompt (`prompts/get`).
    Prompt,
}

impl Kind {
    /// `tool`, `resource` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Resource => "resource",
            Kind::Prompt => "prompt",
        }
    }
}

/// What the pipeline decided about a call, before it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The gate allowed it by `rule` (`None`: a host tool the gate does not
    /// see, or a resource or prompt, which only the trust level decides).
    Allowed {
        /// The rule that allowed it.
        rule: Option<Rule>,
    },
    /// The gate asked, and this was the answer (`No` refused the call).
    Asked {
        /// The answer.
        answer: Answer,
    },
    /// The gate refused it by `rule`.
    Denied {
        /// The rule that refused it.
        rule: Rule,
    },
    /// The caller's trust level may not call it.
    Restricted,
    /// It is withheld from the catalog (a pin quarantined its server's
    /// tools, or a policy left it out).
    Withheld,
    /// No tool, prompt or resource has that name.
    Unknown,
}

impl Verdict {
    /// The verdict a call refused before the gate gets from its error.
    pub(crate) fn of_refusal(error: &Error) -> Verdict {
        match error {
            Error::Restricted { .. } => Verdict::Restricted,
            Error::Withheld { .. } | Error::Pin { .. } => Verdict::Withheld,
            Error::UnknownTool { .. }
            | Error::UnknownPrompt { .. }
            | Error::UnknownResource { .. } => Verdict::Unknown,
            _ => Verdict::Allowed { rule: None },
        }
    }

    /// `allow`, `ask`, `deny`, `restricted`, `withheld` or `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Allowed { .. } => "allow",
            Verdict::Asked { .. } => "ask",
            Verdict::Denied { .. } => "deny",
            Verdict::Restricted => "restricted",
            Verdict::Withheld => "withheld",
            Verdict::Unknown => "unknown",
        }
    }

    /// Whether the call was let through to run.
    pub fn ran(&self) -> bool {
        match self {
            Verdict::Allowed { .. } => true,
            Verdict::Asked { answer } => *answer != Answer::No,
            _ => false,
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// It ran and returned a result.
    Ok,
    /// It ran and its result says it failed (`isError: true`).
    ToolError,
    /// It was refused, or could not finish (a timeout, a transport error).
    Failed,
}

impl Outcome {
    /// `ok`, `tool_error` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Failed => "failed",
        }
    }
}

/// A result the digest replaced with its synthetic response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestedResult {
    /// The method that made it (`json`, `text`, `llm`, …).
    pub method: String,
    /// The raw payload's size in bytes.
    pub raw_bytes: u64,
    /// The synthetic response's size in bytes.
    pub digest_bytes: u64,
}

/// One call, as an [`Observer`] is told it.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallRecord<'a> {
    /// The session's id (`None` when its digest is off).
    pub session: Option<&'a str>,
    /// Who opened the session ([`SessionOptions::owner`](crate::SessionOptions::owner)).
    pub owner: Option<&'a str>,
    /// What was called.
    pub kind: Kind,
    /// The name called: the namespaced tool or prompt, or the resource's URI.
    pub name: &'a str,
    /// The server it went to, when it was routed to one.
    pub server: Option<&'a str>,
    /// The arguments it was called with (a resource read has none; `None`
    /// too for an observer that does not want them).
    pub arguments: Option<&'a JsonObject>,
    /// What the pipeline decided.
    pub verdict: &'a Verdict,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it failed, when it did.
    pub error: Option<&'a Error>,
    /// From the start of its decision to its result.
    pub duration: Duration,
    /// The size of the result the caller got, as JSON (`None` without one,
    /// or for an observer that does not want it).
    pub result_bytes: Option<usize>,
    /// Set when the digest replaced the result.
    pub digested: Option<&'a DigestedResult>,
    /// How long its server took to answer a tool call (the backend request
    /// alone, without the gate and the digest); `None` when no request was
    /// sent, and for resources and prompts, whose `duration` is the request's.
    pub backend: Option<Duration>,
}

tokio::task_local! {
    /// What the digest did to the result of the call running on this task:
    /// set by the shaping step, read when the call is reported.
    pub(crate) static DIGESTED: Cell<Option<DigestedResult>>;
    /// How long the backend request of the call running on this task took.
    pub(crate) static BACKEND: Cell<Option<Duration>>;
}

/// Notes how long the running call's backend request took (nothing when no
/// call is being observed).
pub(crate) fn note_backend(took: Duration) {
    let _ = BACKEND.try_with(|slot| slot.set(Some(took)));
}

/// Notes that the digest replaced the running call's result (nothing when
/// no call is being observed).
pub(crate) fn note_digest(digested: DigestedResult) {
    let _ = DIGESTED.try_with(|slot| slot.set(Some(digested)));
}

/// The outcome of a call's result, and its size as JSON when `measure`
/// (measuring serializes the result).
pub(crate) fn outcome_of(
    result: &Result<CallToolResult, Error>,
    measure: bool,
) -> (Outcome, Option<usize>) {
    let size = |r: &CallToolResult| measure.then(|| crate::cap::json_len(r));
    match result {
        Ok(r) if r.is_error == Some(true) => (Outcome::ToolError, size(r)),
        Ok(r) => (Outcome::Ok, size(r)),
        Err(_) => (Outcome::Failed, None),
    }
}

/// Marks `span` (a backend request's) as failed with `error_type`
/// (OpenTelemetry's `error.type`).
pub(crate) fn span_failed(span: &tracing::Span, error_type: &'static str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// The `error.type` of a backend request that failed.
pub(crate) fn error_type(error: &core_agent_mcp_transport::Error) -> &'static str {
    use core_agent_mcp_transport::Error as E;
    match error {
        E::Timeout { .. } | E::Busy { .. } => "timeout",
        E::Crashed { .. } => "crashed",
        E::NotConnected { .. } => "not_connected",
        E::Refused { .. } => "refused",
        _ => "_OTHER",
    }
}
