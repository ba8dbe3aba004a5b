-- Vectors a caller or the worker hands in: their size (the tenant's vector column decides it) and
-- whether a batch of results can be stored.

-- What both embedding queues check before storing a worker's results: one
-- array length, and that the tenant still embeds with this model and input
-- version. False when it has switched meanwhile (the jobs were re-queued,
-- so these results are dropped, not an error). The vectors themselves are
-- checked apart (_checked_vectors).
create or replace function __tenant__._embedding_results_usable(
    p_what text, p_ids bigint[], p_generations bigint[], p_embeddings __ext__.halfvec[], p_model text,
    p_input_version integer)
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
comment on function __tenant__._embedding_results_usable(text, bigint[], bigint[], __ext__.halfvec[], text, integer) is
    'Internal: PR107 unless a worker''s results are arrays of one length; false when the tenant switched model or input version.';

-- The stamp in force, held (FOR SHARE) until a worker's results are stored:
-- a worker checks that its results have the stamp in force, then locks its
-- jobs and stores. A switch (set_embedding_version) committed between the
-- two let it store a vector of the old stamp after the switch's rebuild had
-- passed over the memory (its vector had the new stamp then): stale, and
-- queued by nothing. Held, the switch waits for the store and its rebuild
-- sees the vector, or the store waits for the switch and drops its results.
-- Taken before any job is locked, so neither waits holding what the other
-- wants. One row: set_embedding_version, the only writer of the stamp
-- (set_setting refuses both keys), updates the model's row first, always.
create or replace function __tenant__._hold_embedding_stamp()
returns void
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
begin
    perform 1 from setting s where s.key = 'embedding_model' for share;
end
$$;
comment on function __tenant__._hold_embedding_stamp() is
    'Internal: holds the embedding stamp (its model setting''s row, FOR SHARE) until the transaction ends: a switch waits.';

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

-- The vectors a caller or the worker hands in, as halfvecs (the driver sends
-- pgvector's vectors in binary, cast on the way in: a literal parsed from text
-- cost 30 us a vector, 3% of a bulk remember): PR154 for any other count of
-- dimensions than _embedding_dimensions(). pgvector refuses NaN, infinity and
-- values beyond halfvec's range as the argument is read. A NULL element is
-- refused too, unless p_nulls_allowed (remember_many: an item without one).
-- A vector of zeros (or of numbers too small for half precision) is refused:
-- its cosine to any query is NaN, which ranked it first in recall with a NaN
-- score and made `recall --json` print NaN, which is not JSON.
create or replace function __tenant__._checked_vectors(p_vectors __ext__.halfvec[],
                                                      p_nulls_allowed boolean default false)
returns __ext__.halfvec[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_bad integer;
    v_zeros boolean;
begin
    select min(__ext__.vector_dims(e)) filter (where __ext__.vector_dims(e) <> _embedding_dimensions()),
           coalesce(bool_or(__ext__.l2_norm(e) = 0), false)
      into v_bad, v_zeros
      from unnest(p_vectors) e;
    if v_bad is not null or (not p_nulls_allowed and array_position(p_vectors, null) is not null) then
        perform _fail('PR154', format('an embedding has %s dimensions, not %s', coalesce(v_bad::text, 'no'),
                                      _embedding_dimensions()));
    end if;
    if v_zeros then
        perform _fail('PR154', 'an embedding is all zeros at half precision: it has no direction to compare',
                      'The tenant stores vectors at half precision (pgvector''s halfvec); a normalized vector is safe.');
    end if;
    return p_vectors;
end
$$;
comment on function __tenant__._checked_vectors(__ext__.halfvec[], boolean) is
    'Internal: PR154 unless each vector has _embedding_dimensions() numbers, not all zero (or is NULL, where allowed).';

-- Vector literals as halfvecs (remember_keys takes its keys' vectors as text):
-- PR154 for a literal pgvector refuses (not a vector, NaN or infinity, beyond
-- halfvec's range), then as _checked_vectors.
create or replace function __tenant__._embedding_vectors(p_embeddings text[], p_nulls_allowed boolean default false)
returns __ext__.halfvec[]
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_vectors __ext__.halfvec[];
begin
    begin
        v_vectors := p_embeddings::__ext__.halfvec[];
    exception when data_exception then
        -- pgvector's own refusals: not a vector literal, NaN or infinity, too many dimensions
        perform _fail('PR154', format('an embedding is not a vector of %s finite numbers: %s',
                                      _embedding_dimensions(), sqlerrm));
    end;
    return _checked_vectors(v_vectors, p_nulls_allowed);
end
$$;
comment on function __tenant__._embedding_vectors(text[], boolean) is
    'Internal: vector literals as halfvecs; PR154 unless each is _embedding_dimensions() finite numbers (or NULL, where allowed).';
