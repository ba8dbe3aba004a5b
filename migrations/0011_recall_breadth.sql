-- Recall's breadth, re-measured. A tenant that changed one of these settings
-- keeps its own value.
--
-- * arm_candidates 100 -> 20. Each arm now contributes max(arm_candidates,
--   2 x limit) candidates to the fusion (plpgsql/recall.sql). With rrf_k = 60,
--   a memory ranked d in both arms outscores either arm's first alone for any
--   d < 62, so deep lists let two mediocre rankings outvote the better arm's
--   best. On the LoCoMo development split (make eval; input version 2) fusing
--   the first 20 instead of 100 took hybrid from recall@5 0.595, recall@10
--   0.713, nDCG@10 0.503 to 0.612, 0.764, 0.523 (lexical alone: 0.569, 0.661,
--   0.509).
-- * hnsw_ef_search 400 -> 100. With iterative scans, the filtered HNSW scan
--   of 100k memories (80% eligible) returned 0.984 of the exact first 20 at
--   100, 0.993 at 150, 0.968 at 40, in 3.1, 4.2 and 2.1 ms (make bench corpus).
-- * exact_dense_below 2000 -> 1000. Exact distances cost ~3-4 us per eligible
--   memory (a key lookup and a 384-d distance each), so 1000 of them cost
--   about what the HNSW search does at 100k (3 ms); the probe that counts the
--   eligible memories before choosing stops at this number, and halves too.
-- * lexical_match_budget 3000 -> 1000. Past the budget the rarest terms now
--   recruit only together with a second query term, so a smaller budget no
--   longer means recruiting by one common word.
update __tenant__.setting set value = '20',
       description = 'Candidates each recall arm contributes to the fusion, at least (each arm gives twice the rows asked for)'
 where key = 'arm_candidates' and value = '100';
update __tenant__.setting set value = '100',
       description = 'HNSW search breadth for the dense arm (iterative scans continue past rows eligibility rejects)'
 where key = 'hnsw_ef_search' and value = '400';
update __tenant__.setting set value = '1000',
       description = 'Lexical arm: the rarest query terms whose document frequencies add up to at most this (and to at least the arm''s candidates) recruit candidates; past it, only together with another query term. The other terms only score'
 where key = 'lexical_match_budget' and value = '3000';
update __tenant__.setting set value = '1000'
 where key = 'exact_dense_below' and value = '2000';
