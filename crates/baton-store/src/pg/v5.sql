-- PostgreSQL schema version 5: why a run stopped is recorded as a fact (`task-failed`,
-- `budget-spent`, `soft-budget`, …) beside its words. NULL on a run recorded before this
-- version: its cause is read from `stop_reason`'s words (`StopCause::of`).
ALTER TABLE runs ADD COLUMN stop_cause TEXT;
