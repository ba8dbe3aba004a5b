-- Passages, the chunking rule (passages.sql writes the passages of each
-- appended observation with it).
--
--   * an observation of at most passage_max_chars characters (a conversation
--     turn) is one passage: its text without surrounding whitespace;
--   * longer text is cut into sentences: after . ! ? or an ellipsis followed
--     by whitespace, and at every line end; a sentence longer than
--     passage_target_chars is cut between words, and a word longer than that
--     in pieces of that length;
--   * sentences are packed in order up to about passage_target_chars, and a
--     passage also ends at a paragraph break (a blank line) once it is half
--     that size;
--   * a passage starts with the previous passage's last sentence when that
--     sentence is at most passage_overlap_chars long and not a paragraph end,
--     so a statement cut at a boundary is still found whole;
--   * each passage records its [start_byte, end_byte) span in the
--     observation's UTF-8 body, so it can be cited: the bytes of the span
--     decode to exactly the passage's text.
-- Changing the sizes applies to observations appended afterwards.

create or replace function __tenant__._passage_pieces(p_body text, p_target integer)
returns table (t text, len integer, at_char integer, at_byte integer, para boolean, whole boolean)
language sql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
    -- Sentences (each with the whitespace after it), the long ones cut into
    -- pieces; together they are the whole body, in order.
    with sentence as (
        select m[1] as t, n
          from regexp_matches(p_body,
                 $re$(?:[^.!?…\n]|[.!?…](?!\s|$))+[.!?…]*["'’”)\]]*\s*|\s+|[.!?…]+["'’”)\]]*\s*$re$, 'g')
               with ordinality as s(m, n)
    ), piece as (
        select s.n, 0::bigint as k, 0 as i, s.t, true as whole from sentence s where char_length(s.t) <= p_target
        union all
        -- a sentence longer than the target: its words, and a word longer than
        -- the target in pieces of the target's length
        select s.n, w.k, g.i, substr(w.m[1], g.i * p_target + 1, p_target), false
          from sentence s
         cross join lateral regexp_matches(s.t, '[^[:space:]]+[[:space:]]*|[[:space:]]+', 'g') with ordinality as w(m, k)
         cross join lateral generate_series(0, (char_length(w.m[1]) - 1) / p_target) as g(i)
         where char_length(s.t) > p_target
    ), placed as (
        select p.t, char_length(p.t) as len,
               coalesce(sum(char_length(p.t)) over w, 0)::integer as at_char,
               coalesce(sum(octet_length(p.t)) over w, 0)::integer as at_byte,
               p.t ~ E'\\n[ \\t\\r\\f\\v]*\\n' as para, p.whole, p.n, p.k, p.i
          from piece p
        window w as (order by p.n, p.k, p.i rows between unbounded preceding and 1 preceding)
    )
    select x.t, x.len, x.at_char, x.at_byte, x.para, x.whole from placed x order by x.n, x.k, x.i
$$;
comment on function __tenant__._passage_pieces(text, integer) is
    'Internal: a text as its sentences in order (long ones cut at words, long words at the target length), each with where it starts.';

create or replace function __tenant__._passage_spans(p_body text, p_max integer, p_target integer, p_overlap integer)
returns table (ordinal integer, start_byte integer, end_byte integer, body text)
language plpgsql immutable
security definer
set search_path = pg_catalog, __tenant__, __ext__, pg_temp
as $$
declare
    v_space constant text := E' \t\n\r\f\v\u00a0\u2028\u2029\ufeff';
    v_text text[];
    v_len integer[];
    v_char integer[];
    v_byte integer[];
    v_para boolean[];
    v_whole boolean[];
    v_n integer;
    v_i integer := 1;
    v_j integer;
    v_first_new integer;
    v_size integer;
    v_chunk text;
    v_lead integer;
    v_out integer := 0;
    v_overlapped boolean := false;
begin
    if p_body is null or btrim(p_body, v_space) = '' then
        return;
    end if;
    if char_length(p_body) <= p_max then
        v_lead := char_length(p_body) - char_length(ltrim(p_body, v_space));
        ordinal := 1;
        start_byte := octet_length(left(p_body, v_lead));
        body := btrim(p_body, v_space);
        end_byte := start_byte + octet_length(body);
        return next;
        return;
    end if;
    select array_agg(x.t order by x.n), array_agg(x.len order by x.n), array_agg(x.at_char order by x.n),
           array_agg(x.at_byte order by x.n), array_agg(x.para order by x.n), array_agg(x.whole order by x.n)
      into v_text, v_len, v_char, v_byte, v_para, v_whole
      from _passage_pieces(p_body, p_target) with ordinality as x(t, len, at_char, at_byte, para, whole, n);
    v_n := coalesce(cardinality(v_text), 0);
    while v_i <= v_n loop
        v_j := v_i;
        v_size := v_len[v_i];
        -- A passage that starts with the overlap takes at least one new sentence.
        v_first_new := case when v_overlapped then v_i + 1 else v_i end;
        loop
            exit when v_j = v_n;
            exit when v_j >= v_first_new and v_para[v_j] and v_size >= p_target / 2;
            exit when v_j >= v_first_new and v_size + v_len[v_j + 1] > p_target;
            v_j := v_j + 1;
            v_size := v_size + v_len[v_j];
        end loop;
        v_chunk := substr(p_body, v_char[v_i] + 1, v_size);
        if btrim(v_chunk, v_space) <> '' then
            v_out := v_out + 1;
            v_lead := char_length(v_chunk) - char_length(ltrim(v_chunk, v_space));
            ordinal := v_out;
            start_byte := v_byte[v_i] + octet_length(left(v_chunk, v_lead));
            body := btrim(v_chunk, v_space);
            end_byte := start_byte + octet_length(body);
            return next;
        end if;
        exit when v_j = v_n;
        -- Overlap: the next passage repeats this one's last sentence if it is
        -- short, is not a paragraph end, and this passage had more than it.
        if v_j > v_i and v_whole[v_j] and v_len[v_j] <= p_overlap and not v_para[v_j]
           and btrim(v_text[v_j], v_space) <> '' then
            v_i := v_j;
            v_overlapped := true;
        else
            v_i := v_j + 1;
            v_overlapped := false;
        end if;
    end loop;
end
$$;
comment on function __tenant__._passage_spans(text, integer, integer, integer) is
    'Internal: the chunking rule. Passages of a text with their UTF-8 byte spans [start_byte, end_byte).';
