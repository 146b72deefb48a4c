-- The audit trail, when the replicas write it here (gateway.audit.store):
-- one row per line, the line itself as jsonb, and the fields a query
-- filters on most, taken from it when it is written.
CREATE TABLE audit_lines (
    id       bigserial PRIMARY KEY,
    -- The line's "time".
    at       timestamptz NOT NULL,
    -- The replica that wrote it (its host name and process id by default).
    replica  text NOT NULL,
    -- "call" or "sign_in".
    event    text NOT NULL,
    -- "tool", "resource" or "prompt"; null for a refused sign-in.
    kind     text,
    -- caller.name: the token's name, or the signed-in user; null for a refused sign-in.
    caller   text,
    -- caller.identity.subject, for a caller signed in with the identity provider.
    subject  text,
    session  text,
    -- "allow", "ask", "deny", "restricted", "withheld", "unknown" or "refused".
    decision text,
    line     jsonb NOT NULL
);
CREATE INDEX audit_lines_at ON audit_lines (at);
CREATE INDEX audit_lines_caller ON audit_lines (caller, at);
CREATE INDEX audit_lines_session ON audit_lines (session, at) WHERE session IS NOT NULL;
CREATE INDEX audit_lines_decision ON audit_lines (decision, at);
