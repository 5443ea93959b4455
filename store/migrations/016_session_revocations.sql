-- Vigil schema, version 16: signed-out console sessions (issue 22).
--
-- A console session cookie is signed, so every replica accepts it without
-- a shared table; signing out must still end it on every replica before
-- its expiry. Sign-out records the SHA-256 of the cookie here, with the
-- cookie's own expiry; a request by cookie, once the signature holds,
-- reads this table in the statement that reads the database clock. Rows
-- past their expiry are of no use (the cookie is refused as expired) and
-- the next sign-out deletes them, so the table holds at most the sessions
-- signed out within one session lifetime (12 h).
CREATE TABLE session_revocations (
    id         bytea PRIMARY KEY,          -- sha256 of the cookie value
    expires_at timestamptz NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

---- create above / drop below ----

DROP TABLE session_revocations;
