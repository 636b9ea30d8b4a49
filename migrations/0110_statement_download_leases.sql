-- Statement downloads: an app's limit set by operators (null: the instances' default,
-- STATEMENT_DOWNLOADS_PER_APP), and the leases of the downloads in progress, one row each, held by
-- the instance making the file. A lease counts while its instance beats (service_instances): an
-- instance that dies leaks no slot. Nullable, no default: adding the column rewrites nothing.
ALTER TABLE apps ADD COLUMN statement_downloads_at_once integer
  CHECK (statement_downloads_at_once BETWEEN 1 AND 1000);

CREATE TABLE statement_download_leases (
  lease_id    text PRIMARY KEY,
  app_id      text NOT NULL REFERENCES apps(id),
  instance_id text NOT NULL,
  taken_at    timestamptz NOT NULL
);
CREATE INDEX statement_download_leases_app ON statement_download_leases(app_id);
