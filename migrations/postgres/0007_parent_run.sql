-- A run an agent started (MCP `ask` with its run-scoped token) is the child of that agent's
-- run: recorded in the parent's channel with the parent's stamp. NULL: a run a person or a
-- machine started. The tool broker's ratchet folds over this chain of ancestors.
ALTER TABLE runs ADD COLUMN parent_run TEXT;
