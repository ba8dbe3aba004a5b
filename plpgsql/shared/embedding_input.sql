-- Vectors a caller or the worker hands in: their size (the tenant's vector column decides it) and
-- whether a batch of results can be stored.

-- What both embedding queues check before storing a worker's results: one
-- array length, and that the tenant still embeds with this model and input
-- version. False when it has switched meanwhile (the jobs were re-queued,
-- so these results are dropped, not an error). The vectors themselves are
-- checked as they are parsed (_embedding_vectors).
create or replace function __tenant__._embedding_results_usable(
    p_what text, p_ids bigint[], p_generations bigint[], p_embeddings text[], p_model text, p_input_version integer)
returns boolean
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    if p_ids is null or cardinality(p_ids) is distinct from cardinality(p_generations)
       or cardinality(p_ids) is distinct from cardinality(p_embeddings) then
        perform _fail('PR107', format('%s ids, generations and embeddings must be arrays of one length', p_what));
    end if;
    perform _check_length(p_model, 'model name', 200);
    return p_model is not distinct from (_setting_value('embedding_model') #>> '{}')
       and p_input_version is not distinct from (_setting_value('embedding_input_version') #>> '{}')::integer;
end
$$;
comment on function __tenant__._embedding_results_usable(text, bigint[], bigint[], text[], text, integer) is
    'Internal: PR107 unless a worker''s results are arrays of one length; false when the tenant switched model or input version.';

-- How many numbers every vector of the tenant holds: the type of its vector
-- columns (halfvec(384) since migration 0032), named once here for the
-- checks that refuse a vector of another size before pgvector would. A test
-- holds it to the columns' types, and the driver's generated module copies
-- it (python/pgrecall/_catalog.py). Inlined: a constant in every plan.
create or replace function __tenant__._embedding_dimensions()
returns integer
language sql immutable
as $$
    select 384
$$;
comment on function __tenant__._embedding_dimensions() is
    'Internal: the number of dimensions of every vector the tenant stores (its vector columns'' type).';

-- Vector literals as the halfvecs they are stored as, parsed once: the
-- worker's results and a caller's vectors are read here and nowhere else
-- (each parse of 500 literals of 384 numbers is some 20 ms). PR154 for a
-- literal pgvector refuses (not a vector, NaN or infinity, beyond halfvec's
-- range) and for any other count of dimensions than _embedding_dimensions().
-- A NULL element is refused too, unless p_nulls_allowed (remember_many: an
-- item without one).
create or replace function __tenant__._embedding_vectors(p_embeddings text[], p_nulls_allowed boolean default false)
returns __ext__.halfvec[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_vectors __ext__.halfvec[];
    v_bad integer;
begin
    begin
        v_vectors := p_embeddings::__ext__.halfvec[];
    exception when data_exception then
        -- pgvector's own refusals: not a vector literal, NaN or infinity, too many dimensions
        perform _fail('PR154', format('an embedding is not a vector of %s finite numbers: %s',
                                      _embedding_dimensions(), sqlerrm));
    end;
    select min(__ext__.vector_dims(e)) into v_bad
      from unnest(v_vectors) e where __ext__.vector_dims(e) <> _embedding_dimensions();
    if v_bad is not null or (not p_nulls_allowed and array_position(v_vectors, null) is not null) then
        perform _fail('PR154', format('an embedding has %s dimensions, not %s', coalesce(v_bad::text, 'no'),
                                      _embedding_dimensions()));
    end if;
    return v_vectors;
end
$$;
comment on function __tenant__._embedding_vectors(text[], boolean) is
    'Internal: vector literals as halfvecs, parsed once; PR154 unless each is _embedding_dimensions() finite numbers (or NULL, where allowed).';
