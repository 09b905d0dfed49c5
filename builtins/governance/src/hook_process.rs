//! Running one command hook, with Claude Code's async protocol: a hook whose first line of
//! output is `{"async": true}` (optionally with `"asyncTimeout"`, in milliseconds) asks to go
//! on in the background. Nothing waits for it from then on and it cannot block; it is ended
//! when its `asyncTimeout` (else its own `timeout`) has passed, and how it ended is logged.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{Either, select};
use noeta_core::exec::{ExecCommand, ExecEnv, ExecError, ExecOutput};
use serde_json::Value;

/// How a hook's command went.
pub(crate) enum Finished {
    /// It ended (or could not start).
    Done(Result<ExecOutput, ExecError>),
    /// It asked to go on in the background.
    WentAsync,
}

/// The `asyncTimeout` of `line` when it is Claude Code's async answer, `{"async": true, …}`.
pub(crate) fn async_request(line: &str) -> Option<Option<Duration>> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(line).ok()?;
    (value.get("async") == Some(&Value::Bool(true))).then(|| {
        value
            .get("asyncTimeout")
            .and_then(Value::as_u64)
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis)
    })
}

/// Runs `command` (a hook, whose deadline is `timeout`) in `env`; when its first line that
/// opens a JSON object asks for the background, returns at once and lets it go on, counted in
/// `in_flight`, until it ends or its async timeout passes.
pub(crate) async fn run(
    env: Arc<dyn ExecEnv>,
    command: ExecCommand,
    timeout: Duration,
    label: String,
    in_flight: Arc<AtomicUsize>,
) -> Finished {
    let (asked, went_async) = oneshot::channel::<Option<Duration>>();
    let asked = Arc::new(Mutex::new(Some(asked)));
    let heard = Arc::clone(&asked);
    let command = command.with_line_sink(Arc::new(move |line: &str| {
        // The first line that opens an object decides (stderr lines seldom do).
        if !line.trim_start().starts_with('{') {
            return;
        }
        let Some(sender) = heard.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return;
        };
        if let Some(limit) = async_request(line) {
            let _ = sender.send(limit);
        }
    }));
    let (kill, killed) = oneshot::channel::<()>();
    let (ended, done) = oneshot::channel::<Option<Result<ExecOutput, ExecError>>>();
    // The command runs on a thread of its own, so it can outlive this call; dropping its
    // future (when `kill` fires) ends it.
    let spawned = std::thread::Builder::new()
        .name("noeta-hook".to_owned())
        .spawn(move || {
            let outcome = futures::executor::block_on(async move {
                let running = Box::pin(env.run(&command));
                match select(running, killed).await {
                    Either::Left((out, _)) => Some(out),
                    Either::Right(_) => None,
                }
            });
            let _ = ended.send(outcome);
        });
    if let Err(err) = spawned {
        return Finished::Done(Err(ExecError::Wait {
            program: "sh".to_owned(),
            message: format!("cannot start the hook's thread: {err}"),
        }));
    }
    match select(done, went_async).await {
        Either::Left((Ok(Some(out)), _)) => Finished::Done(out),
        Either::Left((_, _)) => Finished::Done(Err(ExecError::Wait {
            program: "sh".to_owned(),
            message: "the hook's thread stopped".to_owned(),
        })),
        Either::Right((Err(_), done)) => {
            // No async answer, and the sender is gone: the command ended; wait for it.
            match done.await {
                Ok(Some(out)) => Finished::Done(out),
                _ => Finished::Done(Err(ExecError::Wait {
                    program: "sh".to_owned(),
                    message: "the hook's thread stopped".to_owned(),
                })),
            }
        }
        Either::Right((Ok(limit), done)) => {
            let limit = limit.unwrap_or(timeout);
            in_flight.fetch_add(1, Ordering::SeqCst);
            let (expired, expiry) = oneshot::channel::<()>();
            let _ = std::thread::Builder::new()
                .name("noeta-hook-clock".to_owned())
                .spawn(move || {
                    std::thread::sleep(limit);
                    let _ = expired.send(());
                });
            let _ = std::thread::Builder::new()
                .name("noeta-hook-async".to_owned())
                .spawn(move || {
                    match futures::executor::block_on(select(done, expiry)) {
                        Either::Left((Ok(Some(Ok(out))), _)) if out.status == Some(0) => {}
                        Either::Left((Ok(Some(Ok(out))), _)) => tracing::warn!(
                            command = %label,
                            status = ?out.status,
                            stderr = %String::from_utf8_lossy(&out.stderr).trim(),
                            "background hook failed"
                        ),
                        Either::Left((Ok(Some(Err(err))), _)) => {
                            tracing::warn!(command = %label, "background hook failed: {err}");
                        }
                        Either::Left(_) => {}
                        Either::Right(_) => {
                            let _ = kill.send(());
                            tracing::warn!(
                                command = %label,
                                "background hook ended: its async timeout of {} ms passed",
                                limit.as_millis()
                            );
                        }
                    }
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            Finished::WentAsync
        }
    }
}

#[cfg(test)]
mod tests {
    use super::async_request;
    use std::time::Duration;

    #[test]
    fn only_an_object_with_async_true_asks_for_the_background() {
        assert_eq!(async_request(r#"{"async": true}"#), Some(None));
        assert_eq!(
            async_request(r#" {"async":true,"asyncTimeout":15000} "#),
            Some(Some(Duration::from_millis(15_000)))
        );
        assert_eq!(async_request(r#"{"async": false}"#), None);
        assert_eq!(async_request(r#"{"decision": "block"}"#), None);
        assert_eq!(async_request("async: true"), None);
        assert_eq!(async_request(r#"{"async": true"#), None);
    }
}
