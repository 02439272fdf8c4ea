//! The attributes a site gives its span, in the form the engine keeps
//! them in a record.

/// The attributes a site gives its span: one inline (no allocation),
/// more on the heap (one allocation of the site's count). One, not more:
/// the record moves into its thread's list and out again, and each inline
/// slot (56 bytes) costs more in those copies than an allocation saves
/// (three inline slots made the enabled site dearer, as
/// `scripts/callgrind.sh` counts it). Generated code builds them; a
/// `Vec<KeyValue>` converts.
///
/// ```
/// use lens::__private::{Attrs, KeyValue};
/// let mut a = Attrs::with_capacity(1);
/// a.push(KeyValue::new("k", 1));
/// let b: Attrs = vec![KeyValue::new("k", 1)].into();
/// assert_eq!(a.len(), b.len());
/// ```
#[doc(hidden)]
#[derive(Debug, Default, Clone)]
pub struct Attrs(pub(crate) smallvec::SmallVec<[opentelemetry::KeyValue; 1]>);

impl Attrs {
    /// No attributes.
    #[inline]
    pub fn new() -> Self {
        Attrs(smallvec::SmallVec::new())
    }

    /// Room for `n` attributes (on the heap only if `n` > 1).
    #[inline]
    pub fn with_capacity(n: usize) -> Self {
        Attrs(smallvec::SmallVec::with_capacity(n))
    }

    /// Adds one attribute.
    #[inline]
    pub fn push(&mut self, attribute: opentelemetry::KeyValue) {
        self.0.push(attribute);
    }

    /// How many attributes there are.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The attributes as a `Vec` (the heap buffer as it is, or one
    /// allocation of the exact count).
    pub fn into_vec(mut self) -> Vec<opentelemetry::KeyValue> {
        if self.0.spilled() {
            return self.0.into_vec();
        }
        // moved bit for bit: `SmallVec::into_vec`, or a loop that pushes
        // each, goes through the iterator's per-element checks even for
        // one
        let n = self.0.len();
        if n == 0 {
            return Vec::new();
        }
        let mut v = Vec::with_capacity(n);
        // SAFETY: `v` has room for `n`; the `n` inline attributes are
        // copied there and counted in `v`, and `self.0`'s length is set to
        // 0 first, so they are owned (and dropped) once, by `v`.
        unsafe {
            self.0.set_len(0);
            std::ptr::copy_nonoverlapping(self.0.as_ptr(), v.as_mut_ptr(), n);
            v.set_len(n);
        }
        // inline and now empty: it owns nothing, and forgetting it saves
        // the call that would drop its no elements
        std::mem::forget(self);
        v
    }
}

impl From<Vec<opentelemetry::KeyValue>> for Attrs {
    fn from(v: Vec<opentelemetry::KeyValue>) -> Self {
        Attrs(smallvec::SmallVec::from_vec(v))
    }
}

impl std::ops::Deref for Attrs {
    type Target = [opentelemetry::KeyValue];
    fn deref(&self) -> &[opentelemetry::KeyValue] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inline or on the heap, every attribute comes out once, in order,
    /// owned strings included (each dropped once: a double free aborts).
    #[test]
    fn into_vec_moves_each_attribute_once() {
        use opentelemetry::KeyValue;
        for n in 0..4 {
            let mut a = Attrs::new();
            for i in 0..n {
                a.push(KeyValue::new(format!("k{i}"), format!("v{i}")));
            }
            let v = a.into_vec();
            let got: Vec<String> = v
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect();
            let want: Vec<String> = (0..n).map(|i| format!("k{i}=v{i}")).collect();
            assert_eq!(got, want, "{n} attributes");
            if n <= 1 {
                assert_eq!(v.capacity(), n, "inline: one allocation of the count");
            }
        }
    }
}
