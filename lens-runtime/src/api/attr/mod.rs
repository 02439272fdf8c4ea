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

// the attributes a site gives its span: the engine's list
pub use super::engine_socket::Attrs;

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::{Array, Value};

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
