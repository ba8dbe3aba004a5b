-- Vectors of zeros stored before they were refused (their cosine to any query
-- is NaN, which ranked their memories first for every question): the data
-- step _clear_zero_vectors (queues/embedding_queue.sql) deletes them and
-- queues their memories for the worker, once, after the function files.
-- Where no vector is all zeros, it changes nothing.

insert into __tenant__.data_step (name, requested_by) values ('_clear_zero_vectors', 50);
