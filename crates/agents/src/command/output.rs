//! What a command agent prints: each stdout line read up to its cap, and the answer's block
//! kept as it streams.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Reads one line of at most `max` bytes (the rest of a longer line is read and dropped).
/// `None` at end of input.
pub(super) async fn read_capped_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut saw_any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        saw_any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (buf.get(..i).unwrap_or(buf), Some(i + 1)),
            None => (buf, None),
        };
        let room = max.saturating_sub(line.len());
        line.extend(chunk.iter().take(room));
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            break;
        }
    }
    Ok(saw_any.then(|| {
        String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_owned()
    }))
}

/// The last block of output (the lines after the last blank line that is followed by more
/// output), kept as it streams in at most `max` bytes: a later block replaces it, and a block
/// longer than `max` keeps its first `max` bytes (the answer is cut there anyway).
pub(super) struct AnswerBlock {
    max: usize,
    /// The block being read; empty lines after it are not part of it yet.
    lines: Vec<String>,
    bytes: usize,
    /// Blank lines seen since the block's last line.
    blank_after: bool,
    /// The whole output is the answer (Claude Code's text): a blank line starts no new block.
    whole: bool,
}

impl AnswerBlock {
    pub(super) fn new(max: usize) -> AnswerBlock {
        AnswerBlock {
            max,
            lines: Vec::new(),
            bytes: 0,
            blank_after: false,
            whole: false,
        }
    }

    pub(super) fn whole(max: usize) -> AnswerBlock {
        AnswerBlock {
            whole: true,
            ..AnswerBlock::new(max)
        }
    }

    pub(super) fn push(&mut self, line: String) {
        if self.whole {
            if self.bytes < self.max && !(self.lines.is_empty() && line.trim().is_empty()) {
                self.bytes += line.len() + 1;
                self.lines.push(line);
            }
            return;
        }
        if line.trim().is_empty() {
            self.blank_after = !self.lines.is_empty();
            return;
        }
        if self.blank_after {
            self.lines.clear();
            self.bytes = 0;
            self.blank_after = false;
        }
        if self.bytes >= self.max {
            return;
        }
        self.bytes += line.len() + 1;
        self.lines.push(line);
    }

    pub(super) fn text(&self) -> String {
        self.lines.join("\n").trim_end().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_block(lines: &[String]) -> String {
        let mut block = AnswerBlock::new(usize::MAX);
        for line in lines {
            block.push(line.clone());
        }
        block.text()
    }

    #[test]
    fn the_answer_is_the_last_block() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(last_block(&l(&["a", "b"])), "a\nb");
        assert_eq!(
            last_block(&l(&["step", "", "answer 1", "answer 2", ""])),
            "answer 1\nanswer 2"
        );
        assert_eq!(last_block(&l(&[])), "");
    }

    /// However much a program prints, the answer's block holds at most its bound (plus one
    /// line), and a later block replaces it.
    #[test]
    fn the_answer_block_is_bounded_as_it_streams() {
        let mut block = AnswerBlock::new(1000);
        for i in 0..100_000 {
            block.push(format!("line {i} of a long answer"));
        }
        assert!(block.bytes <= 1000 + 30, "{}", block.bytes);
        assert!(block.text().starts_with("line 0 "));
        block.push(String::new());
        block.push("the answer".into());
        assert_eq!(block.text(), "the answer");
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_rest_dropped() {
        let data = format!("{}\nshort\n", "x".repeat(100));
        let mut r = BufReader::with_capacity(8, data.as_bytes());
        assert_eq!(
            read_capped_line(&mut r, 10).await.unwrap().unwrap(),
            "x".repeat(10)
        );
        assert_eq!(
            read_capped_line(&mut r, 10).await.unwrap().unwrap(),
            "short"
        );
        assert_eq!(read_capped_line(&mut r, 10).await.unwrap(), None);
    }

    /// Claude Code's answer is all it printed, blank lines and all.
    #[test]
    fn a_whole_answer_keeps_every_paragraph() {
        let mut block = AnswerBlock::whole(1000);
        for line in ["", "first paragraph", "", "second paragraph", ""] {
            block.push(line.to_owned());
        }
        assert_eq!(block.text(), "first paragraph\n\nsecond paragraph");
    }
}
