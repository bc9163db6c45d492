//! An optional handle on a piece of the agent's I/O, injected into the
//! pure scheduling code (a link-speed reader, a thermal source) so tests
//! run it with none. Its `Debug` says only whether it is set.

use std::sync::Arc;

/// `on` with a shared `T`, `off` without.
pub struct Injected<T: ?Sized>(Option<Arc<T>>);

impl<T: ?Sized> Injected<T> {
    /// Set to `inner`.
    pub fn new(inner: Arc<T>) -> Injected<T> {
        Injected(Some(inner))
    }

    /// Not set.
    pub fn none() -> Injected<T> {
        Injected(None)
    }

    /// The handle, when set.
    pub fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }
}

impl<T: ?Sized> Clone for Injected<T> {
    fn clone(&self) -> Self {
        Injected(self.0.clone())
    }
}

impl<T: ?Sized> Default for Injected<T> {
    fn default() -> Self {
        Injected::none()
    }
}

impl<T: ?Sized> std::fmt::Debug for Injected<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "on" } else { "off" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_says_only_whether_it_is_set() {
        #[derive(Debug, Default)]
        struct Probe(Injected<u8>);
        assert_eq!(format!("{:?}", Probe::default()), "Probe(off)");
        let on = Probe(Injected::new(Arc::new(7)));
        assert_eq!(format!("{on:?}"), "Probe(on)");
        assert_eq!(on.0.clone().get(), Some(&7));
        assert_eq!(Injected::<u8>::none().get(), None);
    }
}
