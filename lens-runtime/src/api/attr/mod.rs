//! Attribute values: the scalar rule and redaction.

mod rule;
mod set;
mod value;

#[cfg(feature = "sdk-core")]
pub(crate) use rule::is_redactable;

pub use rule::{is_redacted_key, REDACTED, REDACTED_KEYS};
#[cfg(feature = "sdk-core")]
pub(crate) use rule::{is_redacted_key_with, redact_value};
pub(crate) use set::{collect, value_for_key};
pub use set::{safe_set_span_attributes, SpanAttributeTarget};
pub use value::AttributeValue;

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
    use opentelemetry::{Array, Value};

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

    /// `(key, redacted by the default rule)`.
    const TABLE: &[(&str, bool)] = &[
        // sensitive words, whole key or any segment, any case
        ("prompt", true),
        ("PROMPT", true),
        ("gen_ai.Prompt", true),
        ("input_text", true),
        ("output_text", true),
        ("text", true),
        ("llm.text.raw", true),
        ("password", true),
        ("token", true),
        ("api.token", true),
        ("secret", true),
        ("api.secret", true),
        ("key", true),
        ("API.KEY.id", true),
        // sensitive segment endings
        ("api_key", true),
        ("openai.API_KEY", true),
        ("hf_token", true),
        ("access_token.v2", true),
        ("client_secret", true),
        ("db_password", true),
        // GenAI content keys
        ("gen_ai.prompt.0.content", true),
        ("gen_ai.prompt.1.role", true),
        ("gen_ai.completion", true),
        ("gen_ai.completion.0.content", true),
        ("GEN_AI.COMPLETION.0.CONTENT", true),
        ("gen_ai.input.messages", true),
        ("gen_ai.output.messages", true),
        ("gen_ai.system_instructions", true),
        // near-misses and common ML keys
        ("gen_ai.usage.input_tokens", false),
        ("gen_ai.usage.output_tokens", false),
        ("gen_ai.usage.prompt_tokens", false),
        ("prompt_tokens", false),
        ("output_tokens", false),
        ("tokens", false),
        ("tokenizer", false),
        ("tokenizer.name", false),
        ("keyframe", false),
        ("keys", false),
        ("monkey", false),
        ("text_len", false),
        ("texture", false),
        ("context", false),
        ("passwords_checked", false),
        ("secretary", false),
        ("gen_ai.request.model", false),
        ("gen_ai.response.finish_reasons", false),
        ("gen_ai.token.type", false),
        ("gen_ai.input.messages.count", false),
        ("_keys", false),
        ("", false),
        ("prompt\u{e9}", false),
        ("\u{e9}_key", true),
    ];

    #[test]
    fn default_rule_matches_and_near_misses() {
        for &(key, want) in TABLE {
            assert_eq!(is_redacted_key(key), want, "{key:?}");
        }
    }

    #[test]
    fn extra_keys_match_whole_segment_runs() {
        let extra = ["email", "user.ssn", " ", ""];
        for (key, want) in [
            ("email", true),
            ("user.EMAIL", true),
            ("email.hash", true),
            ("a.email.b", true),
            ("user.ssn", true),
            ("app.user.ssn.last4", true),
            ("emails", false),
            ("user_email", false),
            ("ssn", false),
            ("user.ssn_hash", false),
            ("xuser.ssn", false),
            ("http.status", false),
            ("prompt", true),
        ] {
            assert_eq!(is_redacted_key_with(key, &extra), want, "{key:?}");
        }
        assert!(
            !is_redacted_key_with("anything", &[" "]),
            "blank extras ignored"
        );
    }

    #[test]
    fn user_types_are_redacted_by_default() {
        struct Doc(&'static str);
        impl AttributeValue for Doc {
            fn to_value(&self) -> Option<Value> {
                Some(Value::from(self.0))
            }
        }
        struct Tags;
        impl AttributeValue for Tags {
            fn to_value(&self) -> Option<Value> {
                Some(Value::Array(Array::String(vec!["a".into()])))
            }
        }
        struct Count;
        impl AttributeValue for Count {
            fn to_value(&self) -> Option<Value> {
                Some(Value::I64(42))
            }
        }
        assert_eq!(Doc("x").to_value_redacted(), Some(Value::from(REDACTED)));
        assert_eq!(Tags.to_value_redacted(), Some(Value::from(REDACTED)));
        assert_eq!(Count.to_value_redacted(), Some(Value::I64(42)));
        assert_eq!(
            value_for_key("prompt", &Doc("x")),
            Some(Value::from(REDACTED))
        );
        assert_eq!(value_for_key("note", &Doc("x")), Some(Value::from("x")));
        assert_eq!(
            value_for_key("api_key", &vec!["a", "b"]),
            Some(Value::from(REDACTED))
        );
        assert_eq!(
            value_for_key("gen_ai.prompt.0.content", &"hi"),
            Some(Value::from(REDACTED))
        );
        assert_eq!(value_for_key("token", &42u32), Some(Value::I64(42)));
        assert_eq!(
            value_for_key("key", &vec![1i64, 2]),
            Some(Value::Array(Array::I64(vec![1, 2])))
        );
    }

    #[test]
    fn redact_value_is_idempotent() {
        let mut v = Value::from(REDACTED);
        assert!(!redact_value(&mut v), "already redacted: no change");
        let mut f = Value::F64(1.5);
        assert!(!redact_value(&mut f));
        assert_eq!(f, Value::F64(1.5));
    }
}
