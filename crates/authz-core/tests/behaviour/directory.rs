//! The static channel directory: what an id alone establishes.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use authz_core::{
    ChannelDirectory, ChannelId, ChannelVisibility as V, Membership, StaticChannelDirectory,
};

use crate::fixtures::id;

/// The static directory answers at once; poll its future a single time, no runtime needed.
fn now<T>(f: impl Future<Output = T>) -> T {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the static directory never waits"),
    }
}

#[test]
fn the_static_id_mapping() {
    let cases = [
        ("http:ops", V::Machine),
        ("mcp:ci", V::Machine),
        ("slack:D024", V::Dm),
        ("slack:G024", V::Private),
        ("slack:C024", V::Unknown),
        ("cli:local", V::Machine),
        ("schedule:self-improvement", V::Machine),
        ("access:svc:deploy", V::Machine),
        ("access:alice", V::Dm),
        ("teams:x", V::Unknown),
        ("slack:X1", V::Unknown),
    ];
    let dir = StaticChannelDirectory;
    for (raw, want) in cases {
        let ch = ChannelId::parse(raw).unwrap();
        assert_eq!(now(dir.info(&ch)), want, "{raw}");
        assert_eq!(authz_core::static_visibility(&ch), want, "{raw}");
    }
}

#[test]
fn the_static_directory_knows_no_members() {
    let dir: std::sync::Arc<dyn ChannelDirectory> = std::sync::Arc::new(StaticChannelDirectory);
    let ch = ChannelId::parse("slack:G1").unwrap();
    assert_eq!(
        now(dir.is_member(&id("slack:U1"), &ch)),
        Membership::Unknown
    );
}
