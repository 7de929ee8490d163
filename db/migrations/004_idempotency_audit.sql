-- Idempotency keys and the audit trail. Both are written in the transaction of the mutation they
-- describe: a committed change always has its key's stored response and its audit row, and a
-- rolled-back one has neither.

-- Keys are scoped to the caller: (tenant, user), with '' standing for "none" (the platform
-- operator has no tenant; an admin may have no user id).
CREATE TABLE idempotency_keys (
  tenant_id   text NOT NULL,
  user_id     text NOT NULL,
  key         text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 255),
  fingerprint text NOT NULL,
  operation   text NOT NULL,
  response    jsonb,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, user_id, key)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

CREATE TABLE audit_log (
  tenant_id     text NOT NULL,
  id            bigint GENERATED ALWAYS AS IDENTITY,
  actor_user_id text,
  role          text NOT NULL,
  operation     text NOT NULL,
  entity_ids    text[] NOT NULL,
  request_id    text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, id)
);
