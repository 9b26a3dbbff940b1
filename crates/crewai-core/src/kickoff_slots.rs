//! [`KickoffSlots`]: what a kickoff opens at most once, for the first task that needs it, and
//! shares with every later task (MCP sessions, A2A conversations).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use tokio::sync::{Mutex, OnceCell};

/// Values by key, each opened once per kickoff; clones share them. Two tasks asking for the
/// same key at once wait for one opening instead of racing two.
pub(crate) struct KickoffSlots<K, V> {
    slots: Arc<Mutex<HashMap<K, Arc<Slot<V>>>>>,
}

/// One value, empty until its first successful opening.
type Slot<V> = OnceCell<Arc<V>>;

impl<K, V> Default for KickoffSlots<K, V> {
    fn default() -> Self {
        Self {
            slots: Arc::default(),
        }
    }
}

impl<K, V> Clone for KickoffSlots<K, V> {
    fn clone(&self) -> Self {
        Self {
            slots: Arc::clone(&self.slots),
        }
    }
}

impl<K: Eq + Hash, V> KickoffSlots<K, V> {
    /// The value of `key`, opened with `open` when this kickoff has none yet. A failed opening
    /// leaves the slot empty, so a later task tries again.
    pub(crate) async fn get_or_open<E, F, Fut>(&self, key: K, open: F) -> Result<Arc<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let cell = {
            let mut slots = self.slots.lock().await;
            Arc::clone(slots.entry(key).or_default())
        };
        let value = cell
            .get_or_try_init(|| async { open().await.map(Arc::new) })
            .await?;
        Ok(Arc::clone(value))
    }

    /// Every value opened so far, taken out of the slots (the kickoff is ending).
    pub(crate) async fn drain(&self) -> Vec<Arc<V>> {
        let cells: Vec<_> = self
            .slots
            .lock()
            .await
            .drain()
            .map(|(_, cell)| cell)
            .collect();
        cells
            .into_iter()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }
}
