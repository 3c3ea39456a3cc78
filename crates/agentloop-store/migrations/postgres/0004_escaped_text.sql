-- Free text now reaches PostgreSQL through an escape (see src/text.rs in agentloop-store): U+0000,
-- which `text` cannot hold, is written as U+FDD0 '0', and U+FDD0 itself as U+FDD0 U+FDD0. Text
-- written before holds no U+0000 (PostgreSQL refused it); any U+FDD0 in it is doubled here so
-- that it reads back unchanged. In practice no row matches: U+FDD0 is a Unicode noncharacter.
-- The same columns as the store escapes; JSON columns are left alone (JSON escapes U+0000).

-- users.id is referenced by sessions and api_keys: the escaped id is added, the references
-- moved to it, and the old id removed.
CREATE TEMPORARY TABLE agentloop_escaped_users ON COMMIT DROP AS
    SELECT id FROM users WHERE strpos(id, chr(64976)) > 0;
INSERT INTO users (id, created_at)
    SELECT replace(id, chr(64976), chr(64976) || chr(64976)), created_at FROM users
    WHERE id IN (SELECT id FROM agentloop_escaped_users);
UPDATE sessions SET user_id = replace(user_id, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(user_id, chr(64976)) > 0;
UPDATE api_keys SET user_id = replace(user_id, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(user_id, chr(64976)) > 0;
DELETE FROM users WHERE id IN (SELECT id FROM agentloop_escaped_users);

UPDATE sessions SET title = replace(title, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(title, chr(64976)) > 0;

UPDATE messages SET content = replace(content, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(content, chr(64976)) > 0;
UPDATE messages SET tool_call_id = replace(tool_call_id, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(tool_call_id, chr(64976)) > 0;

UPDATE runs SET user_id = replace(user_id, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(user_id, chr(64976)) > 0;
UPDATE runs SET query = replace(query, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(query, chr(64976)) > 0;
UPDATE runs SET model = replace(model, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(model, chr(64976)) > 0;
UPDATE runs SET error_code = replace(error_code, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(error_code, chr(64976)) > 0;
UPDATE runs SET error_message = replace(error_message, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(error_message, chr(64976)) > 0;

UPDATE tool_executions SET call_id = replace(call_id, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(call_id, chr(64976)) > 0;
UPDATE tool_executions SET tool = replace(tool, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(tool, chr(64976)) > 0;
UPDATE tool_executions SET result = replace(result, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(result, chr(64976)) > 0;
UPDATE tool_executions SET error = replace(error, chr(64976), chr(64976) || chr(64976))
    WHERE strpos(error, chr(64976)) > 0;
