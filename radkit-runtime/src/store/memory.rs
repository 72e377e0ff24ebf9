//! `MemoryStore`: tasks and journals in process memory, for tests and examples. A clone shares the same
//! data, so two engines over clones behave like two processes over one database (crash tests).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::push::{PushClaim, PushConfig, PushStore};
use super::view::{MemView, TaskView, ViewDelta};
use super::{Append, Store, StoreError, TaskQuery, TaskRecord};
use crate::journal::JournalRecord;

/// One task: its row, its journal and its view.
struct Stored {
    row: TaskRecord,
    /// In seq order; a compacted journal has a gap (see [`Store::prune`]).
    journal: Vec<JournalRecord>,
    view: MemView,
    /// The last seq of the first append and the first seq of the last: what compaction keeps.
    first_append_ends: u64,
    last_append_starts: u64,
    /// The journal was compacted.
    compacted: bool,
}

impl Stored {
    /// The records after `after_seq`.
    fn after(&self, after_seq: u64) -> &[JournalRecord] {
        &self.journal[self.journal.partition_point(|r| r.seq <= after_seq)..]
    }
}

type Tasks = HashMap<String, Stored>;

/// One push config and its delivery cursor and lease (see [`super::push`]).
struct MemPush {
    config: PushConfig,
    delivered_seq: u64,
    attempts: u32,
    next_at_ms: i64,
    owner: Option<String>,
    lease_until_ms: i64,
    finished: bool,
}

/// Push configs by (task, config id).
type Pushes = BTreeMap<(String, String), MemPush>;

/// An in-memory store.
#[derive(Clone, Default)]
pub struct MemoryStore {
    tasks: Arc<Mutex<Tasks>>,
    push: Arc<Mutex<Pushes>>,
    dispatched: Arc<Mutex<Vec<DispatchRow>>>,
}

/// A dispatched command and its claim.
#[derive(Clone)]
struct DispatchRow {
    task_id: String,
    id: crate::flow::InvocationId,
    cmd: crate::flow::Cmd,
    claimed_until_ms: i64,
    claims: u32,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Tasks> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pushes(&self) -> MutexGuard<'_, Pushes> {
        self.push.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Apply one append to an in-memory map, with the same rules as every store.
fn apply(tasks: &mut Tasks, append: Append, at_ms: i64) -> Result<(), StoreError> {
    let conflict = |expected| StoreError::Conflict {
        task_id: append.task_id.clone(),
        expected,
        got: append.first_seq,
    };
    if let Some(record) = &append.create {
        if tasks.contains_key(&record.id) || append.first_seq != 1 || record.id != append.task_id {
            return Err(conflict(0));
        }
    } else {
        match tasks.get(&append.task_id) {
            None => return Err(conflict(0)),
            Some(task) if task.row.last_seq + 1 != append.first_seq => {
                return Err(conflict(task.row.last_seq + 1))
            }
            Some(_) => {}
        }
    }
    let migrated_to = append.migrated_to().map(str::to_owned);
    let task = match append.create {
        Some(row) => tasks.entry(append.task_id.clone()).or_insert(Stored {
            row,
            journal: Vec::new(),
            view: MemView::default(),
            first_append_ends: (append.first_seq + append.entries.len() as u64).saturating_sub(1),
            last_append_starts: append.first_seq,
            compacted: false,
        }),
        None => tasks.get_mut(&append.task_id).ok_or_else(|| conflict(0))?,
    };
    for (i, entry) in append.entries.iter().cloned().enumerate() {
        task.journal.push(JournalRecord {
            seq: append.first_seq + i as u64,
            at_ms,
            entry,
        });
    }
    task.view
        .apply(&ViewDelta::of(append.first_seq, &append.entries), at_ms);
    if !append.entries.is_empty() {
        task.last_append_starts = append.first_seq;
        task.row.last_seq = append.first_seq + append.entries.len() as u64 - 1;
    }
    let row = &mut task.row;
    row.updated_at_ms = at_ms;
    if let Some(state) = append.state {
        row.state = state;
    }
    if let Some(wake) = append.wake_at_ms {
        row.wake_at_ms = wake;
    }
    if let Some(waits) = append.waits_on_call {
        row.waits_on_call = waits;
    }
    if let Some(version) = migrated_to {
        row.skill_version = version;
    }
    Ok(())
}

/// Whether a row matches a query.
fn matches(row: &TaskRecord, query: &TaskQuery) -> bool {
    (!query.non_terminal || !row.state.is_terminal())
        && query
            .principal
            .as_ref()
            .is_none_or(|p| row.principal.as_ref() == Some(p))
        && query
            .wake_due_ms
            .is_none_or(|t| row.wake_at_ms.is_some_and(|w| w <= t))
        && (!query.waits_on_call || row.waits_on_call)
        && !(query.skip_idle_input
            && row.state == crate::model::TaskState::InputRequired
            && row.wake_at_ms.is_none())
        && query
            .id_prefix
            .as_ref()
            .is_none_or(|p| row.id.starts_with(p.as_str()))
}

#[async_trait]
impl Store for MemoryStore {
    async fn append(&self, append: Append) -> Result<(), StoreError> {
        let at_ms = append.at_ms;
        apply(&mut self.lock(), append, at_ms)
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.lock().get(task_id).map(|task| task.row.clone()))
    }

    async fn task_view(
        &self,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<Option<TaskView>, StoreError> {
        Ok(self
            .lock()
            .get(task_id)
            .map(|task| task.view.view(task.row.clone(), history)))
    }

    async fn journal(
        &self,
        task_id: &str,
        after_seq: u64,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        Ok(self
            .lock()
            .get(task_id)
            .map(|task| task.after(after_seq).to_vec())
            .unwrap_or_default())
    }

    /// A page of `appends` entries (the memory store keeps entries, not appends).
    async fn journal_page(
        &self,
        task_id: &str,
        after_seq: u64,
        appends: usize,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        Ok(self
            .lock()
            .get(task_id)
            .map(|task| {
                let rest = task.after(after_seq);
                rest[..rest.len().min(appends.max(1))].to_vec()
            })
            .unwrap_or_default())
    }

    async fn journal_for_replay(&self, task_id: &str) -> Result<Vec<JournalRecord>, StoreError> {
        let tasks = self.lock();
        let Some(Stored { journal, .. }) = tasks.get(task_id) else {
            return Ok(Vec::new());
        };
        let from = journal
            .iter()
            .rposition(|r| matches!(r.entry, crate::journal::Entry::Checkpoint { .. }))
            .unwrap_or(0);
        Ok(journal
            .iter()
            .take(1)
            .chain(journal.iter().skip(from.max(1)))
            .cloned()
            .collect())
    }

    async fn list(&self, query: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        let mut rows: Vec<TaskRecord> = self
            .lock()
            .values()
            .filter(|task| matches(&task.row, &query))
            .map(|task| task.row.clone())
            .collect();
        rows.sort_by(|a, b| {
            a.created_at_ms
                .cmp(&b.created_at_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        if let Some(limit) = query.limit {
            rows.reverse();
            rows.truncate(limit);
        }
        Ok(rows)
    }

    async fn prune(&self, prune: &super::Prune) -> Result<super::Pruned, StoreError> {
        // Tasks whose sender still reads their journal.
        let delivering: HashSet<String> = self
            .pushes()
            .iter()
            .filter(|(_, push)| !push.finished)
            .map(|((task_id, _), _)| task_id.clone())
            .collect();
        let mut tasks = self.lock();
        // The finished tasks past `cutoff` (and `also`), oldest first, at most `limit`.
        let due = |tasks: &Tasks, cutoff: i64, also: &dyn Fn(&Stored) -> bool| {
            let mut due: Vec<(i64, String)> = tasks
                .values()
                .filter(|t| t.row.state.is_terminal() && t.view.status_at_ms < cutoff && also(t))
                .map(|t| (t.view.status_at_ms, t.row.id.clone()))
                .collect();
            due.sort();
            due.truncate(prune.limit);
            due
        };
        let mut pruned = super::Pruned::default();
        if let Some(cutoff) = prune.tasks_before_ms {
            // A push delivery not finished by now never will be: its config goes with the task.
            let gone = due(&tasks, cutoff, &|_| true);
            for (_, id) in &gone {
                tasks.remove(id);
            }
            drop(tasks);
            self.pushes()
                .retain(|(task_id, _), _| !gone.iter().any(|(_, id)| id == task_id));
            self.dispatched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|row| !gone.iter().any(|(_, id)| *id == row.task_id));
            pruned.deleted = gone.len() as u64;
            tasks = self.lock();
        }
        if let Some(cutoff) = prune.journals_before_ms {
            // A task whose push deliveries are not finished keeps its journal: the sender reads it.
            let compactable = |t: &Stored| !t.compacted && !delivering.contains(&t.row.id);
            for (_, id) in due(&tasks, cutoff, &compactable) {
                if let Some(task) = tasks.get_mut(&id) {
                    let (first, last) = (task.first_append_ends, task.last_append_starts);
                    task.journal.retain(|r| r.seq <= first || r.seq >= last);
                    task.compacted = true;
                    pruned.compacted += 1;
                }
            }
        }
        Ok(pruned)
    }

    fn push(&self) -> Option<&dyn PushStore> {
        Some(self)
    }

    fn dispatch(&self) -> Option<&dyn super::DispatchStore> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl super::DispatchStore for MemoryStore {
    async fn dispatch(
        &self,
        task_id: &str,
        id: &crate::flow::InvocationId,
        cmd: &crate::flow::Cmd,
    ) -> Result<(), StoreError> {
        let mut rows = self.dispatched.lock().unwrap_or_else(|p| p.into_inner());
        if !rows.iter().any(|r| &r.id == id) {
            rows.push(DispatchRow {
                task_id: task_id.to_owned(),
                id: id.clone(),
                cmd: cmd.clone(),
                claimed_until_ms: 0,
                claims: 0,
            });
        }
        Ok(())
    }

    async fn claim_dispatched(
        &self,
        _owner: &str,
        ttl_ms: i64,
        limit: usize,
    ) -> Result<Vec<super::Dispatched>, StoreError> {
        let now = crate::journal::now_ms();
        let mut rows = self.dispatched.lock().unwrap_or_else(|p| p.into_inner());
        Ok(rows
            .iter_mut()
            .filter(|r| r.claimed_until_ms <= now)
            .take(limit)
            .map(|r| {
                r.claimed_until_ms = now.saturating_add(ttl_ms);
                r.claims += 1;
                super::Dispatched {
                    task_id: r.task_id.clone(),
                    id: r.id.clone(),
                    cmd: r.cmd.clone(),
                    claims: r.claims,
                }
            })
            .collect())
    }

    async fn dispatch_done(&self, id: &crate::flow::InvocationId) -> Result<(), StoreError> {
        self.dispatched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|r| &r.id != id);
        Ok(())
    }
}

#[async_trait]
impl PushStore for MemoryStore {
    async fn put_push_config(
        &self,
        task_id: &str,
        config: &PushConfig,
        delivered_seq: u64,
    ) -> Result<(), StoreError> {
        if !self.lock().contains_key(task_id) {
            return Err(StoreError::UnknownTask {
                task_id: task_id.to_owned(),
            });
        }
        let key = (task_id.to_owned(), config.id.clone());
        let mut pushes = self.pushes();
        match pushes.get_mut(&key) {
            Some(push) => push.config = config.clone(),
            None => {
                pushes.insert(
                    key,
                    MemPush {
                        config: config.clone(),
                        delivered_seq,
                        attempts: 0,
                        next_at_ms: 0,
                        owner: None,
                        lease_until_ms: 0,
                        finished: false,
                    },
                );
            }
        }
        Ok(())
    }

    async fn push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfig>, StoreError> {
        let key = (task_id.to_owned(), config_id.to_owned());
        Ok(self.pushes().get(&key).map(|p| p.config.clone()))
    }

    async fn push_deliveries(
        &self,
        task_id: &str,
    ) -> Result<Vec<super::push::PushDelivery>, StoreError> {
        let now = crate::journal::now_ms();
        Ok(self
            .pushes()
            .iter()
            .filter(|((task, _), _)| task == task_id)
            .map(|(_, p)| super::push::PushDelivery {
                config: p.config.clone(),
                delivered_seq: p.delivered_seq,
                attempts: p.attempts,
                next_at_ms: p.next_at_ms,
                finished: p.finished,
                sender: p.owner.clone().filter(|_| p.lease_until_ms > now),
            })
            .collect())
    }

    async fn push_configs(
        &self,
        task_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PushConfig>, StoreError> {
        Ok(self
            .pushes()
            .iter()
            .filter(|((task, id), _)| task == task_id && after.is_none_or(|a| id.as_str() > a))
            .take(limit)
            .map(|(_, p)| p.config.clone())
            .collect())
    }

    async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        let key = (task_id.to_owned(), config_id.to_owned());
        Ok(self.pushes().remove(&key).is_some())
    }

    async fn claim_push(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
        exclusive: bool,
        task_id: Option<&str>,
    ) -> Result<Vec<PushClaim>, StoreError> {
        let tasks = self.lock();
        let mut pushes = self.pushes();
        let mut due: Vec<(&(String, String), &mut MemPush)> = pushes
            .iter_mut()
            .filter(|((task, _), p)| {
                task_id.is_none_or(|only| only == task)
                    && !p.finished
                    && tasks
                        .get(task)
                        .is_some_and(|t| t.row.last_seq > p.delivered_seq)
                    && p.next_at_ms <= now_ms
                    && (p.owner.is_none()
                        || p.lease_until_ms < now_ms
                        || (exclusive && p.owner.as_deref() != Some(owner)))
            })
            .collect();
        due.sort_by_key(|(_, p)| p.next_at_ms);
        Ok(due
            .into_iter()
            .take(limit)
            .map(|((task, _), p)| {
                p.owner = Some(owner.to_owned());
                p.lease_until_ms = now_ms.saturating_add(lease_ms);
                PushClaim {
                    task_id: task.clone(),
                    config: p.config.clone(),
                    delivered_seq: p.delivered_seq,
                    attempts: p.attempts,
                }
            })
            .collect())
    }

    async fn push_delivered(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        seq: u64,
        finished: bool,
        lease_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let key = (task_id.to_owned(), config_id.to_owned());
        let mut pushes = self.pushes();
        match pushes.get_mut(&key) {
            Some(p) if p.owner.as_deref() == Some(owner) => {
                p.delivered_seq = p.delivered_seq.max(seq);
                p.finished |= finished;
                p.attempts = 0;
                p.lease_until_ms = lease_until_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release_push(
        &self,
        task_id: &str,
        config_id: &str,
        owner: &str,
        attempts: u32,
        next_at_ms: i64,
    ) -> Result<(), StoreError> {
        let key = (task_id.to_owned(), config_id.to_owned());
        if let Some(p) = self
            .pushes()
            .get_mut(&key)
            .filter(|p| p.owner.as_deref() == Some(owner))
        {
            p.owner = None;
            p.attempts = attempts;
            p.next_at_ms = next_at_ms;
        }
        Ok(())
    }
}
