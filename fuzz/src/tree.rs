//! The generated pieces every target builds its inputs from: words (from the target's vocabulary
//! or any text), JSON trees, and edits of a seed — byte edits of its text, or edits of its
//! documents as JSON/YAML trees, so a real fixture with one field changed still reaches the code
//! past the syntax check.
//!
//! Trees are generated as a flat list of tokens and built with an explicit stack, so their depth
//! is bounded here ([`MAX_DEPTH`]) rather than by the generator's recursion.

use arbitrary::Arbitrary;
use serde_json::{Map, Number, Value};

/// How deep a generated tree nests.
pub const MAX_DEPTH: usize = 8;
/// The longest text a case gets: a rendered case is cut at this many bytes, so every case's
/// input stays small whatever the edits did (repeats can multiply a seed).
pub const MAX_TEXT: usize = 64 * 1024;

/// A word of the target's vocabulary (field names, enum values, well-known labels), or any text.
#[derive(Debug, Clone, Arbitrary)]
pub enum Word {
    Known(u16),
    Any(String),
}

impl Word {
    pub fn resolve<'a>(&'a self, vocabulary: &'a [&'a str]) -> &'a str {
        match self {
            Word::Known(i) if !vocabulary.is_empty() => vocabulary[*i as usize % vocabulary.len()],
            Word::Known(_) => "",
            Word::Any(s) => s,
        }
    }
}

/// One of a fixed list (the values a parser handles), or any text.
#[derive(Debug, Clone, Arbitrary)]
pub enum Choice {
    Known(u8),
    Any(Word),
}

impl Choice {
    pub fn resolve<'a>(&'a self, known: &'a [&'a str], vocabulary: &'a [&'a str]) -> &'a str {
        match self {
            Choice::Known(i) => known[*i as usize % known.len()],
            Choice::Any(w) => w.resolve(vocabulary),
        }
    }
}

/// A JSON scalar.
#[derive(Debug, Clone, Arbitrary)]
pub enum Scalar {
    Null,
    Bool(bool),
    Small(u8),
    Int(i64),
    Unsigned(u64),
    Float(f64),
    Text(Word),
}

impl Scalar {
    pub fn value(&self, vocabulary: &[&str]) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Small(n) => Value::from(*n),
            Scalar::Int(n) => Value::from(*n),
            Scalar::Unsigned(n) => Value::from(*n),
            // NaN and infinities have no JSON form: they become null, as serde_json writes them.
            Scalar::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Scalar::Text(w) => Value::String(w.resolve(vocabulary).to_string()),
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
pub enum Token {
    /// A scalar, under this key when the open container is an object.
    Scalar(Word, Scalar),
    Object(Word),
    Array(Word),
    Close,
}

/// A JSON object built from tokens.
#[derive(Debug, Clone, Arbitrary)]
pub struct Tree(pub Vec<Token>);

fn put(parent: &mut Value, key: String, child: Value) {
    match parent {
        Value::Object(map) => {
            map.insert(key, child);
        }
        Value::Array(items) => items.push(child),
        _ => {}
    }
}

impl Tree {
    pub fn value(&self, vocabulary: &[&str]) -> Value {
        let mut stack: Vec<(String, Value)> = vec![(String::new(), Value::Object(Map::new()))];
        for token in &self.0 {
            match token {
                Token::Scalar(key, scalar) => {
                    let top = &mut stack.last_mut().expect("the root stays").1;
                    put(top, key.resolve(vocabulary).to_string(), scalar.value(vocabulary));
                }
                Token::Object(key) | Token::Array(key) if stack.len() <= MAX_DEPTH => {
                    let empty = if matches!(token, Token::Object(_)) {
                        Value::Object(Map::new())
                    } else {
                        Value::Array(vec![])
                    };
                    stack.push((key.resolve(vocabulary).to_string(), empty));
                }
                Token::Object(_) | Token::Array(_) => {}
                Token::Close => close(&mut stack),
            }
        }
        while stack.len() > 1 {
            close(&mut stack);
        }
        stack.pop().expect("the root stays").1
    }
}

fn close(stack: &mut Vec<(String, Value)>) {
    if stack.len() > 1 {
        let (key, child) = stack.pop().expect("checked");
        put(&mut stack.last_mut().expect("checked").1, key, child);
    }
}

/// A value to put somewhere: a scalar or a tree.
#[derive(Debug, Clone, Arbitrary)]
pub enum Fragment {
    Scalar(Scalar),
    Tree(Tree),
    /// An empty list, which many fields treat differently from a missing one.
    EmptyList,
}

impl Fragment {
    pub fn value(&self, vocabulary: &[&str]) -> Value {
        match self {
            Fragment::Scalar(s) => s.value(vocabulary),
            Fragment::Tree(t) => t.value(vocabulary),
            Fragment::EmptyList => Value::Array(vec![]),
        }
    }
}

/// One change to a seed's documents, at its `at`-th node (counted in document order, modulo the
/// number of nodes).
#[derive(Debug, Clone, Arbitrary)]
pub struct TreeEdit {
    pub at: u32,
    pub op: TreeOp,
}

#[derive(Debug, Clone, Arbitrary)]
pub enum TreeOp {
    Set(Fragment),
    Remove,
    Rename(Word),
    /// Adds a field to an object, an item to a list.
    Insert(Word, Fragment),
    /// The same node twice (a list item repeated, an object copied under another key).
    Duplicate(Word),
}

/// One change to a seed's text; positions are modulo its length, moved back to a char boundary.
#[derive(Debug, Clone, Arbitrary)]
pub enum ByteEdit {
    Insert {
        at: u16,
        text: Word,
    },
    Delete {
        at: u16,
        len: u8,
    },
    Replace {
        at: u16,
        len: u8,
        text: Word,
    },
    /// The bytes at `at..at+len`, `times` more times.
    Repeat {
        at: u16,
        len: u8,
        times: u8,
    },
}

/// A seed, edited.
#[derive(Debug, Clone, Arbitrary)]
pub enum Mutation {
    Bytes {
        seed: u16,
        edits: Vec<ByteEdit>,
    },
    /// `flip`: write JSON seeds as YAML and YAML seeds as JSON.
    Tree {
        seed: u16,
        edits: Vec<TreeEdit>,
        flip: bool,
    },
}

impl Mutation {
    pub fn render(&self, seeds: &[String], vocabulary: &[&str]) -> String {
        if seeds.is_empty() {
            return String::new();
        }
        match self {
            Mutation::Bytes { seed, edits } => {
                let mut text = seeds[*seed as usize % seeds.len()].clone();
                for edit in edits {
                    apply_bytes(&mut text, edit, vocabulary);
                    if text.len() > MAX_TEXT {
                        break;
                    }
                }
                cut(text)
            }
            Mutation::Tree { seed, edits, flip } => {
                let text = &seeds[*seed as usize % seeds.len()];
                let Some(mut docs) = documents(text) else { return text.clone() };
                for edit in edits {
                    apply_tree(&mut docs, edit, vocabulary);
                }
                let json = text.trim_start().starts_with(['{', '[']) != *flip;
                cut(write_documents(&docs, json))
            }
        }
    }
}

/// Cuts a text to [`MAX_TEXT`] bytes, at a char boundary.
pub fn cut(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut end = MAX_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

fn boundary(text: &str, at: usize) -> usize {
    let mut at = if text.is_empty() { 0 } else { at % (text.len() + 1) };
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply_bytes(text: &mut String, edit: &ByteEdit, vocabulary: &[&str]) {
    match edit {
        ByteEdit::Insert { at, text: word } => {
            let at = boundary(text, *at as usize);
            text.insert_str(at, word.resolve(vocabulary));
        }
        ByteEdit::Delete { at, len } => {
            let from = boundary(text, *at as usize);
            let to = boundary(text, (from + *len as usize).min(text.len()));
            text.replace_range(from..to.max(from), "");
        }
        ByteEdit::Replace { at, len, text: word } => {
            let from = boundary(text, *at as usize);
            let to = boundary(text, (from + *len as usize).min(text.len()));
            text.replace_range(from..to.max(from), word.resolve(vocabulary));
        }
        ByteEdit::Repeat { at, len, times } => {
            let from = boundary(text, *at as usize);
            let to = boundary(text, (from + *len as usize).min(text.len())).max(from);
            let piece = text[from..to].repeat(*times as usize);
            text.insert_str(to, &piece);
        }
    }
}

/// A text's documents: one JSON value, a JSON stream, or multi-document YAML. `None` when it
/// does not parse (the mutation then leaves the seed as it is).
pub fn documents(text: &str) -> Option<Vec<Value>> {
    use serde::Deserialize;
    if text.trim_start().starts_with(['{', '[']) {
        return serde_json::Deserializer::from_str(text).into_iter::<Value>().collect::<Result<_, _>>().ok();
    }
    serde_yaml_ng::Deserializer::from_str(text).map(Value::deserialize).collect::<Result<_, _>>().ok()
}

pub fn write_documents(docs: &[Value], json: bool) -> String {
    let written: Vec<String> = docs
        .iter()
        .map(|d| {
            if json {
                serde_json::to_string_pretty(d).unwrap_or_default()
            } else {
                serde_yaml_ng::to_string(d).unwrap_or_default()
            }
        })
        .collect();
    written.join(if json { "\n" } else { "---\n" })
}

/// The path of every node, in document order (the documents themselves included).
fn paths(value: &Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                here.push(Step::Key(k.clone()));
                paths(v, here, out);
                here.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                here.push(Step::Index(i));
                paths(v, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn at_mut<'a>(root: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut cur = root;
    for step in path {
        cur = match step {
            Step::Key(k) => cur.as_object_mut()?.get_mut(k)?,
            Step::Index(i) => cur.as_array_mut()?.get_mut(*i)?,
        };
    }
    Some(cur)
}

fn apply_tree(docs: &mut Vec<Value>, edit: &TreeEdit, vocabulary: &[&str]) {
    // The documents as one list, so an edit may also add, drop or repeat a document.
    let mut root = Value::Array(std::mem::take(docs));
    let mut all = Vec::new();
    paths(&root, &mut Vec::new(), &mut all);
    let path = all.swap_remove(edit.at as usize % all.len());
    match (&edit.op, path.split_last()) {
        (TreeOp::Set(fragment), _) => {
            if let Some(node) = at_mut(&mut root, &path) {
                *node = fragment.value(vocabulary);
            }
        }
        (TreeOp::Insert(key, fragment), _) => {
            if let Some(node) = at_mut(&mut root, &path) {
                put(node, key.resolve(vocabulary).to_string(), fragment.value(vocabulary));
            }
        }
        (TreeOp::Remove, Some((last, parent))) => {
            if let Some(parent) = at_mut(&mut root, parent) {
                match (parent, last) {
                    (Value::Object(map), Step::Key(k)) => {
                        map.remove(k);
                    }
                    (Value::Array(items), Step::Index(i)) if *i < items.len() => {
                        items.remove(*i);
                    }
                    _ => {}
                }
            }
        }
        (TreeOp::Rename(word), Some((Step::Key(k), parent))) => {
            if let Some(Value::Object(map)) = at_mut(&mut root, parent) {
                if let Some(v) = map.remove(k) {
                    map.insert(word.resolve(vocabulary).to_string(), v);
                }
            }
        }
        (TreeOp::Duplicate(word), Some((last, parent))) => {
            let copy = at_mut(&mut root, &path).map(|v| v.clone());
            if let (Some(copy), Some(parent)) = (copy, at_mut(&mut root, parent)) {
                match (parent, last) {
                    (Value::Array(items), Step::Index(i)) => items.insert(*i, copy),
                    (Value::Object(map), _) => {
                        map.insert(word.resolve(vocabulary).to_string(), copy);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    if let Value::Array(items) = root {
        *docs = items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_nest_no_deeper_than_the_bound() {
        let deep = Tree((0..50).map(|_| Token::Object(Word::Any("k".into()))).collect());
        let mut v = deep.value(&[]);
        let mut depth = 0;
        while let Some(next) = v.get("k").cloned() {
            v = next;
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH);
    }

    #[test]
    fn tree_edits_change_one_field_of_a_seed() {
        let seeds = vec!["a: 1\nb:\n  c: x\n".to_string()];
        let set = Mutation::Tree {
            seed: 0,
            // Nodes: the document list, the document, a, b, b.c.
            edits: vec![TreeEdit { at: 4, op: TreeOp::Set(Fragment::Scalar(Scalar::Text(Word::Known(1)))) }],
            flip: false,
        };
        assert_eq!(set.render(&seeds, &["zero", "one"]), "a: 1\nb:\n  c: one\n");
        let removed = Mutation::Tree { seed: 0, edits: vec![TreeEdit { at: 2, op: TreeOp::Remove }], flip: true };
        assert_eq!(removed.render(&seeds, &[]), "{\n  \"b\": {\n    \"c\": \"x\"\n  }\n}");
    }

    #[test]
    fn byte_edits_keep_to_char_boundaries() {
        let seeds = vec!["é1".to_string()];
        let edit = Mutation::Bytes {
            seed: 0,
            edits: vec![
                ByteEdit::Replace { at: 1, len: 1, text: Word::Any("x".into()) },
                ByteEdit::Repeat { at: 0, len: 200, times: 2 },
            ],
        };
        // The replace moves back to the start of é (an empty range there: an insert).
        assert_eq!(edit.render(&seeds, &[]), "xé1xé1xé1");
    }
}
