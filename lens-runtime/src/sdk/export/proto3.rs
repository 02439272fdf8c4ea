//! A serde serializer adapter that writes non-finite `f32`/`f64` as the
//! proto3 JSON mapping asks (`"NaN"`, `"Infinity"`, `"-Infinity"`) and
//! forwards everything else unchanged. serde_json writes `null` for them,
//! and opentelemetry-proto's derived serde passes most doubles (attribute
//! values, metric point values, histogram sums) straight to `serialize_f64`.
//! Wrapping the serializer covers every double of every message at the cost
//! of one `is_finite` test per double, with no pre-pass and no rewriting of
//! the output.

use serde::ser::{self, Serialize, Serializer};

/// The adapter: a serializer, or one of its compound states.
#[derive(Debug)]
pub(super) struct Doubles<S>(pub(super) S);

/// A value whose serialization goes through [`Doubles`].
struct Wrap<'a, T: ?Sized>(&'a T);

impl<T: ?Sized + Serialize> Serialize for Wrap<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(Doubles(s))
    }
}

/// The proto3 JSON string of a non-finite double.
fn special(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v.is_sign_positive() {
        "Infinity"
    } else {
        "-Infinity"
    }
}

macro_rules! forward {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
            self.0.$method(v)
        }
    )*};
}

impl<S: Serializer> Serializer for Doubles<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Doubles<S::SerializeSeq>;
    type SerializeTuple = Doubles<S::SerializeTuple>;
    type SerializeTupleStruct = Doubles<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Doubles<S::SerializeTupleVariant>;
    type SerializeMap = Doubles<S::SerializeMap>;
    type SerializeStruct = Doubles<S::SerializeStruct>;
    type SerializeStructVariant = Doubles<S::SerializeStructVariant>;

    forward!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            self.0.serialize_f32(v)
        } else {
            self.0.serialize_str(special(f64::from(v)))
        }
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            self.0.serialize_f64(v)
        } else {
            self.0.serialize_str(special(v))
        }
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_none()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<S::Ok, S::Error> {
        self.0.serialize_some(&Wrap(v))
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0.serialize_newtype_struct(name, &Wrap(v))
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.0
            .serialize_newtype_variant(name, index, variant, &Wrap(v))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.0.serialize_seq(len).map(Doubles)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.0.serialize_tuple(len).map(Doubles)
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.0.serialize_tuple_struct(name, len).map(Doubles)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        self.0
            .serialize_tuple_variant(name, index, variant, len)
            .map(Doubles)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.0.serialize_map(len).map(Doubles)
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.0.serialize_struct(name, len).map(Doubles)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        self.0
            .serialize_struct_variant(name, index, variant, len)
            .map(Doubles)
    }
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// The compound states: each element, key, value or field is wrapped.
macro_rules! compound {
    ($trait:ident, $method:ident) => {
        impl<S: ser::$trait> ser::$trait for Doubles<S> {
            type Ok = S::Ok;
            type Error = S::Error;
            fn $method<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), S::Error> {
                ser::$trait::$method(&mut self.0, &Wrap(v))
            }
            fn end(self) -> Result<S::Ok, S::Error> {
                ser::$trait::end(self.0)
            }
        }
    };
    (fields $trait:ident) => {
        impl<S: ser::$trait> ser::$trait for Doubles<S> {
            type Ok = S::Ok;
            type Error = S::Error;
            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), S::Error> {
                ser::$trait::serialize_field(&mut self.0, key, &Wrap(v))
            }
            fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
                ser::$trait::skip_field(&mut self.0, key)
            }
            fn end(self) -> Result<S::Ok, S::Error> {
                ser::$trait::end(self.0)
            }
        }
    };
}

compound!(SerializeSeq, serialize_element);
compound!(SerializeTuple, serialize_element);
compound!(SerializeTupleStruct, serialize_field);
compound!(SerializeTupleVariant, serialize_field);
compound!(fields SerializeStruct);
compound!(fields SerializeStructVariant);

impl<S: ser::SerializeMap> ser::SerializeMap for Doubles<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), S::Error> {
        self.0.serialize_key(&Wrap(k))
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), S::Error> {
        self.0.serialize_value(&Wrap(v))
    }
    fn serialize_entry<K, V>(&mut self, k: &K, v: &V) -> Result<(), S::Error>
    where
        K: ?Sized + Serialize,
        V: ?Sized + Serialize,
    {
        self.0.serialize_entry(&Wrap(k), &Wrap(v))
    }
    fn end(self) -> Result<S::Ok, S::Error> {
        self.0.end()
    }
}
