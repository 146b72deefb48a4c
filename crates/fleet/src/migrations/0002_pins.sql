-- The fleet's one mcp.lock: its text and a version for compare-and-swap.
CREATE TABLE pin_locks (
    name    text PRIMARY KEY,
    text    text NOT NULL,
    version bigint NOT NULL
);
-- Each MCP session's tool calls, added by every replica that served it.
ALTER TABLE mcp_sessions ADD COLUMN calls bigint NOT NULL DEFAULT 0;
CREATE INDEX mcp_sessions_used ON mcp_sessions (used_ms DESC);
