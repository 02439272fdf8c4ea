// Lifetimes: functions returning references, elided and explicit, also with
// `err`, as methods, and as async fns borrowing their arguments.
use lens::trace_fn;

#[trace_fn(group = "step", fields(len = text.len()))]
fn first_word(text: &str) -> &str {
    text.split(' ').next().unwrap_or("")
}

#[trace_fn(group = "step")]
fn longest<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.len() >= b.len() {
        a
    } else {
        b
    }
}

#[trace_fn(group = "step", args(i), err)]
fn pick<'a, 'b: 'a>(xs: &'a [&'b str], i: usize) -> Result<&'a str, String> {
    xs.get(i).copied().ok_or_else(|| format!("no item {i}"))
}

struct Corpus {
    docs: Vec<String>,
}

impl Corpus {
    #[trace_fn(group = "evaluate", fields(docs = self.docs.len()))]
    fn first(&self) -> Option<&String> {
        self.docs.first()
    }

    #[trace_fn(group = "evaluate", err)]
    fn get_mut(&mut self, i: usize) -> Result<&mut String, String> {
        self.docs
            .get_mut(i)
            .ok_or_else(|| "out of range".to_owned())
    }

    #[trace_fn(group = "evaluate")]
    async fn longest_doc(&self) -> &str {
        self.docs
            .iter()
            .max_by_key(|d| d.len())
            .map_or("", |d| d.as_str())
    }
}

#[trace_fn(group = "evaluate", args(prefix))]
async fn strip<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.strip_prefix(prefix).unwrap_or(text)
}

fn main() {
    lens::set_enabled_span_groups(&lens::SpanGroupSet::resolve("all", &[]).unwrap());
    assert_eq!(first_word("hello world"), "hello");
    assert_eq!(longest("ab", "abc"), "abc");
    let xs = ["a", "b"];
    assert_eq!(pick(&xs, 1), Ok("b"));
    assert!(pick(&xs, 2).is_err());
    let mut c = Corpus {
        docs: vec!["x".to_owned(), "yyy".to_owned()],
    };
    assert_eq!(c.first().map(String::as_str), Some("x"));
    c.get_mut(0).unwrap().push('!');
    assert_eq!(c.docs[0], "x!");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(c.longest_doc()), "yyy");
    assert_eq!(rt.block_on(strip("v1-model", "v1-")), "model");
}
