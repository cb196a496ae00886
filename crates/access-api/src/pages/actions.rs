//! `POST /runs/<id>/stop` and `POST /runs/<id>/approvals/<approval>`: same-origin forms, each a
//! registry command or an answer through the approval desk, then back to the run's page.

use std::sync::Arc;

use authz_core::RunId;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use commands::{ApprovalError, ReplyKind};
use serde_json::json;

use crate::html::{self, escape};
use crate::{AccessApi, cross_site, guard};

use super::run::{Opener, answerer, opener, token_suffix};
use super::{ask, param};

/// `POST /runs/<id>/stop`: the form on a run's page (or a script). A stopped run sends the
/// browser back to its page; a finished one is 409.
pub async fn stop(
    State(api): State<Arc<AccessApi>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let headers = request.headers();
    if !guard::same_origin(headers, api.services.public_url.as_deref()) {
        return cross_site();
    }
    let token = param(query.as_deref(), "token");
    let reply = match opener(&api, &id, token.clone(), headers).await {
        Err(r) => return r,
        Ok(Opener::Token(cap, _)) => cap.stop(&api.services).await,
        Ok(Opener::Viewer(caller)) => ask(&api, &caller, "runs.stop", json!({"id": id})).await,
    };
    match reply.kind {
        ReplyKind::Ok => back_to_run(&id, token.as_deref()),
        ReplyKind::NotFound => html::not_found(),
        kind => not_done(
            crate::api::status_of(kind),
            "Not stopped",
            &id,
            &format!("<pre>{}</pre>", escape(&reply.text)),
        ),
    }
}

/// 303 back to the run's page (with its capability token, when it came with one).
pub(super) fn back_to_run(id: &str, token: Option<&str>) -> Response {
    let to = format!("/runs/{id}{}", token_suffix(token));
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    html::secure(&mut r, None);
    r
}

/// A page saying what was not done (`why` is HTML, already escaped), linking back to the run.
pub(super) fn not_done(status: StatusCode, title: &str, id: &str, why: &str) -> Response {
    html::page(
        status,
        title,
        &format!(
            "<main><h1>{title}</h1>{why}<p><a href=\"/runs/{}\">Back to the run</a></p></main>",
            escape(id)
        ),
        None,
    )
}

/// `POST /runs/<id>/approvals/<approval>` with `answer=approve|deny` (the run page's form): a
/// same-origin post by the run's principal or its capability link's holder. Answered, the
/// browser goes back to the run; an ask that is no longer waiting is 409, someone else's 403.
pub async fn approve(
    State(api): State<Arc<AccessApi>>,
    Path((id, approval)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    if !guard::same_origin(&parts.headers, api.services.public_url.as_deref()) {
        return cross_site();
    }
    let token = param(query.as_deref(), "token");
    let opener = match opener(&api, &id, token.clone(), &parts.headers).await {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Ok(run_id) = RunId::parse(&id) else {
        return html::not_found();
    };
    let form = match axum::body::to_bytes(body, 4096).await {
        Ok(bytes) => bytes,
        Err(_) => return not_answered(StatusCode::PAYLOAD_TOO_LARGE, &id, "the form is too large"),
    };
    let approve = match param(std::str::from_utf8(&form).ok(), "answer").as_deref() {
        Some("approve") => true,
        Some("deny") => false,
        _ => {
            return not_answered(
                StatusCode::BAD_REQUEST,
                &id,
                "the form must say answer=approve or answer=deny",
            );
        }
    };
    let Some(by) = answerer(&opener) else {
        tracing::warn!(
            reason = "machine-link",
            "[access] a machine's link tried to answer an approval"
        );
        return not_answered(
            StatusCode::FORBIDDEN,
            &id,
            "this link watches and stops the run; only the person the run acts for answers its questions",
        );
    };
    match api
        .services
        .approvals
        .answer(&run_id, &approval, by, approve)
        .await
    {
        Ok(()) => back_to_run(&id, token.as_deref()),
        Err(e @ ApprovalError::NotPending) => {
            not_answered(StatusCode::CONFLICT, &id, &e.to_string())
        }
        Err(e @ ApprovalError::NotThePrincipal) => {
            tracing::warn!(
                reason = "not-the-principal",
                "[access] an approval was answered by someone else"
            );
            not_answered(StatusCode::FORBIDDEN, &id, &e.to_string())
        }
        Err(e @ ApprovalError::Unrecorded) => {
            not_answered(StatusCode::SERVICE_UNAVAILABLE, &id, &e.to_string())
        }
    }
}

pub(super) fn not_answered(status: StatusCode, id: &str, why: &str) -> Response {
    not_done(
        status,
        "Not answered",
        id,
        &format!("<p>{}</p>", escape(why)),
    )
}
