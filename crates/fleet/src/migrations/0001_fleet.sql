-- Raw payloads for `retrieve_raw`: one row per payload, its bytes in chunks.
CREATE TABLE raw_payloads (
    call_id    text PRIMARY KEY,
    session_id text NOT NULL,
    server     text NOT NULL,
    tool       text NOT NULL,
    created_ms bigint NOT NULL,
    bytes      bigint NOT NULL
);
CREATE INDEX raw_payloads_session ON raw_payloads (session_id);
CREATE TABLE raw_chunks (
    call_id text NOT NULL REFERENCES raw_payloads (call_id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (call_id, seq)
);
-- The digest's telemetry (each session's ledger: savings, LLM spend).
CREATE TABLE digest_events (
    id         bigserial PRIMARY KEY,
    session_id text NOT NULL,
    event      text NOT NULL
);
CREATE INDEX digest_events_session ON digest_events (session_id, id);
-- Who opened each session id: the first claim stands.
CREATE TABLE session_owners (
    session_id text PRIMARY KEY,
    owner      text NOT NULL,
    claimed_ms bigint NOT NULL
);
-- The gate's "always" answers and the plans, per session.
CREATE TABLE session_always (
    session_id  text NOT NULL,
    tool        text NOT NULL,
    answered_ms bigint NOT NULL,
    PRIMARY KEY (session_id, tool)
);
CREATE TABLE session_plans (
    session_id  text PRIMARY KEY,
    plan        text NOT NULL,
    recorded_ms bigint NOT NULL
);
-- The MCP sessions clients opened, for any replica to continue.
CREATE TABLE mcp_sessions (
    id          text PRIMARY KEY,
    owner       text NOT NULL,
    caller      text NOT NULL,
    trust_level text NOT NULL,
    started_ms  bigint NOT NULL,
    used_ms     bigint NOT NULL,
    initialize  text NOT NULL
);
-- Secrets every replica shares (the key relayed states are sealed with).
CREATE TABLE fleet_secrets (
    name  text PRIMARY KEY,
    value bytea NOT NULL
);
