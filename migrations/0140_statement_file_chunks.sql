-- The bytes of a closed day's statement file, kept (docs/statements.md, "How a file is made, kept
-- and served"): the first summary of a day makes the file once (for its digest, statement_files)
-- and writes its bytes here as they pass; a download then streams them, a chunk per query, instead
-- of making the file again from the day's rows. Dropped STATEMENT_FILES_KEPT_DAYS after the day
-- (PURGE_HISTORY); a later download makes the file from the rows again.
--
-- Chunks of a fixed size (256 KiB, the last one shorter) numbered from 0 by their place in the
-- file: the file is the same bytes whoever makes it, so two instances making it at once write the
-- same rows (each insert ON CONFLICT DO NOTHING). Same key as statement_files but no foreign key:
-- the chunks are written before the digest row exists (the digest is known once the last byte
-- has passed), and chunks left by a making that never finished are dropped with their day.
-- The default storage of bytea (compressed out of line): CSV takes about a third of its size, at
-- about a tenth more to read; gzip chunks are stored as they are.
CREATE TABLE statement_file_chunks (
  app_id          text NOT NULL,
  day             date NOT NULL,
  format_version  integer NOT NULL,
  compression     text NOT NULL,
  encoder         text NOT NULL,
  seq             integer NOT NULL CHECK (seq >= 0),
  bytes           bytea NOT NULL,
  PRIMARY KEY (app_id, day, format_version, compression, encoder, seq)
);
-- The purge walks the oldest days.
CREATE INDEX statement_file_chunks_day ON statement_file_chunks(day);

-- How many chunks of the file are kept: set only once every one of them is written; null while
-- they are not (a digest made before this migration, bytes dropped by the purge or found damaged):
-- a download then makes the file from the rows. Nullable, no default: adding it rewrites nothing.
ALTER TABLE statement_files ADD COLUMN chunks integer CHECK (chunks > 0);
