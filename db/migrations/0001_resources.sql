-- Current state of every object, keyed like a Kubernetes storage key.
-- "C" collation: list order and continue tokens compare bytes, as Kubernetes does.
CREATE TABLE objects (
    api_group        text COLLATE "C" NOT NULL,
    resource         text COLLATE "C" NOT NULL,
    namespace        text COLLATE "C" NOT NULL DEFAULT '',
    name             text COLLATE "C" NOT NULL,
    uid              uuid   NOT NULL,
    resource_version bigint NOT NULL,
    object           jsonb  NOT NULL,
    PRIMARY KEY (api_group, resource, namespace, name)
);

-- For the distinct-namespace query.
CREATE INDEX objects_namespace_idx ON objects (namespace);

-- One row per write; the source of watch events. rv values are contiguous
-- because each rv is allocated and logged in the same transaction.
CREATE TABLE revisions (
    rv         bigint PRIMARY KEY,
    api_group  text   NOT NULL,
    resource   text   NOT NULL,
    namespace  text   NOT NULL,
    name       text   NOT NULL,
    event_type text   NOT NULL CHECK (event_type IN ('ADDED', 'MODIFIED', 'DELETED')),
    object     jsonb  NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX revisions_resource_rv_idx ON revisions (api_group, resource, rv);

-- Single row. Its row lock serialises writers, so commits happen in rv order.
CREATE TABLE store_meta (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    current_rv   bigint  NOT NULL,
    compacted_rv bigint  NOT NULL
);

INSERT INTO store_meta (id, current_rv, compacted_rv) VALUES (true, 0, 0);
