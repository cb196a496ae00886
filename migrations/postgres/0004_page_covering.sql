-- SQLite widens its page index here so its bounded walk filters from the index. Postgres keeps
-- `runs_page` narrow: with the filter columns INCLUDEd, the planner preferred an index-only walk
-- of the page index over a branch's own index even for a sparse branch, which is not flat.
-- Kept as a migration so both databases share version numbers.
SELECT 1;
