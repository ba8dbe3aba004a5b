-- recall_question_time: whether recall prefers the memories whose time is the
-- one the question names (plpgsql/recall_time.sql): "in May 2023", "on 3 June,
-- 2023", "last week" (against the recall's clock). Of the candidates the
-- lexical and dense lists chose, those said (or valid from) within that time
-- are a list of their own, fused with the other two by RRF, and under
-- rrf_scores each adds an arm's first to the evidence that orders the rows.
-- On: on the LoCoMo development split every conversation and every category
-- passed the per-cell check (make eval BASELINE=halfvec33;
-- eval/results/question-time.md), so it is a default, for upgraded tenants too.

alter table __tenant__.setting add constraint setting_recall_question_time_boolean check (
    key <> 'recall_question_time' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_question_time', 'true',
     'Recall: when the query names a date or a time relative to the recall''s clock, the candidates said or valid from within it are a ranked list of their own, fused by RRF with the lexical and dense lists, and under rrf_scores each counts as an arm''s first in the rows'' order');
