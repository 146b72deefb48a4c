//! core-agent's own dialect: `{"version": 1, "servers": {…}}`, with the
//! wrap and survey settings at the top.

use serde_json::{Map, Value};

use super::{Cx, FileConfig, Server, TransportKind, builtin, entry, strings};
use crate::position::escape_pointer;
use crate::spec::BUILTIN;
use crate::{Dialect, Limits, Scope, Setting, WrapSettings};

/// Reads a core file the schema accepted into `file`.
pub(super) fn convert(cx: &mut Cx<'_>, root: &Value, scope: Scope, file: &mut FileConfig) {
    file.wrap = WrapSettings::read(root, cx.path);
    file.survey = root
        .get("survey")
        .and_then(Value::as_bool)
        .map(|value| Setting {
            value,
            source: cx.path.to_owned(),
        });
    let empty = Map::new();
    let file_limits = Limits::default().overlaid(root.get("limits"));
    let servers = root
        .get("servers")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    // The built-in tools' allowlist, under the reserved name.
    if let Some(b) = servers.get(BUILTIN) {
        file.builtin = Some(builtin(cx, b));
    }
    for (name, value) in servers.iter().filter(|(n, _)| *n != BUILTIN) {
        let server = Server {
            name,
            base: format!("/servers/{}", escape_pointer(name)),
            value,
            policy: &Value::Null,
            kind: TransportKind::of(value),
            tools: strings(value.get("tools")),
            blocked_tools: Vec::new(),
            // The server's own `limits` over the file's.
            limits: file_limits.overlaid(value.get("limits")),
        };
        let entry = entry(cx, scope, Dialect::Core, server);
        file.servers.push(entry);
    }
}
