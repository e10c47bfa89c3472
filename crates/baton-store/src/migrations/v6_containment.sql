-- Schema version 6: what held each attempt's processes (`cgroup` or `process_group`), as
-- recorded in its `attempt-finished` event. NULL where no process ran, and for attempts
-- recorded before this version.

ALTER TABLE attempts ADD COLUMN containment TEXT;
