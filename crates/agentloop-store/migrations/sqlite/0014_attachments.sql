-- Images and files of messages (a user's attachments, the images a tool returned), each stored
-- once whatever the number of messages, runs and sessions that carry it: named by the SHA-256
-- of its bytes (lowercase hex). A message keeps the references (media type, name, size, hash,
-- or an https URL the provider fetches) as JSON in `messages.attachments`; NULL: none.

CREATE TABLE attachments (
    sha256 TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    data BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

ALTER TABLE messages ADD COLUMN attachments TEXT;
