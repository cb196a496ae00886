//! What only the databases can show: old rows migrated forward, corrupt rows, a file that is
//! not SQLite, the query plans.

use authz_core::{ChannelVisibility as V, Predicate, Surface};
use store::{ListRuns, PostgresStore, SqliteStore, StatusFilter, StoreError};

use crate::support::*;

#[tokio::test]
async fn sqlite_old_rows_read_unknown_after_the_stamp_migration() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let s = SqliteStore::connect(&sqlite_spec(&url)).await.unwrap();
    s.migrate_first(1).await.unwrap();
    sqlx::query("INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at) VALUES ('old1', 'slack', 'slack:C1', 'slack:U1', 'echo', 'completed', 'hi', 5)")
        .execute(s.pool())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    let run = store::RunStore::get_run(&s, &"old1".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.channel_visibility, V::Unknown);
    let public = ListRuns {
        visible_to: Predicate::VisibilityIn(vec![V::Public]),
        status: StatusFilter::All,
        limit: 10,
        before: None,
    };
    assert!(
        store::RunStore::list_runs(&s, &public)
            .await
            .unwrap()
            .runs
            .is_empty(),
        "unknown is never public"
    );
}

#[tokio::test]
async fn postgres_old_rows_read_unknown_after_the_stamp_migration() {
    let schema = unique_schema();
    let s = PostgresStore::connect(&postgres_spec(&schema))
        .await
        .unwrap();
    s.migrate_first(1).await.unwrap();
    sqlx::query("INSERT INTO runs (id, surface, channel_id, user_id, agent, status, request, created_at) VALUES ('old1', 'slack', 'slack:C1', 'slack:U1', 'echo', 'completed', 'hi', 5)")
        .execute(s.pool())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    let run = store::RunStore::get_run(&s, &"old1".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.channel_visibility, V::Unknown);
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(s.pool())
        .await;
}

#[tokio::test]
async fn sqlite_slack_rows_are_slacks_after_the_surface_migration() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let s = SqliteStore::connect(&sqlite_spec(&url)).await.unwrap();
    s.migrate_first(12).await.unwrap();
    for row in SLACK_ROWS {
        sqlx::query(row).execute(s.pool()).await.unwrap();
    }
    s.migrate().await.unwrap();
    slack_rows_read_as_slacks(&s).await;
}

#[tokio::test]
async fn postgres_slack_rows_are_slacks_after_the_surface_migration() {
    let schema = unique_schema();
    let s = PostgresStore::connect(&postgres_spec(&schema))
        .await
        .unwrap();
    s.migrate_first(12).await.unwrap();
    for row in SLACK_ROWS {
        sqlx::query(row).execute(s.pool()).await.unwrap();
    }
    s.migrate().await.unwrap();
    slack_rows_read_as_slacks(&s).await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(s.pool())
        .await;
}

/// A Slack event id and an answered thread, as the tables before migration 13 held them.
const SLACK_ROWS: [&str; 2] = [
    "INSERT INTO slack_events (event_id, received_at) VALUES ('Ev-old', 5)",
    "INSERT INTO slack_threads (channel, thread_ts, answered_at) VALUES ('C1', '1.1', 5)",
];

/// Slack's rows from before the surface-neutral tables are Slack's after them, and no other
/// surface's.
async fn slack_rows_read_as_slacks(s: &dyn store::SurfaceEventStore) {
    let at = store::Timestamp::from_micros(9);
    assert!(
        !s.first_sighting(Surface::Slack, "Ev-old", at)
            .await
            .unwrap()
    );
    assert!(s.first_sighting(Surface::Http, "Ev-old", at).await.unwrap());
    assert!(
        s.answered_thread(Surface::Slack, "C1", "1.1")
            .await
            .unwrap()
    );
    assert!(!s.answered_thread(Surface::Mcp, "C1", "1.1").await.unwrap());
}

async fn corrupt_status_is_named(u: Under) {
    let run = u
        .store
        .create_run(new_run("slack:C1", "slack:U1", V::Public, 1))
        .await
        .unwrap();
    let update = "UPDATE runs SET status = 'paused'";
    if let Some(s) = &u.sqlite {
        sqlx::query(update).execute(s.pool()).await.unwrap();
    }
    if let Some(s) = &u.postgres {
        sqlx::query(update).execute(s.pool()).await.unwrap();
    }
    let e = u.store.get_run(&run.id).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupt { what: "run status", value } if value == "paused"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "a stored run status is not valid: \"paused\""
    );
    let all = ListRuns {
        visible_to: Predicate::All,
        status: StatusFilter::All,
        limit: 10,
        before: None,
    };
    assert!(
        matches!(
            u.store.list_runs(&all).await,
            Err(StoreError::Corrupt { .. })
        ),
        "a list fails rather than skipping the row"
    );
    u.cleanup().await;
}

#[tokio::test]
async fn sqlite_an_unknown_status_in_a_row_is_a_clear_error() {
    corrupt_status_is_named(open(Backend::Sqlite).await).await;
}

#[tokio::test]
async fn postgres_an_unknown_status_in_a_row_is_a_clear_error() {
    corrupt_status_is_named(open(Backend::Postgres).await).await;
}

#[tokio::test]
async fn sqlite_a_file_that_is_not_sqlite_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    let garbage = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &garbage).unwrap();
    let e = store::open(&format!("sqlite://{}", path.display()))
        .await
        .err()
        .unwrap();
    assert!(matches!(&e, StoreError::NotSqlite { .. }), "{e:?}");
    assert!(
        e.to_string().contains("notes.db is not a SQLite database"),
        "{e}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), garbage, "nothing written");
}

#[tokio::test]
async fn unknown_urls_are_refused_naming_the_forms() {
    for url in ["mysql://x", "", "sqlite:", "file.db"] {
        let e = store::open(url).await.err().unwrap();
        assert!(matches!(e, StoreError::BadUrl(_)), "{url}: {e:?}");
    }
    let e = store::open("mysql://user:secret@host/db")
        .await
        .err()
        .unwrap();
    assert!(!e.to_string().contains("secret"), "{e}");
}

/// The predicate shapes whose plans are checked, with a readable name.
fn shapes() -> Vec<(&'static str, Predicate)> {
    let ch = |s: &str| s.parse().unwrap();
    vec![
        ("all", Predicate::All),
        (
            "channels-in",
            Predicate::ChannelsIn(vec![ch("slack:C1"), ch("slack:C2")]),
        ),
        ("visibility-in", Predicate::VisibilityIn(vec![V::Public])),
        ("user-is", Predicate::UserIs("slack:U1".parse().unwrap())),
        (
            "repos-in",
            Predicate::ReposIn(vec!["acme/web".parse().unwrap()]),
        ),
        (
            "member-or-public-or-self",
            Predicate::Or(vec![
                Predicate::ChannelsIn((0..10).map(|i| ch(&format!("slack:C{i}"))).collect()),
                Predicate::VisibilityIn(vec![V::Public]),
                Predicate::UserIs("slack:U1".parse().unwrap()),
            ]),
        ),
    ]
}

#[tokio::test]
async fn sqlite_every_branch_reads_an_index_ordered_like_the_page() {
    let u = open(Backend::Sqlite).await;
    let s = u.sqlite.clone().unwrap();
    for i in 0..500 {
        u.store
            .create_run(new_run(
                &format!("slack:C{}", i % 20),
                "slack:U1",
                V::ALL[i % 5],
                i as i64,
            ))
            .await
            .unwrap();
    }
    sqlx::query("ANALYZE").execute(s.pool()).await.unwrap();
    for (name, p) in shapes() {
        for status in [StatusFilter::All, StatusFilter::Live] {
            let plan = s
                .list_plan(&ListRuns {
                    visible_to: p.clone(),
                    status,
                    limit: 50,
                    before: None,
                })
                .await
                .unwrap();
            let text = plan.join("\n");
            for line in &plan {
                // A scan of the walk's window (`w`, a co-routine bounded by its LIMIT) or of a
                // bound list is not a scan of the table.
                let table = line.split_whitespace().nth(1).unwrap_or_default();
                let full_scan = line.starts_with("SCAN")
                    && matches!(table, "x" | "r" | "runs")
                    && !line.contains("USING INDEX")
                    && !line.contains("USING COVERING INDEX");
                assert!(!full_scan, "{name}: full scan of runs:\n{text}");
                assert!(
                    !line.contains("TEMP B-TREE"),
                    "{name}: a sort beyond the branch's page:\n{text}"
                );
            }
            assert!(
                text.contains("INDEX runs_"),
                "{name}: no runs index used:\n{text}"
            );
            if status == StatusFilter::Live {
                // Live runs are few: one read of their partial index, in page order.
                assert!(
                    text.contains("INDEX runs_live_page"),
                    "{name}: a live list reads the live runs' index:\n{text}"
                );
            } else if name != "all" {
                // Each branch reads its own index, newest-first.
                let branch = text
                    .split("CORRELATED LIST SUBQUERY")
                    .nth(1)
                    .unwrap_or_default();
                assert!(
                    branch.contains("INDEX runs_") && !branch.contains("runs_page"),
                    "{name}: a branch must read its own index:\n{text}"
                );
            }
        }
    }
}

#[tokio::test]
async fn postgres_every_branch_reads_an_index_ordered_like_the_page() {
    let u = open(Backend::Postgres).await;
    let s = u.postgres.clone().unwrap();
    // Enough rows that the planner prefers the indexes on its own (no enable_seqscan games).
    sqlx::query(
        "INSERT INTO runs (id, surface, channel_id, user_id, agent, repo, status, request, created_at, channel_visibility) \
         SELECT lpad(g::text, 12, '0'), 'http', 'slack:C' || (g % 200), 'slack:U' || (g % 500), 'echo', \
                CASE WHEN g % 7 = 0 THEN 'acme/web' END, CASE WHEN g % 10 = 0 THEN 'running' ELSE 'completed' END, 'x', g, \
                (ARRAY['public','private','dm','machine','unknown'])[1 + g % 5] \
         FROM generate_series(1, 60000) AS g",
    )
    .execute(s.pool())
    .await
    .unwrap();
    sqlx::query("ANALYZE runs").execute(s.pool()).await.unwrap();
    for (name, p) in shapes() {
        for status in [StatusFilter::All, StatusFilter::Live] {
            let plan = s
                .list_plan(&ListRuns {
                    visible_to: p.clone(),
                    status,
                    limit: 50,
                    before: None,
                })
                .await
                .unwrap();
            let text = plan.join("\n");
            assert!(
                !text.contains("Seq Scan on runs"),
                "{name}/{status:?}: full scan of runs:\n{text}"
            );
            // The planner may sort what it expects to be no bigger than the walk's window (8
            // pages: a bitmap read of the window's matches) or a branch's page, and a live
            // list may sort the live runs the `runs_live` partial index yields (capped by the
            // dispatcher's concurrency limit). Each bound is independent of the table's size;
            // a sort of anything larger fails.
            let live_only = status == StatusFilter::Live && text.contains("runs_live");
            let window = 51 * store::DEFAULT_WALK_PAGES as u64;
            for line in plan
                .iter()
                .filter(|l| l.trim_start().starts_with("->  Sort") || l.starts_with("Sort"))
            {
                let rows: u64 = line
                    .split("rows=")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(u64::MAX);
                assert!(
                    rows <= window || live_only,
                    "{name}/{status:?}: a sort of {rows} rows, beyond the walk's window:\n{text}"
                );
            }
            assert!(
                text.contains("Index") && text.contains("runs_"),
                "{name}/{status:?}: no runs index used:\n{text}"
            );
            // A branch reads an index ordered like the page under its LIMIT: its own, or (when
            // Postgres judges the value dense, as it does for a five-valued visibility it cannot
            // see through `unnest`) the page index itself, stopping at the limit.
            let branch_plan = text.split("Function Scan on v").nth(1).unwrap_or_default();
            if status == StatusFilter::Live {
                assert!(
                    text.contains("runs_live"),
                    "{name}/{status:?}: a live list reads a live runs' index:\n{text}"
                );
            } else if name != "all" {
                assert!(
                    branch_plan.contains("Index") && branch_plan.contains("runs_"),
                    "{name}/{status:?}: a branch without an ordered index:\n{text}"
                );
            }
        }
    }
    u.cleanup().await;
}
