//! [`NodeState`]: an opaque slot holding one value whose type its owner names. A kernel
//! keeps its state across executions in one (each kernel module defines its own state
//! type and is the only one to look inside); an engine keeps its per-state data in one.
//! The slot knows nothing of the types it holds, so the plan and the context that carry
//! it stay below every kernel and engine.

use std::any::{Any, TypeId};

/// One owner's state of a type only the owner names, made on first use.
///
/// Why the shape: a launch kernel reads its state on every call, the hot path of a static
/// model. `Box<dyn Any>`'s own `downcast_mut` asks the value for its type through the
/// vtable, an indirect call per access; here the type's id is kept beside the box, so an
/// access is one compare of two words against a constant and a pointer cast, and the
/// value stays where it was boxed (its first execution), so a steady state allocates
/// nothing.
pub struct NodeState {
    /// The type of `value`; [`Empty`]'s while there is none.
    type_id: TypeId,
    value: Option<Box<dyn Any + Send>>,
}

/// The type of no state: private, so no owner can store one.
struct Empty;

impl Default for NodeState {
    fn default() -> Self {
        NodeState {
            type_id: TypeId::of::<Empty>(),
            value: None,
        }
    }
}

impl std::fmt::Debug for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeState")
            .field("set", &self.value.is_some())
            .finish()
    }
}

impl NodeState {
    /// The state as a `T`, made with `make` when it holds nothing or another type.
    #[inline(always)]
    pub fn get_or_insert_with<T: Any + Send>(&mut self, make: impl FnOnce() -> T) -> &mut T {
        if self.type_id != TypeId::of::<T>() {
            self.set(make());
        }
        match &mut self.value {
            // SAFETY: `type_id` is the id of the boxed value's type (`set` keeps them
            // together), and it is `T`'s.
            Some(b) => unsafe { &mut *(&mut **b as *mut (dyn Any + Send)).cast::<T>() },
            None => unreachable!("a state whose type is not `Empty` is set"),
        }
    }

    /// The state, if it holds a `T`.
    #[inline]
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        if self.type_id != TypeId::of::<T>() {
            return None;
        }
        // SAFETY: as in `get_or_insert_with`.
        self.value
            .as_ref()
            .map(|b| unsafe { &*(&**b as *const (dyn Any + Send)).cast::<T>() })
    }

    /// Replaces the state with `value`.
    #[cold]
    pub fn set<T: Any + Send>(&mut self, value: T) {
        self.value = Some(Box::new(value));
        self.type_id = TypeId::of::<T>();
    }

    /// Takes the state out, if it holds a `T`.
    pub fn take<T: Any + Send>(&mut self) -> Option<T> {
        if self.type_id != TypeId::of::<T>() {
            return None;
        }
        self.type_id = TypeId::of::<Empty>();
        let b = self.value.take()?;
        // SAFETY: as in `get_or_insert_with`.
        Some(*unsafe { Box::from_raw(Box::into_raw(b).cast::<T>()) })
    }
}

#[cfg(test)]
mod tests {
    use super::NodeState;

    #[test]
    fn a_state_holds_one_type_and_is_remade_for_another() {
        let mut s = NodeState::default();
        assert_eq!(s.get::<u32>(), None);
        *s.get_or_insert_with(|| 1u32) += 1;
        assert_eq!(s.get::<u32>(), Some(&2));
        assert_eq!(*s.get_or_insert_with(|| 7u32), 2);
        assert_eq!(s.get::<u64>(), None);
        assert_eq!(*s.get_or_insert_with(|| String::from("x")), "x");
        assert_eq!(s.get::<u32>(), None);
        assert_eq!(s.take::<String>().as_deref(), Some("x"));
        assert_eq!(s.get::<String>(), None);
    }
}
