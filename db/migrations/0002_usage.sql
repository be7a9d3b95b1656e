-- Claim usage history: one row per accrual interval of a bound MachineClaim.
-- The primary key makes a retried insert of the same interval a no-op, so an
-- interval is counted exactly once however often the controller retries.
CREATE TABLE claim_usage_intervals (
    claim_uid          uuid        NOT NULL,
    interval_start     timestamptz NOT NULL,
    interval_end       timestamptz NOT NULL CHECK (interval_end >= interval_start),
    namespace          text COLLATE "C" NOT NULL,
    claim_name         text COLLATE "C" NOT NULL,
    state              text        NOT NULL CHECK (state IN ('active', 'suspended', 'none')),
    active_seconds     bigint      NOT NULL DEFAULT 0,
    suspended_seconds  bigint      NOT NULL DEFAULT 0,
    vcpu_seconds       double precision NOT NULL DEFAULT 0,
    memory_gib_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (claim_uid, interval_start)
);

-- Range scans by namespace (and the raw-history fallback for audits).
CREATE INDEX claim_usage_intervals_ns_start_idx ON claim_usage_intervals (namespace, interval_start);

-- Daily rollup per (namespace, day, claim), maintained by the same transaction
-- that inserts an interval (the interval counts on the UTC day it starts).
-- Billing totals read this: a month of 10,000 claims is 300,000 rows, not
-- 864 million intervals.
CREATE TABLE claim_usage_daily (
    namespace          text COLLATE "C" NOT NULL,
    day                date        NOT NULL,
    claim_uid          uuid        NOT NULL,
    claim_name         text COLLATE "C" NOT NULL,
    active_seconds     bigint      NOT NULL DEFAULT 0,
    suspended_seconds  bigint      NOT NULL DEFAULT 0,
    vcpu_seconds       double precision NOT NULL DEFAULT 0,
    memory_gib_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, day, claim_uid)
);

-- Per-day totals across namespaces.
CREATE INDEX claim_usage_daily_day_idx ON claim_usage_daily (day);
