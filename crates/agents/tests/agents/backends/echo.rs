//! The `echo` back end: a deterministic answer, failing and stalling, memory counted but not shown.

use super::*;

#[tokio::test]
async fn echo_says_how_many_records_it_was_given_never_their_text() {
    let echo = EchoBackend::new(EchoSettings::default());
    let (o, items) = run(&echo, remembering("hi"), CancellationToken::new()).await;
    let answer = o.answer().unwrap();
    assert!(
        answer.contains("memory: 2 records (org 1, user 1)"),
        "{answer}"
    );
    let all = format!("{answer}\n{}", events(&items).join("\n"));
    assert!(!all.contains("Fridays") && !all.contains("tea"), "{all}");
    let (o, _) = run(&echo, job("hi"), CancellationToken::new()).await;
    assert!(o.answer().unwrap().contains("memory: none"));
}

#[tokio::test]
async fn echo_answers_deterministically_and_says_what_it_is() {
    let echo = EchoBackend::new(EchoSettings::default());
    let (a, items) = run(&echo, job("summarise the week"), CancellationToken::new()).await;
    let (b, _) = run(&echo, job("summarise the week"), CancellationToken::new()).await;
    assert_eq!(a, b);
    let answer = a.answer().unwrap();
    assert!(answer.contains("runs no model"), "{answer}");
    assert!(answer.contains("request: summarise the week"));
    assert_eq!(events(&items).len(), 3);
}

#[tokio::test]
async fn echo_can_fail_and_stall() {
    let fail = EchoBackend::new(EchoSettings {
        behaviour: EchoBehaviour::Fail,
        ..Default::default()
    });
    let (o, _) = run(&fail, job("x"), CancellationToken::new()).await;
    assert!(o.error().unwrap().contains("told to fail"));
    let stall = EchoBackend::new(EchoSettings {
        behaviour: EchoBehaviour::Stall,
        ..Default::default()
    });
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c2.cancel();
    });
    let (o, items) = run(&stall, job("x"), cancel).await;
    assert!(o.is_cancelled());
    assert_eq!(events(&items).len(), 2, "it said it was stalling");
}
