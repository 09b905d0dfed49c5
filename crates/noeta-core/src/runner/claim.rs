//! A claim of one task: taking it (the lease, the fold, a fold that keeps failing), its state
//! and per-claim caches, and its durability — every batch appended under the lease and folded
//! in, deferred writes, snapshots, plugin pins.

use std::collections::HashMap;
use std::sync::Arc;

use crate::extension::View;
use crate::fold::TaskState;
use crate::hooks::Hooks;
use crate::records::{CoreRecord, hydrate_all, spilled};
use crate::session::Session;
use crate::store::{Event, Lease, Record, StoreError, TaskId};
use crate::tool::Keeper;

use super::compose::PromptCache;
use super::lease::{self, HeldLease};
use super::{MAX_REFUSED_CLAIMS, RunError, Runtime};

/// The runner's side of `ctx.keep`: renews the claim's lease now (the heartbeat renews it on
/// its own as well).
pub(super) struct ClaimKeeper(pub(super) Arc<HeldLease>);

#[async_trait::async_trait]
impl Keeper for ClaimKeeper {
    async fn keep(&self) -> Result<(), String> {
        self.0.renew().await.map_err(|err| err.to_string())
    }
}

/// How many of the log's last records are `core` records of `kind`, counting back from the end.
pub(super) fn trailing(events: &[Event], kind: &str) -> usize {
    events
        .iter()
        .rev()
        .take_while(|e| e.record.extension == crate::records::CORE && e.record.kind == kind)
        .count()
}

/// One claim of one task: the lease, the folded state, and caches valid for this claim.
pub(super) struct Claim<'s> {
    pub(super) rt: &'s Runtime,
    pub(super) session: &'s Session,
    pub(super) task: TaskId,
    /// The live lease; shared with the heartbeat and tools' `ctx.keep`.
    pub(super) lease: Arc<HeldLease>,
    /// Claims refused in a row just before this one (a missing plugin).
    pub(super) refusals: usize,
    /// The sequence number the task's latest snapshot reaches (0: none).
    pub(super) snapshot_seq: u64,
    pub(super) state: Arc<TaskState>,
    /// What the last request sent, so an unchanged prefix is not rendered or hashed again.
    pub(super) cache: PromptCache,
    /// Image bodies loaded for requests, by SHA-256.
    pub(super) images: HashMap<String, Arc<Vec<u8>>>,
    /// Records folded in under the sequence numbers their append gets, not yet appended (each
    /// as appended, its bodies spilled, and as folded): a reply whose tool calls are allowed
    /// is written with their started-records, one durable write instead of two. The next
    /// commit writes them first; anything slow or outside this process (a person asked, the
    /// turn ending, the claim ending) writes them before it starts.
    pub(super) unwritten: Vec<(Arc<Record>, Event)>,
    /// When the claim was taken (for the claim-to-first-step metric).
    pub(super) claimed: std::time::Instant,
    /// Where this task's commands run: the runtime's environment, or the one it keeps for
    /// this task ([`ExecEnv::for_task`](crate::exec::ExecEnv::for_task)).
    pub(super) exec: Option<Arc<dyn crate::exec::ExecEnv>>,
}

impl Runtime {
    /// Restores the task's snapshot when it is usable, reads the rest and folds it; the events
    /// read are returned too, and a failing fold is returned, not raised.
    pub(super) async fn fold_task(
        &self,
        session: &Session,
        task: &TaskId,
    ) -> Result<(Result<TaskState, crate::fold::FoldError>, Vec<Event>), RunError> {
        let snapshot = self.log.snapshot(task).await?;
        let start = session
            .folder
            .restore(snapshot.as_ref())
            .unwrap_or_default();
        let events = self.read_hydrated(task, start.seq).await?;
        let folded = session.folder.fold_onto(start, &events);
        Ok((folded, events))
    }

    pub(super) async fn read_hydrated(
        &self,
        task: &TaskId,
        after: u64,
    ) -> Result<Vec<Event>, RunError> {
        let mut events = self.log.read(task, after).await?;
        hydrate_all(&mut events, self.content.as_ref()).await?;
        Ok(events)
    }

    pub(super) async fn claim<'s>(
        &'s self,
        session: &'s Session,
        task: &TaskId,
    ) -> Result<Claim<'s>, RunError> {
        let lease = match self.log.claim(task, &self.worker, self.lease_ttl_ms).await {
            // The holder is known to be gone (its process ended): take the task at once.
            Err(StoreError::Leased { holder, .. })
                if self.holder_gone.as_ref().is_some_and(|gone| gone(&holder)) =>
            {
                tracing::info!(task = %task, holder, "taking the task over from a worker that is gone");
                self.log
                    .take_over(task, &self.worker, self.lease_ttl_ms, &holder)
                    .await?
            }
            other => other?,
        };
        let (folded, events) = self.fold_task(session, task).await?;
        let state = match folded {
            Ok(state) => state,
            Err(err) => return Err(self.fold_refused(task, &lease, err).await),
        };
        Ok(Claim {
            rt: self,
            session,
            task: task.clone(),
            lease: HeldLease::new(Arc::clone(&self.log), lease, self.lease_ttl_ms),
            refusals: trailing(&events, "claim_refused"),
            snapshot_seq: state.seq - events.len() as u64,
            state: Arc::new(state),
            cache: PromptCache::default(),
            images: HashMap::new(),
            unwritten: Vec::new(),
            claimed: std::time::Instant::now(),
            exec: self.exec.as_ref().map(|env| {
                env.for_task(task.as_str())
                    .unwrap_or_else(|| Arc::clone(env))
            }),
        })
    }

    /// A claim whose fold failed: recorded, and the lease left to lapse so a later claim (or
    /// another worker) can try; the third such claim in a row fails the task.
    pub(super) async fn fold_refused(
        &self,
        task: &TaskId,
        lease: &Lease,
        err: crate::fold::FoldError,
    ) -> RunError {
        let events = match self.log.read(task, 0).await {
            Ok(events) => events,
            Err(store) => return store.into(),
        };
        if trailing(&events, "task_failed") > 0 {
            return err.into();
        }
        let mut batch = vec![
            CoreRecord::FoldFailed {
                reason: err.to_string(),
            }
            .to_record(),
        ];
        if trailing(&events, "fold_failed") + 1 >= MAX_REFUSED_CLAIMS {
            batch.push(
                CoreRecord::TaskFailed {
                    reason: format!(
                        "the log could not be folded on {MAX_REFUSED_CLAIMS} claims in a row: {err}"
                    ),
                }
                .to_record(),
            );
        }
        if let Err(store) = self.log.append(lease, &batch).await {
            return store.into();
        }
        err.into()
    }
}

impl Claim<'_> {
    /// The agent's extensions, as the hook dispatcher calls them.
    pub(super) fn hooks(&self) -> Hooks<'_> {
        Hooks(&self.session.extensions)
    }

    pub(super) fn view(&self) -> View<'_> {
        View::new(
            &self.task,
            &self.session.spec.name,
            &self.state,
            &self.session.spec.spawnable,
            &self.session.extensions,
        )
        .with_model(&**self.rt.provider_for(&self.session.spec.name))
        .with_exec_env(self.exec.as_ref())
    }

    /// Folds `records` in now and leaves their append to the next commit (see `unwritten`).
    pub(super) async fn defer(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        for record in records {
            let written = spilled(&record, self.rt.content.as_ref()).await?;
            let event = Event::new(self.state.seq + 1, record);
            let written = written.map_or_else(|| Arc::clone(&event.record), Arc::new);
            self.session
                .folder
                .apply(Arc::make_mut(&mut self.state), &event)?;
            self.unwritten.push((written, event));
        }
        Ok(())
    }

    /// Appends what was deferred, if anything.
    pub(super) async fn write_unwritten(&mut self) -> Result<(), RunError> {
        self.append(Vec::new()).await
    }

    /// Appends a batch (after anything deferred) under the lease and folds it in; observers
    /// see each event. An empty batch leaves deferred records for the next.
    pub(super) async fn commit(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        if records.is_empty() {
            return Ok(());
        }
        self.append(records).await
    }

    pub(super) async fn append(&mut self, records: Vec<Record>) -> Result<(), RunError> {
        let deferred = std::mem::take(&mut self.unwritten);
        if records.is_empty() && deferred.is_empty() {
            return Ok(());
        }
        let mut batch = Vec::with_capacity(deferred.len() + records.len());
        let mut events = Vec::with_capacity(deferred.len() + records.len());
        for (spilled, event) in deferred {
            batch.push(spilled);
            events.push(event);
        }
        let folded = events.len();
        let mut records: Vec<Arc<Record>> = records.into_iter().map(Arc::new).collect();
        for record in &records {
            batch.push(match spilled(record, self.rt.content.as_ref()).await? {
                Some(written) => Arc::new(written),
                None => Arc::clone(record),
            });
        }
        let lease = self.lease.current();
        let last = self
            .rt
            .log
            .append_shared(&lease, &batch)
            .await
            .map_err(lease::lost)?;
        let first = last + 1 - batch.len() as u64;
        // Deferred records were folded under the numbers the lease guarantees them.
        if let Some(event) = events.first()
            && event.seq != first
        {
            return Err(crate::fold::FoldError::Gap {
                seq: first,
                after: event.seq - 1,
            }
            .into());
        }
        events.extend(records.drain(..).enumerate().map(|(i, record)| Event {
            seq: first + (folded + i) as u64,
            record,
        }));
        {
            let state = Arc::make_mut(&mut self.state);
            for event in &events[folded..] {
                self.session.folder.apply(state, event)?;
            }
        }
        self.hooks().on_event(&self.view(), &events);
        Ok(())
    }

    pub(super) async fn release(self) -> Result<(), RunError> {
        self.rt.log.release(&self.lease.current()).await?;
        Ok(())
    }

    /// Writes a snapshot; a failure only costs the next load some time.
    pub(super) async fn snapshot(&self) {
        let snapshot = self.session.folder.snapshot(&self.state);
        if let Err(err) = self.rt.log.put_snapshot(&self.task, &snapshot).await {
            tracing::warn!(task = %self.task, "writing a snapshot failed: {err}");
        }
    }

    /// Records the pins on first start, re-records them when they changed, refuses a missing plugin.
    pub(super) async fn check_pins(&mut self) -> Result<(), RunError> {
        let identity = self.session.spec.identity_hash();
        let core = &self.state.core;
        if core.identity.as_deref() == Some(identity.as_str()) && core.pins == self.session.pins {
            return Ok(());
        }
        if core.identity.is_some() {
            let missing = core
                .pins
                .iter()
                .find(|pin| !self.session.pins.iter().any(|p| p.name == pin.name))
                .cloned();
            if let Some(pin) = missing {
                if self.rt.pool {
                    // Recorded, and the lease left to lapse for a worker that has the plugin.
                    let mut batch = vec![
                        CoreRecord::ClaimRefused {
                            plugin: pin.name.clone(),
                        }
                        .to_record(),
                    ];
                    if self.refusals + 1 >= MAX_REFUSED_CLAIMS {
                        batch.push(
                            CoreRecord::TaskFailed {
                                reason: format!(
                                    "plugin_missing: no worker that claimed it has plugin `{}` ({} {})",
                                    pin.name, pin.source, pin.version
                                ),
                            }
                            .to_record(),
                        );
                    }
                    self.commit(batch).await?;
                }
                return Err(RunError::PluginMissing {
                    task: self.task.clone(),
                    pin,
                });
            }
            tracing::info!(task = %self.task, "the task's plugins or identity changed since it was pinned; re-recording them");
        }
        let pins = CoreRecord::PluginsPinned {
            identity,
            pins: self.session.pins.clone(),
        };
        self.commit(vec![pins.to_record()]).await
    }
}
