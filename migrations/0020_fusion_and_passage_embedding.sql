-- Two per-tenant choices recall and message search did not have.
--
-- * fusion: how recall combines its lexical and dense lists. 'rrf' (the
--   design's Reciprocal Rank Fusion, unchanged and still the default) or
--   'scores': each arm's scores normalised by that arm's own best (BM25 over
--   the first BM25; cosine above dense_floor over the first cosine above it)
--   and added, so an arm counts by how strong its evidence is relative to its
--   best, not by rank alone (plpgsql/recall_fusion.sql). Measured on the
--   LoCoMo development split before it was offered (eval/results/fusion.md);
--   not the default because it lost recall@10 in one conversation there.
--
-- * passage_embedding: which passages the embedding worker embeds. Every
--   observation is chunked into passages (message search's corpus, with its
--   lexical index) in the append's transaction; embedding them all made a
--   document cost four vectors instead of one (the memory's, plus ~3
--   passages' for an abstract). 'messages' (the new default) embeds the
--   passages of observations of kind 'message', what message search is for;
--   'all' embeds every passage (the behaviour before this migration), 'none'
--   none. A scope may override the tenant's value (scope.passage_embedding,
--   set_scope_passage_embedding()). Passages already embedded keep their
--   vectors; what is queued follows the new rule from now on.

alter table __tenant__.setting add constraint setting_fusion_values check (
    case key
        when 'fusion'            then value #>> '{}' in ('rrf', 'scores')
        when 'passage_embedding' then value #>> '{}' in ('all', 'messages', 'none')
        else true
    end
);

insert into __tenant__.setting (key, value, description) values
    ('fusion', '"rrf"',
     'How recall fuses its lexical and dense lists: rrf (sum of 1 / (rrf_k + rank)) or scores (each arm''s scores over its best, added)'),
    ('passage_embedding', '"messages"',
     'Which passages are embedded for semantic message search: messages (observations of kind message), all, or none; a scope may override it');

alter table __tenant__.scope add column passage_embedding text
    check (passage_embedding in ('all', 'messages', 'none'));
comment on column __tenant__.scope.passage_embedding is
    'Which of this scope''s passages are embedded (all, messages, none); NULL follows the tenant setting passage_embedding.';
