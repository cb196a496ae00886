//! Deliberate change (c), row by row, through `Memory::reflect` on a real SQLite store: the
//! write gate narrows and drops, never widens, and its one log line holds no fact's text.

use std::sync::{Arc, Mutex};

use authz_core::{
    Action, Actor, ActorId, ActorKind, BoxFuture, ChannelId, ChannelVisibility, RepoSlug, Resource,
    RunId, ScopeKey, Verdict, authorize, resolve_actor,
};
use memory::{
    EXTRACTION_FRICTION, ExtractorKind, Memory, MemorySettings, ModelCall, ReflectionInput,
    RunScopes, Transcript,
};
use store::{MemoryStore, NewMemory, Store, Timestamp};

struct Fixture {
    store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    Fixture {
        store: store::open(&url).await.unwrap(),
        _dir: dir,
    }
}

fn u1() -> ActorId {
    ActorId::parse("slack:U1").unwrap()
}

fn principal() -> Actor {
    let table = authz_core::GrantsTable::default();
    resolve_actor(u1(), &table)
}

/// The same person, granted `repo:write`: who may retire a shared record.
fn repo_writer() -> Actor {
    let mut p = principal();
    p.grants = p.grants.union(&authz_core::Grants::actions([
        Action::parse("repo:write").unwrap()
    ]));
    p
}

fn scopes(user: bool, channel: bool) -> RunScopes {
    RunScopes {
        user: user.then(u1),
        channel: channel.then(|| ChannelId::parse("slack:G1").unwrap()),
        repo: Some(RepoSlug::parse("acme/web").unwrap()),
    }
}

fn run_id() -> RunId {
    RunId::parse("01JRUN0000000000000000000A").unwrap()
}

/// A model that answers what it was told to.
struct Scripted(String);

impl ModelCall for Scripted {
    fn complete(&self, _run: &RunId, _prompt: String) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
}

fn rules_memory(store: &Arc<dyn Store>) -> Memory {
    let s: Arc<dyn MemoryStore> = store.clone();
    Memory::new(s, MemorySettings::default())
}

fn model_memory(store: &Arc<dyn Store>, answer: &str) -> Memory {
    let s: Arc<dyn MemoryStore> = store.clone();
    let settings = MemorySettings {
        extractor: ExtractorKind::Model,
        ..MemorySettings::default()
    };
    Memory::new(s, settings).with_model(Arc::new(Scripted(answer.to_owned())))
}

async fn reflect(
    memory: &Memory,
    run: &RunScopes,
    origin: ChannelVisibility,
    request: &str,
) -> memory::Reflection {
    reflect_as(memory, run, origin, request, &principal()).await
}

async fn reflect_as(
    memory: &Memory,
    run: &RunScopes,
    origin: ChannelVisibility,
    request: &str,
    principal: &Actor,
) -> memory::Reflection {
    let id = run_id();
    let transcript = Transcript {
        request: request.to_owned(),
        answer: Some("ok".to_owned()),
    };
    memory
        .reflect(&ReflectionInput {
            run_id: &id,
            scopes: run,
            origin,
            principal,
            transcript: &transcript,
        })
        .await
        .unwrap()
}

/// Every live record, as `(scope key, text)`, newest first.
async fn written(store: &Arc<dyn Store>) -> Vec<(String, String)> {
    let keys = scopes(true, true).keys();
    store
        .memory_in_scopes(&keys, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.scope.key(), m.text))
        .collect()
}

/// An org record and a model's correction of it (it `supersedes` it, for the org),
/// reflected from a run whose origin is `origin`.
struct Corrected {
    f: Fixture,
    org: store::MemoryRecord,
    memory: Memory,
    reflection: memory::Reflection,
    /// Every record the run's scopes read afterwards.
    got: Vec<store::MemoryRecord>,
}

async fn correct_the_org_record(origin: ChannelVisibility) -> Corrected {
    let f = sqlite().await;
    let org = remembered(&f.store, ScopeKey::Org, "deploys freeze on Fridays").await;
    let answer = format!(
        r#"{{"facts": [{{"text": "deploys freeze on Thursdays", "audience": "org", "supersedes": "{}"}}], "summary": null}}"#,
        org.id
    );
    let memory = model_memory(&f.store, &answer);
    let reflection = reflect(&memory, &scopes(true, true), origin, "x").await;
    let got = f
        .store
        .memory_in_scopes(&scopes(true, true).keys(), 10)
        .await
        .unwrap();
    Corrected {
        f,
        org,
        memory,
        reflection,
        got,
    }
}

/// A record already remembered before the reflection under test.
async fn remembered(store: &Arc<dyn Store>, scope: ScopeKey, text: &str) -> store::MemoryRecord {
    store
        .add_memory(NewMemory {
            scope,
            text: text.into(),
            supersedes: None,
            source_run: None,
            created_at: Timestamp::from_micros(1),
        })
        .await
        .unwrap()
}

fn pair(scope: &str, text: &str) -> (String, String) {
    (scope.to_owned(), text.to_owned())
}

const ORG_FACT_AND_SUMMARY: &str = r#"{"facts": [{"text": "deploys freeze on Fridays", "audience": "org"}],
  "summary": {"text": "talked about deploys", "audience": "org"}}"#;

#[tokio::test]
async fn a_dm_origin_org_fact_is_written_to_the_user_scope_and_its_summary_follows_it() {
    let f = sqlite().await;
    let m = model_memory(&f.store, ORG_FACT_AND_SUMMARY);
    let r = reflect(&m, &scopes(true, true), ChannelVisibility::Dm, "x").await;
    let mut got = written(&f.store).await;
    got.sort();
    assert_eq!(
        got,
        vec![
            pair("user:slack:U1", "deploys freeze on Fridays"),
            pair("user:slack:U1", "talked about deploys"),
        ]
    );
    assert_eq!(r.report.to_string(), "2× org → user (origin-visibility)");
}

#[tokio::test]
async fn a_private_origin_org_fact_narrows_to_the_channel_and_without_one_to_the_user() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Private,
        "remember: a",
    )
    .await;
    reflect(
        &m,
        &scopes(true, false),
        ChannelVisibility::Private,
        "remember: b",
    )
    .await;
    let got = written(&f.store).await;
    assert_eq!(
        got,
        vec![pair("user:slack:U1", "b"), pair("channel:slack:G1", "a")]
    );
}

#[tokio::test]
async fn an_unstamped_or_unknown_run_never_writes_org() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    let r = reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Unknown,
        "remember: a",
    )
    .await;
    assert_eq!(written(&f.store).await, vec![pair("channel:slack:G1", "a")]);
    assert_eq!(r.report.to_string(), "1× org → channel (origin-visibility)");
}

#[tokio::test]
async fn a_public_or_machine_origin_keeps_the_routing_and_logs_nothing() {
    for origin in [ChannelVisibility::Public, ChannelVisibility::Machine] {
        let f = sqlite().await;
        let m = rules_memory(&f.store);
        let r = reflect(&m, &scopes(true, true), origin, "remember: deploys freeze").await;
        assert_eq!(written(&f.store).await, vec![pair("org", "deploys freeze")]);
        assert!(!r.report.is_notable(), "{origin}: {:?}", r.report);
    }
}

#[tokio::test]
async fn user_channel_and_repo_facts_are_never_widened() {
    for origin in ChannelVisibility::ALL {
        let f = sqlite().await;
        let m = rules_memory(&f.store);
        let said = "note for me: u\nremember for this channel: c\nremember for this repo: r";
        let r = reflect(&m, &scopes(true, true), origin, said).await;
        let mut got = written(&f.store).await;
        got.extend(
            f.store
                .memory_in_scopes(&[ScopeKey::Repo(RepoSlug::parse("acme/web").unwrap())], 10)
                .await
                .unwrap()
                .into_iter()
                .map(|m| (m.scope.key(), m.text)),
        );
        got.sort();
        got.dedup();
        assert_eq!(
            got,
            vec![
                pair("channel:slack:G1", "c"),
                pair("repo:acme/web", "r"),
                pair("user:slack:U1", "u")
            ],
            "{origin}"
        );
        assert!(!r.report.is_notable(), "{origin}");
    }
}

#[tokio::test]
async fn a_correction_of_an_org_record_from_a_dm_cannot_follow_it_into_org() {
    let Corrected {
        org,
        reflection: r,
        got,
        ..
    } = correct_the_org_record(ChannelVisibility::Dm).await;
    let correction = got.iter().find(|m| m.text.contains("Thursdays")).unwrap();
    assert_eq!(correction.scope, ScopeKey::User(u1()));
    assert_eq!(
        correction.supersedes, None,
        "a narrowed correction drops its supersedes"
    );
    assert!(got.iter().any(|m| m.id == org.id), "the org record stands");
    assert_eq!(r.report.to_string(), "1× org → user (origin-visibility)");
}

#[tokio::test]
async fn a_supersedes_is_kept_only_for_a_live_record_of_the_same_scope() {
    let f = sqlite().await;
    let channel = ScopeKey::Channel(ChannelId::parse("slack:G1").unwrap());
    let same = remembered(&f.store, channel.clone(), "standup at 10").await;
    let other = remembered(&f.store, ScopeKey::User(u1()), "mine").await;
    let gone = remembered(&f.store, channel, "old").await;
    f.store
        .forget_memory(&gone.id, Timestamp::from_micros(2))
        .await
        .unwrap();
    let answer = format!(
        r#"{{"facts": [
            {{"text": "standup at 11", "audience": "channel", "supersedes": "{}"}},
            {{"text": "hides another scope?", "audience": "channel", "supersedes": "{}"}},
            {{"text": "revives?", "audience": "channel", "supersedes": "{}"}}
        ], "summary": null}}"#,
        same.id, other.id, gone.id
    );
    let m = model_memory(&f.store, &answer);
    let r = reflect_as(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "x",
        &repo_writer(),
    )
    .await;
    let texts: Vec<String> = written(&f.store)
        .await
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert!(
        !texts.contains(&"standup at 10".to_owned()),
        "the same-scope target is superseded"
    );
    assert!(
        texts.contains(&"mine".to_owned()),
        "a record of another scope is never hidden"
    );
    assert_eq!(
        r.report.to_string(),
        "1× supersedes dropped (not-live), 1× supersedes dropped (other-scope)"
    );
}

#[tokio::test]
async fn another_denial_is_dropped_with_its_reason_never_rerouted() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    // The run's user scope is someone else's: the principal may not write it.
    let run = RunScopes {
        user: Some(ActorId::parse("slack:U2").unwrap()),
        ..scopes(true, true)
    };
    let r = reflect(&m, &run, ChannelVisibility::Public, "note for me: x").await;
    assert!(written(&f.store).await.is_empty());
    assert!(
        f.store
            .memory_in_scopes(&run.keys(), 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing written anywhere"
    );
    assert_eq!(r.report.to_string(), "1× dropped (not-self)");
}

#[tokio::test]
async fn with_no_narrower_scope_the_candidate_is_dropped_and_said_so() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    let r = reflect(
        &m,
        &scopes(false, false),
        ChannelVisibility::Dm,
        "remember: x",
    )
    .await;
    assert!(
        f.store
            .memory_in_scopes(&[ScopeKey::Org], 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(r.report.to_string(), "1× dropped (no-narrower-scope)");
}

#[tokio::test]
async fn a_malformed_model_answer_writes_nothing_and_is_one_friction_entry() {
    let f = sqlite().await;
    let half_good = r#"{"facts": [{"text": "kept?", "audience": "org"}, {"text": "", "audience": "org"}], "summary": null}"#;
    for answer in ["Sure! Deploys freeze on Fridays.", half_good] {
        let m = model_memory(&f.store, answer);
        let r = reflect(&m, &scopes(true, true), ChannelVisibility::Public, "x").await;
        let (kind, detail) = r.friction.unwrap();
        assert_eq!(kind, EXTRACTION_FRICTION);
        assert!(detail.contains("answer was"), "{detail}");
        assert_eq!(r.report.written, 0);
    }
    assert!(written(&f.store).await.is_empty(), "never a partial write");
}

/// `forget that …` of a shared record asks what `memory forget <id>` asks, `repo:write` on its
/// scope, on top of the origin's write: before, any member of a public channel could forget
/// any org record this way (this test asserted that a plain member's forget counted).
#[tokio::test]
async fn forget_that_forgets_a_shared_record_only_with_repo_write_where_the_origin_may_write() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "remember: the office is in Leeds",
    )
    .await;
    let r = reflect_as(
        &m,
        &scopes(true, true),
        ChannelVisibility::Dm,
        "forget that the office is in Leeds.",
        &repo_writer(),
    )
    .await;
    assert_eq!(
        written(&f.store).await.len(),
        1,
        "a DM cannot forget an org fact"
    );
    assert_eq!(
        r.report.to_string(),
        "1× forget dropped (origin-visibility)"
    );
    let r = reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "forget that the office is in Leeds",
    )
    .await;
    assert_eq!(
        written(&f.store).await.len(),
        1,
        "a member without repo:write cannot forget an org fact"
    );
    assert_eq!(r.report.to_string(), "1× forget dropped (missing-grant)");
    let r = reflect_as(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "Forget that THE OFFICE IS IN LEEDS",
        &repo_writer(),
    )
    .await;
    assert_eq!(r.report.forgotten, 1);
    assert!(written(&f.store).await.is_empty());
    let r = reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "forget that nothing",
    )
    .await;
    assert_eq!(r.report.to_string(), "1× forget dropped (no-match)");
}

/// A person forgets their own record with no more than the write (`is_self`); a channel's
/// record needs `repo:write` like the org's.
#[tokio::test]
async fn forget_that_of_ones_own_record_needs_no_repo_write_and_a_channels_does() {
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    let channel = ScopeKey::Channel(ChannelId::parse("slack:G1").unwrap());
    remembered(&f.store, ScopeKey::User(u1()), "i like tea").await;
    remembered(&f.store, channel, "standup at 10").await;
    let r = reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "forget that i like tea\nforget that standup at 10",
    )
    .await;
    assert_eq!(r.report.forgotten, 1);
    assert_eq!(r.report.to_string(), "1× forget dropped (missing-grant)");
    assert_eq!(
        written(&f.store).await,
        vec![pair("channel:slack:G1", "standup at 10")]
    );
}

/// A model's `supersedes` of a shared record asks `repo:write` too; without it the correction
/// is still written, and the record it meant to retire stands.
#[tokio::test]
async fn a_supersedes_of_a_shared_record_without_repo_write_keeps_the_fact_and_the_record() {
    let Corrected {
        f,
        org,
        memory: m,
        reflection: r,
        got,
    } = correct_the_org_record(ChannelVisibility::Public).await;
    let correction = got.iter().find(|m| m.text.contains("Thursdays")).unwrap();
    assert_eq!(correction.scope, ScopeKey::Org);
    assert_eq!(correction.supersedes, None);
    assert!(got.iter().any(|m| m.id == org.id), "the org record stands");
    assert_eq!(
        r.report.to_string(),
        "1× supersedes dropped (missing-grant)"
    );
    // With repo:write, the same answer retires it.
    let r = reflect_as(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "x",
        &repo_writer(),
    )
    .await;
    assert!(!r.report.is_notable(), "{}", r.report);
    let got = written(&f.store).await;
    assert!(
        !got.contains(&pair("org", "deploys freeze on Fridays")),
        "{got:?}"
    );
}

/// A model extractor that proposes, for the whole org, every line of its prompt holding the
/// marker: a model that launders whatever it is shown.
struct Launderer(&'static str);

impl ModelCall for Launderer {
    fn complete(&self, _run: &RunId, prompt: String) -> BoxFuture<'_, Result<String, String>> {
        let facts: Vec<serde_json::Value> = prompt
            .lines()
            .filter(|l| l.contains(self.0))
            .map(|l| serde_json::json!({"text": l.trim(), "audience": "org"}))
            .collect();
        Box::pin(
            async move { Ok(serde_json::json!({"facts": facts, "summary": null}).to_string()) },
        )
    }
}

/// A fact said in a DM (kept in its person's scope) is in the context block of that person's
/// next run, in a public channel, and so can be in the agent's answer there. The model
/// extractor is never shown the answer (nor a person's records outside a DM), so it cannot
/// propose the fact for the org.
#[tokio::test]
async fn a_dm_born_fact_never_comes_back_as_an_org_fact_through_the_model_extractor() {
    let f = sqlite().await;
    let marker = "the-dm-secret-7f3a";
    reflect(
        &rules_memory(&f.store),
        &scopes(true, true),
        ChannelVisibility::Dm,
        &format!("remember: {marker} is the launch date"),
    )
    .await;
    assert_eq!(
        written(&f.store).await,
        vec![pair(
            "user:slack:U1",
            &format!("{marker} is the launch date")
        )],
        "a DM's org fact is kept for its person"
    );
    let s: Arc<dyn MemoryStore> = f.store.clone();
    let settings = MemorySettings {
        extractor: ExtractorKind::Model,
        ..MemorySettings::default()
    };
    let m = Memory::new(s, settings).with_model(Arc::new(Launderer(marker)));
    let id = run_id();
    let transcript = Transcript {
        request: "when do we launch?".to_owned(),
        answer: Some(format!("You told me {marker} is the launch date.")),
    };
    m.reflect(&ReflectionInput {
        run_id: &id,
        scopes: &scopes(true, true),
        origin: ChannelVisibility::Public,
        principal: &principal(),
        transcript: &transcript,
    })
    .await
    .unwrap();
    let org = f
        .store
        .memory_in_scopes(&[ScopeKey::Org], 10)
        .await
        .unwrap();
    assert!(org.is_empty(), "laundered into org: {org:?}");
}

/// The spy sees every decision: the context block asks none, reflection asks with the
/// reflection actor and the memory scope. A call of `authorize` around the spy (the seam)
/// is what `cargo xtask tidy` refuses in the memory crate, so the spy sees them all.
#[tokio::test]
async fn the_context_block_never_calls_authorize_and_reflection_does() {
    let f = sqlite().await;
    let seen: Arc<Mutex<Vec<(Actor, Resource)>>> = Arc::default();
    let spy = {
        let seen = seen.clone();
        move |a: &Actor, action: &Action, r: &Resource| -> Verdict {
            seen.lock().unwrap().push((a.clone(), r.clone()));
            authorize(a, action, r)
        }
    };
    let s: Arc<dyn MemoryStore> = f.store.clone();
    let m = Memory::new(s, MemorySettings::default()).with_decide(Arc::new(spy));
    let run = scopes(true, true);
    reflect(
        &m,
        &run,
        ChannelVisibility::Public,
        "remember: a\nnote for me: b",
    )
    .await;
    let block = m.context_block(&run).await.unwrap();
    assert_eq!(block.records().len(), 2);
    let calls = seen.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        2,
        "two writes, two decisions; the block read asked none"
    );
    let (actor, resource) = &calls[0];
    assert_eq!(actor.id, u1());
    assert!(
        actor
            .grants
            .channels
            .contains(&ChannelId::parse("slack:G1").unwrap()),
        "the reflection actor holds the run's channel"
    );
    assert_eq!(
        resource,
        &Resource::MemoryScope {
            scope: ScopeKey::Org,
            origin_visibility: ChannelVisibility::Public
        }
    );
    seen.lock().unwrap().clear();
    for _ in 0..3 {
        m.context_block(&run).await.unwrap();
    }
    assert!(seen.lock().unwrap().is_empty());
}

/// The one `[memory]` line: counts and reason tokens, never a fact's text.
#[tokio::test]
async fn the_log_line_holds_counts_and_tokens_never_text() {
    let buf = test_support::log::CapturedLog::default();
    let _guard = buf.install();
    let f = sqlite().await;
    let m = rules_memory(&f.store);
    reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Dm,
        "remember: the-secret-plan\nremember: other-secret",
    )
    .await;
    reflect(
        &m,
        &scopes(true, true),
        ChannelVisibility::Public,
        "remember: public-fact",
    )
    .await;
    let out = buf.text();
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("[memory]")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(
        lines[0].contains("2× org → user (origin-visibility)"),
        "{out}"
    );
    assert!(lines[0].contains(run_id().as_str()));
    for secret in ["the-secret-plan", "other-secret", "public-fact"] {
        assert!(!out.contains(secret), "{secret} reached the log: {out}");
    }
}

/// A principal built like the surfaces build one: its kind matches its id.
#[test]
fn the_test_principal_is_consistent() {
    let p = principal();
    assert_eq!(p.kind, ActorKind::User);
    assert!(p.is_consistent());
    assert!(
        p.grants.actions.holds(&memory::memory_write()),
        "the Slack baseline writes memory"
    );
}
