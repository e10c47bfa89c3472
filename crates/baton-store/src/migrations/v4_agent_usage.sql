-- Schema version 4: what agent attempts used and cost.
--
-- `tokens` and `cost_usd` are kept as columns so that run and engine totals are sums, not
-- JSON parsing; `agent_json` is the whole `AgentUsage` (model, session, token kinds, turns,
-- tool calls, permission denials) as recorded in the attempt's `attempt-finished` event.
-- NULL for shell attempts.

ALTER TABLE attempts ADD COLUMN tokens INTEGER;
ALTER TABLE attempts ADD COLUMN cost_usd REAL;
ALTER TABLE attempts ADD COLUMN agent_json TEXT;
