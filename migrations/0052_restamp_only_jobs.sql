-- Why a memory waits for the worker, as far as a switch of embedding
-- version needs to know: a job queued by rebuild_embeddings only because
-- the memory's vector has another stamp is done once the stamp in force is
-- that vector's again; a job queued because the vector's text changed (a
-- reply came after it, a neighbour was erased) is not. set_embedding_version
-- took every job whose memory had a vector of the new stamp as done, the
-- second kind too: the reply then never reached the vector.

alter table __tenant__.embedding_job add column restamp_only boolean not null default false;
comment on column __tenant__.embedding_job.restamp_only is
    'Queued only because the memory''s vector has a stamp other than the one in force (rebuild_embeddings): done when a switch makes that stamp current again. Any other reason to embed again clears it.';
