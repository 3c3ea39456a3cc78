//! OpenAI-compatible Chat Completions client.
