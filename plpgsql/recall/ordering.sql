-- Recall, step 6 (plpgsql/recall/recall.sql composes the steps): under the fusion rrf_scores, what
-- orders the rows the permission walk passed.

-- What orders the rows RRF chose under fusion rrf_scores (NULL under the
-- other fusions): _evidence_scores, and with recall_question_time on, 1 more
-- for each row of the question's period (_time_arm of the rows).
-- p_window_ids, p_window_bm25: with recall_window_beside, the windows' list;
-- the lexical evidence is then _window_beside_shares.
create or replace function __tenant__._ordering_evidence(
    p_ids bigint[], p_lexical_ids bigint[], p_bm25 double precision[], p_dense_ids bigint[],
    p_cosines double precision[], p_query_embedding double precision[], p_principal_id bigint, p_scopes text[],
    p_purpose text, p_include_superseded boolean, p_at timestamptz, p_query text, p_settings jsonb,
    p_window_ids bigint[] default '{}', p_window_bm25 double precision[] default '{}')
returns double precision[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_evidence double precision[];
    v_then bigint[] := '{}';
    v_bm25_scale double precision;  -- what a lexical score is a share of (NULL: the lexical arm's first)
begin
    if p_settings ->> 'fusion' is distinct from 'rrf_scores' then
        return null;
    end if;
    if cardinality(p_window_ids) > 0 then
        -- the lexical evidence is the mean of a memory's shares by its own words and by its window
        select w.ids, w.shares, 1.0 into p_lexical_ids, p_bm25, v_bm25_scale
          from _window_beside_shares(p_lexical_ids, p_bm25, p_window_ids, p_window_bm25) w;
    end if;
    v_evidence := _evidence_scores(p_ids, p_lexical_ids, p_bm25, p_dense_ids, p_cosines,
                                   case when cardinality(p_dense_ids) > 0 then p_query_embedding end,
                                   (p_settings ->> 'dense_floor')::double precision,
                                   p_settings ->> 'embedding_model', (p_settings ->> 'embedding_input_version')::integer,
                                   v_bm25_scale);
    if (p_settings -> 'recall_question_time')::boolean then
        v_then := _time_arm(p_ids, p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at, p_query);
    end if;
    if cardinality(v_then) = 0 then
        return v_evidence;
    end if;
    return array(select e.s + (e.id = any (v_then))::integer
                   from unnest(v_evidence, p_ids) with ordinality as e(s, id, ord) order by e.ord);
end
$$;
comment on function __tenant__._ordering_evidence(bigint[], bigint[], double precision[], bigint[],
                                                  double precision[], double precision[], bigint, text[], text,
                                                  boolean, timestamptz, text, jsonb, bigint[], double precision[]) is
    'Internal: the evidence that orders RRF''s rows under rrf_scores, each row of the query''s period raised by 1 with recall_question_time on.';
