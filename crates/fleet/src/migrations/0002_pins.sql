-- The fleet's one mcp.lock: its text and a version for compare-and-swap.
CREATE TABLE pin_locks (
    name    text PRIMARY KEY,
    text    text NOT NULL,
    version bigint NOT NULL
);
