//! Reasoning items kept between the calls of a run.
//!
//! A reasoning model's reply carries `reasoning` items (with `encrypted_content`, since
//! requests are `store: false`) before its function calls; sent back before those calls in the
//! next request, they let the model go on from its chain of thought instead of starting over.
//! The loop's messages have no place for them, so the client keeps them itself, keyed by the id
//! of the first call of the reply they came with: ids are unique, so runs sharing the client
//! never see each other's items, and a conversation written by another provider (or before a
//! restart) simply has none to send. The cache is bounded; an item evicted is only a thought
//! the model has to think again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// Replies remembered; far more than the calls in flight of any realistic server.
const CAPACITY: usize = 2048;

#[derive(Debug, Default)]
pub(crate) struct ReasoningCache {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_call: HashMap<String, Vec<Value>>,
    order: VecDeque<String>,
}

impl ReasoningCache {
    /// Remembers the reasoning `items` of a reply whose first call is `first_call_id`.
    pub fn remember(&self, first_call_id: &str, items: Vec<Value>) {
        if items.is_empty() {
            return;
        }
        let mut entries = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if entries
            .by_call
            .insert(first_call_id.to_owned(), items)
            .is_none()
        {
            entries.order.push_back(first_call_id.to_owned());
        }
        while entries.order.len() > CAPACITY {
            if let Some(oldest) = entries.order.pop_front() {
                entries.by_call.remove(&oldest);
            }
        }
    }

    /// The reasoning items to send before the calls of the reply whose first call is `call_id`.
    pub fn items_before(&self, call_id: &str) -> Vec<Value> {
        let entries = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        entries.by_call.get(call_id).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_are_found_by_the_first_call_and_the_oldest_go_first() {
        let cache = ReasoningCache::default();
        cache.remember("call_a", vec![json!({"type": "reasoning", "id": "rs_1"})]);
        cache.remember("call_none", Vec::new());
        assert_eq!(cache.items_before("call_a").len(), 1);
        assert!(cache.items_before("call_none").is_empty());
        for n in 0..CAPACITY {
            cache.remember(&format!("call_{n}"), vec![json!({"n": n})]);
        }
        assert!(cache.items_before("call_a").is_empty(), "evicted");
        assert_eq!(
            cache.items_before(&format!("call_{}", CAPACITY - 1)).len(),
            1
        );
    }
}
