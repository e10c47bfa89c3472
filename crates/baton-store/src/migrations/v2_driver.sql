-- Schema version 2: the process driving a run (issue 3: one driver per run, `interrupted` runs).
--
-- A driver is identified by pid, process start time and host together, so that a reused pid is
-- never mistaken for the process that died.

ALTER TABLE runs ADD COLUMN driver_pid INTEGER;
ALTER TABLE runs ADD COLUMN driver_start_time INTEGER;
ALTER TABLE runs ADD COLUMN driver_host TEXT;
