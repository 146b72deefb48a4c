//! On protocol 2026-07-28 a server sends list changes and resource updates
//! only on a `subscriptions/listen` stream the client opened (there is no
//! session to send them on): one stream per connection for the lists it
//! declares changes of, and one per subscribed resource. Their
//! notifications go where the handler sends the unscoped ones of older
//! revisions.

use rmcp::RoleClient;
use rmcp::model::{
    ServerCapabilities, ServerNotification, SubscriptionFilter, SubscriptionFilterBuilder,
};

use crate::features::Notice;
use crate::handler::{Handler, List};

/// Whether a connection at `version` needs listen streams (2026-07-28 and
/// later: no `initialize`, no session).
pub(crate) fn needs_listen(version: Option<&rmcp::model::ProtocolVersion>) -> bool {
    version.is_some_and(|v| !v.has_initialize())
}

/// Opens the connection's stream for the list changes `capabilities`
/// declares and routes them through `handler`, until the connection ends.
pub(crate) fn lists(
    handler: Handler,
    peer: rmcp::Peer<RoleClient>,
    capabilities: &ServerCapabilities,
) -> Option<tokio::task::JoinHandle<()>> {
    let filter = SubscriptionFilterBuilder::default()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build()
        .supported_by(capabilities);
    if filter == SubscriptionFilter::default() {
        return None;
    }
    Some(tokio::spawn(route(handler, peer, filter)))
}

/// Opens a stream for updates of the resource `uri` and routes them
/// through `handler`; dropping (aborting) the task ends the subscription.
pub(crate) fn resource(
    handler: Handler,
    peer: rmcp::Peer<RoleClient>,
    uri: &str,
) -> tokio::task::JoinHandle<()> {
    let filter = SubscriptionFilterBuilder::default()
        .resource_subscription(uri)
        .build();
    tokio::spawn(route(handler, peer, filter))
}

async fn route(handler: Handler, peer: rmcp::Peer<RoleClient>, filter: SubscriptionFilter) {
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::info!("{}: no subscription to its changes: {e}", handler.server);
            return;
        }
    };
    while let Ok(Some(notification)) = subscription.next().await {
        match notification {
            ServerNotification::ToolListChangedNotification(_)
                if !handler.twin(List::Tools, true) =>
            {
                handler.tools_changed(peer.clone());
            }
            ServerNotification::PromptListChangedNotification(_)
                if !handler.twin(List::Prompts, true) =>
            {
                handler.tell(|server| Notice::PromptsChanged { server });
            }
            ServerNotification::ResourceListChangedNotification(_)
                if !handler.twin(List::Resources, true) =>
            {
                handler.tell(|server| Notice::ResourcesChanged { server });
            }
            ServerNotification::ResourceUpdatedNotification(updated) => {
                handler.tell(|server| Notice::ResourceUpdated {
                    server,
                    uri: updated.params.uri,
                });
            }
            _ => {}
        }
    }
}
