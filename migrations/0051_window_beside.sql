-- The windows' list beside the lexical arm's (issue #48, setting
-- recall_window_beside): recall fuses the windows' BM25 list
-- (_window_candidates, migration 0049) as a list of its own, the memories'
-- own words keeping theirs; the two share the lexical arm's part of the
-- vote and of the evidence. Off until the development split's per-cell
-- rule adopts it (eval/results/window-beside.md).

alter table __tenant__.setting add constraint setting_recall_window_beside_boolean check (
    key <> 'recall_window_beside' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_window_beside', 'false',
     'Recall: the memories'' windows (their words with those of the turns around their evidence) are a lexical list of their own beside the one by their own words, the two sharing the lexical arm''s vote and evidence; recall_lexical_window is then moot');
