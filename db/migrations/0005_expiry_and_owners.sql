-- When each object was last written: Events expire a while after their last write, as
-- Kubernetes' --event-ttl does.
ALTER TABLE objects ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX objects_expiry_idx ON objects (api_group, resource, updated_at);

-- Garbage collection finds a deleted object's dependents (`ownerReferences @> [{"uid": …}]`)
-- without reading its namespace's every object.
CREATE INDEX objects_owners_idx ON objects USING gin ((object -> 'metadata' -> 'ownerReferences') jsonb_path_ops);
