//! Log lines kept in memory, for tests that read what was logged.

use std::sync::Mutex;

use tracing_subscriber::fmt::MakeWriter;

/// Log lines kept in memory: a writer for a `tracing_subscriber` layer (the server's
/// `telemetry::subscriber` takes one), or a plain human-format subscriber on this thread
/// ([`CapturedLog::install`]).
#[derive(Clone, Default)]
pub struct CapturedLog(std::sync::Arc<Mutex<Vec<u8>>>);

impl CapturedLog {
    /// Everything written so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Makes a human-format subscriber (INFO and above, no colour) writing here this thread's default,
    /// until the guard drops.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
