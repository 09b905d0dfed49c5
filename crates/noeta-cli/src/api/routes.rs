//! The API's routes: the page and its files, the task list, one task, and the requests that
//! create, message, answer and cancel tasks. What a request may choose for a new task is
//! bounded by what the server runs with ([`Bounds`]).

use anyhow::Result;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use noeta::tasks::{Answer, TaskOpError};
use noeta::{HostPaths, TaskRun};
use noeta_core::runner::RunError;
use noeta_core::store::{StoreError, TaskId};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Api, Shared};
use crate::agent::{self, AgentArgs};
use crate::overview;

/// An answer other than success: a status and `{"error": "…"}`.
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) StatusCode, pub(crate) String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

pub(super) fn bad(message: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::BAD_REQUEST, message.to_string())
}

/// A run error as an answer: a task held by a worker, or in no state to take this, is a
/// conflict; anything else the server's failure.
fn from_run(err: RunError) -> Fail {
    match err {
        RunError::Busy { .. }
        | RunError::NotParked { .. }
        | RunError::BadAnswer { .. }
        | RunError::Store(StoreError::Leased { .. }) => Fail(StatusCode::CONFLICT, err.to_string()),
        other => Fail(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

pub(super) fn internal(err: impl std::fmt::Display) -> Fail {
    Fail(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
}

/// The body as `T`, or why not: 413 for a body over the server's limit, 400 naming what is
/// wrong with any other.
fn body<T>(body: Result<Json<T>, JsonRejection>) -> Result<T, Fail> {
    body.map(|Json(value)| value).map_err(|err| {
        let status = err.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            return Fail(
                status,
                format!(
                    "the request body is over this server's limit: {}",
                    err.body_text()
                ),
            );
        }
        bad(format!(
            "the request body is not accepted: {}",
            err.body_text()
        ))
    })
}

/// What a request may choose for a new task: a model provider this server runs (a scripted
/// model's script only when the server itself runs one: it is a test device), and a permission
/// mode no looser than the server's own.
#[derive(Debug, Clone)]
pub(super) struct Bounds {
    /// `--provider`, else the settings' `[plugins.providers] provider`.
    provider: Option<String>,
    /// `--model`.
    model: Option<String>,
    /// The server's settings (its flags the last layer): each agent's permission mode.
    settings: noeta::Settings,
}

/// The providers a request may name besides the server's own.
const NAMED_PROVIDERS: [&str; 2] = ["anthropic", "openai"];

impl Bounds {
    pub(super) fn of(paths: &HostPaths, base: &AgentArgs) -> Result<Self> {
        let settings = agent::settings(paths, base)?;
        let configured = settings
            .params("providers")
            .and_then(|p| p.get("provider"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(Self {
            provider: base.provider.clone().or(configured),
            model: base.model.clone(),
            settings,
        })
    }

    fn scripted(&self) -> bool {
        self.provider
            .as_deref()
            .is_some_and(|p| p.starts_with("scripted:"))
    }

    /// The provider a new task runs on, when the request's choice is allowed.
    fn provider(&self, asked: Option<String>) -> Result<Option<String>, Fail> {
        let Some(asked) = asked else {
            return Ok(self.provider.clone());
        };
        if let Some(script) = asked.strip_prefix("scripted:") {
            if self.scripted() {
                // Checked now, so a request naming a device or a pipe is refused at once; the
                // worker that runs the task reads it (and checks it again).
                noeta_core::files::regular(std::path::Path::new(script))
                    .map_err(|err| bad(format!("`provider`: the script {err}")))?;
                return Ok(Some(asked));
            }
            return Err(bad(format!(
                "`provider`: `{asked}` names a scripted model's script, a test device this server                  takes only when it runs one itself (`noeta serve --provider scripted:FILE`)"
            )));
        }
        if NAMED_PROVIDERS.contains(&asked.as_str()) || self.provider.as_deref() == Some(&asked) {
            return Ok(Some(asked));
        }
        Err(bad(format!(
            "`provider`: `{asked}` is not a provider this server runs (it runs {})",
            NAMED_PROVIDERS.join(", ")
        )))
    }

    /// The permission modes a new task of `agent` may ask for: its own and the stricter ones.
    fn modes(&self, agent: &str) -> Vec<&'static str> {
        let own = self
            .settings
            .permission_mode(agent)
            .unwrap_or_else(|| "default".to_owned());
        ["plan", "default", "acceptEdits", "bypassPermissions"]
            .into_iter()
            .filter(|mode| noeta::looseness(mode) <= noeta::looseness(&own))
            .collect()
    }

    /// The permission mode a new task of `agent` starts in: the request's, when it is no looser
    /// than the server's own for that agent, else the server's (recorded either way, so the
    /// worker that runs it keeps to it).
    fn mode(&self, asked: Option<&str>, agent: &str) -> Result<Option<String>, Fail> {
        let own = self
            .settings
            .permission_mode(agent)
            .unwrap_or_else(|| "default".to_owned());
        let Some(asked) = asked else {
            return Ok(Some(own));
        };
        let mode = agent::permission_mode(asked)
            .map_err(|err| bad(format!("`permission_mode`: {err}")))?;
        if noeta::looseness(&mode) > noeta::looseness(&own) {
            return Err(bad(format!(
                "`permission_mode`: `{mode}` is looser than this server's own mode `{own}`; a \
                 server started with `--permission-mode {mode}` allows it"
            )));
        }
        Ok(Some(mode))
    }
}

/// The web frontend's page and files.
pub(super) async fn page(State(api): State<Shared>, uri: axum::http::Uri) -> Response {
    let Some(ui) = &api.ui else {
        return Fail(
            StatusCode::NOT_FOUND,
            "this server serves no page (--no-ui); the API is under /v1/".to_owned(),
        )
        .into_response();
    };
    match ui.assets().iter().find(|a| a.path == uri.path()) {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.media_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            asset.body,
        )
            .into_response(),
        None => Fail(StatusCode::NOT_FOUND, "no such file".to_owned()).into_response(),
    }
}

/// A host operation's failure as an answer.
fn from_op(err: TaskOpError) -> Fail {
    match err {
        TaskOpError::Unknown(task) => Fail(
            StatusCode::NOT_FOUND,
            format!("no task `{task}` in this store"),
        ),
        TaskOpError::Conflict(why) => Fail(StatusCode::CONFLICT, why),
        TaskOpError::Invalid(why) => bad(why),
        TaskOpError::Run(err) => from_run(err),
        TaskOpError::Store(err @ StoreError::Leased { .. }) => {
            Fail(StatusCode::CONFLICT, err.to_string())
        }
        TaskOpError::Store(err) => internal(err),
        other @ (TaskOpError::Host(_) | TaskOpError::Record(_)) => bad(other),
    }
}

impl Api {
    /// The task `id` names, which must exist (404 otherwise).
    pub(super) async fn task(&self, id: &str) -> Result<TaskId, Fail> {
        let task = TaskId::new(id).map_err(bad)?;
        self.tasks.task(&task).await.map_err(from_op)
    }
}

pub(super) async fn list(State(api): State<Shared>) -> Result<Json<Value>, Fail> {
    let rows = overview::rows(api.tasks.stores()).await.map_err(internal)?;
    Ok(Json(Value::Array(
        rows.iter().map(overview::Row::json).collect(),
    )))
}

pub(super) async fn show(
    State(api): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Fail> {
    let task = api.task(&id).await?;
    let row = overview::one(api.tasks.stores(), &task)
        .await
        .map_err(internal)?;
    Ok(Json(row.json()))
}

/// `GET /v1/agents`: the agents a new task may run — each with its description, the
/// permission mode it starts in here and the modes a request may ask for (its own and the
/// stricter ones). An agent whose file does not load is left out.
pub(super) async fn agents(State(api): State<Shared>) -> Result<Json<Value>, Fail> {
    let host = api.tasks.host(&TaskRun::default()).map_err(from_op)?;
    let agents: Vec<Value> = crate::agents::rows(&host)
        .into_iter()
        .filter(|row| row.error.is_none())
        .map(|row| {
            let modes = api.bounds.modes(&row.name);
            json!({
                "name": row.name,
                "description": row.description,
                "permission_mode": modes.last(),
                "permission_modes": modes,
            })
        })
        .collect();
    Ok(Json(Value::Array(agents)))
}

/// `POST /v1/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTask {
    goal: String,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    permission_mode: Option<String>,
}

pub(super) async fn create(
    State(api): State<Shared>,
    new: Result<Json<NewTask>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    if new.goal.trim().is_empty() {
        return Err(bad("`goal` is empty: say what the agent is to do"));
    }
    let permission_mode = api.bounds.mode(
        new.permission_mode.as_deref(),
        new.agent.as_deref().unwrap_or("main"),
    )?;
    let provider = api.bounds.provider(new.provider)?;
    // The server's model goes with the server's provider only.
    let model = new
        .model
        .or_else(|| (provider == api.bounds.provider).then(|| api.bounds.model.clone())?);
    let run = TaskRun {
        agent: new.agent,
        provider,
        model,
        permission_mode,
        ..TaskRun::default()
    };
    let task = api.tasks.submit(run, &new.goal).await.map_err(from_op)?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": task.as_str(), "status": "queued" })),
    ))
}

/// `POST /v1/tasks/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewMessage {
    text: String,
}

pub(super) async fn message(
    State(api): State<Shared>,
    Path(id): Path<String>,
    new: Result<Json<NewMessage>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    let task = api.task(&id).await?;
    if new.text.trim().is_empty() {
        return Err(bad("`text` is empty"));
    }
    api.tasks.message(&task, &new.text).await.map_err(from_op)?;
    api.tasks.queue(&task).await.map_err(internal)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": task.as_str(), "status": "queued" })),
    ))
}

/// `POST /v1/tasks/{id}/answer`: `allow` for a permission ask, `answer` for a question.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewAnswer {
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    allow: Option<bool>,
    #[serde(default)]
    answer: Option<Value>,
}

pub(super) async fn answer(
    State(api): State<Shared>,
    Path(id): Path<String>,
    new: Result<Json<NewAnswer>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), Fail> {
    let new = body(new)?;
    let task = api.task(&id).await?;
    let state = api.tasks.state(&task).await.map_err(from_op)?;
    let noeta_core::fold::TurnState::Parked { call_id, question } = &state.core.turn else {
        return Err(Fail(
            StatusCode::CONFLICT,
            format!(
                "task {task} waits for no answer ({})",
                overview::status(&state)
            ),
        ));
    };
    if let Some(given) = &new.call_id
        && given != call_id
    {
        return Err(Fail(
            StatusCode::CONFLICT,
            format!("task {task} waits on call `{call_id}`, not `{given}`"),
        ));
    }
    let asks_a_question = state
        .core
        .parked
        .get(call_id)
        .is_some_and(|p| p.question.is_some());
    if asks_a_question {
        let answer = match (new.answer, new.allow) {
            (Some(Value::String(text)), _) => {
                noeta::tasks::typed_answer(&state, call_id, &text).map_err(bad)?
            }
            (Some(answer), _) => answer,
            (None, _) => {
                return Err(bad(format!(
                    "call {call_id} asks a question ({question}): give `answer`, not `allow`"
                )));
            }
        };
        api.tasks
            .answer(&task, call_id, Answer::Reply(answer))
            .await
            .map_err(from_op)?;
    } else {
        let Some(allow) = new.allow else {
            return Err(bad(format!(
                "call {call_id} asks permission ({question}): give `allow`: true or false"
            )));
        };
        api.tasks
            .answer(&task, call_id, Answer::Allow(allow))
            .await
            .map_err(from_op)?;
    }
    api.tasks.queue(&task).await.map_err(internal)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": task.as_str(), "call_id": call_id, "status": "queued" })),
    ))
}

pub(super) async fn cancel(
    State(api): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Fail> {
    let task = api.task(&id).await?;
    // Its queue entry ends at the next take; a parent waiting on it wakes with why.
    let cancelled = api
        .tasks
        .cancel(&task, "by a request to the HTTP API")
        .await
        .map_err(from_op)?;
    Ok(Json(json!({ "id": task.as_str(), "cancelled": cancelled })))
}
