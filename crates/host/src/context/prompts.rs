//! Prompts under public names: `<server>_<prompt>`, named like tools
//! ([`core_agent_mcp_policy::unique_names`]), or the server's own names
//! when one server is served as itself; each `prompts/get` routed back to
//! its server under the server's own name.

use std::sync::Arc;

use core_agent_mcp_config::TrustLevel;
use core_agent_mcp_transport::Server;
use core_agent_mcp_transport::model::{
    ContentBlock, GetPromptResult, JsonObject, Prompt, ResourceContents,
};

use super::Offered;
use crate::{Error, Host, Result, Session};

/// How fresh a server's prompt list must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fresh {
    /// Within the freshness the server gave it (`ttlMs`): a listing.
    Now,
    /// Any listing kept (asked for now only when none is): routing a name.
    Kept,
}

/// One prompt as a caller sees it.
struct Published<'a> {
    /// Its public name.
    name: String,
    server: &'a Server,
    prompt: Prompt,
}

impl Host {
    /// Every prompt a caller at `level` may get, under its public name
    /// (title, description and arguments as the server wrote them). A
    /// server that fails to list is left out.
    pub async fn prompts(&self, level: TrustLevel) -> Vec<Prompt> {
        self.published_prompts(level, Fresh::Now)
            .await
            .into_iter()
            .map(|p| {
                let mut prompt = p.prompt;
                prompt.name = p.name;
                prompt
            })
            .collect()
    }

    /// The prompts of every server offering them to `level`, named. Each
    /// server's list is kept until it says it changed or the freshness it
    /// gave (`ttlMs`) passed (with [`Fresh::Kept`], kept past it).
    async fn published_prompts(&self, level: TrustLevel, fresh: Fresh) -> Vec<Published<'_>> {
        let servers = self.offering(level, Offered::Prompts);
        let lists =
            futures::future::join_all(servers.iter().map(|s| self.prompts_of(s, fresh))).await;
        let listed: Vec<(&Server, Prompt)> = servers
            .iter()
            .zip(lists)
            .flat_map(|(server, prompts)| {
                prompts
                    .iter()
                    .map(|p| (*server, p.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|(s, p)| (s.name(), p.name.as_str()))
            .collect();
        // One server's prompts, served as that server: its own names,
        // unique already (prompt names have no character rules to meet).
        let names = match self.options.naming {
            core_agent_mcp_policy::Naming::Bare => {
                pairs.iter().map(|(_, name)| (*name).to_owned()).collect()
            }
            naming => core_agent_mcp_policy::unique_names(naming, &pairs),
        };
        listed
            .into_iter()
            .zip(names)
            .map(|((server, prompt), name)| Published {
                name,
                server,
                prompt,
            })
            .collect()
    }

    /// The prompts `server` lists, from the cache while fresh or asked for
    /// now (a server that fails to list has none). A listing stays until
    /// the server says its prompts changed, or as long as its `ttlMs` says;
    /// with [`Fresh::Kept`], any listing kept will do.
    async fn prompts_of(&self, server: &Server, fresh: Fresh) -> Arc<Vec<Prompt>> {
        let cached = self
            .context
            .prompts
            .lock()
            .ok()
            .and_then(|cache| cache.get(server.name()).cloned());
        if let Some((prompts, until)) = &cached
            && (fresh == Fresh::Kept || until.is_none_or(|until| std::time::Instant::now() < until))
        {
            return prompts.clone();
        }
        let began = std::time::Instant::now();
        match server.list_prompts().await {
            Ok(listing) => {
                let prompts = Arc::new(listing.items);
                let until = listing.fresh_for.and_then(|ttl| began.checked_add(ttl));
                if let Ok(mut cache) = self.context.prompts.lock() {
                    cache.insert(server.name().to_owned(), (prompts.clone(), until));
                }
                prompts
            }
            // A listing gone stale still beats none while the server cannot list.
            Err(e) => match cached {
                Some((prompts, _)) => {
                    tracing::info!(
                        "prompts of `{}` not listed again, the last listing kept: {e}",
                        server.name()
                    );
                    prompts
                }
                None => {
                    tracing::warn!("prompts of `{}` left out: {e}", server.name());
                    Arc::default()
                }
            },
        }
    }

    /// The server behind the public prompt name `name`, and its own name
    /// for it, when a caller at `level` may get it.
    pub(crate) async fn prompt_route(
        &self,
        level: TrustLevel,
        name: &str,
    ) -> Result<(&Server, String)> {
        // No prompt has a name longer than MCP allows a tool's: refused
        // before any listing or did-you-mean.
        if name.len() > core_agent_mcp_policy::MAX_TOOL_NAME {
            return Err(Error::UnknownPrompt {
                name: name.to_owned(),
                suggestions: Vec::new(),
            });
        }
        // A name the kept listings have is routed by them (the client read
        // it from a listing; the server says if the prompt is gone): a
        // `prompts/get` costs no listing. One they lack is looked up in
        // listings made now.
        let kept = self.published_prompts(level, Fresh::Kept).await;
        if let Some(p) = kept.iter().find(|p| p.name == name) {
            return Ok((p.server, p.prompt.name.clone()));
        }
        let published = self.published_prompts(level, Fresh::Now).await;
        if let Some(p) = published.iter().find(|p| p.name == name) {
            return Ok((p.server, p.prompt.name.clone()));
        }
        let names: Vec<&str> = published.iter().map(|p| p.name.as_str()).collect();
        Err(Error::UnknownPrompt {
            name: name.to_owned(),
            suggestions: core_agent_mcp_config::suggestions(name, names, 3)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        })
    }
}

impl Session {
    /// `prompts/get` of the public prompt `name` with `arguments`, from its
    /// server. A required argument that is missing is refused here, naming
    /// it, before the server is asked; resources the messages embed come
    /// back under their public URIs.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult> {
        if self.observer.is_none() {
            return self.prompt(name, arguments).await;
        }
        let started = std::time::Instant::now();
        let observed = self
            .observer_wants_payloads()
            .then(|| arguments.clone())
            .flatten();
        let result = self.prompt(name, arguments).await;
        let verdict = match &result {
            Err(e) => crate::observe::Verdict::of_refusal(e),
            Ok(_) => crate::observe::Verdict::Allowed { rule: None },
        };
        let (outcome, bytes) = match &result {
            Ok(r) => (
                crate::Outcome::Ok,
                self.observer_wants_payloads()
                    .then(|| crate::cap::json_len(r)),
            ),
            Err(_) => (crate::Outcome::Failed, None),
        };
        let server = match self.host.prompt_route(self.level, name).await {
            Ok((server, _)) => Some(server.name().to_owned()),
            Err(_) => None,
        };
        let told = crate::session::Told {
            name,
            server: server.as_deref(),
            arguments: observed.as_ref(),
            verdict: &verdict,
            duration: started.elapsed(),
            digested: None,
            backend: None,
        };
        self.tell_record(
            crate::Kind::Prompt,
            &told,
            outcome,
            bytes,
            result.as_ref().err(),
        );
        result
    }

    /// [`Session::get_prompt`], unobserved.
    async fn prompt(&self, name: &str, arguments: Option<JsonObject>) -> Result<GetPromptResult> {
        let host = &self.host;
        let (server, own) = host.prompt_route(self.level, name).await?;
        let prompt = host
            .prompts_of(server, Fresh::Kept)
            .await
            .iter()
            .find(|p| p.name == own)
            .cloned();
        if let Some(prompt) = &prompt {
            let missing: Vec<&str> = prompt
                .arguments
                .iter()
                .flatten()
                .filter(|a| a.required == Some(true))
                .filter(|a| {
                    !arguments
                        .as_ref()
                        .is_some_and(|given| given.contains_key(&a.name))
                })
                .map(|a| a.name.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(Error::BadArguments {
                    name: name.to_owned(),
                    message: format!(
                        "missing required argument{} {}",
                        if missing.len() == 1 { "" } else { "s" },
                        missing
                            .iter()
                            .map(|m| format!("`{m}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        let span = tracing::info_span!(
            "prompts/get",
            otel.name = %format_args!("prompts/get {own}"),
            otel.kind = "client",
            mcp.method.name = "prompts/get",
            gen_ai.prompt.name = %own,
            core_agent.server = %server.name(),
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let got =
            tracing::Instrument::instrument(server.get_prompt(&own, arguments), span.clone()).await;
        if let Err(e) = &got {
            crate::observe::span_failed(&span, crate::observe::error_type(e));
        }
        let mut result = got?;
        for message in &mut result.messages {
            match &mut message.content {
                ContentBlock::Resource(embedded) => {
                    publish_uri(host, server.name(), &mut embedded.resource);
                }
                ContentBlock::ResourceLink(link) => {
                    link.uri = host.resource_uri(server.name(), &link.uri);
                }
                _ => {}
            }
        }
        Ok(result)
    }
}

/// Puts the URI of embedded resource contents of `server` under the URI a
/// caller sees.
pub(crate) fn publish_uri(host: &Host, server: &str, contents: &mut ResourceContents) {
    match contents {
        ResourceContents::TextResourceContents { uri, .. }
        | ResourceContents::BlobResourceContents { uri, .. } => {
            *uri = host.resource_uri(server, uri);
        }
        _ => {}
    }
}
