-- recall_people_arm: whether recall adds its people-and-things arm
-- (plpgsql/recall_people.sql): of the candidates the lexical and dense lists
-- chose, those said by the peers or about the entities the question names,
-- a list of their own fused with the other two by RRF. Off: it is adopted as a
-- default only when the LoCoMo development split's per-cell check passes
-- (make eval-compare; eval/results/people-arm.md).

alter table __tenant__.setting add constraint setting_recall_people_arm_boolean check (
    key <> 'recall_people_arm' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_people_arm', 'false',
     'Recall: the memories said by the peers or about the entities the query names are a ranked list of their own, fused by RRF with the lexical and dense lists');
