-- Three optional steps of recall for an answer spread over a conversation
-- (plpgsql/recall_spread.sql), both off: each becomes a default only when
-- make eval's per-cell check passes on every development conversation and
-- category (issue #48).
--   recall_session_spread: the rows a recall returns are kept from coming all
--     from one conversation session while another session's row scores close.
--   recall_second_round: the query's terms that the first rows lack are
--     searched for again, and those rows take turns with the first round's
--     after its first half.
--   recall_neighbour_turns: the memories of the turns just before and after
--     the first hits' turns, each below the rows that outscore it.

alter table __tenant__.setting add constraint setting_recall_session_spread_boolean check (
    key <> 'recall_session_spread' or jsonb_typeof(value) = 'boolean'
);
alter table __tenant__.setting add constraint setting_recall_second_round_boolean check (
    key <> 'recall_second_round' or jsonb_typeof(value) = 'boolean'
);
alter table __tenant__.setting add constraint setting_recall_neighbour_turns_boolean check (
    key <> 'recall_neighbour_turns' or jsonb_typeof(value) = 'boolean'
);

insert into __tenant__.setting (key, value, description) values
    ('recall_session_spread', 'false',
     'Recall: of the fused rows, one conversation session gives at most 30% of the rows asked for (at least 2) while another session''s row waits within the first twice as many'),
    ('recall_second_round', 'false',
     'Recall: when the first half of the rows holds some of the query''s kept terms and not others, the others are searched for alone and those rows take turns with the first round''s after its first half'),
    ('recall_neighbour_turns', 'false',
     'Recall: each of the first half of the rows brings the memories of the turns just before and after its turn, each counting nine tenths of its source''s RRF score, so placed after every row that scores more');
