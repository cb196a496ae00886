//! The static channel directory (what an id alone establishes), and the directory chosen per
//! namespace.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use authz_core::{
    ActorId, BoxFuture, ChannelDirectory, ChannelId, ChannelVisibility as V, DirectoryByNamespace,
    Membership, Namespace, StaticChannelDirectory,
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

/// A directory that says the same of every channel and member, to see which one answered.
struct Says(V, Membership, &'static str);

impl ChannelDirectory for Says {
    fn info<'a>(&'a self, _: &'a ChannelId) -> BoxFuture<'a, V> {
        Box::pin(std::future::ready(self.0))
    }

    fn is_member<'a>(&'a self, _: &'a ActorId, _: &'a ChannelId) -> BoxFuture<'a, Membership> {
        Box::pin(std::future::ready(self.1))
    }

    fn memberships<'a>(&'a self, _: &'a ActorId) -> BoxFuture<'a, BTreeSet<ChannelId>> {
        let one = ChannelId::parse(self.2).unwrap();
        Box::pin(std::future::ready(BTreeSet::from([one])))
    }
}

/// Each namespace's channels and actors are answered by its own directory; any other by the
/// id alone (never by another surface's directory).
#[test]
fn the_directory_is_chosen_per_namespace() {
    let dir = DirectoryByNamespace::new()
        .with(
            Namespace::Slack,
            Arc::new(Says(V::Public, Membership::Yes, "slack:C1")),
        )
        .with(
            Namespace::Mcp,
            Arc::new(Says(V::Private, Membership::No, "mcp:m1")),
        );
    let ch = |raw: &str| ChannelId::parse(raw).unwrap();
    assert_eq!(now(dir.info(&ch("slack:C024"))), V::Public);
    assert_eq!(now(dir.info(&ch("mcp:ci"))), V::Private);
    assert_eq!(now(dir.info(&ch("http:ops"))), V::Machine, "the id alone");
    assert_eq!(now(dir.info(&ch("teams:x"))), V::Unknown, "the id alone");
    let alice = id("slack:U1");
    assert_eq!(
        now(dir.is_member(&alice, &ch("slack:C024"))),
        Membership::Yes
    );
    assert_eq!(now(dir.is_member(&alice, &ch("mcp:ci"))), Membership::No);
    assert_eq!(
        now(dir.is_member(&alice, &ch("http:ops"))),
        Membership::Unknown
    );
    assert_eq!(
        now(dir.memberships(&alice)),
        BTreeSet::from([ch("slack:C1")])
    );
    assert!(now(dir.memberships(&id("http:ops"))).is_empty());

    // The longest prefix wins: a service token's channel is not a browser session's.
    let access = DirectoryByNamespace::new()
        .with(
            Namespace::Access,
            Arc::new(Says(V::Dm, Membership::Yes, "access:a")),
        )
        .with(
            Namespace::AccessSvc,
            Arc::new(Says(V::Private, Membership::No, "access:svc:b")),
        );
    assert_eq!(now(access.info(&ch("access:alice"))), V::Dm);
    assert_eq!(now(access.info(&ch("access:svc:deploy"))), V::Private);
    // A namespace with no directory of its own gets what the id establishes, even when a
    // shorter prefix has one.
    let browsers_only = DirectoryByNamespace::new().with(
        Namespace::Access,
        Arc::new(Says(V::Dm, Membership::Yes, "access:a")),
    );
    assert_eq!(
        now(browsers_only.info(&ch("access:svc:deploy"))),
        V::Machine
    );
    assert_eq!(
        now(browsers_only.is_member(&alice, &ch("access:svc:deploy"))),
        Membership::Unknown
    );
}
