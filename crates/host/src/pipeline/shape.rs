//! The shaping step: the digest, then the result cap.

use core_agent_mcp_transport::model::CallToolResult;

use crate::cap::cap_result;
use crate::pipeline::ToolRoute;

/// The shaping step, on a result as the server sent it: the digest, when
/// the session has one and the route's server is digested (the raw payload
/// is stored whole, and the synthetic response made to fit the cap whole),
/// then the route's `max_result_bytes` cap, on what the caller will see.
pub(crate) async fn shape(
    result: CallToolResult,
    digest: Option<&crate::DigestWrap>,
    route: &ToolRoute,
) -> CallToolResult {
    let result = match digest {
        Some(digest) if route.digest => {
            let span = tracing::info_span!("digest", gen_ai.tool.name = %route.tool);
            tracing::Instrument::instrument(
                digest.apply_within(
                    result,
                    &route.server_name,
                    &route.tool,
                    route.max_result_bytes,
                ),
                span,
            )
            .await
        }
        _ => result,
    };
    cap_result(result, route.max_result_bytes)
}
