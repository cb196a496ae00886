//! Text in and out of Slack: the bot's mention stripped from a request, and an answer
//! escaped and split into messages under Slack's limit, on line boundaries, never cut.

/// The longest message text this surface posts, in characters after escaping. Slack
/// truncates `text` past 40,000 and advises under 4,000.
pub const MESSAGE_LIMIT: usize = 3_900;

/// The request text: every mention of the bot (`<@U123>` or `<@U123|name>`) removed, the
/// rest trimmed. Mentions of anyone else stay.
pub fn strip_mention(text: &str, bot_user: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        let (before, tail) = rest.split_at(start);
        out.push_str(before);
        let Some(end) = tail.find('>') else {
            out.push_str(tail);
            rest = "";
            break;
        };
        let (mention, after) = tail.split_at(end + 1);
        let inner = mention
            .trim_start_matches("<@")
            .trim_end_matches('>')
            .split('|')
            .next()
            .unwrap_or_default();
        if inner != bot_user {
            out.push_str(mention);
        }
        rest = after;
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `text` mentions the bot.
pub fn mentions(text: &str, bot_user: &str) -> bool {
    text.contains(&format!("<@{bot_user}>")) || text.contains(&format!("<@{bot_user}|"))
}

/// Slack's three control characters escaped, so no text can ping `@channel`, mention
/// someone or forge a link: `&` → `&amp;`, `<` → `&lt;`, `>` → `&gt;`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

fn escaped_len(c: char) -> usize {
    match c {
        '&' => 5,
        '<' | '>' => 4,
        _ => 1,
    }
}

/// [`messages`], with each of `users` (Slack user ids the text names as `slack:<id>`) turned
/// into a mention (`<@id>`); nothing else of the text becomes markup.
pub fn messages_mentioning(text: &str, limit: usize, users: &[&str]) -> Vec<String> {
    let users: Vec<&str> = users
        .iter()
        .copied()
        .filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect();
    messages(text, limit)
        .into_iter()
        .map(|mut part| {
            for user in &users {
                part = mention(&part, user);
            }
            part
        })
        .collect()
}

/// `text` with each whole `slack:<user>` (not one that runs on into a longer id) as `<@user>`.
fn mention(text: &str, user: &str) -> String {
    let id = format!("slack:{user}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&id) {
        let (before, from) = rest.split_at(at);
        let after = from.get(id.len()..).unwrap_or_default();
        out.push_str(before);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            out.push_str(&id);
        } else {
            out.push_str(&format!("<@{user}>"));
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `text` escaped and split into messages of at most `limit` characters: whole lines where
/// they fit, a line longer than a message split between characters (never inside an
/// escape). Every character arrives, in order.
pub fn messages(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(8);
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_len = 0usize;
    for line in text.split_inclusive('\n') {
        let line_len: usize = line.chars().map(escaped_len).sum();
        if current_len + line_len > limit && current_len > 0 {
            out.push(std::mem::take(&mut current));
            current_len = 0;
        }
        if line_len <= limit {
            current.push_str(&escape(line));
            current_len += line_len;
            continue;
        }
        for c in line.chars() {
            let n = escaped_len(c);
            if current_len + n > limit {
                out.push(std::mem::take(&mut current));
                current_len = 0;
            }
            current.push_str(&escape(&c.to_string()));
            current_len += n;
        }
    }
    out.push(current);
    let parts: Vec<String> = out
        .into_iter()
        .map(|m| m.trim_end_matches('\n').to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    if parts.is_empty() {
        // An empty answer is still one message, so a run always shows it ended.
        vec!["(no text)".to_owned()]
    } else {
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    #[test]
    fn the_bots_mention_is_stripped_and_others_stay() {
        for (text, want) in [
            ("<@UBOT> runs list", "runs list"),
            ("<@UBOT|switchboard>   help ", "help"),
            ("hey <@UBOT> ask <@U2> about it", "hey ask <@U2> about it"),
            ("no mention", "no mention"),
            ("<@UBOT", "<@UBOT"),
            ("<@UBOT><@UBOT>", ""),
        ] {
            assert_eq!(strip_mention(text, "UBOT"), want, "{text}");
        }
        assert!(mentions("hi <@UBOT>", "UBOT"));
        assert!(mentions("hi <@UBOT|sb>", "UBOT"));
        assert!(!mentions("hi <@UBOTX>", "UBOT"));
    }

    #[test]
    fn escaping_defuses_pings_and_links() {
        assert_eq!(
            escape("<!channel> <https://evil|bank> & co"),
            "&lt;!channel&gt; &lt;https://evil|bank&gt; &amp; co"
        );
    }

    #[test]
    fn long_answers_are_split_on_lines_and_nothing_is_lost() {
        let text: String = (0..500).map(|i| format!("line {i} <&>\n")).collect();
        let parts = messages(&text, 200);
        assert!(parts.len() > 10);
        for p in &parts {
            assert!(p.chars().count() <= 200, "{}", p.len());
            assert!(!p.contains("&am\n"));
        }
        let joined = parts
            .iter()
            .map(|p| unescape(p))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(joined, text.trim_end());
        // A line longer than a message is split between characters, never inside an escape.
        let long = "&".repeat(100);
        let parts = messages(&long, 42);
        assert!(parts.iter().all(|p| p.len() <= 42 && p.len() % 5 == 0));
        assert_eq!(parts.iter().map(|p| unescape(p)).collect::<String>(), long);
        assert_eq!(messages("", 100), vec!["(no text)".to_owned()]);
    }

    #[test]
    fn only_whole_admin_ids_become_mentions() {
        let parts = messages_mentioning(
            "Ask slack:U1, slack:U12 or slack:U1X <!channel>",
            MESSAGE_LIMIT,
            &["U1", "U12"],
        );
        assert_eq!(parts, ["Ask <@U1>, <@U12> or slack:U1X &lt;!channel&gt;"]);
    }
}
