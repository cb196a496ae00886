//! How much of a tool's output an agent is shown: every tool cuts its text the same way.

/// `bytes` as text, cut at `cap` bytes and marked when cut (every tool's output).
pub(crate) fn capped(bytes: &[u8], cap: usize) -> String {
    let text = String::from_utf8_lossy(bytes.get(..cap.min(bytes.len())).unwrap_or(bytes));
    if bytes.len() > cap {
        format!("{text}\n[cut at {cap} bytes]")
    } else {
        text.into_owned()
    }
}
