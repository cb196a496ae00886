-- The policy each server runs (`sha256:<hex>` of its grants, groups, restrict and agent
-- policy), written at start and at each reload, so `status` shows when replicas disagree.
ALTER TABLE replicas ADD COLUMN policy_hash TEXT;
