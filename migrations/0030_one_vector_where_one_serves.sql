-- One vector where one serves (issue #31). Since 0018 every memory stored two
-- 384-dimension vectors: the recall vector of its input and the vector of its
-- own text alone, which duplicate proposals compare. Input version 1 embeds
-- exactly the memory's own text (title and body), so under it the two were
-- the same 1.5 kB twice. A row of version 1 now keeps one: its recall vector
-- is its text vector (plpgsql/duplicates.sql reads it so), and text_embedding
-- stays NULL. Rows of version 2 are unchanged; nothing is re-embedded.
update __tenant__.memory_embedding
   set text_embedding = null
 where input_version = 1 and text_embedding is not null;

comment on column __tenant__.memory_embedding.text_embedding is
    'The memory''s own text (title and body) embedded alone, what duplicate proposals compare; NULL under input version 1, whose embedding is that vector, or when no worker has stored it yet.';
