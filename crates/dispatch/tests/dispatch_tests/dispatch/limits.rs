//! Limits: the per-actor and global busy replies, and the output cap.

use super::*;

#[tokio::test]
async fn over_a_limit_the_reply_is_busy_and_nothing_starts() {
    let w = world().await;
    let mut o = Options::default();
    o.settings.max_per_actor = 1;
    o.settings.max_concurrent = 2;
    let d = dispatcher(&w, &o);
    let first = d
        .start(request(&w, "http:viewer", "http:ops", "@staller a"))
        .await
        .unwrap();
    let e = refused(&d, request(&w, "http:viewer", "http:ops", "@echo b")).await;
    assert!(
        matches!(e, LaunchError::Busy(Busy::Actor { limit: 1 })),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("busy: you already have 1 runs going"),
        "{e}"
    );
    let _second = d
        .start(request(&w, "http:fleet", "http:ops", "@staller c"))
        .await
        .unwrap();
    let e = refused(&d, request(&w, "http:coder", "http:ops", "@echo d")).await;
    assert!(
        matches!(e, LaunchError::Busy(Busy::Global { limit: 2 })),
        "{e}"
    );
    assert_eq!(
        all_runs(&w).await.len(),
        2,
        "the refused requests recorded nothing"
    );
    assert!(d.stop(first.id()));
    first.finished().await.unwrap();
    assert!(
        d.start(request(&w, "http:viewer", "http:ops", "@echo e"))
            .await
            .is_ok(),
        "the slot came back"
    );
}

#[tokio::test]
async fn output_past_the_cap_is_dropped_and_recorded_as_friction() {
    let w = world().await;
    let mut o = Options::default();
    o.chatty_caps = OutputCaps {
        event_bytes: 64,
        total_bytes: 200,
        answer_bytes: 32,
    };
    let d = dispatcher(&w, &o);
    let s = d
        .start(request(&w, "http:viewer", "http:ops", "@chatty go"))
        .await
        .unwrap();
    let id = s.id().clone();
    let r = s.finished().await.unwrap();
    assert_eq!(r.status(), RunStatus::Completed);
    assert!(r.answer().unwrap().len() <= 32);
    let events = w.store.events(&id).await.unwrap();
    assert!(
        events.len() < 50 && !events.is_empty(),
        "{} events",
        events.len()
    );
    let f = w.store.friction(&id).await.unwrap();
    assert_eq!(f.iter().filter(|f| f.kind == "output_capped").count(), 1);
}
