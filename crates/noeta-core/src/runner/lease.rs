//! A claim's lease, kept alive on a heartbeat for as long as the claim works on its task.
//!
//! A claim's work can take far longer than its lease: a model reply streaming for minutes, a
//! provider's retries through an outage, a long tool run. [`HeldLease::keep_alive`] runs that
//! work beside a heartbeat that renews the lease every quarter of its length (measured on
//! this process's monotonic clock from the last renewal, whoever made it). The heartbeat needs
//! no async runtime: its timer is a helper thread, so the kernel stays executor-agnostic.
//!
//! What ends the work early, and how it is reported:
//! - the store says the lease is stale: another worker claimed the task (named), or the lease
//!   lapsed before a renewal reached the store — [`RunError::LeaseLost`]; the work future is
//!   dropped at once, which cancels a model call in flight and kills a command's process group;
//! - the store keeps failing to renew for a whole lease length: the store's own error.
//!
//! A renewal that fails for a store reason is retried sooner (every sixteenth of the lease)
//! until the lease would have lapsed.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::Either;

use crate::store::{EventLog, Lease, StoreError};

use super::RunError;

/// The live lease of one claim, shared by the runner, the heartbeat and tools' `ctx.keep`.
pub(super) struct HeldLease {
    log: Arc<dyn EventLog>,
    ttl_ms: u64,
    /// The lease as last taken or renewed, and when (this process's monotonic clock).
    state: Mutex<(Lease, Instant)>,
}

impl HeldLease {
    /// A lease just taken.
    pub(super) fn new(log: Arc<dyn EventLog>, lease: Lease, ttl_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            log,
            ttl_ms,
            state: Mutex::new((lease, Instant::now())),
        })
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.max(1))
    }

    /// The lease to write under.
    pub(super) fn current(&self) -> Lease {
        self.lock().0.clone()
    }

    /// When the lease was last taken or renewed.
    fn renewed(&self) -> Instant {
        self.lock().1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Lease, Instant)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews the lease now.
    pub(super) async fn renew(&self) -> Result<(), RunError> {
        let asked = Instant::now();
        let current = self.current();
        match self.log.renew(&current, self.ttl_ms).await {
            Ok(lease) => {
                let mut state = self.lock();
                // A renewal that finished later (asked later) keeps its later expiry.
                if asked >= state.1 {
                    *state = (lease, asked);
                }
                Ok(())
            }
            Err(err) => Err(lost(err)),
        }
    }

    /// Renews the lease once a tenth of its time has passed since it was last taken or
    /// renewed, so every step starts with at least nine tenths of it left, and a run of quick
    /// steps does not pay a store write for each.
    pub(super) async fn renew_when_due(&self) -> Result<(), RunError> {
        if self.renewed().elapsed() < self.ttl() / 10 {
            return Ok(());
        }
        self.renew().await
    }

    /// Runs `work` while a heartbeat keeps the lease alive; a lost lease drops `work` at once.
    pub(super) async fn keep_alive<T>(
        &self,
        work: impl Future<Output = Result<T, RunError>>,
    ) -> Result<T, RunError> {
        let work = std::pin::pin!(work);
        let beat = std::pin::pin!(self.heartbeat());
        match futures::future::select(work, beat).await {
            Either::Left((out, _)) => out,
            Either::Right((lost, _)) => Err(lost),
        }
    }

    /// Renews the lease every quarter of its length until a renewal shows it is lost; only
    /// returns then.
    async fn heartbeat(&self) -> RunError {
        let ttl = self.ttl();
        let mut failing: Option<RunError> = None;
        loop {
            let since = self.renewed().elapsed();
            let wait = match &failing {
                None => (ttl / 4).saturating_sub(since),
                Some(_) => ttl / 16,
            };
            if !wait.is_zero() {
                futures_timer::Delay::new(wait).await;
                if failing.is_none() && self.renewed().elapsed() < ttl / 4 {
                    // Renewed meanwhile (a step or a tool's `ctx.keep`).
                    continue;
                }
            }
            match self.renew().await {
                Ok(()) => failing = None,
                Err(err @ RunError::LeaseLost { .. }) => return err,
                Err(err) => {
                    if self.renewed().elapsed() >= ttl {
                        return err;
                    }
                    tracing::warn!(
                        task = %self.current().task,
                        "renewing the lease failed, trying again: {err}"
                    );
                    failing = Some(err);
                }
            }
        }
    }
}

/// A store's refusal to renew or append under a lease, as the runner reports it.
pub(super) fn lost(err: StoreError) -> RunError {
    match err {
        StoreError::StaleLease { task, holder, .. } => RunError::LeaseLost { task, holder },
        other => other.into(),
    }
}

/// The words for a lost lease: who took it, or that it lapsed.
pub(super) fn describe_loss(task: &crate::store::TaskId, holder: Option<&str>) -> String {
    match holder {
        Some(holder) => format!(
            "lost the lease on task `{task}` to worker `{holder}`, which claimed the task; stopping without writing"
        ),
        None => format!(
            "the lease on task `{task}` lapsed before this worker renewed it (the store refused the renewal); stopping without writing"
        ),
    }
}
