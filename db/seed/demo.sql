-- Demo data for a fresh embedded database: two tenants, a demo member (member-1, used by the
-- headers GraphiQL opens with) and a few contracts in each tenant. Loaded only into an empty
-- database, so it never touches real data.

INSERT INTO tenants (id, name, monthly_cap_yen) VALUES
  ('acme', 'Acme Reuse Co.', 2000),
  ('globex', 'Globex Trading', 3000);

INSERT INTO contracts (tenant_id, id, title) VALUES
  ('acme', '11111111-1111-4111-8111-111111111111', 'Store purchase agreement'),
  ('acme', '11111111-1111-4111-8111-111111111112', 'Home visit purchase agreement'),
  ('acme', '11111111-1111-4111-8111-111111111113', 'Consignment agreement'),
  ('globex', '22222222-2222-4222-8222-222222222221', 'Wholesale agreement'),
  ('globex', '22222222-2222-4222-8222-222222222222', 'Auction listing agreement');

-- acme's demo campaigns: the member's monthly cap (2000 yen) fits both coupons.
INSERT INTO campaigns (tenant_id, id, name, discount_yen, budget_yen) VALUES
  ('acme', 'welcome', 'Welcome coupon', 500, 100000),
  ('acme', 'autumn-sale', 'Autumn sale', 1000, 300000);

INSERT INTO campaign_budget_slots (tenant_id, campaign_id, slot, budget_yen) VALUES
  ('acme', 'welcome', 0, 100000),
  ('acme', 'autumn-sale', 0, 300000);

-- acme's Silver Week campaigns ran five days (2026-09-19 to 09-23, Japan time) and their coupons were
-- good until the end of October: an issue now answers ENDED. Its winter sale opens a week after this
-- data was loaded: until then NOT_STARTED.
INSERT INTO campaigns (tenant_id, id, name, discount_yen, budget_yen, starts_at, ends_at, coupons_expire_at) VALUES
  ('acme', 'sw-a', 'Silver Week A: early bird', 1000, 100000, '2026-09-18T15:00:00Z', '2026-09-23T15:00:00Z', '2026-10-31T15:00:00Z'),
  ('acme', 'sw-b', 'Silver Week B: appliances', 1000, 300000, '2026-09-18T15:00:00Z', '2026-09-23T15:00:00Z', '2026-10-31T15:00:00Z'),
  ('acme', 'sw-c', 'Silver Week C: daily goods', 1000, 300000, '2026-09-18T15:00:00Z', '2026-09-23T15:00:00Z', '2026-10-31T15:00:00Z'),
  ('acme', 'winter-sale', 'Winter sale', 1000, 300000, now() + interval '7 days', now() + interval '21 days', now() + interval '60 days');

INSERT INTO campaign_budget_slots (tenant_id, campaign_id, slot, budget_yen) VALUES
  ('acme', 'sw-a', 0, 100000),
  ('acme', 'sw-b', 0, 300000),
  ('acme', 'sw-c', 0, 300000),
  ('acme', 'winter-sale', 0, 300000);
