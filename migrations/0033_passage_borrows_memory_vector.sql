-- A turn quoted by a memory keeps one vector (issue #31). Through the usual
-- path (append a turn, remember what it says, citing it) a short turn is one
-- passage whose text is the memory's embedding input under input version 1,
-- so the worker embedded the same text twice and inserted it into two HNSW
-- graphs: at 10k items the passage vectors and their graph were 30 MB of the
-- 76 MB on disk and half of the worker's drain.
--
-- Decided: such a passage borrows the memory's vector instead of storing
-- one. passage.vector_memory_id names the lender; the passage's own embedding
-- stays NULL. A passage borrows only when it is its turn's only passage and
-- its text is exactly what the memory's stored vector was computed from
-- (that vector's model and input version), so message search ranks it by the
-- very cosine its own vector would give (within halfvec's rounding). The
-- semantic arm reaches borrowed passages through memory_embedding's HNSW
-- index and filters them by the passage's own audience, scope, session and
-- sender: the lender's audience plays no part. When the lent vector goes
-- (the memory is forgotten, revised, superseded or erased, or re-embedded)
-- a trigger on memory_embedding takes the loan back and queues the passage
-- for a vector of its own; the worker lends again where the text still
-- matches (plpgsql/passage_vectors.sql).
--
-- Not chosen: lending the other way (recall reads memory_embedding on every
-- call; it stays the one place memories' vectors are), and dropping the body
-- copy of a one-passage turn (the passage's tsv is generated from it and
-- citations, erasure and the lexical arm read it on the row; it is the
-- text's length, some 100 bytes a turn here, against 776 for the vector and
-- about as much again for its place in the graph).
--
-- Existing tenants: passages that can borrow from a memory whose current
-- vector is of input version 1 and whose text (title and body) is the
-- passage's text give up their own vector; nothing is re-embedded. Their
-- entries in passage_embedding_hnsw are dead until vacuum reuses the space.
alter table __tenant__.passage add column vector_memory_id bigint;
comment on column __tenant__.passage.vector_memory_id is
    'The memory whose stored vector this passage uses (its text is that vector''s input); NULL when the passage has its own vector or none.';
alter table __tenant__.passage add constraint passage_one_vector
    check (vector_memory_id is null or embedding is null);
create index passage_vector_memory on __tenant__.passage (vector_memory_id) where vector_memory_id is not null;

with stamp as (
    select max(s.value #>> '{}') filter (where s.key = 'embedding_model') as model,
           max((s.value #>> '{}')::integer) filter (where s.key = 'embedding_input_version') as input_version
      from __tenant__.setting s where s.key in ('embedding_model', 'embedding_input_version')
), lenders as (
    select distinct on (p.id) p.id, p.scope, me.memory_id
      from __tenant__.passage p
      join __tenant__.observation o on o.id = p.observation_id
      join __tenant__.memory_link l on l.target_observation_id = o.id and l.link_type = 'derived_from'
      join __tenant__.memory m on m.id = l.memory_id
      join __tenant__.memory_embedding me on me.memory_id = m.id
      cross join stamp st
     where p.ordinal = 1 and p.start_byte = 0 and p.end_byte = octet_length(o.body)
       and me.model = st.model and me.input_version = st.input_version and me.input_version = 1
       and concat_ws(E'\n', m.title, m.body) = p.body
       and (p.embedding is not null
            or exists (select 1 from __tenant__.passage_embedding_job j where j.passage_id = p.id))
     order by p.id, me.memory_id
), lent as (
    update __tenant__.passage p
       set vector_memory_id = x.memory_id, embedding = null, embedding_model = null,
           embedding_input_version = null, embedded_at = null
      from lenders x
     where p.id = x.id and p.scope = x.scope
    returning p.id
)
delete from __tenant__.passage_embedding_job j where j.passage_id in (select id from lent);
