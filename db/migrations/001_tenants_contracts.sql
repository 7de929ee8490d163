-- Tenants, contracts and their gapless per-tenant document numbers.
-- Every key leads with tenant_id so that a tenant's rows live together (and can be distributed
-- by tenant later without a rewrite).

CREATE TABLE tenants (
  id              text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
  name            text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  monthly_cap_yen integer NOT NULL DEFAULT 2000 CHECK (monthly_cap_yen > 0),
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE contracts (
  tenant_id  text NOT NULL REFERENCES tenants (id),
  id         uuid NOT NULL DEFAULT gen_random_uuid(),
  title      text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, id)
);

-- One row per tenant: the row lock on it is where two concurrent numberings collide, and because
-- it is updated in the document's own transaction a rollback gives the number back (no gap).
CREATE TABLE document_sequences (
  tenant_id       text PRIMARY KEY REFERENCES tenants (id),
  last_doc_number integer NOT NULL CHECK (last_doc_number >= 10000000),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE contract_documents (
  tenant_id   text NOT NULL,
  id          uuid NOT NULL DEFAULT gen_random_uuid(),
  contract_id uuid NOT NULL,
  doc_number  integer NOT NULL CHECK (doc_number >= 10000000),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, id),
  CONSTRAINT contract_documents_number_unique UNIQUE (tenant_id, doc_number),
  FOREIGN KEY (tenant_id, contract_id) REFERENCES contracts (tenant_id, id)
);

CREATE INDEX contract_documents_by_contract ON contract_documents (tenant_id, contract_id, doc_number);
