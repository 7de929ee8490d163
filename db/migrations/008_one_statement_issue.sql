-- An issue of a coupon runs as one statement in its own implicit transaction (docs/design.md §4), so
-- the campaign's budget row is locked only for the rest of that statement and its commit, never
-- across a network round trip. A refusal found while the statement runs is a raised error, which
-- rolls the whole statement back: nothing of it is kept (the Idempotency-Key's claim included).
-- The outcome travels as the message under SQLSTATE CR001, which no PostgreSQL error uses.
CREATE FUNCTION coupon_issue_refused(outcome text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'CR001', MESSAGE = outcome;
END
$$;
