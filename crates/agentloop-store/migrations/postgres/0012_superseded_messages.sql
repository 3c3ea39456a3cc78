-- A regenerated answer (the AI SDK's `regenerate`) replaces the session's last exchange: its
-- messages stay, marked with the run that replaced them, and are left out of the history the
-- model sees and of the session's listing. NULL: the message is part of the conversation.

ALTER TABLE messages ADD COLUMN superseded_by_run TEXT;
