-- Single-use WebSocket tickets (api/src/tickets.rs), shared by every api replica: a ticket
-- minted on one opens its WebSocket on another, once. Only the ticket's SHA-256 is kept.
CREATE TABLE tickets (
    digest      bytea PRIMARY KEY,
    subject     text NOT NULL,
    identity    jsonb NOT NULL,
    -- The one WebSocket route (path, no query) the ticket opens.
    path        text NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX tickets_subject_idx ON tickets (subject, expires_at);
CREATE INDEX tickets_expires_idx ON tickets (expires_at);
