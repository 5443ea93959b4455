-- Vigil schema, version 10: claims seek queued work by tag set
-- (docs/design.md §4 claim; adr/0018-claim-and-completion-protocol.md).
--
-- The claim used to walk ti_queued_idx oldest first and filter on
-- required_tags <@ the agent's tags, reading past every queued TI that the
-- agent cannot take. This index groups the queued TIs by their exact
-- required_tags array: the claim enumerates the distinct arrays with one
-- index probe each (a loose index scan), keeps those contained in the
-- agent's tags, and reads only their oldest entries. ti_queued_idx stays
-- for the dispatch-lost reaper, which walks the queue by age.
CREATE INDEX ti_queued_tags_idx ON task_instances (required_tags, queued_at, id) WHERE state = 'queued';

---- create above / drop below ----

DROP INDEX ti_queued_tags_idx;
