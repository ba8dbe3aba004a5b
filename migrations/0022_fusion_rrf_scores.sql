-- A third way for recall to fuse its lexical and dense lists, 'rrf_scores':
-- Reciprocal Rank Fusion chooses which memories are returned (so the rows are
-- RRF's rows), and the strength of each arm's evidence orders them (each
-- arm's score over that arm's best, as 'scores' does; the dense arm's cosine
-- computed for every chosen memory, not only those it listed). RRF's
-- agreement between two rankings is what finds a memory at depth; an arm's
-- score is what says which of the found memories it is sure of. On the
-- LoCoMo development split (eval/results/fusion.md) it keeps RRF's
-- recall@10 in every conversation and category, by construction, and gains
-- recall@5 and nDCG@10 in each; 'scores' gained more at the head but lost
-- recall@10 in one conversation and two categories. It becomes the default:
-- a tenant that chose a fusion of its own keeps it.

alter table __tenant__.setting drop constraint setting_fusion_values;
alter table __tenant__.setting add constraint setting_fusion_values check (
    case key
        when 'fusion'            then value #>> '{}' in ('rrf', 'scores', 'rrf_scores')
        when 'passage_embedding' then value #>> '{}' in ('all', 'messages', 'none')
        else true
    end
);

update __tenant__.setting
   set description = 'How recall fuses its lexical and dense lists: rrf (sum of 1 / (rrf_k + rank)), scores (each arm''s scores over its best, added) or rrf_scores (rrf chooses the rows, scores order them)'
 where key = 'fusion';
update __tenant__.setting set value = '"rrf_scores"' where key = 'fusion' and value = '"rrf"';
