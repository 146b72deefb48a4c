//! Extra `_meta` entries for the requests a task sends: the neutral seam a
//! tracer uses to pass its trace context on (W3C `traceparent`, SEP-414)
//! without this crate knowing any tracing library.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::{JsonObject, RequestMetaObject};

/// Adds entries to the `_meta` of each `tools/call`, `resources/read` and
/// `prompts/get` request sent while it is in scope ([`with_request_meta`]).
/// Asked once per request, on the calling task, just before the request
/// is sent, so it may read what is current then (a span). It must be quick
/// and must not block; keys the request already has are kept, never overwritten.
pub trait RequestMeta: Send + Sync {
    /// Puts this request's extra entries in `meta`.
    fn add_to(&self, meta: &mut JsonObject);
}

tokio::task_local! {
    static EXTRA: Arc<dyn RequestMeta>;
}

/// Runs `calls` so that each request they send to a server carries what
/// `source` adds to its `_meta`.
pub async fn with_request_meta<F: Future>(source: Arc<dyn RequestMeta>, calls: F) -> F::Output {
    EXTRA.scope(source, calls).await
}

/// Adds the task's extra entries, if any, to a request's `_meta`.
pub(crate) fn extend(meta: &mut Option<RequestMetaObject>) {
    let _ = EXTRA.try_with(|source| {
        let mut extra = JsonObject::new();
        source.add_to(&mut extra);
        if extra.is_empty() {
            return;
        }
        let meta = meta.get_or_insert_with(Default::default);
        for (key, value) in extra {
            meta.0.0.entry(key).or_insert(value);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Trace;

    impl RequestMeta for Trace {
        fn add_to(&self, meta: &mut JsonObject) {
            meta.insert("traceparent".into(), "00-ab-cd-01".into());
            meta.insert("progressToken".into(), 9.into());
        }
    }

    #[tokio::test]
    async fn entries_are_added_in_scope_only_and_never_overwrite() {
        let mut outside = None;
        extend(&mut outside);
        assert_eq!(outside, None);
        let meta = with_request_meta(Arc::new(Trace), async {
            let mut meta = Some(RequestMetaObject::default());
            if let Some(m) = &mut meta {
                m.0.0.insert("progressToken".into(), 1.into());
            }
            extend(&mut meta);
            meta
        })
        .await
        .unwrap();
        assert_eq!(meta.0.0.get("traceparent"), Some(&"00-ab-cd-01".into()));
        assert_eq!(meta.0.0.get("progressToken"), Some(&1.into()));
    }
}
