//! Standard output for every command. A reader that goes away early (`… --json | head`) ends
//! the command quietly with status 0, as it would for `grep`; any other failure to write is
//! an error naming standard output. Never a panic.

use std::io::Write;

/// Writes `text` to standard output and flushes it.
pub fn write(text: &str) {
    write_bytes(text.as_bytes());
}

/// Writes `bytes` to standard output and flushes it.
pub fn write_bytes(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_all(bytes).and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// A failure, as the command line says it: with `--json`, `{"error": …, "code": …}`
/// pretty-printed on standard output (the exit status says the rest); else the text on
/// standard error.
pub fn failure(json: bool, code: &str, text: &str) {
    if json {
        let value = serde_json::json!({"error": text, "code": code});
        write(&format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        ));
    } else {
        eprintln!("{text}");
    }
}

/// `println!` through [`write`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(&format!($($arg)*))
    };
}
