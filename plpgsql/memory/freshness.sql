-- Freshness: how far the log and each asynchronous projection are current,
-- so a caller that wrote offset N can wait until what it wrote is visible.

create or replace function __tenant__.freshness(p_principal text, p_scopes text[], p_scope text)
returns table (scope text, log_watermark bigint, embeddings_current_to bigint, embedding_jobs bigint)
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_watermark bigint;
    v_first_pending bigint;
    v_jobs bigint;
begin
    perform _peer_id(p_principal);
    perform _check_write_scope(p_scope, p_scopes);
    select s.log_watermark into v_watermark from scope s where s.name = p_scope;
    -- Embeddings are current up to just before the earliest observation that a
    -- memory still waiting for its embedding was derived from.
    select min(o.log_offset), count(distinct j.memory_id) into v_first_pending, v_jobs
      from embedding_job j
      join projection_dependency d on d.kind = 'memory' and d.row_key = j.memory_id::text
      join observation o on o.id = d.observation_id
     where o.scope = p_scope;
    return query select p_scope, v_watermark, coalesce(v_first_pending - 1, v_watermark), v_jobs;
end
$$;
comment on function __tenant__.freshness(text, text[], text) is
    'The scope''s log watermark, and the offset up to which every memory derived from the log has its embedding.';

create or replace function __tenant__.wait_for(p_principal text, p_scopes text[], p_scope text, p_offset bigint,
                                              p_projection text default 'embeddings',
                                              p_timeout_ms integer default 5000)
returns boolean
language plpgsql volatile
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_deadline timestamptz := clock_timestamp() + make_interval(secs => greatest(coalesce(p_timeout_ms, 0), 0) / 1000.0);
    v_current bigint;
begin
    perform _check_one_of(p_projection, 'projection', array['log', 'embeddings']);
    perform _check_id(p_offset, 'offset');
    -- A caller's timeout holds a backend (and a connection) that long: ten
    -- minutes is already more than any caller waits for an embedding.
    if p_timeout_ms < 0 or p_timeout_ms > 600000 then
        perform _fail('PR150', format('timeout must be 0 to 600000 ms, not %s', p_timeout_ms),
                      'Wait in a loop of shorter calls, or pass NULL to check once.');
    end if;
    loop
        -- each statement sees what has committed since the last one (read committed)
        select case when p_projection = 'log' then f.log_watermark else f.embeddings_current_to end
          into v_current from freshness(p_principal, p_scopes, p_scope) f;
        if v_current >= p_offset then
            return true;
        end if;
        exit when clock_timestamp() >= v_deadline;
        perform pg_sleep(0.05);
    end loop;
    return false;
end
$$;
comment on function __tenant__.wait_for(text, text[], text, bigint, text, integer) is
    'Waits (up to p_timeout_ms) until the log or the embeddings are current to p_offset; true if they are.';
