//! The bare server the HTTP benchmarks compare Switchboard with: one axum handler that answers
//! every request, on any path and method, with the same status-200 body and content type. What
//! `serve` does beyond it (authentication, the registry, the store, rendering) is the
//! difference the benchmarks report as a ratio. Same allocator, runtime and release profile as
//! the `switchboard` binary; never part of the product.
//!
//! Usage: `bare-http <listen address> <body file> <content type>`

use axum::Router;
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, body_file, content_type] = args.as_slice() else {
        return Err("usage: bare-http <listen address> <body file> <content type>".into());
    };
    let body = Bytes::from(std::fs::read(body_file)?);
    let content_type = HeaderValue::from_str(content_type)?;
    let app = Router::new().fallback(move || {
        let (body, content_type) = (body.clone(), content_type.clone());
        async move { (StatusCode::OK, [(CONTENT_TYPE, content_type)], body).into_response() }
    });
    let listener = tokio::net::TcpListener::bind(listen.as_str()).await?;
    println!("bare-http listening on {}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
