-- Schema version 8: the driver's claim on a run is a lease. `lease_token` grows with every
-- claim and fences the holder's commits: a driver whose run was taken over cannot write to it
-- any more. `lease_expires_at_ms` is when the claim lapses unless renewed; NULL for a claim
-- made before this version, which lapses only when its process is found dead.

ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_expires_at_ms INTEGER;
