-- The role is part of an Idempotency-Key's scope: a key stored by a member's request is never
-- replayed to the same user id acting as an admin, and the other way round.
ALTER TABLE idempotency_keys ADD COLUMN role text NOT NULL DEFAULT '';

-- Keys stored before this migration did not record their role. Sessions with a tenant and a user
-- id are members far more often than admins, so those keys go to 'user' and the rest to 'admin';
-- keys expire within IDEMPOTENCY_TTL_HOURS, so the guess only matters for resends of that window.
UPDATE idempotency_keys SET role = CASE WHEN tenant_id <> '' AND user_id <> '' THEN 'user' ELSE 'admin' END;

ALTER TABLE idempotency_keys ALTER COLUMN role DROP DEFAULT;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (tenant_id, user_id, role, key);
