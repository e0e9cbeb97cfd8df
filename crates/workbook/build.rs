//! Generates the ONNX protobuf messages (`src/onnx_graph/proto.rs` includes them) from the
//! vendored `proto/onnx.proto` with prost-build, the proto compiled by protox (pure Rust, so no
//! `protoc` is needed).
//!
//! ONNX's file is proto2, whose singular fields prost turns into `Option`s; the messages are
//! generated from its proto3 form instead (as ONNX's own `onnx.proto3` is made from it): the
//! `optional` labels dropped, and every repeated number that proto2 would write unpacked marked
//! `[packed = false]`, so the wire format is proto2's, byte for byte. Three messages whose Rust
//! shape programs rely on are declared in `proto.rs` by hand and mapped with `extern_path` (see
//! there).

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let source = manifest.join("proto/onnx.proto");
    println!("cargo:rerun-if-changed={}", source.display());
    let text = std::fs::read_to_string(&source)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
    let proto3 = as_proto3(&text);
    let dir = out.join("proto");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    std::fs::write(dir.join("onnx.proto"), proto3).expect("OUT_DIR is writable");
    let files = protox::compile([dir.join("onnx.proto")], [&dir])
        .unwrap_or_else(|e| panic!("protox cannot compile the proto3 form of onnx.proto: {e:?}"));
    let mut config = prost_build::Config::new();
    // ONNX's comments hold markup and code that rustdoc would read as links and doctests.
    config.disable_comments(["."]);
    for (proto, rust) in [
        (".onnx.TypeProto", "crate::onnx_graph::proto::TypeProto"),
        (
            ".onnx.TypeProto.Tensor",
            "crate::onnx_graph::proto::TypeProtoTensor",
        ),
        (
            ".onnx.TensorShapeProto.Dimension",
            "crate::onnx_graph::proto::Dimension",
        ),
    ] {
        config.extern_path(proto, rust);
    }
    config
        .compile_fds(files.clone())
        .unwrap_or_else(|e| panic!("prost-build cannot generate the ONNX messages: {e}"));
    // The full messages, without the hand-declared three: the proto module's test checks that
    // those are wire-compatible with these.
    let full = out.join("full");
    std::fs::create_dir_all(&full).expect("OUT_DIR is writable");
    prost_build::Config::new()
        .disable_comments(["."])
        .out_dir(&full)
        .compile_fds(files)
        .unwrap_or_else(|e| panic!("prost-build cannot generate the ONNX messages: {e}"));
}

/// The proto3 form of a proto2 file that uses neither `required`, groups, extensions nor
/// defaults (ONNX's): `syntax = "proto3"`, `optional ` labels removed, and `[packed = false]` on
/// every repeated scalar without a `packed` option (proto2's default encoding).
fn as_proto3(text: &str) -> String {
    const SCALARS: [&str; 15] = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
        "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
    ];
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim_start();
        let indent = &code[..code.len() - trimmed.len()];
        let comment = &line[code.len()..];
        let line = if trimmed.starts_with("syntax = \"proto2\";") {
            "syntax = \"proto3\";".to_string()
        } else if let Some(rest) = trimmed.strip_prefix("optional ") {
            format!("{indent}{rest}{comment}")
        } else if let Some(rest) = trimmed.strip_prefix("repeated ") {
            let ty = rest.split_whitespace().next().unwrap_or("");
            let numeric = SCALARS.contains(&ty) && ty != "string" && ty != "bytes";
            if numeric && !rest.contains("packed") {
                let body = rest.trim_end().trim_end_matches(';');
                format!("{indent}repeated {body} [packed = false];{comment}")
            } else {
                line.to_string()
            }
        } else {
            line.to_string()
        };
        assert!(
            !trimmed.starts_with("required ") && !trimmed.contains("[default"),
            "onnx.proto uses proto2 features its proto3 form cannot keep: {trimmed}"
        );
        out.push_str(&line);
        out.push('\n');
    }
    out
}
