//! TEMPORARY in-test store until store::MemoryStore lands.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use radkit_runtime::journal::{now_ms, JournalRecord};
use radkit_runtime::store::{Append, Store, StoreError, TaskQuery, TaskRecord};

#[derive(Clone, Default)]
pub struct MemoryStore(Arc<Mutex<HashMap<String, (TaskRecord, Vec<JournalRecord>)>>>);

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn append(&self, a: Append) -> Result<(), StoreError> {
        let mut m = self.0.lock().unwrap();
        if let Some(rec) = a.create.clone() {
            if m.contains_key(&rec.id) || a.first_seq != 1 {
                return Err(StoreError::Conflict { task_id: a.task_id, expected: 0, got: a.first_seq });
            }
            m.insert(rec.id.clone(), (rec, Vec::new()));
        }
        let Some((row, journal)) = m.get_mut(&a.task_id) else {
            return Err(StoreError::Conflict { task_id: a.task_id, expected: 0, got: a.first_seq });
        };
        if row.last_seq + 1 != a.first_seq {
            return Err(StoreError::Conflict { task_id: a.task_id, expected: row.last_seq + 1, got: a.first_seq });
        }
        let at = now_ms();
        for (i, entry) in a.entries.into_iter().enumerate() {
            journal.push(JournalRecord { seq: a.first_seq + i as u64, at_ms: at, entry });
        }
        row.last_seq = journal.len() as u64;
        row.updated_at_ms = at;
        if let Some(s) = a.state {
            row.state = s;
        }
        if let Some(w) = a.wake_at_ms {
            row.wake_at_ms = w;
        }
        Ok(())
    }
    async fn task(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.0.lock().unwrap().get(id).map(|(r, _)| r.clone()))
    }
    async fn journal(&self, id: &str, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        Ok(self.0.lock().unwrap().get(id).map(|(_, j)| j.iter().filter(|r| r.seq > after).cloned().collect()).unwrap_or_default())
    }
    async fn list(&self, q: TaskQuery) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .values()
            .map(|(r, _)| r.clone())
            .filter(|r| !q.non_terminal || !r.state.is_terminal())
            .collect())
    }
}
