-- recall_question_time: whether recall prefers the memories whose time is the
-- one the question names (plpgsql/recall_time.sql): "in May 2023", "on 3 June,
-- 2023", "last week" (against the recall's clock). Of the candidates the
-- lexical and dense lists chose, those said (or valid from) within that time
-- are a list of their own, fused with the other two by RRF. Off: it becomes a
-- default only when the LoCoMo development split's per-cell check passes
-- (make eval BASELINE=...; eval/results/question-time.md).

alter table __tenant__.setting add constraint setting_recall_question_time_boolean check (
    key <> 'recall_question_time' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_question_time', 'false',
     'Recall: when the query names a date or a time relative to the recall''s clock, the candidates said or valid from within it are a ranked list of their own, fused by RRF with the lexical and dense lists');
