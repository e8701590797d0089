//! Jute primitive encodings (big-endian ints, length-prefixed buffers, strings and vectors)
//! and the `Jute` trait every wire type implements.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record truncated: needed {needed} more bytes, {remaining} left")]
    Truncated { needed: usize, remaining: usize },
    #[error("invalid length {0}")]
    BadLength(i32),
    #[error("unknown multi sub-operation type {0}")]
    BadMultiOp(i32),
    #[error("opcode {0} is not a client request")]
    NotARequest(i32),
}

/// A cursor over a received payload. Buffers are split off without copying.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated {
                needed: n,
                remaining: self.buf.len(),
            })
        } else {
            Ok(())
        }
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8() != 0)
    }

    /// A length-prefixed buffer; `None` for the null encoding (-1).
    pub fn buffer(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let len = self.i32()?;
        match len {
            -1 => Ok(None),
            n if n < -1 => Err(DecodeError::BadLength(n)),
            n => {
                self.need(n as usize)?;
                Ok(Some(self.buf.split_to(n as usize)))
            }
        }
    }

    /// A length-prefixed string, decoded leniently (invalid UTF-8 is replaced).
    pub fn ustring(&mut self) -> Result<Option<String>, DecodeError> {
        Ok(self.buffer()?.map(|b| match std::str::from_utf8(&b) {
            // The usual case, checked by the faster of the two validators.
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(&b).into_owned(),
        }))
    }

    /// A vector count: `None` for null (-1).
    pub fn vec_len(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.i32()? {
            -1 => Ok(None),
            n if n < -1 => Err(DecodeError::BadLength(n)),
            // Every element takes at least one byte, so a count larger than what is left
            // cannot be satisfied: the payload is truncated (or the count is a lie). Refuse
            // it before allocating.
            n if n as usize > self.buf.len() => Err(DecodeError::Truncated {
                needed: n as usize,
                remaining: self.buf.len(),
            }),
            n => Ok(Some(n as usize)),
        }
    }

    /// Takes the rest of the payload.
    pub fn rest(&mut self) -> Bytes {
        self.buf.split_off(0)
    }
}

/// A value with a Jute encoding.
pub trait Jute: Sized {
    fn write(&self, out: &mut BytesMut);
    fn read(r: &mut Reader) -> Result<Self, DecodeError>;
}

impl Jute for i32 {
    fn write(&self, out: &mut BytesMut) {
        out.put_i32(*self)
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.i32()
    }
}

impl Jute for i64 {
    fn write(&self, out: &mut BytesMut) {
        out.put_i64(*self)
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.i64()
    }
}

impl Jute for bool {
    fn write(&self, out: &mut BytesMut) {
        out.put_u8(*self as u8)
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.bool()
    }
}

/// A non-null string; a null on the wire reads as the empty string.
impl Jute for String {
    fn write(&self, out: &mut BytesMut) {
        write_bytes(out, self.as_bytes())
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(r.ustring()?.unwrap_or_default())
    }
}

/// A nullable string.
impl Jute for Option<String> {
    fn write(&self, out: &mut BytesMut) {
        match self {
            Some(s) => write_bytes(out, s.as_bytes()),
            None => out.put_i32(-1),
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.ustring()
    }
}

/// A non-null buffer; a null on the wire reads as empty.
impl Jute for Bytes {
    fn write(&self, out: &mut BytesMut) {
        write_bytes(out, self)
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(r.buffer()?.unwrap_or_default())
    }
}

/// A nullable buffer (znode data: null and empty are different).
impl Jute for Option<Bytes> {
    fn write(&self, out: &mut BytesMut) {
        match self {
            Some(b) => write_bytes(out, b),
            None => out.put_i32(-1),
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.buffer()
    }
}

/// A vector; a null on the wire reads as empty.
impl<T: Jute> Jute for Vec<T> {
    fn write(&self, out: &mut BytesMut) {
        out.put_i32(self.len() as i32);
        for item in self {
            item.write(out);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        let n = r.vec_len()?.unwrap_or(0);
        // The count is bounded by the payload size, but an element can be much larger in
        // memory than its smallest encoding: do not let a count alone decide the allocation.
        let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            v.push(T::read(r)?);
        }
        Ok(v)
    }
}

/// The most elements a vector decode reserves up front; longer vectors grow as they are read.
const MAX_PREALLOC: usize = 1024;

/// Writes a length-prefixed byte string.
pub fn write_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

/// Encodes a value into a fresh buffer (no frame length).
pub fn to_bytes<T: Jute>(v: &T) -> Bytes {
    let mut out = BytesMut::new();
    v.write(&mut out);
    out.freeze()
}

/// Decodes a value from a payload, ignoring trailing bytes as the real server does.
pub fn from_bytes<T: Jute>(b: Bytes) -> Result<T, DecodeError> {
    T::read(&mut Reader::new(b))
}

/// Declares a Jute record: a struct whose fields are encoded in declaration order.
///
/// ```
/// zkd_protocol::record! {
///     pub struct Pair { pub n: i32, pub name: String }
/// }
/// let bytes = zkd_protocol::to_bytes(&Pair { n: 1, name: "ab".into() });
/// assert_eq!(&bytes[..], &[0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b']);
/// ```
#[macro_export]
macro_rules! record {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }

        impl $crate::jute::Jute for $name {
            #[allow(unused_variables)]
            fn write(&self, out: &mut $crate::__bytes::BytesMut) {
                $($crate::jute::Jute::write(&self.$field, out);)*
            }
            #[allow(unused_variables)]
            fn read(r: &mut $crate::jute::Reader) -> Result<Self, $crate::jute::DecodeError> {
                Ok($name { $($field: <$ty as $crate::jute::Jute>::read(r)?),* })
            }
        }

        $crate::__record_strategy!($name { $($field: $ty),* });
    };
}

/// Test support for `record!`: a proptest strategy built from the field types' strategies.
/// Expands to nothing outside this crate's own tests.
#[cfg(test)]
#[doc(hidden)]
#[macro_export]
macro_rules! __record_strategy {
    ($name:ident { $($field:ident : $ty:ty),* }) => {
        impl $crate::jute::strategy::Generate for $name {
            fn strategy() -> proptest::strategy::BoxedStrategy<Self> {
                use proptest::strategy::Strategy;
                ($(<$ty as $crate::jute::strategy::Generate>::strategy(),)*)
                    .prop_map(|($($field,)*)| $name { $($field),* })
                    .boxed()
            }
        }
    };
}

#[cfg(not(test))]
#[doc(hidden)]
#[macro_export]
macro_rules! __record_strategy {
    ($($tokens:tt)*) => {};
}

/// Proptest strategies for the Jute field types, used by `record!` in this crate's tests.
/// Strings, buffers and vectors are generated non-null: null decodes to empty for them.
#[cfg(test)]
pub(crate) mod strategy {
    use bytes::Bytes;
    use proptest::prelude::*;

    pub(crate) trait Generate: Sized + std::fmt::Debug {
        fn strategy() -> BoxedStrategy<Self>;
    }

    /// Integers and flags: any value of the type.
    macro_rules! any_value {
        ($($t:ty),*) => {$(
            impl Generate for $t {
                fn strategy() -> BoxedStrategy<Self> {
                    any::<$t>().boxed()
                }
            }
        )*};
    }
    any_value!(i32, i64, bool);

    impl Generate for String {
        fn strategy() -> BoxedStrategy<Self> {
            prop::collection::vec(any::<char>(), 0..12)
                .prop_map(String::from_iter)
                .boxed()
        }
    }

    impl Generate for Bytes {
        fn strategy() -> BoxedStrategy<Self> {
            prop::collection::vec(any::<u8>(), 0..24)
                .prop_map(Bytes::from)
                .boxed()
        }
    }

    impl<T: Generate + 'static> Generate for Option<T> {
        fn strategy() -> BoxedStrategy<Self> {
            prop::option::of(T::strategy()).boxed()
        }
    }

    impl<T: Generate + 'static> Generate for Vec<T> {
        fn strategy() -> BoxedStrategy<Self> {
            prop::collection::vec(T::strategy(), 0..4).boxed()
        }
    }
}
