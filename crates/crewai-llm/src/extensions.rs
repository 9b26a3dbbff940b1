//! [`Extensions`]: typed values that travel with a request for the layers of a stack (see
//! [`crate::layer`]), never to the provider.
//!
//! A run attaches what its layers need to know about a call (who makes it, for which task,
//! where its events go) as one value of its own type; a layer reads it back by type. Nothing
//! here is serialised or compared: two requests that differ only in their extensions are equal
//! and produce the same request body.
//!
//! ```
//! use crewai_llm::{Extensions, LlmRequest, Message};
//!
//! #[derive(Debug, PartialEq)]
//! struct Tenant(&'static str);
//!
//! let mut request = LlmRequest::new(vec![Message::user("hi")]);
//! request.extensions.insert(Tenant("acme"));
//! assert_eq!(request.extensions.get::<Tenant>(), Some(&Tenant("acme")));
//! assert_eq!(request, LlmRequest::new(vec![Message::user("hi")]), "extensions are not compared");
//!
//! // Cloning shares the values: a run builds its extensions once and hands a copy to every call.
//! let shared: Extensions = request.extensions.clone();
//! assert!(shared.get::<Tenant>().is_some());
//! ```

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

type Entry = (TypeId, Arc<dyn Any + Send + Sync>);

/// A small map from a type to one value of it.
///
/// Cloning is one reference-count increment (the entries are shared and copied only when a
/// clone is changed), so a caller can prepare its extensions once and attach them to every
/// request without allocating. A handful of entries at most is expected, so lookups scan.
#[derive(Clone, Default)]
pub struct Extensions {
    entries: Option<Arc<Vec<Entry>>>,
}

impl Extensions {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the value of type `T`, replacing one already there.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        self.insert_arc(Arc::new(value));
    }

    /// [`Extensions::insert`] with a value already shared.
    pub fn insert_arc<T: Any + Send + Sync>(&mut self, value: Arc<T>) {
        let id = TypeId::of::<T>();
        let value: Arc<dyn Any + Send + Sync> = value;
        let entries = Arc::make_mut(self.entries.get_or_insert_with(Default::default));
        match entries.iter_mut().find(|(entry, _)| *entry == id) {
            Some(entry) => entry.1 = value,
            None => entries.push((id, value)),
        }
    }

    fn entry<T: Any>(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        let id = TypeId::of::<T>();
        self.entries
            .as_deref()?
            .iter()
            .find(|(entry, _)| *entry == id)
            .map(|(_, value)| value)
    }

    /// The value of type `T`, if one was set.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.entry::<T>()?.downcast_ref()
    }

    /// The value of type `T` as a shared handle (to keep it past the request).
    pub fn get_arc<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.entry::<T>()?.clone().downcast().ok()
    }

    /// Whether a value of type `T` is set.
    pub fn contains<T: Any>(&self) -> bool {
        self.entry::<T>().is_some()
    }

    /// Removes the value of type `T`, returning it.
    pub fn remove<T: Any + Send + Sync>(&mut self) -> Option<Arc<T>> {
        let id = TypeId::of::<T>();
        let entries = self.entries.as_mut()?;
        let at = entries.iter().position(|(entry, _)| *entry == id)?;
        let (_, value) = Arc::make_mut(entries).remove(at);
        value.downcast().ok()
    }

    /// How many values are set.
    pub fn len(&self) -> usize {
        self.entries.as_deref().map_or(0, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Extensions are call context, not request content: they never make two requests differ.
impl PartialEq for Extensions {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Role(&'static str);
    #[derive(Debug, PartialEq)]
    struct Count(u32);

    #[test]
    fn values_are_found_by_type_replaced_and_removed() {
        let mut extensions = Extensions::new();
        assert!(extensions.is_empty());
        extensions.insert(Role("writer"));
        extensions.insert(Count(1));
        extensions.insert(Count(2));
        assert_eq!(extensions.len(), 2);
        assert_eq!(extensions.get::<Count>(), Some(&Count(2)));
        assert_eq!(
            extensions.get_arc::<Role>().as_deref(),
            Some(&Role("writer"))
        );
        assert_eq!(
            extensions.remove::<Role>().as_deref(),
            Some(&Role("writer"))
        );
        assert!(!extensions.contains::<Role>());
        assert_eq!(extensions.get::<String>(), None);
    }

    #[test]
    fn a_changed_clone_leaves_the_original_alone() {
        let mut original = Extensions::new();
        original.insert(Count(1));
        let mut copy = original.clone();
        copy.insert(Count(7));
        copy.insert(Role("critic"));
        assert_eq!(original.get::<Count>(), Some(&Count(1)));
        assert!(!original.contains::<Role>());
        assert_eq!(copy.get::<Count>(), Some(&Count(7)));
    }
}
