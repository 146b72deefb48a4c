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
