//! The scalars of OTLP/JSON, written by hand: ids in lowercase hex,
//! integers and times as decimal strings, eight digits at a time, strings
//! with their escape check remembered within a batch ([`Memo`]).

use crate::sdk::export::hex::HEX;
use std::time::{SystemTime, UNIX_EPOCH};

/// An id of `N` bytes as a JSON string of lowercase hex (`Q` = 2N + 2
/// bytes with the quotes), one fixed-size append.
pub(super) fn hex<const N: usize, const Q: usize>(buf: &mut Vec<u8>, bytes: [u8; N]) {
    let mut out = [b'"'; Q];
    for (pair, b) in out[1..Q - 1].chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    buf.extend_from_slice(&out);
}

/// `{"traceId":"<hex>","spanId":"<hex>","traceState":`, one fixed-size
/// append.
pub(super) fn ids(buf: &mut Vec<u8>, trace_id: [u8; 16], span_id: [u8; 8]) {
    const HEAD: &[u8; 87] =
        b"{\"traceId\":\"________________________________\",\"spanId\":\"________________\",\"traceState\":";
    let mut out = *HEAD;
    for (pair, b) in out[12..44].chunks_exact_mut(2).zip(trace_id) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    for (pair, b) in out[56..72].chunks_exact_mut(2).zip(span_id) {
        pair.copy_from_slice(&HEX[usize::from(b)]);
    }
    buf.extend_from_slice(&out);
}

/// Whether `s` needs no escape in a JSON string (serde_json escapes the
/// control characters, `"`, `\\` and DEL). No early exit: the loop
/// vectorizes, and most strings are clean.
pub(super) fn clean(s: &[u8]) -> bool {
    !s.iter().fold(false, |bad, &b| {
        bad | (b < 0x20) | (b == b'"') | (b == b'\\') | (b == 0x7f)
    })
}

/// A JSON string (serde_json's escaping).
pub(super) fn string(buf: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    if clean(s.as_bytes()) {
        quoted(buf, s);
        Ok(())
    } else {
        serde_json::to_writer(buf, s)
    }
}

/// `s`, known clean, between quotes.
pub(super) fn quoted(buf: &mut Vec<u8>, s: &str) {
    buf.reserve(s.len() + 2);
    buf.push(b'"');
    buf.extend_from_slice(s.as_bytes());
    buf.push(b'"');
}

/// The decimal digits of each number below 100.
pub(super) const DECIMAL: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// The eight decimal digits of `x` (below 10^8), zero-padded, as the
/// bytes of a little-endian word: four independent table lookups, kept in
/// a register.
#[inline]
pub(super) fn eight(x: u32) -> u64 {
    let (hi, lo) = ((x / 10_000) as usize, (x % 10_000) as usize);
    let pair = |i: usize| u64::from(u16::from_le_bytes(DECIMAL[i]));
    pair(hi / 100) | pair(hi % 100) << 16 | pair(lo / 100) << 32 | pair(lo % 100) << 48
}

/// An unsigned integer in decimal, between `open` and `close` (each
/// written when not 0): three eight-digit blocks (one for a number below
/// 10^8), computed apart, and the significant digits appended.
#[inline]
pub(super) fn digits(buf: &mut Vec<u8>, v: u64, open: u8, close: u8) {
    let count = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut out = [0u8; 24];
    if v < 100_000_000 {
        out[16..].copy_from_slice(&eight(v as u32).to_le_bytes());
    } else {
        let (rest, low) = (v / 100_000_000, (v % 100_000_000) as u32);
        let (high, mid) = ((rest / 100_000_000) as u32, (rest % 100_000_000) as u32);
        out[..8].copy_from_slice(&eight(high).to_le_bytes());
        out[8..16].copy_from_slice(&eight(mid).to_le_bytes());
        out[16..].copy_from_slice(&eight(low).to_le_bytes());
    }
    if open != 0 {
        buf.push(open);
    }
    buf.extend_from_slice(&out[24 - count..]);
    if close != 0 {
        buf.push(close);
    }
}

/// An unsigned integer below 10^8 in decimal: its eight-digit block
/// shifted so that the significant digits come first (their count from
/// the leading zero digits), appended as one word and cut to length.
#[inline]
pub(super) fn small(buf: &mut Vec<u8>, v: u32) {
    let word = eight(v);
    // a zero digit is a zero byte once `'0'` is taken from each
    let zeros = (word - 0x3030_3030_3030_3030).trailing_zeros() as usize / 8;
    let count = 8 - zeros.min(7);
    let len = buf.len() + count;
    buf.extend_from_slice(&(word >> (8 * (8 - count))).to_le_bytes());
    buf.truncate(len);
}

/// An unsigned integer in decimal.
pub(super) fn uint(buf: &mut Vec<u8>, v: u64) {
    if v < 10 {
        buf.push(b'0' + v as u8);
    } else if v < 100_000_000 {
        small(buf, v as u32);
    } else {
        digits(buf, v, 0, 0);
    }
}

/// A signed integer in decimal.
pub(super) fn int(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    uint(buf, v.unsigned_abs());
}

/// What one batch's encoding remembers from span to span:
/// * the digits of the last time written above its last eight: the times
///   of a batch mostly share them (they change every 0.1 s), so most times
///   only compute their last eight digits;
/// * strings already found clean (no escape needed), by address and
///   length: a call site's name and attribute keys repeat span after span.
///   Only strings borrowed from the batch's spans are remembered: they all
///   live, unchanged, for the whole encoding, so an address and a length
///   name one content.
#[derive(Debug, Default)]
pub(super) struct Memo {
    /// `nanos / 10^8` of the last time written (0: none yet).
    high: u64,
    /// `"` and its digits, then room: appended whole and cut to length.
    head: [u8; 24],
    /// The length of `"` and its digits.
    len: usize,
    /// (address, length) of strings found clean, the last four.
    clean: [(usize, usize); 4],
    /// Where the next one goes in `clean`.
    next: usize,
}

impl Memo {
    /// A JSON string of a string borrowed from the batch's spans (see
    /// [`Memo`]), its escape check skipped when it was done before.
    pub(super) fn string(&mut self, buf: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
        let key = (s.as_ptr() as usize, s.len());
        if !self.clean.contains(&key) {
            if !clean(s.as_bytes()) {
                return serde_json::to_writer(buf, s);
            }
            self.clean[self.next % 4] = key;
            self.next = self.next.wrapping_add(1);
        }
        quoted(buf, s);
        Ok(())
    }
}

/// Nanoseconds since the epoch as a JSON string (0 before the epoch).
pub(super) fn nanos(buf: &mut Vec<u8>, t: SystemTime, memo: &mut Memo) {
    let n = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let (high, low) = (n / 100_000_000, (n % 100_000_000) as u32);
    if high == 0 {
        return digits(buf, n, b'"', b'"');
    }
    if high != memo.high {
        memo.high = high;
        let mut head = Vec::with_capacity(24);
        digits(&mut head, high, b'"', 0);
        memo.len = head.len();
        head.resize(24, 0);
        memo.head.copy_from_slice(&head);
    }
    // `"` and the high digits (fixed-size copy, cut), the low eight, `"`
    let len = buf.len() + memo.len;
    buf.extend_from_slice(&memo.head);
    buf.truncate(len);
    buf.extend_from_slice(&eight(low).to_le_bytes());
    buf.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// The integer, id and string writers against `format!` and
    /// serde_json, at every digit count and edge.
    #[test]
    fn numbers_ids_and_strings_match_the_std_forms() {
        let mut values = vec![0, 1, 9, 10, 99, 100, 101, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(q) = p.checked_mul(10) {
            values.extend([p - 1, p, p + 1, q - 1]);
            p = q;
        }
        for v in values {
            let mut b = vec![b'x'];
            uint(&mut b, v);
            assert_eq!(b, format!("x{v}").as_bytes());
            b.clear();
            digits(&mut b, v, b'"', b'"');
            assert_eq!(b, format!("\"{v}\"").as_bytes());
            let i = v as i64;
            b.clear();
            int(&mut b, i);
            assert_eq!(b, i.to_string().as_bytes());
        }
        // times: one cache over a sequence that changes its high digits
        let mut memo = Memo::default();
        let base = 1_796_000_000_099_999_990u64;
        let mut seq = vec![0, 5, 99_999_999, 100_000_000, 123_456_789_012, u64::MAX];
        seq.extend((0..40).map(|i| base + i * 3));
        seq.extend([base, 1, base + 100_000_000, 999_999_999, 1_000_000_000]);
        for n in seq {
            let t = UNIX_EPOCH + std::time::Duration::from_nanos(n);
            let mut b = Vec::new();
            nanos(&mut b, t, &mut memo);
            assert_eq!(b, format!("\"{n}\"").as_bytes(), "{n}");
        }
        let mut b = Vec::new();
        nanos(
            &mut b,
            UNIX_EPOCH - std::time::Duration::from_secs(1),
            &mut memo,
        );
        assert_eq!(b, b"\"0\"");
        let mut b = Vec::new();
        hex::<16, 34>(
            &mut b,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128.to_be_bytes(),
        );
        assert_eq!(b, b"\"0123456789abcdeffedcba9876543210\"");
        let mut cases: Vec<String> = [
            "", "plain", "é ü", "a\"b", "a\\b", "\u{0}", "\u{1f}", "\u{7f}", "\n",
        ]
        .map(String::from)
        .to_vec();
        // each bad byte, and the clean ones around them, at every place in
        // strings of 1 to 20 bytes
        for len in 1..=20 {
            for at in 0..len {
                for c in [
                    '\u{0}', '\u{1f}', ' ', '!', '"', '#', '\\', '[', ']', '~', '\u{7f}', 'é',
                ] {
                    let mut t = "x".repeat(len);
                    t.replace_range(at..=at, c.encode_utf8(&mut [0; 4]));
                    cases.push(t);
                }
            }
        }
        // and through the memo, twice each (the second from memory), the
        // strings all alive as in a batch
        let mut memo = Memo::default();
        for s in cases.iter().chain(&cases) {
            let s = s.as_str();
            let want = serde_json::to_vec(s).unwrap();
            let mut b = Vec::new();
            string(&mut b, s).unwrap();
            assert_eq!(b, want, "{s:?}");
            b.clear();
            memo.string(&mut b, s).unwrap();
            assert_eq!(b, want, "{s:?}");
        }
    }
}
