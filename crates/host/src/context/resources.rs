//! `resources/read` for a session: routed to the server by the public URI,
//! its texts digested like a tool's result (the raw payload kept for
//! `retrieve_raw`), and the whole capped at the server's
//! `max_result_bytes`.

use core_agent_mcp_transport::model::{
    CallToolResult, ContentBlock, ReadResourceResult, ResourceContents,
};

use super::prompts::publish_uri;
use crate::observe::{Kind, Outcome, Verdict};
use crate::session::Told;
use crate::{Result, Session};

impl Session {
    /// `resources/read` of the public URI `uri`, from its server, when this
    /// session's caller may read it. The contents come back under public
    /// URIs; texts over the digest's threshold come back as one digest
    /// (`"call_id"` names the raw payload for `retrieve_raw`), and the
    /// result is capped at the server's `max_result_bytes` (texts cut,
    /// blobs that do not fit left out, saying so).
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        if self.observer.is_none() {
            return self.read(uri).await;
        }
        let started = std::time::Instant::now();
        let (result, digested, _) = crate::session::observing(self.read(uri)).await;
        let verdict = match &result {
            Err(e) => Verdict::of_refusal(e),
            Ok(_) => Verdict::Allowed { rule: None },
        };
        let (outcome, bytes) = match &result {
            Ok(r) => (
                Outcome::Ok,
                self.observer_wants_payloads()
                    .then(|| crate::cap::json_len(r)),
            ),
            Err(_) => (Outcome::Failed, None),
        };
        let server = crate::origin_of(uri).map(|(server, _)| server);
        let told = Told {
            name: uri,
            server: server.as_deref(),
            arguments: None,
            verdict: &verdict,
            duration: started.elapsed(),
            digested: digested.as_ref(),
            backend: None,
        };
        self.tell_record(Kind::Resource, &told, outcome, bytes, result.as_ref().err());
        result
    }

    /// [`Session::read_resource`], unobserved.
    async fn read(&self, uri: &str) -> Result<ReadResourceResult> {
        let (server, own) = self.host.resource_route(self.level, uri)?;
        let span = tracing::info_span!(
            "resources/read",
            otel.kind = "client",
            mcp.method.name = "resources/read",
            core_agent.server = %server.name(),
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let read = tracing::Instrument::instrument(server.read_resource(own), span.clone()).await;
        if let Err(e) = &read {
            crate::observe::span_failed(&span, crate::observe::error_type(e));
        }
        let mut result = read?;
        for contents in &mut result.contents {
            publish_uri(&self.host, server.name(), contents);
        }
        let max = server.limits().max_result_bytes;
        if let Some(digest) = &self.digest
            && self.host.digests(server.name())
        {
            let what = format!("{}{own}", super::READ_RESOURCE);
            result.contents =
                digested(digest, result.contents, server.name(), &what, uri, max).await;
        }
        result.contents = capped(result.contents, uri, max);
        Ok(result)
    }
}

/// `contents` with their texts digested together when they are over the
/// threshold: one text under `public` (the synthetic response) in place of
/// the first text, the other texts gone, the blobs kept.
async fn digested(
    digest: &crate::DigestWrap,
    contents: Vec<ResourceContents>,
    server: &str,
    what: &str,
    public: &str,
    max: usize,
) -> Vec<ResourceContents> {
    let mut texts = Vec::new();
    let blocks: Vec<ContentBlock> = contents
        .into_iter()
        .map(|c| match c {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                meta,
            } => {
                texts.push((uri, mime_type, meta));
                ContentBlock::text(text)
            }
            blob => ContentBlock::resource(blob),
        })
        .collect();
    if texts.is_empty() {
        return unwrapped(blocks, public);
    }
    let (result, was_digested) = digest
        .digest_within(CallToolResult::success(blocks), server, what, max)
        .await;
    let count = result
        .content
        .iter()
        .filter(|b| b.as_text().is_some())
        .count();
    if was_digested || count != texts.len() {
        return unwrapped(result.content, public);
    }
    let mut texts = texts.into_iter();
    result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(t) => match texts.next() {
                Some((uri, mime_type, meta)) => ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text: t.text,
                    meta,
                },
                None => text_at(public, t.text),
            },
            other => contents_of(other, public),
        })
        .collect()
}

/// `contents` capped at `max` bytes by the tool results' cap: texts cut,
/// blobs that do not fit left out, and a note under `public` saying what.
fn capped(contents: Vec<ResourceContents>, public: &str, max: usize) -> Vec<ResourceContents> {
    let blocks = contents.into_iter().map(ContentBlock::resource).collect();
    let result = crate::cap_result(CallToolResult::success(blocks), max);
    unwrapped(result.content, public)
}

/// Blocks back as resource contents: a text block (a digest, the cap's
/// note) is a text under `public`.
fn unwrapped(blocks: Vec<ContentBlock>, public: &str) -> Vec<ResourceContents> {
    blocks
        .into_iter()
        .map(|block| contents_of(block, public))
        .collect()
}

fn contents_of(block: ContentBlock, public: &str) -> ResourceContents {
    match block {
        ContentBlock::Resource(embedded) => embedded.resource,
        ContentBlock::Text(t) => text_at(public, t.text),
        other => text_at(public, serde_json::to_string(&other).unwrap_or_default()),
    }
}

fn text_at(public: &str, text: String) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: public.to_owned(),
        mime_type: Some("text/plain".to_owned()),
        text,
        meta: None,
    }
}
