//! `memory list|forget`.

use super::*;

on_both!(memory_list_and_forget);

async fn memory_list_and_forget(w: World) {
    let s = &w.store;
    let add = |scope: authz_core::ScopeKey, text: &str| NewMemory {
        scope,
        text: text.into(),
        supersedes: None,
        source_run: None,
        created_at: Timestamp::from_micros(NOW),
    };
    let mine = s
        .add_memory(add(
            authz_core::ScopeKey::User("slack:UPLAIN".parse().unwrap()),
            "prefers terse answers",
        ))
        .await
        .unwrap();
    let org = s
        .add_memory(add(authz_core::ScopeKey::Org, "standup is at 10"))
        .await
        .unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Channel("slack:C1".parse().unwrap()),
        "deploys on friday",
    ))
    .await
    .unwrap();
    let plain = w.in_channel("slack:UPLAIN", "slack:C1");
    let listed = w.say(&plain, "memory list").await;
    assert_eq!(
        listed.data["records"].as_array().unwrap().len(),
        3,
        "{}",
        listed.text
    );
    let org_only = w.say(&plain, "memory list --scope org").await;
    assert_eq!(org_only.data["records"].as_array().unwrap().len(), 1);
    // A shared record needs repo:write: refused as not_found, identical to a missing id.
    let denied = w.say(&plain, &format!("memory forget {}", org.id)).await;
    assert_eq!(
        denied,
        w.say(&plain, "memory forget 00000000000000NOSUCHRECORD")
            .await
    );
    assert_eq!(denied.text, "memory record not found");
    assert_eq!(
        w.say(&plain, &format!("memory forget {}", mine.id))
            .await
            .kind,
        ReplyKind::Ok,
        "own user scope"
    );
    assert_eq!(
        w.say(
            &w.caller("slack:UREPO"),
            &format!("memory forget {}", org.id)
        )
        .await
        .kind,
        ReplyKind::Ok
    );
    assert_eq!(
        w.say(&plain, &format!("memory forget {}", mine.id))
            .await
            .text,
        "memory record not found",
        "already forgotten"
    );
    assert_eq!(
        w.say(&plain, "memory list --scope team").await.kind,
        ReplyKind::Usage
    );
    // A repo's scope is listed only for a repo the caller may use: a restricted one's only
    // to those it is granted to.
    let vault = "acme/vault".parse().unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Repo(vault),
        "the vault key rotates monthly",
    ))
    .await
    .unwrap();
    s.add_memory(add(
        authz_core::ScopeKey::Repo("acme/web".parse().unwrap()),
        "web tests need docker",
    ))
    .await
    .unwrap();
    refused(&w, &plain, "memory list --repo acme/vault --scope repo").await;
    let admin = w
        .say(
            &w.caller("slack:UADMIN"),
            "memory list --repo acme/vault --scope repo",
        )
        .await;
    assert_eq!(
        admin.data["records"][0]["text"], "the vault key rotates monthly",
        "{}",
        admin.text
    );
    let web = w
        .say(&plain, "memory list --repo acme/web --scope repo")
        .await;
    assert_eq!(
        web.data["records"][0]["text"], "web tests need docker",
        "{}",
        web.text
    );
    assert_eq!(
        w.say(&w.caller("http:dispatch"), "memory forget x")
            .await
            .kind,
        ReplyKind::NotFound
    );
}
