//! The Changes section of a run's page (`runs diff` as the viewer): the kept commits'
//! messages, the file list, what was not kept, then each file's diff, collapsible. At most
//! [`PAGE_LINES`] lines of diff are on the page; the whole diff (up to the command's cap) is
//! one link away, as text (`/runs/<id>/diff`). Every path, line and message is agent text:
//! escaped.

use commands::{Reply, ReplyKind};
use serde_json::Value;

use super::text_of;
use crate::html::escape;

/// The most lines of diff one run page carries.
pub(crate) const PAGE_LINES: usize = 5_000;

fn int(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn list<'v>(v: &'v Value, key: &str) -> impl Iterator<Item = &'v Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

/// The section for `reply` (the viewer's `runs diff`); `base` is the run's own path and
/// `suffix` its token query, if any.
pub(super) fn section(reply: &Reply, base: &str, suffix: &str) -> String {
    // A viewer who may read the run but not its restricted repo's files sees no section.
    if matches!(reply.kind, ReplyKind::NotFound | ReplyKind::Unauthorized) {
        return String::new();
    }
    let mut out = format!(
        "<section id=\"changes\"><h2>Changes <a class=\"muted\" href=\"{base}/diff{suffix}\">text</a></h2>"
    );
    if reply.kind != ReplyKind::Ok {
        out.push_str(&format!(
            "<p class=\"muted\">{}</p></section>",
            escape(&reply.text)
        ));
        return out;
    }
    let data = &reply.data;
    let stats = data.get("stats").cloned().unwrap_or(Value::Null);
    let count = |key: &str| match stats.get(key).and_then(Value::as_u64) {
        Some(n) => n.to_string(),
        None => "?".to_owned(),
    };
    match data.get("branch").and_then(Value::as_str) {
        Some(branch) => out.push_str(&format!(
            "<p id=\"changes-summary\">{} commit(s) kept on <code>{}</code>: {} file(s) changed, <span class=\"add\">+{}</span> <span class=\"del\">-{}</span></p>",
            list(data, "commits").count(),
            escape(branch),
            int(&stats, "files"),
            count("added"),
            count("removed"),
        )),
        None => out.push_str("<p id=\"changes-summary\">No changes were kept (no branch was made).</p>"),
    }
    out.push_str(&commits(data));
    let unread = stats.get("unread").and_then(Value::as_bool) == Some(true);
    if unread {
        out.push_str(&format!(
            "<p id=\"changes-unread\">The files changed weigh more than the {} MiB a diff reads: they are listed without their lines.</p>",
            commands::run_changes::MAX_DIFF_INPUT_BYTES >> 20
        ));
    }
    out.push_str(&file_list(data, &stats));
    out.push_str(&not_kept(data));
    for (i, file) in list(data, "files").enumerate() {
        out.push_str(&file_diff(i, file));
    }
    if stats.get("cut").and_then(Value::as_bool) == Some(true) {
        out.push_str(&format!(
            "<p id=\"changes-cut\">{} lines of diff are shown here; <a href=\"{base}/diff{suffix}\">the whole diff, as text</a>.</p>",
            int(&stats, "lines_shown")
        ));
    }
    out.push_str("</section>");
    out
}

fn commits(data: &Value) -> String {
    let items: String = list(data, "commits")
        .map(|c| {
            format!(
                "<li><pre class=\"message\">{}</pre></li>",
                escape(&text_of(c, "message"))
            )
        })
        .collect();
    if items.is_empty() {
        String::new()
    } else {
        format!("<h3>Commits</h3><ol id=\"commits\">{items}</ol>")
    }
}

fn counts(file: &Value) -> String {
    if file.get("binary").and_then(Value::as_bool) == Some(true) {
        "<span class=\"muted\">binary</span>".to_owned()
    } else {
        format!(
            "<span class=\"add\">+{}</span> <span class=\"del\">-{}</span>",
            int(file, "added"),
            int(file, "removed")
        )
    }
}

fn file_list(data: &Value, stats: &Value) -> String {
    let rows: String = list(data, "files")
        .enumerate()
        .map(|(i, f)| {
            format!(
                "<tr><td>{}</td><td>{}</td><td><a href=\"#file-{i}\">{}</a></td></tr>",
                escape(&text_of(f, "status")),
                counts(f),
                escape(&text_of(f, "path"))
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let listed = list(data, "files").count() as u64;
    let more = int(stats, "files").saturating_sub(listed);
    let more = if more > 0 {
        format!("<p class=\"muted\">… and {more} more files, in the text.</p>")
    } else {
        String::new()
    };
    format!("<h3>Files</h3><table id=\"files\">{rows}</table>{more}")
}

fn not_kept(data: &Value) -> String {
    let Some(not_kept) = data.get("not_kept") else {
        return String::new();
    };
    let count = int(not_kept, "count");
    if count == 0 {
        return String::new();
    }
    let names: String = list(not_kept, "names")
        .map(|n| format!("<li><code>{}</code></li>", escape(n.as_str().unwrap_or(""))))
        .collect();
    format!(
        "<h3>Not kept ({count})</h3><p class=\"muted\">Denied, protected, .switchboard/, a submodule or a link out.</p><ul id=\"not-kept\">{names}</ul>"
    )
}

/// One file: a `<details>` whose summary is its path and counts, and its hunks.
fn file_diff(i: usize, file: &Value) -> String {
    let mut body = String::new();
    if file.get("binary").and_then(Value::as_bool) == Some(true) {
        body.push_str("<span class=\"muted\">Binary file changed</span>\n");
    }
    for hunk in list(file, "hunks") {
        body.push_str(&format!(
            "<span class=\"hunk\">{}</span>\n",
            escape(&text_of(hunk, "header"))
        ));
        for line in list(hunk, "lines") {
            let line = line.as_str().unwrap_or("");
            let class = match line.as_bytes().first() {
                Some(b'+') => " class=\"add\"",
                Some(b'-') => " class=\"del\"",
                _ => "",
            };
            body.push_str(&format!("<span{class}>{}</span>\n", escape(line)));
        }
    }
    if file.get("cut").and_then(Value::as_bool) == Some(true) {
        body.push_str("<span class=\"muted\">… (more in the text)</span>\n");
    }
    format!(
        "<details open id=\"file-{i}\" class=\"file\"><summary><code>{}</code> {}</summary><pre class=\"diff\">{body}</pre></details>",
        escape(&text_of(file, "path")),
        counts(file)
    )
}
