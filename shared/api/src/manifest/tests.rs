use super::read::documents;

#[test]
fn document_numbers_count_empty_documents() {
    let docs = documents("a.yaml", "---\nkind: A\n---\n---\nkind: B\n...\n---\nkind: C\n").unwrap();
    let numbers: Vec<usize> = docs.iter().map(|d| d.source.document).collect();
    assert_eq!(numbers, [1, 3, 4]);
}

#[test]
fn lists_flatten_with_item_numbers() {
    let docs = documents(
        "l.yaml",
        "apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n---\napiVersion: v1\nkind: List\nitems: []\n",
    )
    .unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[1].source.item, Some(2));
    assert_eq!(docs[1].value["kind"], "Service");
    assert_eq!(docs[1].value["apiVersion"], "v1");
    assert_eq!(docs[1].source.to_string(), "l.yaml: document 1, item 2");
}

#[test]
fn json_sniffing_and_bom() {
    let docs = documents("<stdin>", "\u{feff}  {\"kind\": \"Pod\"} [1]").unwrap_err();
    assert_eq!(
        docs.to_string(),
        "<stdin>: document 2: expected a Kubernetes object (a mapping with apiVersion and kind), found a list"
    );
    assert_eq!(documents("x.yml", "{kind: Pod}").unwrap().len(), 1, "YAML flow mapping by extension");
}
