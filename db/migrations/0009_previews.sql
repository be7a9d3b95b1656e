-- Preview links (api/src/previews.rs): a capability that opens one port of one Machine to a
-- browser with no header, on a host of its own (`<capability>-<port>.<preview domain>`). Only
-- the capability's SHA-256 is kept; the link stands for the identity that made it, for the
-- Machine with this UID only (a new Machine of the same name is not reached), until it expires
-- or is revoked.
CREATE TABLE previews (
    id          text PRIMARY KEY,
    digest      bytea NOT NULL UNIQUE,
    namespace   text NOT NULL,
    machine     text NOT NULL,
    machine_uid text NOT NULL,
    port        integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    subject     text NOT NULL,
    identity    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX previews_machine_idx ON previews (namespace, machine, machine_uid);
CREATE INDEX previews_expires_idx ON previews (expires_at);
