//! The proxy's side toward a host the broker allowed: one lookup, each address checked, the
//! connection made to a checked address; then bytes relayed both ways until either side ends.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixStream};

use super::head::Head;
use crate::tools::net::checked;

/// What closes a relay: it moves on when the run's taint rises after the connection was
/// decided (or its sender is gone).
pub type Closer = tokio::sync::watch::Receiver<u64>;

/// Relays both ways until either side ends or `closed` moves on.
async fn relay(stream: &mut UnixStream, upstream: &mut TcpStream, mut closed: Closer) {
    tokio::select! {
        _ = tokio::io::copy_bidirectional_with_sizes(
            stream,
            upstream,
            super::RELAY_BUFFER,
            super::RELAY_BUFFER,
        ) => {}
        _ = closed.changed() => {}
    }
}

/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to `host:port` at an address that passed the check (the name resolved once:
/// no second lookup can lead elsewhere).
pub async fn connect(host: &str, port: u16, literal: &[String]) -> Result<TcpStream, String> {
    let (_, addresses) = checked(host, port, literal).await?;
    let mut last = String::from("no address");
    for address in addresses {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(tcp)) => return Ok(tcp),
            Ok(Err(e)) => last = format!("{address}: {e}"),
            Err(_) => last = format!("{address}: timed out"),
        }
    }
    Err(format!("{host}:{port} could not be reached ({last})"))
}

/// A CONNECT tunnel: the program is told it is open, then bytes go both ways as they are
/// (what the program sent after its head first).
pub async fn tunnel(
    stream: &mut UnixStream,
    mut upstream: TcpStream,
    rest: Vec<u8>,
    closed: Closer,
) {
    if stream
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
        return;
    }
    relay(stream, &mut upstream, closed).await;
}

/// A plain HTTP request to `authority`: its head rewritten to the origin form, with the
/// authority the broker decided as its `Host` (never the program's own), its hop-by-hop
/// fields dropped and `Connection: close` (one decided request per connection); then the
/// rest relayed as it is.
pub async fn plain(
    stream: &mut UnixStream,
    mut upstream: TcpStream,
    head: &Head,
    authority: &str,
    path: &str,
    rest: Vec<u8>,
    closed: Closer,
) {
    let mut out = format!("{} {path} HTTP/1.1\r\nHost: {authority}\r\n", head.method);
    for (name, value) in head.end_to_end_fields() {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(out.as_bytes()).await.is_err()
        || (!rest.is_empty() && upstream.write_all(&rest).await.is_err())
    {
        return;
    }
    relay(stream, &mut upstream, closed).await;
}
