//! Handing a server's `input_required` back to the caller instead of
//! answering it here: for a gateway whose client speaks 2026-07-28, where
//! the answers can only come in the client's retry of its own request.

use std::future::Future;

use rmcp::model::InputResponses;

tokio::task_local! {
    static RELAY: Option<Resume>;
}

/// What a caller's retry carries back for the round a server asked in: the
/// answers to its input requests and its `requestState`, unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Resume {
    /// The answers, by the keys the server's input requests had.
    pub responses: Option<InputResponses>,
    /// The server's `requestState`, as it sent it.
    pub state: Option<String>,
}

impl Resume {
    /// A retry answering `responses`, echoing `state`.
    pub fn new(responses: Option<InputResponses>, state: Option<String>) -> Resume {
        Resume { responses, state }
    }
}

/// Runs `calls` so that a tool call in it whose server answers
/// `input_required` ends with [`crate::Error::InputRequired`] (the server's
/// requests, for the caller to put to its own client) instead of being
/// answered by the elicitor, sampler and roots. `resume`, when set, is sent
/// with the requests made within `calls` (a gateway's relayed call makes
/// one): the retry of a round a server asked in.
pub async fn relaying<F: Future>(resume: Option<Resume>, calls: F) -> F::Output {
    RELAY.scope(resume, calls).await
}

/// `None` when calls answer `input_required` themselves; else
/// `Some(resume)`, the retry's answers to send (a clone for each request).
pub(crate) fn relayed() -> Option<Option<Resume>> {
    RELAY.try_with(Clone::clone).ok()
}
