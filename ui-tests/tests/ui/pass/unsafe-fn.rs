// `unsafe fn`, also with `err` and as a method.
use lens::trace_fn;

/// # Safety
/// `p` must point to a valid `u32`.
#[trace_fn(group = "step")]
unsafe fn read(p: *const u32) -> u32 {
    // SAFETY: the caller guarantees `p` is valid
    unsafe { *p }
}

/// # Safety
/// `p` must be null or point to a valid `u32`.
#[trace_fn(group = "step", err)]
unsafe fn try_read(p: *const u32) -> Result<u32, &'static str> {
    if p.is_null() {
        return Err("null");
    }
    // SAFETY: the caller guarantees `p` is valid when not null
    Ok(unsafe { *p })
}

struct Buf(Vec<u8>);

impl Buf {
    /// # Safety
    /// `i` must be in bounds.
    #[trace_fn(group = "step", args(i))]
    unsafe fn get(&self, i: usize) -> u8 {
        // SAFETY: the caller guarantees `i` is in bounds
        unsafe { *self.0.get_unchecked(i) }
    }
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    let x = 5u32;
    // SAFETY: `&x` is valid
    unsafe {
        assert_eq!(read(&x), 5);
        assert_eq!(try_read(&x), Ok(5));
        assert_eq!(try_read(std::ptr::null()), Err("null"));
        assert_eq!(Buf(vec![1, 2]).get(1), 2);
    }
}
