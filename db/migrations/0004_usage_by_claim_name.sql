-- A claim's history by its namespace and name (the MCP describe_claim of a claim already
-- deleted): the newest claim of that name first.
CREATE INDEX claim_usage_intervals_ns_name_end_idx ON claim_usage_intervals (namespace, claim_name, interval_end DESC);
