//! Reading a MIME document as far as merging a class's `userData` needs: the header block
//! (RFC 5322: field names in any case, folded lines), the `Content-Type` and its parameters
//! (RFC 2045: parameter names in any case, values as tokens or quoted strings), and the parts of a
//! `multipart/*` body (RFC 2046: a delimiter is a whole line `--boundary`, optionally followed by
//! blanks; `--boundary--` closes the body; the preamble before the first delimiter and the
//! epilogue after the close are not parts; the line break before a delimiter belongs to it).
//! Lines may end in CRLF or LF. Part bodies are kept byte for byte, nested multiparts included.

/// Why user data that declares itself MIME multipart cannot be split into its parts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MimeError {
    #[error("Content-Type {0:?} declares a multipart document without a boundary parameter")]
    NoBoundary(String),
    #[error("no line --{0} starts a part of the multipart document")]
    NoDelimiter(String),
}

/// One part of a MIME document: its header fields, unfolded (one string per field), and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub headers: Vec<String>,
    pub body: String,
}

/// What a document turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// Not MIME: no header block with a `Content-Type` opens it.
    Plain,
    /// A single MIME entity (not multipart): its headers but `MIME-Version`, and its body.
    Single(Part),
    /// A multipart document's parts (its own headers, preamble and epilogue are dropped).
    Multipart(Vec<Part>),
}

/// Reads `text` as a MIME document.
pub fn read(text: &str) -> Result<Document, MimeError> {
    let (headers, body_start, blank_line) = header_block(text);
    let Some(content_type) = header(&headers, "content-type").filter(|_| blank_line) else {
        return Ok(Document::Plain);
    };
    let (media_type, params) = content_type_parts(content_type);
    if !media_type.starts_with("multipart/") {
        let headers = headers.iter().filter(|h| !field_name_is(h, "mime-version")).cloned().collect();
        return Ok(Document::Single(Part { headers, body: text[body_start..].to_string() }));
    }
    let boundary = params
        .into_iter()
        .find(|(name, value)| name == "boundary" && !value.is_empty())
        .map(|(_, value)| value)
        .ok_or_else(|| MimeError::NoBoundary(content_type.to_string()))?;
    let parts = multipart_bodies(&text[body_start..], &boundary)?.into_iter().map(part).collect();
    Ok(Document::Multipart(parts))
}

/// The raw text of each part of a multipart body. A body that ends without its close delimiter
/// ends its last part (as Python's `email`, which cloud-init reads user data with, does).
fn multipart_bodies<'a>(body: &'a str, boundary: &str) -> Result<Vec<&'a str>, MimeError> {
    let mut parts = Vec::new();
    let mut open: Option<usize> = None;
    for (start, line, next) in lines(body, 0) {
        let Some(close) = delimiter(line, boundary) else { continue };
        if let Some(from) = open {
            parts.push(without_last_line_break(&body[from..start]));
        }
        if close {
            return Ok(parts);
        }
        open = Some(next);
    }
    match open {
        Some(from) => {
            parts.push(&body[from..]);
            Ok(parts)
        }
        None => Err(MimeError::NoDelimiter(boundary.to_string())),
    }
}

/// Whether `line` is a delimiter of `boundary`: `Some(false)` for `--boundary`, `Some(true)` for
/// the close delimiter `--boundary--`, either followed only by blanks (transport padding).
fn delimiter(line: &str, boundary: &str) -> Option<bool> {
    let rest = line.strip_prefix("--")?.strip_prefix(boundary)?;
    let (close, padding) = match rest.strip_prefix("--") {
        Some(padding) => (true, padding),
        None => (false, rest),
    };
    padding.bytes().all(|b| b == b' ' || b == b'\t').then_some(close)
}

/// The line break before a delimiter line is part of the delimiter, not of the body before it.
fn without_last_line_break(text: &str) -> &str {
    text.strip_suffix("\r\n").or_else(|| text.strip_suffix('\n')).unwrap_or(text)
}

/// A part: header fields up to the blank line, then the body. A line that is no header field
/// before any blank line starts the body (Python's `email` reads a part missing the blank line
/// so too).
fn part(raw: &str) -> Part {
    let (headers, body_start, _) = header_block(raw);
    Part { headers, body: raw[body_start..].to_string() }
}

/// The header fields opening `text`, unfolded; where the body starts; and whether a blank line
/// ended the fields (rather than a line that is none, or the end of the text).
fn header_block(text: &str) -> (Vec<String>, usize, bool) {
    let mut headers: Vec<String> = Vec::new();
    for (start, line, next) in lines(text, 0) {
        if line.is_empty() {
            return (headers, next, true);
        }
        match headers.last_mut() {
            // Unfolding: a line starting with a blank continues the field; only the line break
            // goes.
            Some(field) if line.starts_with([' ', '\t']) => field.push_str(line),
            _ if is_field(line) => headers.push(line.to_string()),
            _ => return (headers, start, false),
        }
    }
    (headers, text.len(), false)
}

/// `name: value` with a name of printable ASCII (no blanks, no colon).
fn is_field(line: &str) -> bool {
    line.split_once(':').is_some_and(|(name, _)| !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()))
}

fn field_name_is(field: &str, name: &str) -> bool {
    field.split_once(':').is_some_and(|(n, _)| n.eq_ignore_ascii_case(name))
}

fn header<'a>(headers: &'a [String], name: &str) -> Option<&'a str> {
    headers.iter().find(|h| field_name_is(h, name)).and_then(|h| h.split_once(':')).map(|(_, value)| value.trim())
}

/// A `Content-Type` value's media type (lowercase) and parameters (names lowercase, values
/// unquoted). A parameter without `=` is skipped.
fn content_type_parts(value: &str) -> (String, Vec<(String, String)>) {
    let (media_type, mut rest) = value.split_once(';').unwrap_or((value, ""));
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ';']);
        let Some(at) = rest.find(['=', ';']) else { break };
        if rest[at..].starts_with(';') {
            rest = &rest[at..];
            continue;
        }
        let name = rest[..at].trim().to_ascii_lowercase();
        rest = rest[at + 1..].trim_start_matches([' ', '\t']);
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            // A quoted string: `\x` stands for `x`; it ends at the first unescaped quote.
            let mut value = String::new();
            let mut end = quoted.len();
            let mut chars = quoted.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            rest = &quoted[end..];
            value
        } else {
            let end = rest.find([';', ' ', '\t']).unwrap_or(rest.len());
            let token = rest[..end].to_string();
            rest = &rest[end..];
            token
        };
        params.push((name, value));
    }
    (media_type.trim().to_ascii_lowercase(), params)
}

/// The lines of `text` from `from`: (start offset, the line without its CRLF or LF, offset after
/// its line break).
fn lines(text: &str, from: usize) -> impl Iterator<Item = (usize, &str, usize)> {
    let mut at = from;
    std::iter::from_fn(move || {
        let rest = text.get(at..).filter(|rest| !rest.is_empty())?;
        let (line, len) = match rest.find('\n') {
            Some(i) => (rest[..i].strip_suffix('\r').unwrap_or(&rest[..i]), i + 1),
            None => (rest, rest.len()),
        };
        let start = at;
        at += len;
        Some((start, line, at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_parameters() {
        let parse = |v: &str| content_type_parts(v);
        assert_eq!(parse("Multipart/Mixed"), ("multipart/mixed".into(), vec![]));
        assert_eq!(
            parse(r#"multipart/mixed; charset=us-ascii;BOUNDARY="a b;c=\"d\"" ; x = y"#),
            (
                "multipart/mixed".into(),
                vec![
                    ("charset".into(), "us-ascii".into()),
                    ("boundary".into(), r#"a b;c="d""#.into()),
                    ("x".into(), "y".into())
                ]
            )
        );
        // Junk after a value and a parameter without `=` are skipped; an unterminated quote runs
        // to the end.
        assert_eq!(
            parse(r#"text/plain; a="1"junk; flag; b=2 3; c="open"#).1,
            vec![("a".into(), "1".into()), ("b".into(), "2".into()), ("c".into(), "open".into())]
        );
    }

    #[test]
    fn delimiters_are_whole_lines() {
        assert_eq!(delimiter("--b", "b"), Some(false));
        assert_eq!(delimiter("--b \t", "b"), Some(false));
        assert_eq!(delimiter("--b--", "b"), Some(true));
        assert_eq!(delimiter("--b-- ", "b"), Some(true));
        assert_eq!(delimiter("--bx", "b"), None);
        assert_eq!(delimiter("--b--x", "b"), None);
        assert_eq!(delimiter("b", "b"), None);
        assert_eq!(delimiter(" --b", "b"), None);
        assert_eq!(delimiter("-b", "b"), None);
    }

    #[test]
    fn header_blocks_unfold_and_stop_at_the_blank_line() {
        let (headers, body, blank) = header_block("A: 1\r\nContent-Type: x;\r\n\tb=2\r\n c=3\r\n\r\nbody\r\n");
        assert_eq!(headers, vec!["A: 1".to_string(), "Content-Type: x;\tb=2 c=3".to_string()]);
        assert!(blank);
        assert_eq!(body, "A: 1\r\nContent-Type: x;\r\n\tb=2\r\n c=3\r\n\r\n".len());
        // A script's first line is no header field.
        assert_eq!(header_block("#!/bin/bash\necho\n"), (vec![], 0, false));
        assert_eq!(header(&["content-TYPE:  text/plain ".to_string()], "Content-Type"), Some("text/plain"));
    }
}
