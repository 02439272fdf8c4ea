//! `AttributeValue`: the scalar rule for span attribute values.

use super::rule::*;
use opentelemetry::{Array, StringValue, Value};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;
/// A value that can be recorded as a span attribute: `bool`, an integer, a
/// float, a string, a slice / array / `Vec` of one of those, or an `Option`
/// of any of these (`None` records nothing).
///
/// ```
/// use lens::AttributeValue;
/// assert!(3u32.to_value().is_some());
/// assert!(None::<f64>.to_value().is_none());
/// assert_eq!("hi".to_value_redacted().unwrap().as_str(), "[REDACTED]");
/// assert_eq!(7i64.to_value_redacted().unwrap().as_str(), "7");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be recorded as a span attribute value",
    label = "not a scalar, a slice/Vec of scalars, or an Option of those",
    note = "span attribute values must be bool, an integer, a float, a string, a slice/array/Vec of one of those, or an Option of one of those (None is skipped)",
    note = "record a field of it instead, or convert it first (e.g. `value.to_string()`)"
)]
pub trait AttributeValue {
    /// The OpenTelemetry value, or `None` to record nothing.
    fn to_value(&self) -> Option<Value>;
    /// The value under a redacted key: strings and string arrays become
    /// [`REDACTED`], other values are kept. The default applies
    /// `redact_value` to [`to_value`](Self::to_value), so a type
    /// implementing only `to_value` is redacted too.
    ///
    /// ```
    /// use lens::AttributeValue;
    /// use lens::otel::Value;
    /// struct Prompt(String);
    /// impl AttributeValue for Prompt {
    ///     fn to_value(&self) -> Option<Value> { Some(Value::from(self.0.clone())) }
    /// }
    /// let p = Prompt("tell me a secret".into());
    /// assert_eq!(p.to_value_redacted().unwrap().as_str(), "[REDACTED]");
    /// ```
    fn to_value_redacted(&self) -> Option<Value> {
        self.to_value().map(redacted)
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            #[inline]
            fn to_value(&self) -> Option<Value> { Some(Value::I64(i64::from(*self))) }
        }
        impl ArrayElement for $t {
            fn to_array(items: &[Self]) -> Array { Array::I64(items.iter().map(|v| i64::from(*v)).collect()) }
        }
    )*};
}
int_value!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! wide_int_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            /// Values above `i64::MAX` are recorded as decimal strings.
            #[inline]
            fn to_value(&self) -> Option<Value> {
                Some(match i64::try_from(*self) {
                    Ok(v) => Value::I64(v),
                    Err(_) => Value::String(self.to_string().into()),
                })
            }
        }
        impl ArrayElement for $t {
            /// Saturates at `i64::MAX` (arrays hold one type).
            fn to_array(items: &[Self]) -> Array {
                Array::I64(items.iter().map(|v| i64::try_from(*v).unwrap_or(i64::MAX)).collect())
            }
        }
    )*};
}
wide_int_value!(u64, usize, isize);

impl AttributeValue for f64 {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::F64(*self))
    }
}
impl AttributeValue for f32 {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::F64(f64::from(*self)))
    }
}
impl AttributeValue for bool {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

macro_rules! str_value {
    ($($t:ty),*) => {$(
        impl AttributeValue for $t {
            #[inline]
            fn to_value(&self) -> Option<Value> { Some(Value::String(StringValue::from(<str as ToOwned>::to_owned(self)))) }
            #[inline]
            fn to_value_redacted(&self) -> Option<Value> { Some(Value::String(StringValue::from(REDACTED))) }
        }
    )*};
}
str_value!(str, String, Cow<'_, str>, Box<str>, Rc<str>, Arc<str>);

impl<T: AttributeValue + ?Sized> AttributeValue for &T {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        (**self).to_value()
    }
    #[inline]
    fn to_value_redacted(&self) -> Option<Value> {
        (**self).to_value_redacted()
    }
}

impl<T: AttributeValue> AttributeValue for Option<T> {
    #[inline]
    fn to_value(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_value)
    }
    #[inline]
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_ref().and_then(T::to_value_redacted)
    }
}

/// A scalar type that can be an element of an array attribute.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an element of an array span attribute",
    note = "array attribute elements must all be one of: bool, an integer, a float, a string"
)]
pub trait ArrayElement: Sized {
    /// Builds the OpenTelemetry array.
    fn to_array(items: &[Self]) -> Array;
    /// The array under a redacted key: [`redact_value`] applied to
    /// [`to_array`](Self::to_array) (a string array becomes [`REDACTED`]).
    fn to_array_redacted(items: &[Self]) -> Value {
        redacted(Value::Array(Self::to_array(items)))
    }
}

impl ArrayElement for bool {
    fn to_array(items: &[Self]) -> Array {
        Array::Bool(items.to_vec())
    }
}
impl ArrayElement for f64 {
    fn to_array(items: &[Self]) -> Array {
        Array::F64(items.to_vec())
    }
}
impl ArrayElement for f32 {
    fn to_array(items: &[Self]) -> Array {
        Array::F64(items.iter().map(|v| f64::from(*v)).collect())
    }
}
macro_rules! str_elem {
    ($($t:ty),*) => {$(
        impl ArrayElement for $t {
            fn to_array(items: &[Self]) -> Array {
                Array::String(items.iter().map(|s| StringValue::from(<str as ToOwned>::to_owned(s))).collect())
            }
            fn to_array_redacted(_: &[Self]) -> Value { Value::String(StringValue::from(REDACTED)) }
        }
    )*};
}
str_elem!(&str, String, Cow<'_, str>, Box<str>, Arc<str>);

impl<T: ArrayElement> AttributeValue for [T] {
    fn to_value(&self) -> Option<Value> {
        Some(Value::Array(T::to_array(self)))
    }
    fn to_value_redacted(&self) -> Option<Value> {
        Some(T::to_array_redacted(self))
    }
}
impl<T: ArrayElement> AttributeValue for Vec<T> {
    fn to_value(&self) -> Option<Value> {
        self.as_slice().to_value()
    }
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_slice().to_value_redacted()
    }
}
impl<T: ArrayElement, const N: usize> AttributeValue for [T; N] {
    fn to_value(&self) -> Option<Value> {
        self.as_slice().to_value()
    }
    fn to_value_redacted(&self) -> Option<Value> {
        self.as_slice().to_value_redacted()
    }
}
