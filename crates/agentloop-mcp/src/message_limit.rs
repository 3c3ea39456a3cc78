//! The limit on one message a server sends, over stdio and over streamable HTTP, and the error a
//! call fails with when its answer is over it.

/// The most bytes one JSON-RPC message from a server may take (16 MiB, its newline not counted):
/// rmcp's own limit over stdio, and that of its streamable HTTP client for a JSON body or one
/// SSE event.
pub const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The JSON-RPC code of the error that takes the place of a message over the limit: an internal
/// error, as the request itself was fine.
pub(crate) const INTERNAL_ERROR: i32 = -32603;

/// What the call fails with when the size of the answer is known; the model reads it.
pub(crate) fn too_large(server: &str, size: usize, limit: usize) -> String {
    dropped(server, &format!("a message of {size} bytes, over"), limit)
}

/// What the call fails with when the answer was stopped at the limit, its size unknown.
pub(crate) fn over_limit(server: &str, limit: usize) -> String {
    dropped(server, "a message over", limit)
}

fn dropped(server: &str, what: &str, limit: usize) -> String {
    format!(
        "MCP server '{server}' answered with {what} the limit of {} that agentloop accepts in \
         one message, so the answer was dropped; ask the tool for less (a smaller page, a \
         narrower query)",
        describe_bytes(limit)
    )
}

/// `16 MiB` for whole mebibytes, else the bytes.
fn describe_bytes(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_reads_in_mebibytes_when_whole() {
        assert_eq!(MAX_MESSAGE_BYTES, 16 * 1024 * 1024);
        assert_eq!(describe_bytes(MAX_MESSAGE_BYTES), "16 MiB");
        assert_eq!(describe_bytes(100), "100 bytes");
        let message = too_large("files", 20_000_042, MAX_MESSAGE_BYTES);
        assert!(message.contains("'files'"), "{message}");
        assert!(message.contains("20000042 bytes"), "{message}");
        assert!(message.contains("limit of 16 MiB"), "{message}");
        let message = over_limit("files", MAX_MESSAGE_BYTES);
        assert!(message.contains("over the limit of 16 MiB"), "{message}");
    }
}
