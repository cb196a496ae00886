//! What the modules share: a built app served on a loopback port.

use std::net::SocketAddr;

/// A running `server::serve`: its address, its start-up summary, and how to stop it.
pub struct Serving {
    pub addr: SocketAddr,
    pub summary: String,
    pub stop: tokio::sync::oneshot::Sender<()>,
    pub handle: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Serves `app` on 127.0.0.1 (a free port) until `stop` is sent.
pub async fn serve(app: server::App) -> Serving {
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::spawn(server::serve(
        app,
        Some("127.0.0.1:0".parse().unwrap()),
        async move {
            let _ = stop_rx.await;
        },
        move |addr, app| {
            let _ = addr_tx.send((addr, server::summary(app, addr).to_string()));
        },
    ));
    let (addr, summary) = addr_rx.await.unwrap();
    Serving {
        addr,
        summary,
        stop,
        handle,
    }
}
