-- Keys from what was said (migration 0039, setting recall_memory_keys): the
-- lexical arm also scores the keys of the memories the principal may see
-- (remember_keys), each by BM25 with the arm's terms and weights, its own
-- length against the memories' average. A key's hit counts for its memory:
-- the memory comes once, with the best of its own score and its keys'.
-- Eligibility is the memory's: a key is read only through a memory that
-- _memory_eligible admits (and among p_among, when the caller holds the few
-- the principal may see). As of a past moment, only the keys written by then
-- of memories unchanged since.
create or replace function __tenant__._key_hits(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_match tsquery, p_terms text[], p_idf double precision[], p_k1 double precision, p_b double precision,
    p_avg_length double precision, p_depth integer, p_among bigint[] default null, p_as_of timestamptz default null)
returns table (key_ids bigint[], key_scores double precision[])
language plpgsql stable  -- not SQL: Citus cannot plan an SQL function with parameters that reads a table
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    with hits as (
        select k.memory_id,
               (select sum(p_idf[array_position(p_terms, u.lexeme)]
                           * _bm25_tf(cardinality(u.positions), length(k.tsv), p_k1, p_b, p_avg_length))
                  from unnest(k.tsv) u where u.lexeme = any (p_terms)) as score
          from memory_key k
          join memory e on e.id = k.memory_id
         where k.tsv @@ p_match
           and _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                p_principal_id, p_scopes, p_purpose, p_include_superseded, p_at)
           and (p_among is null or e.id = any (p_among))
           and (p_as_of is null or (k.created_at <= p_as_of and _unchanged_since(e.updated_at, p_as_of)))
    ), best as (
        select h.memory_id, max(h.score) as score from hits h
         group by h.memory_id
         order by 2 desc, 1
         limit p_depth
    )
    select coalesce(array_agg(b.memory_id order by b.score desc, b.memory_id), '{}'),
           coalesce(array_agg(b.score order by b.score desc, b.memory_id), '{}')
      from best b;
end
$$;
comment on function __tenant__._key_hits(bigint, text[], text, boolean, timestamptz, tsquery, text[], double precision[],
                                         double precision, double precision, double precision, integer, bigint[],
                                         timestamptz) is
    'Internal (recall_memory_keys): the memories whose keys match, by their best key''s BM25, best p_depth first; only memories the principal may see.';

-- Two ranked lists of memories as one, each memory once with its better score.
create or replace function __tenant__._merge_best(p_ids bigint[], p_scores double precision[],
                                                 p_more_ids bigint[], p_more_scores double precision[],
                                                 p_depth integer)
returns table (merged_ids bigint[], merged_scores double precision[])
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    with best as (
        select u.id, max(u.score) as score
          from (select a.id, a.score from unnest(p_ids, p_scores) a(id, score)
                union all
                select b.id, b.score from unnest(p_more_ids, p_more_scores) b(id, score)) u
         group by u.id
         order by 2 desc, 1
         limit p_depth
    )
    select coalesce(array_agg(b.id order by b.score desc, b.id), '{}'),
           coalesce(array_agg(b.score order by b.score desc, b.id), '{}')
      from best b
$$;
comment on function __tenant__._merge_best(bigint[], double precision[], bigint[], double precision[], integer) is
    'Internal (recall_memory_keys): two ranked lists as one, each id once with its better score, the best p_depth first.';

-- The dense arm's part (setting recall_memory_keys_dense, migration 0040): the
-- keys of the memories the principal may see whose vector (of the key's own
-- text, by the tenant's model p_model) is nearest the question, each key's
-- cosine counting for its memory, at least p_floor; among p_few when the
-- caller holds the few the principal may see, else by the HNSW index (its
-- iterative scan, as _dense_arm sets it, continues past keys eligibility
-- rejects). Best p_depth memories first.
create or replace function __tenant__._key_nearest(
    p_principal_id bigint, p_scopes text[], p_purpose text, p_include_superseded boolean, p_at timestamptz,
    p_embedding __ext__.halfvec, p_model text, p_floor double precision, p_depth integer,
    p_few bigint[] default null, p_as_of timestamptz default null)
returns table (key_ids bigint[], key_cosines double precision[])
language plpgsql stable  -- not SQL: Citus cannot plan an SQL function with parameters that reads a table
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    return query
    with nearest as (
        select k.memory_id, 1 - (k.embedding operator(__ext__.<=>) p_embedding) as cosine
          from memory_key k
         where k.embedding_model = p_model
           and (p_few is null or k.memory_id = any (p_few))
           and exists (select 1 from memory e
                        where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at,
                                               e.superseded_by, e.valid, p_principal_id, p_scopes, p_purpose,
                                               p_include_superseded, p_at)
                          and (p_as_of is null or (k.created_at <= p_as_of and _unchanged_since(e.updated_at, p_as_of)))
                          and e.id = k.memory_id offset 0)
         order by k.embedding operator(__ext__.<=>) p_embedding
         limit 4 * p_depth
    ), best as (
        select n.memory_id, max(n.cosine) as cosine from nearest n
         where n.cosine >= p_floor
         group by n.memory_id
         order by 2 desc, 1
         limit p_depth
    )
    select coalesce(array_agg(b.memory_id order by b.cosine desc, b.memory_id), '{}'),
           coalesce(array_agg(b.cosine order by b.cosine desc, b.memory_id), '{}')
      from best b;
end
$$;
comment on function __tenant__._key_nearest(bigint, text[], text, boolean, timestamptz, __ext__.halfvec, text,
                                            double precision, integer, bigint[], timestamptz) is
    'Internal (recall_memory_keys_dense): the memories whose keys'' vectors are nearest the query, by their best key''s cosine (at least p_floor), best p_depth first; only memories the principal may see.';
