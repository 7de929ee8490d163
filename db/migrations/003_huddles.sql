-- Huddles: a call room per objective. Each race closes on one row or index entry (docs/design.md §4):
--   two first joiners                -> huddle_sessions_one_active (partial unique index)
--   a heartbeat undoing a leave      -> the participant row, changed only by targeted UPDATEs
--   cleanup ending a joined session  -> pg_advisory_xact_lock on (tenant, objective), taken by
--                                       join, leave and cleanup

CREATE TABLE huddle_sessions (
  tenant_id    text NOT NULL REFERENCES tenants (id),
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  objective_id text NOT NULL CHECK (char_length(objective_id) BETWEEN 1 AND 128),
  started_at   timestamptz NOT NULL DEFAULT now(),
  ended_at     timestamptz,
  PRIMARY KEY (tenant_id, id),
  CHECK (ended_at IS NULL OR ended_at >= started_at)
);

CREATE UNIQUE INDEX huddle_sessions_one_active ON huddle_sessions (tenant_id, objective_id) WHERE ended_at IS NULL;

CREATE TABLE huddle_participants (
  tenant_id         text NOT NULL,
  session_id        uuid NOT NULL,
  member_id         text NOT NULL CHECK (char_length(member_id) BETWEEN 1 AND 128),
  joined_at         timestamptz NOT NULL DEFAULT now(),
  last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
  left_at           timestamptz,
  PRIMARY KEY (tenant_id, session_id, member_id),
  FOREIGN KEY (tenant_id, session_id) REFERENCES huddle_sessions (tenant_id, id)
);

CREATE INDEX huddle_participants_present ON huddle_participants (last_heartbeat_at) WHERE left_at IS NULL;
