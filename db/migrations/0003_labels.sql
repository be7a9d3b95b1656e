-- Label lookups (a pool's members, the Machine a claim bound) without reading a namespace's
-- every object: `labels @> {"key": "value"}` uses this index.
CREATE INDEX objects_labels_idx ON objects USING gin ((object -> 'metadata' -> 'labels') jsonb_path_ops);
