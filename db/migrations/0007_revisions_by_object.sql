-- A watch resumed with a selector asks what an object was just before a change (did the client
-- hold it?), and compaction keeps each live object's last revision so that answer survives it.
CREATE INDEX revisions_object_rv_idx ON revisions (api_group, resource, namespace, name, rv);
