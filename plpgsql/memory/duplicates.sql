-- Duplicates: the database proposes pairs of similar memories, a person
-- decides. Other memory stores merge on their own (an LLM judges, or an exact
-- hash matches); here nothing changes because two memories are alike, only
-- because someone looked at both, with their provenance, and said so.
--
-- Which pairs a principal is shown (the design's "cosine 0.80 or above among
-- the 500 newest visible memories", with the tenant's duplicate_cosine and
-- duplicate_window):
--   * the window: the principal's duplicate_window newest CURRENT memories
--     that the eligibility rule (_memory_eligible) lets it see in the
--     authorised scopes for any purpose, neither superseded nor forgotten.
--     Newest is the latest written (highest id): created_at is the writing
--     transaction's start, so ids order the writes more finely;
--   * a pair: two memories of the window that the principal may see for ONE
--     purpose: eligible for a purpose p each. Since eligibility for p is
--     eligibility for any purpose plus p in the row's purposes, that is: both
--     in the window and their purposes overlap. Two memories with no purpose
--     in common never meet in one answer (recall, read and the bundle name one
--     purpose), and retiring one would take its content away from the
--     purposes only it allows;
--   * similar: cosine of the vectors of their own texts (title and body,
--     the tenant's model) at or above duplicate_cosine: text_embedding, or
--     under input version 1, whose input is that text, the recall vector
--     (stored once, migration 0030). Not the recall vectors of version 2: those
--     also embed the turns around each memory's evidence, so two memories
--     stated in neighbouring turns look alike (see claim_embedding_jobs). A
--     memory without a text vector is in the window but in no pair
--     (meta.missing_embeddings says how many);
--   * undecided: no decision about the pair at both memories' current
--     revisions. A decided pair comes back only when either memory changes
--     revision (corrected), i.e. when there is something new to look at.
-- As in read(), provenance shows only the source memories the principal may
-- see and counts the others (hidden_sources).
--
-- Errors: PR180 the pair was decided first (at the revisions the reviewer
-- saw), PR181 the replacement reaches fewer people or purposes than the
-- memory it would supersede, PR182 the two memories share no purpose; and
-- those of the operations underneath (PR104, PR105, PR107, PR108).
--
-- Speed: the pairs are an exact all-pairs comparison of the window (500 x 499
-- / 2 cosines in one nested loop over a materialised CTE: ~31 ms of CPU a
-- call at 100k memories, bench/duplicates.py). An index cannot help: the
-- window is the newest 500 of any number of memories, and HNSW searches the
-- whole table.

-- The purposes as four bits, so that the pair loop tests overlap with one AND
-- instead of an array operator (which cost as much as the cosine itself).
create or replace function __tenant__._purpose_bits(p_purposes text[])
returns integer
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select coalesce(bit_or(1 << (array_position(_purposes(), p) - 1)), 0) from unnest(p_purposes) p
$$;
comment on function __tenant__._purpose_bits(text[]) is 'Internal: a purpose set as a bit mask, bit n for the nth of _purposes().';

-- Whether p_new may replace p_old without anyone losing it: everyone who may
-- see p_old, for every purpose it allows, may see p_new (same scope, an
-- audience at least as wide, a superset of purposes) from the same
-- perspective (observer). Superseding by a narrower memory would take the
-- content away from people who never saw the pair.
create or replace function __tenant__._may_replace(p_old __tenant__.memory, p_new __tenant__.memory)
returns boolean
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select p_new.scope = p_old.scope
       and (p_new.audience_peer_id is null or p_new.audience_peer_id is not distinct from p_old.audience_peer_id)
       and p_new.purposes @> p_old.purposes
       and p_new.observer_peer_id is not distinct from p_old.observer_peer_id
$$;
comment on function __tenant__._may_replace(__tenant__.memory, __tenant__.memory) is
    'Internal: true when the new memory reaches everyone the old one reaches, for every purpose (so it may supersede it).';

-- The proposals (duplicate_pair[]) and the metadata of this call
-- (duplicate_meta: the window, how many of it are embedded, and why nothing
-- is proposed if so), as one value of the declared type
-- duplicate_proposals_answer (migration 0027); duplicate_proposals() returns
-- the pairs as rows.
-- How close the closest pair of the window came (for a common purpose): a
-- second pass over the window that duplicate_proposals_answer pays only when
-- no pair reached the threshold.
create or replace function __tenant__._closest_pair(p_ids bigint[], p_model text)
returns double precision
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
#variable_conflict use_column
declare
    v_result double precision;
begin
    with win as materialized (
        select m.id, _purpose_bits(m.purposes) as bits, case when me.input_version = 1 then me.embedding else me.text_embedding end as embedding
          from unnest(p_ids) w(id)
          join memory m on m.id = w.id
          join memory_embedding me on me.memory_id = w.id and me.model = p_model
                                  and (me.input_version = 1 or me.text_embedding is not null)
    )
    select max(1 - (a.embedding operator(__ext__.<=>) b.embedding))
      from win a join win b on a.id < b.id
     where (a.bits & b.bits) <> 0
    into v_result;
    return v_result;
end
$$;
comment on function __tenant__._closest_pair(bigint[], text) is
    'Internal: the highest cosine of any two memories of the window that share a purpose.';

-- Every pair of the window at or above the threshold, best first: the
-- undecided ones listed, the decided ones counted. The window is read by key,
-- row by row (unnest, then the primary keys): never a scan of the vectors of
-- the whole tenant. Each vector is normalised once, so that a pair's cosine is
-- its inner product: a third of the arithmetic of <=>, which is most of a
-- call's time (the pair loop is window^2 / 2 products).
create or replace function __tenant__.duplicate_proposals_answer(
    p_principal  text,
    p_scopes     text[],
    p_limit      integer default 20
)
returns __tenant__.duplicate_proposals_answer
language plpgsql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_set jsonb := _settings();
    v_principal bigint := _peer_id(p_principal);
    v_window integer := (v_set ->> 'duplicate_window')::integer;
    v_threshold double precision := (v_set ->> 'duplicate_cosine')::double precision;
    v_model text := v_set ->> 'embedding_model';
    v_ids bigint[];
    v_embedded integer;
    v_low bigint[];
    v_high bigint[];
    v_cos double precision[];
    v_decided integer;
    v_closest double precision;
    v_empty text;
    v_answer duplicate_proposals_answer;
begin
    perform _check_scopes(p_scopes);
    perform _check_limit(p_limit, 1000, 'limit', 'Ask for the best pairs first, e.g. p_limit => 20.');

    select coalesce(array_agg(w.id order by w.id desc), '{}') into v_ids
      from (select e.id from memory e where _memory_eligible(e.scope, e.audience_peer_id, e.purposes, e.invalidated_at, e.superseded_by, e.valid,
                                                             v_principal, p_scopes, null, false, null)
             order by e.id desc limit v_window) w;

    select count(*) into v_embedded
      from memory_embedding me
     where me.memory_id = any (v_ids) and me.model = v_model and (me.input_version = 1 or me.text_embedding is not null);

    -- Every pair of the window at or above the threshold (see above).
    with win as materialized (
        select m.id, m.revision, _purpose_bits(m.purposes) as bits,
               __ext__.l2_normalize(case when me.input_version = 1 then me.embedding else me.text_embedding end) as embedding
          from unnest(v_ids) w(id)
          join memory m on m.id = w.id
          join memory_embedding me on me.memory_id = w.id and me.model = v_model and (me.input_version = 1 or me.text_embedding is not null)
    ), close_pairs as (
        select a.id as low, b.id as high, -(a.embedding operator(__ext__.<#>) b.embedding) as cos,
               exists (select 1 from duplicate_decision d
                        where d.memory_low = a.id and d.memory_high = b.id
                          and d.revision_low = a.revision and d.revision_high = b.revision) as decided
          from win a join win b on a.id < b.id
         where (a.bits & b.bits) <> 0
           and -(a.embedding operator(__ext__.<#>) b.embedding) >= v_threshold
    )
    select coalesce(array_agg(s.low order by s.cos desc, s.low, s.high) filter (where not s.decided), '{}'),
           coalesce(array_agg(s.high order by s.cos desc, s.low, s.high) filter (where not s.decided), '{}'),
           coalesce(array_agg(s.cos order by s.cos desc, s.low, s.high) filter (where not s.decided), '{}'),
           count(*) filter (where s.decided)
      into v_low, v_high, v_cos, v_decided
      from close_pairs s;

    if cardinality(v_ids) = 0 then
        v_empty := 'no_memories';
    elsif cardinality(v_ids) = 1 then
        v_empty := 'one_memory';
    elsif v_embedded < 2 then
        v_empty := 'no_embeddings';
    elsif cardinality(v_low) = 0 and v_decided > 0 then
        v_empty := 'all_decided';
    elsif cardinality(v_low) = 0 then
        v_empty := 'below_threshold';
        v_closest := _closest_pair(v_ids, v_model);  -- paid only when there is nothing to review
    end if;
    v_answer.meta := row(v_window, v_threshold, v_model, cardinality(v_ids), v_embedded,
                         cardinality(v_ids) - v_embedded, cardinality(v_low), v_decided,
                         least(cardinality(v_low), p_limit), v_closest, v_empty)::duplicate_meta;

    with top as (
        select p.ord::integer as r, p.low, v_high[p.ord] as high, v_cos[p.ord] as cos
          from unnest(v_low[1:p_limit]) with ordinality as p(low, ord)
    ), prov as (
        select * from _provenance_of(array(select t.low from top t union select t.high from top t),
                                     v_principal, p_scopes)
    )
    select coalesce(array_agg(row(
               t.r, t.cos,
               a.id, a.scope, a.kind, a.title, a.body, a.revision, a.created_at,
               (select p.name from peer p where p.id = a.audience_peer_id), a.purposes,
               b.id, b.scope, b.kind, b.title, b.body, b.revision, b.created_at,
               (select p.name from peer p where p.id = b.audience_peer_id), b.purposes,
               _may_replace(a, b), _may_replace(b, a), pa.provenance, pb.provenance)::duplicate_pair order by t.r), '{}')
      into v_answer.items
      from top t
      join memory a on a.id = t.low
      join memory b on b.id = t.high
      join prov pa on pa.memory_id = a.id
      join prov pb on pb.memory_id = b.id;
    return v_answer;
end
$$;
comment on function __tenant__.duplicate_proposals_answer(text, text[], integer) is
    'duplicate_proposals() and its metadata (window, embedded, threshold, why nothing is proposed) in one value: (items duplicate_pair[], meta duplicate_meta). In psql: select (a.meta).* from duplicate_proposals_answer(...) a.';

create or replace function __tenant__.duplicate_proposals(
    p_principal  text,
    p_scopes     text[],
    p_limit      integer default 20
)
returns setof __tenant__.duplicate_pair
language sql stable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    select d.* from unnest((duplicate_proposals_answer(p_principal, p_scopes, p_limit)).items) d order by d.rank
$$;
comment on function __tenant__.duplicate_proposals(text, text[], integer) is
    'Pairs of current memories the principal may see for a common purpose, among its duplicate_window newest, with cosine >= duplicate_cosine and not yet decided at these revisions; best first, with both texts and provenance. Nothing is merged: decide_duplicate() records a person''s decision.';

-- A person's decision about a pair:
--   distinct   keep both; the pair is not proposed again (at these revisions)
--   supersede  p_b replaces p_a: p_a becomes history pointing to p_b, through
--              supersede's own step and revision checks; refused (PR181) when
--              p_b does not reach everyone p_a reaches
--   forget     p_a is forgotten (forget(), with the reason), p_b stays
-- p_revision_a / p_revision_b are the revisions the reviewer saw (NULL: the
-- current ones). The decision is a row: who, which login role, when, why,
-- and the cosine that was on screen.
--
-- Two reviewers deciding the same pair at once: both memories are locked in
-- id order, so the second waits for the first to commit, then finds its
-- decision at the revisions it saw and gets PR180, with nothing written.
create or replace function __tenant__.decide_duplicate(
    p_principal   text,
    p_scopes      text[],
    p_a           bigint,
    p_b           bigint,
    p_decision    text,
    p_reason      text,
    p_revision_a  integer default null,
    p_revision_b  integer default null
)
returns table (decision_id bigint, decision text, retired_memory bigint, retired_revision integer)
language plpgsql
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_principal bigint := _peer_id(p_principal);
    v_set jsonb := _settings();
    v_a memory;
    v_b memory;
    v_low bigint := least(p_a, p_b);
    v_high bigint := greatest(p_a, p_b);
    v_seen_a integer;  -- the revisions the reviewer saw
    v_seen_b integer;
    v_prior record;
    v_cosine double precision;
    v_retired_revision integer;
    v_id bigint;
begin
    perform _check_scopes(p_scopes);
    perform _check_id(p_a, 'memory a');
    perform _check_id(p_b, 'memory b');
    if p_a = p_b then
        perform _fail('PR107', format('a pair needs two memories, not memory %s twice', p_a));
    end if;
    perform _check_one_of(p_decision, 'decision', array['distinct', 'supersede', 'forget']);
    perform _check_reason(p_reason, 'a decision needs a reason',
                          'Say why, e.g. ''the same allergy, said twice'' or ''different people''.', 2000);
    -- Visible first (PR104 tells nothing of a memory the principal may not
    -- see), then locked in id order so that concurrent deciders queue up.
    perform _check_memory_visible(v_principal, p_scopes, v_low);
    perform _check_memory_visible(v_principal, p_scopes, v_high);
    perform 1 from memory m where m.id in (v_low, v_high) order by m.id for update;
    select m.* into v_a from memory m where m.id = p_a;
    select m.* into v_b from memory m where m.id = p_b;
    v_seen_a := coalesce(p_revision_a, v_a.revision);
    v_seen_b := coalesce(p_revision_b, v_b.revision);
    -- Someone decided this pair, as the reviewer saw it, first.
    select d.decision, p.name as decider, d.decided_at into v_prior
      from duplicate_decision d join peer p on p.id = d.decided_by
     where d.memory_low = v_low and d.memory_high = v_high
       and d.revision_low = case when p_a = v_low then v_seen_a else v_seen_b end
       and d.revision_high = case when p_a = v_high then v_seen_a else v_seen_b end;
    if found then
        perform _fail('PR180', format('memories %s and %s were already decided (%s, by %s at %s)', v_low, v_high,
                                      v_prior.decision, _shown(v_prior.decider), v_prior.decided_at),
                      'Someone decided this pair first: load the proposals again.');
    end if;
    -- The revision checks of correct/supersede/forget: both live, both as seen.
    v_a := _lock_for_revision(v_principal, p_scopes, p_a, p_revision_a, true);
    v_b := _lock_for_revision(v_principal, p_scopes, p_b, p_revision_b, true);
    if not v_a.purposes && v_b.purposes then
        perform _fail('PR182', format('memories %s (%s) and %s (%s) share no purpose: they are not a pair',
                                      p_a, array_to_string(v_a.purposes, ', '), p_b, array_to_string(v_b.purposes, ', ')),
                      'Only memories usable for a common purpose are proposed as duplicates.');
    end if;

    select 1 - ((case when ea.input_version = 1 then ea.embedding else ea.text_embedding end)
                operator(__ext__.<=>) (case when eb.input_version = 1 then eb.embedding else eb.text_embedding end))
      into v_cosine
      from memory_embedding ea, memory_embedding eb
     where ea.memory_id = p_a and eb.memory_id = p_b
       and ea.model = v_set ->> 'embedding_model' and eb.model = v_set ->> 'embedding_model';

    if p_decision = 'supersede' then
        if not _may_replace(v_a, v_b) then
            perform _fail('PR181', format('memory %s cannot supersede memory %s: not everyone who may use %s may use %s',
                                          p_b, p_a, p_a, p_b),
                          'The replacement must be in the same scope, for the same or a wider audience, allow every '
                          'purpose the replaced memory allows, and share its perspective. Supersede the other way, '
                          'forget one, or keep both.');
        end if;
        v_retired_revision := _supersede_by(p_a, p_b);
    elsif p_decision = 'forget' then
        v_retired_revision := forget(p_principal, p_scopes, p_a,
                                     format('duplicate of memory %s: %s', p_b, _trim(p_reason)), v_a.revision);
    end if;

    insert into duplicate_decision (memory_low, memory_high, revision_low, revision_high, decision, retired_memory,
                                    cosine, reason, decided_by)
    values (v_low, v_high,
            case when p_a = v_low then v_a.revision else v_b.revision end,
            case when p_a = v_high then v_a.revision else v_b.revision end,
            p_decision, case when p_decision <> 'distinct' then p_a end, v_cosine, _trim(p_reason), v_principal)
    returning id into v_id;
    perform _register('duplicate_decision', v_id::text, _memory_observations(array[v_low, v_high]));

    return query select v_id, p_decision, case when p_decision <> 'distinct' then p_a end, v_retired_revision;
end
$$;
comment on function __tenant__.decide_duplicate(text, text[], bigint, bigint, text, text, integer, integer) is
    'A person''s decision about a proposed pair: distinct (keep both), supersede (b replaces a) or forget (a); recorded with who, when and why. PR180 if someone decided it first.';
