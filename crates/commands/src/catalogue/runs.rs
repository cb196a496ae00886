//! `runs list|get|events|friction|stop` (`runs diff` is in `diff.rs`). The list hands the caller's predicate to the store;
//! the point reads authorize the run they loaded and answer not_found on a deny, exactly as
//! for a missing id.

use authz_core::{
    Action, BoxFuture, Predicate, Resource, ResourceType, RunId, Verdict, authorize, predicate_for,
};
use serde_json::json;
use store::{Cursor, ListRuns, RunRecord, StatusFilter};

use super::{ago, ok, store_failed, with_list};
use crate::{Args, Ctx, Registry, Reply, ReplyKind, Services, reply_texts};

fn action(ctx: &Ctx<'_>) -> Action {
    ctx.command.action.clone()
}

/// Loads a run and authorizes `action` on it. A malformed id, a missing run and a denied run
/// all answer the same not_found.
pub(crate) async fn load_run(
    ctx: &Ctx<'_>,
    args: &Args,
    action: &Action,
) -> Result<RunRecord, Reply> {
    let Some(id) = args.text("id").and_then(|t| RunId::parse(t).ok()) else {
        return Err(Reply::not_found("run"));
    };
    let run = match ctx.services.store.get().get_run(&id).await {
        Ok(Some(run)) => run,
        Ok(None) => return Err(Reply::not_found("run")),
        Err(e) => return Err(store_failed(e)),
    };
    let resource = Resource::Run(run.facts());
    match authorize(&ctx.caller.actor, action, &resource) {
        Verdict::Allow => Ok(run),
        deny => Err(Registry::refuse(ctx, action, &resource, &deny)),
    }
}

/// The branch a run in a repo keeps its changes on (its workspace is made from the repo's base
/// and its changes kept there when it ends).
fn branch_of(r: &RunRecord) -> Option<String> {
    r.repo.as_ref().map(|_| crate::ports::run_branch(&r.id))
}

pub(crate) fn run_json(r: &RunRecord) -> serde_json::Value {
    json!({
        "id": r.id.as_str(),
        "status": r.status.as_str(),
        "channel": r.channel_id.as_str(),
        "visibility": r.channel_visibility.as_str(),
        "user": r.user_id.as_str(),
        "agent": r.agent,
        "repo": r.repo.as_ref().map(|x| x.as_str()),
        "branch": branch_of(r),
        "surface": r.surface,
        "request": r.request,
        "answer": r.answer,
        "error": r.error,
        "created_at": r.created_at.micros(),
        "finished_at": r.finished_at.map(|t| t.micros()),
        "parent_run": r.parent_run.as_ref().map(|p| p.as_str()),
    })
}

fn shorten(s: &str, n: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        format!(
            "{}…",
            one_line
                .chars()
                .take(n.saturating_sub(1))
                .collect::<String>()
        )
    }
}

pub fn list<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(async move {
        let status = match args.text("status") {
            Some("finished") => StatusFilter::Finished,
            Some("all") => StatusFilter::All,
            _ => StatusFilter::Live,
        };
        let before = match args.text("before").map(Cursor::decode).transpose() {
            Ok(c) => c,
            Err(_) => {
                return Reply::of(
                    ReplyKind::Usage,
                    reply_texts::usage_error(
                        "`--before`: that cursor is not one this server gave",
                        &ctx.command.usage(),
                    ),
                );
            }
        };
        let visible_to = predicate_for(&ctx.caller.actor, &action(ctx), ResourceType::Run);
        let limit = u32::try_from(args.int("limit").unwrap_or(20)).unwrap_or(20);
        let page = if visible_to == Predicate::None {
            store::Page {
                runs: vec![],
                next: None,
            }
        } else {
            match ctx
                .services
                .store
                .get()
                .list_runs(&ListRuns {
                    visible_to,
                    status,
                    limit,
                    before,
                })
                .await
            {
                Ok(p) => p,
                Err(e) => return store_failed(e),
            }
        };
        let next = page.next.as_ref().map(Cursor::encode);
        let text = if ctx.wants.text() {
            page_text(&page.runs, next.as_deref(), ctx.services.clock.now())
        } else {
            String::new()
        };
        let data = if ctx.wants.data() {
            let runs = page.runs.iter().map(run_json).collect();
            with_list(json!({ "next": next }), "runs", runs)
        } else {
            serde_json::Value::Null
        };
        ok(text, data)
    })
}

/// A page of runs as a table, and where the next page starts.
fn page_text(runs: &[RunRecord], next: Option<&str>, now: store::Timestamp) -> String {
    let mut text = if runs.is_empty() {
        "no runs".to_owned()
    } else {
        let rows: Vec<[String; 6]> = runs
            .iter()
            .map(|r| {
                [
                    r.id.to_string(),
                    r.status.to_string(),
                    r.channel_id.to_string(),
                    r.agent.clone(),
                    ago(now, r.created_at),
                    shorten(&r.request, 48),
                ]
            })
            .collect();
        table(
            &["ID", "STATUS", "CHANNEL", "AGENT", "STARTED", "REQUEST"],
            &rows,
        )
    };
    if let Some(n) = next {
        text.push_str(&format!("\nmore: runs list --before {n}"));
    }
    text
}

/// An aligned table; the last column is not padded. Written into one buffer: a page of runs
/// is rendered on every `runs list` that wants text (every MCP call carries it).
pub(crate) fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths: [usize; N] = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = widths.iter().sum::<usize>() + 2 * N;
    let mut out = String::with_capacity(line * (rows.len() + 1));
    table_row(&mut out, header.iter().copied(), &widths);
    for row in rows {
        out.push('\n');
        table_row(&mut out, row.iter().map(String::as_str), &widths);
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out
}

/// One row: cells two spaces apart, each but the last padded to its column, trailing
/// whitespace cut.
fn table_row<'c>(out: &mut String, cells: impl Iterator<Item = &'c str>, widths: &[usize]) {
    let start = out.len();
    for (i, (cell, width)) in cells.zip(widths).enumerate() {
        if i > 0 {
            out.push_str("  ");
        }
        out.push_str(cell);
        if i + 1 < widths.len() {
            let pad = width.saturating_sub(cell.chars().count());
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    let end = start + out[start..].trim_end().len();
    out.truncate(end);
}

/// A loaded run's handler: the point read has been authorized.
async fn with_run<'a, F, Fut>(ctx: &'a Ctx<'a>, args: Args, then: F) -> Reply
where
    F: FnOnce(RunRecord) -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    match load_run(ctx, &args, &action(ctx)).await {
        Ok(run) => then(run).await,
        Err(reply) => reply,
    }
}

pub fn get<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(with_run(ctx, args, move |run| async move {
        run_reply(&run, ctx.services.clock.now())
    }))
}

pub fn events<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(with_run(ctx, args, move |run| async move {
        events_reply(&run, ctx.services).await
    }))
}

pub fn friction<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(with_run(ctx, args, move |run| async move {
        friction_reply(&run, ctx.services).await
    }))
}

pub fn stop<'a>(ctx: &'a Ctx<'a>, args: Args) -> BoxFuture<'a, Reply> {
    Box::pin(with_run(ctx, args, move |run| async move {
        stop_reply(&run, ctx.services).await
    }))
}

/// `runs get`'s answer for a run the caller may read (or holds the capability of).
pub(crate) fn run_reply(run: &RunRecord, now: store::Timestamp) -> Reply {
    let mut text = format!(
        "run {}  {}\nchannel  {} ({})\nuser     {}\nagent    {}\nstarted  {}\n",
        run.id,
        run.status,
        run.channel_id,
        run.channel_visibility,
        run.user_id,
        run.agent,
        ago(now, run.created_at)
    );
    if let Some(repo) = &run.repo {
        text.push_str(&format!("repo     {repo}\n"));
    }
    if let Some(branch) = branch_of(run) {
        text.push_str(&format!(
            "branch   {branch} (its kept changes, in the repo's repository; made when it ends, if it kept a commit: `runs diff {}`)\n",
            run.id
        ));
    }
    if let Some(parent) = &run.parent_run {
        text.push_str(&format!("parent   {parent} (started by its agent)\n"));
    }
    if run.status.is_live() && run.stop_requested_at.is_some() {
        text.push_str("stopping (asked)\n");
    }
    text.push_str(&format!(
        "\nrequest\n  {}\n",
        run.request.replace('\n', "\n  ")
    ));
    if let Some(answer) = &run.answer {
        text.push_str(&format!("\nanswer\n  {}\n", answer.replace('\n', "\n  ")));
    }
    if let Some(error) = &run.error {
        text.push_str(&format!("\nerror\n  {error}\n"));
    }
    ok(text.trim_end().to_owned(), run_json(run))
}

/// `runs events`'s answer.
pub(crate) async fn events_reply(run: &RunRecord, services: &Services) -> Reply {
    let events = match services.store.get().events(&run.id).await {
        Ok(e) => e,
        Err(e) => return store_failed(e),
    };
    let text = if events.is_empty() {
        format!("run {} has no events", run.id)
    } else {
        events
            .iter()
            .map(|e| format!("#{:<4} {:<10} {}", e.seq, e.kind, e.body))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let data = events
        .iter()
        .map(|e| json!({"seq": e.seq, "at": e.at.micros(), "kind": e.kind, "body": e.body}))
        .collect::<Vec<_>>();
    ok(
        text,
        with_list(json!({"run": run.id.as_str()}), "events", data),
    )
}

/// `runs friction`'s answer.
pub(crate) async fn friction_reply(run: &RunRecord, services: &Services) -> Reply {
    let entries = match services.store.get().friction(&run.id).await {
        Ok(e) => e,
        Err(e) => return store_failed(e),
    };
    let text = if entries.is_empty() {
        format!("run {} has no friction", run.id)
    } else {
        entries
            .iter()
            .map(|f| format!("{}: {}", f.kind, f.detail))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let data = entries
        .iter()
        .map(|f| json!({"at": f.at.micros(), "kind": f.kind, "detail": f.detail}))
        .collect::<Vec<_>>();
    ok(
        text,
        with_list(json!({"run": run.id.as_str()}), "friction", data),
    )
}

/// `runs stop` on a run the caller may stop: cancelled here when this process owns it,
/// otherwise asked through the store, where its owner (another replica, or `serve` for a CLI
/// caller) sees the request and stops it.
pub(crate) async fn stop_reply(run: &RunRecord, services: &Services) -> Reply {
    if !run.status.is_live() {
        return Reply::of(
            ReplyKind::Conflict,
            reply_texts::already_finished(run.status.as_str()),
        );
    }
    if services.runs.stop_here(&run.id) {
        return ok(
            reply_texts::stopping(run.id.as_str()),
            json!({"run_id": run.id.as_str(), "stopping": true}),
        );
    }
    match services
        .store
        .get()
        .request_stop(&run.id, services.clock.now())
        .await
    {
        Ok(run) => ok(
            reply_texts::stop_requested(
                run.id.as_str(),
                run.owner.as_deref().unwrap_or("no owner recorded"),
            ),
            json!({"run_id": run.id.as_str(), "stopping": true, "owner": run.owner}),
        ),
        Err(store::StoreError::AlreadyFinished { status, .. }) => Reply::of(
            ReplyKind::Conflict,
            reply_texts::already_finished(status.as_str()),
        ),
        Err(e) => store_failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::table;

    /// The table as it was first written (a cell per `format!`, rows joined): the one-buffer
    /// table must render the same text.
    fn reference<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: [String; N] = header.map(str::to_owned);
        let mut out = String::new();
        for row in std::iter::once(&header).chain(rows) {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i + 1 == N {
                        c.clone()
                    } else {
                        format!("{c:<w$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out.trim_end().to_owned()
    }

    #[test]
    fn the_table_renders_as_the_reference_does() {
        let row = |cells: [&str; 3]| cells.map(str::to_owned);
        let cases: Vec<Vec<[String; 3]>> = vec![
            vec![],
            vec![row(["r1", "running", "ask the tests"])],
            vec![row(["a", "", ""]), row(["", "", ""])],
            vec![
                row(["ünïcode", "ß", "trailing  "]),
                row(["x", "longer status", " lead"]),
            ],
            vec![row(["", "", ""])],
            vec![row(["tab\t", "mid", "last\n"])],
        ];
        for rows in cases {
            let header = ["ID", "STATUS", "REQUEST"];
            assert_eq!(table(&header, &rows), reference(&header, &rows), "{rows:?}");
        }
        assert_eq!(table(&["", ""], &[]), reference(&["", ""], &[]));
    }
}
