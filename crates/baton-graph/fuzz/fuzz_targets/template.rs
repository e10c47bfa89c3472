//! Any template text with any predecessor output: parsing and rendering never panic, and in a
//! shell command a lone value always renders as one single-quoted word (that `sh` reads it back
//! unchanged is checked by the unit tests).
#![no_main]

use std::collections::BTreeMap;

use baton_graph::template::{NeedContext, Quote, Template, TemplateContext};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // First line: the template; the rest: the output a predecessor handed over.
    let (template, output) = text.split_once('\n').unwrap_or((text, ""));
    let mut needs = BTreeMap::new();
    for id in ["a", "b-c", "d.e"] {
        needs.insert(
            id.to_owned(),
            NeedContext {
                output: output.to_owned(),
                status: "succeeded".into(),
                files_changed: vec![output.to_owned()],
                json: serde_json_value(output),
            },
        );
    }
    let ctx = TemplateContext {
        needs,
        ..TemplateContext::default()
    };
    if let Ok(t) = Template::new(template, &["a", "b-c", "d.e"]) {
        let _ = t.render(&ctx, Quote::Shell);
        let _ = t.render(&ctx, Quote::None);
    }
    // A lone value in a shell command is one single-quoted word.
    let lone = Template::new("{{ needs.a.output }}", &["a"]).expect("valid template");
    let word = lone.render(&ctx, Quote::Shell).expect("renders");
    assert!(word.starts_with('\'') && word.ends_with('\''), "{word:?}");
});

fn serde_json_value(text: &str) -> serde_json::Value {
    serde_json::Value::String(text.to_owned())
}
