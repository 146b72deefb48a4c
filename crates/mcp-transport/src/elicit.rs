use std::future::Future;
use std::pin::Pin;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// A boxed future, as returned by [`Elicitor::elicit`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Answers a server's `elicitation/create` request.
///
/// The Host holds one as `Arc<dyn Elicitor>`. The request arrives while a tool
/// call is in flight; the answer goes back to the server, which then decides
/// whether the call fails or goes on. An implementation must answer: one that
/// never resolves stalls that call until its timeout.
pub trait Elicitor: Send + Sync {
    /// Answers `request`, which `server` sent.
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult>;

    /// Whether it can hand a URL-mode request to a person (show the URL
    /// and wait for the go-ahead). When true, each connection declares
    /// URL elicitation (`elicitation.url`) as well as forms; the default
    /// declares forms only, so servers never send it URL requests.
    fn accepts_url(&self) -> bool {
        false
    }
}

/// Declines every request. The default for headless hosts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decline;

impl Elicitor for Decline {
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        _request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        Box::pin(std::future::ready(ElicitResult::new(
            ElicitationAction::Decline,
        )))
    }
}

/// Accepts every form request with the defaults its schema declares, and
/// declines URL requests. Useful for tests and unattended runs that trust
/// the server's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptDefaults;

impl Elicitor for AcceptDefaults {
    fn elicit<'a>(
        &'a self,
        _server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        let result = match request {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(Value::Object(schema_defaults(&schema)))
            }
            _ => ElicitResult::new(ElicitationAction::Decline),
        };
        Box::pin(std::future::ready(result))
    }
}

/// The `default` of every property of an object schema that declares one.
pub(crate) fn schema_defaults(schema: &Value) -> Map<String, Value> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter_map(|(name, prop)| prop.get("default").map(|d| (name.clone(), d.clone())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schema_defaults_takes_each_declared_default() {
        let table = [
            (
                json!({"type": "object", "properties": {
                    "name": {"type": "string", "default": "John"},
                    "age": {"type": "integer", "default": 30},
                    "free": {"type": "string"}
                }}),
                json!({"name": "John", "age": 30}),
            ),
            // `null` and falsy defaults are still defaults.
            (
                json!({"properties": {
                    "a": {"default": null},
                    "b": {"default": false},
                    "c": {"default": ""}
                }}),
                json!({"a": null, "b": false, "c": ""}),
            ),
            // Only the top level: nested defaults are not collected.
            (
                json!({"properties": {"outer": {"type": "object", "properties": {
                    "inner": {"default": 1}
                }}}}),
                json!({}),
            ),
            (json!({"type": "object", "properties": {}}), json!({})),
            (json!({"type": "object"}), json!({})),
            (json!({"properties": ["not", "an", "object"]}), json!({})),
            (json!({"default": {"a": 1}}), json!({})),
            (json!("not a schema"), json!({})),
            (json!({}), json!({})),
            (Value::Null, json!({})),
        ];
        for (schema, want) in table {
            assert_eq!(Value::Object(schema_defaults(&schema)), want, "{schema}");
        }
    }
}

/// How long a connection's elicitations have waited for their answer: a
/// person filling in a form is not the server being slow, so a call's
/// timeout does not run meanwhile (see `call::call`).
#[derive(Debug, Default)]
pub(crate) struct AskClock {
    state: std::sync::Mutex<AskState>,
}

#[derive(Debug, Default)]
struct AskState {
    /// Elicitations waiting for their answer.
    open: usize,
    /// Since when at least one has been waiting.
    since: Option<std::time::Instant>,
    /// The time at least one waited, before `since`.
    spent: std::time::Duration,
}

impl AskClock {
    fn lock(&self) -> std::sync::MutexGuard<'_, AskState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn begin(&self) {
        let mut s = self.lock();
        if s.open == 0 {
            s.since = Some(std::time::Instant::now());
        }
        s.open += 1;
    }

    fn end(&self) {
        let mut s = self.lock();
        s.open = s.open.saturating_sub(1);
        if s.open == 0
            && let Some(since) = s.since.take()
        {
            s.spent += since.elapsed();
        }
    }

    /// The time, so far, during which at least one elicitation waited.
    pub(crate) fn waited(&self) -> std::time::Duration {
        let s = self.lock();
        s.spent + s.since.map_or(std::time::Duration::ZERO, |t| t.elapsed())
    }
}

/// An [`Elicitor`] whose waits are counted on an [`AskClock`].
pub(crate) struct Clocked {
    pub(crate) inner: std::sync::Arc<dyn Elicitor>,
    pub(crate) clock: std::sync::Arc<AskClock>,
}

/// Ends a wait on the clock, however the elicitation ends (dropped too).
struct Waiting<'a>(&'a AskClock);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Elicitor for Clocked {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitRequestParams,
    ) -> BoxFuture<'a, ElicitResult> {
        Box::pin(async move {
            self.clock.begin();
            let _waiting = Waiting(&self.clock);
            self.inner.elicit(server, request).await
        })
    }

    fn accepts_url(&self) -> bool {
        self.inner.accepts_url()
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn the_clock_counts_time_while_any_elicitation_waits() {
        let clock = AskClock::default();
        assert_eq!(clock.waited(), std::time::Duration::ZERO);
        clock.begin();
        clock.begin();
        std::thread::sleep(std::time::Duration::from_millis(30));
        clock.end();
        let mid = clock.waited();
        assert!(mid >= std::time::Duration::from_millis(30), "{mid:?}");
        clock.end();
        let done = clock.waited();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(clock.waited(), done, "no time counts once none waits");
    }
}
