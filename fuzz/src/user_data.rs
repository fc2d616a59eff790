//! The EC2NodeClass's `userData`, merged into the node's MIME document: the generator. The
//! oracle is in `dovetail-aws`'s unit tests (`shared/aws/src/ec2/userdata/fuzz.rs`), so that this
//! crate does not link the AWS SDK.

use arbitrary::Arbitrary;

use crate::tree::{Choice, Word};

/// The target's name and vocabulary (its `Target` is built in `dovetail-aws`).
pub const NAME: &str = "user_data";
pub const VOCABULARY: &[&str] = &[
    "MIME-Version: 1.0",
    "Content-Type: ",
    "multipart/mixed",
    "multipart/alternative",
    "; boundary=",
    "boundary=",
    "\"",
    "--",
    "\n",
    "\r\n",
    "\n\n",
    "text/x-shellscript",
    "text/cloud-config",
    "application/node.eks.aws",
    "#!/bin/bash",
    "#cloud-config",
    "apiVersion: node.eks.aws/v1alpha1",
    "kind: NodeConfig",
    "//dovetail//",
    "--//dovetail//",
    "--//dovetail//--",
    "BOUNDARY",
    "charset=\"us-ascii\"",
    "echo hi",
    " ",
    "",
];

const CONTENT_TYPES: [&str; 4] =
    ["multipart/mixed", "multipart/alternative", "text/x-shellscript", "application/node.eks.aws"];
const BOUNDARIES: [&str; 4] = ["BOUNDARY", "//dovetail//", "==b==", ""];

/// A MIME document (headers, a boundary, parts with headers and bodies), or a script, a
/// cloud-config or a NodeConfig as one text.
#[derive(Debug, Arbitrary)]
pub enum Input {
    Mime { content_type: Choice, boundary: Choice, quoted: bool, crlf: bool, parts: Vec<Part>, closed: bool },
    Text(Vec<Word>),
}

#[derive(Debug, Arbitrary)]
pub struct Part {
    headers: Vec<Word>,
    body: Vec<Word>,
}

pub fn render(input: &Input, vocabulary: &[&str]) -> String {
    let words = |ws: &[Word]| ws.iter().map(|w| w.resolve(vocabulary)).collect::<Vec<_>>().join("");
    let (content_type, boundary, quoted, crlf, parts, closed) = match input {
        Input::Text(words_) => return words(words_),
        Input::Mime { content_type, boundary, quoted, crlf, parts, closed } => {
            (content_type, boundary, quoted, crlf, parts, closed)
        }
    };
    let boundary = boundary.resolve(&BOUNDARIES, vocabulary);
    let shown = if *quoted { format!("\"{boundary}\"") } else { boundary.to_string() };
    let mut out = format!(
        "MIME-Version: 1.0\nContent-Type: {}; boundary={shown}\n\n",
        content_type.resolve(&CONTENT_TYPES, vocabulary)
    );
    for part in parts {
        out.push_str(&format!("--{boundary}\n"));
        for h in &part.headers {
            out.push_str(h.resolve(vocabulary));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&words(&part.body));
        out.push('\n');
    }
    if *closed {
        out.push_str(&format!("--{boundary}--\n"));
    }
    if *crlf {
        out = out.replace('\n', "\r\n");
    }
    out
}
