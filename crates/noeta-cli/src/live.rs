//! Reply text as the model streams it, from this process's worker slots to whoever follows a
//! task through `noeta serve` (`GET /v1/tasks/{id}/events` as Server-Sent Events, `event:
//! text`). It is for display only and never recorded: the reply is recorded once whole, and a
//! task run by a `noeta worker` in another process shows each reply when it is recorded.

use std::sync::Arc;

use noeta_core::runner::TaskTextSink;
use noeta_core::store::TaskId;
use tokio::sync::broadcast;

/// How many pieces a slow follower may fall behind before it skips some (display only).
const BACKLOG: usize = 1024;

/// One piece of a task's reply text.
#[derive(Debug)]
pub(crate) struct Piece {
    pub(crate) task: TaskId,
    pub(crate) text: String,
}

/// The pieces of every task this process runs, to each follower.
#[derive(Clone)]
pub(crate) struct LiveText(broadcast::Sender<Arc<Piece>>);

impl LiveText {
    pub(crate) fn new() -> Self {
        Self(broadcast::channel(BACKLOG).0)
    }

    /// The sink a runtime hands each step's streamed text to.
    pub(crate) fn sink(&self) -> Arc<TaskTextSink> {
        let sender = self.0.clone();
        Arc::new(move |task: &TaskId, text: &str| {
            // Nobody following is fine.
            let _ = sender.send(Arc::new(Piece {
                task: task.clone(),
                text: text.to_owned(),
            }));
        })
    }

    /// A follower of every task's pieces from now on.
    pub(crate) fn follow(&self) -> Follower {
        Follower(self.0.subscribe())
    }
}

/// Receives the pieces streamed after it was made.
pub(crate) struct Follower(broadcast::Receiver<Arc<Piece>>);

impl Follower {
    /// The next pieces of `task`'s text, joined: waits for at least one piece of any task,
    /// then takes whatever else is already waiting. Empty when none of them was `task`'s;
    /// `None` once nothing can stream any more.
    pub(crate) async fn next(&mut self, task: &TaskId) -> Option<String> {
        let mut text = String::new();
        let mut take = |piece: Arc<Piece>| {
            if piece.task == *task {
                text.push_str(&piece.text);
            }
        };
        match self.0.recv().await {
            Ok(piece) => take(piece),
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return None,
        }
        loop {
            match self.0.try_recv() {
                Ok(piece) => take(piece),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
        Some(text)
    }

    /// Drops every piece waiting now (they belong to replies already recorded).
    pub(crate) fn skip_waiting(&mut self) {
        while !matches!(
            self.0.try_recv(),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed)
        ) {}
    }
}
