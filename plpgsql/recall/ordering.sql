-- Recall, step 6 (plpgsql/recall/recall.sql composes the steps): under the fusion rrf_scores, what
-- orders the rows the permission walk passed.

-- What orders the rows RRF chose under fusion rrf_scores (NULL under the
-- other fusions): _evidence_scores, and with recall_question_time on, 1 more
-- for each row of the question's period (_time_arm of the rows).
create or replace function __tenant__._ordering_evidence(
    p_ids bigint[], p_lexical_ids bigint[], p_bm25 double precision[], p_dense_ids bigint[],
    p_cosines double precision[], p_query_embedding double precision[], p_principal_id bigint, p_scopes text[],
    p_purpose text, p_include_superseded boolean, p_at timestamptz, p_query text, p_settings jsonb)
returns double precision[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_evidence double precision[];
    v_then bigint[] := '{}';
begin
    if p_settings ->> 'fusion' is distinct from 'rrf_scores' then
        return null;
    end if;
    v_evidence := _evidence_scores(p_ids, p_lexical_ids, p_bm25, p_dense_ids, p_cosines,
                                   case when cardinality(p_dense_ids) > 0 then p_query_embedding end,
                                   (p_settings ->> 'dense_floor')::double precision,
                                   p_settings ->> 'embedding_model', (p_settings ->> 'embedding_input_version')::integer);
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
                                                  boolean, timestamptz, text, jsonb) is
    'Internal: the evidence that orders RRF''s rows under rrf_scores, each row of the query''s period raised by 1 with recall_question_time on.';
