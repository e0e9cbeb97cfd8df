//! ONNX's protobuf messages, generated from the vendored `crates/workbook/proto/onnx.proto`
//! (ONNX 1.23.2, Apache-2.0) by prost-build, the proto compiled by protox: no `protoc`, no
//! hand-copied field numbers. The generated code is committed (`generated/`), so that a build
//! compiles neither generator; `cargo run -p onnx-codegen` rewrites it, and `.ci/run` fails if it
//! differs from what the proto generates (`cargo run -p onnx-codegen -- --check`).
//!
//! Three messages are declared here by hand, because programs written against this crate (the
//! exercises among them) use their shape: [`TypeProto`] with its `tensor_type` (the one case of
//! ONNX's `oneof value` this library reads and writes, as a plain optional field),
//! [`TypeProtoTensor`] (`TypeProto.Tensor`) and [`Dimension`] (`TensorShapeProto.Dimension`,
//! without its `denotation`). They keep ONNX's field numbers, so they are wire-compatible with
//! the full messages; the test below checks both ways against the full messages generated from
//! the same file.
//!
//! ```
//! use prost::Message;
//! use workbook::export::onnx_proto::{ModelProto, OperatorSetIdProto};
//! let m = ModelProto { ir_version: 8, opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 18 }], ..Default::default() };
//! let back = ModelProto::decode(m.encode_to_vec().as_slice()).unwrap();
//! assert_eq!(back.opset_import[0].version, 18);
//! ```

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated {
    include!("generated/onnx.rs");
}

pub use generated::*;

/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: i32 = tensor_proto::DataType::Float as i32;
/// `TensorProto.DataType.INT64`.
pub const INT64: i32 = tensor_proto::DataType::Int64 as i32;
/// `TensorProto.DataType.BOOL`.
pub const BOOL: i32 = tensor_proto::DataType::Bool as i32;

/// `AttributeProto.AttributeType` values, as the `r#type` field holds them.
pub mod attribute_type {
    use super::attribute_proto::AttributeType;
    pub const FLOAT: i32 = AttributeType::Float as i32;
    pub const INT: i32 = AttributeType::Int as i32;
    pub const STRING: i32 = AttributeType::String as i32;
    pub const TENSOR: i32 = AttributeType::Tensor as i32;
    pub const FLOATS: i32 = AttributeType::Floats as i32;
    pub const INTS: i32 = AttributeType::Ints as i32;
}

/// `onnx.TypeProto`, tensor case only (`oneof value { Tensor tensor_type = 1; ... }`; the other
/// cases are skipped when decoding).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

/// `onnx.TypeProto.Tensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProtoTensor {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `onnx.TensorShapeProto.Dimension`: a fixed size or a symbolic (dynamic) name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dimension {
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
}

/// `oneof value { int64 dim_value = 1; string dim_param = 2; }`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum DimensionValue {
    #[prost(int64, tag = "1")]
    DimValue(i64),
    #[prost(string, tag = "2")]
    DimParam(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The full messages of the same file, generated without the hand-declared three.
    #[allow(clippy::all, clippy::pedantic, dead_code)]
    mod full {
        include!("generated/onnx_full.rs");
    }

    fn value(dims: Vec<Dimension>) -> ValueInfoProto {
        ValueInfoProto {
            name: "x".into(),
            r#type: Some(TypeProto {
                tensor_type: Some(TypeProtoTensor {
                    elem_type: FLOAT,
                    shape: Some(TensorShapeProto { dim: dims }),
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_hand_declared_messages_are_onnx_s_on_the_wire() {
        let ours = value(vec![
            Dimension {
                value: Some(DimensionValue::DimParam("num_nodes".into())),
            },
            Dimension {
                value: Some(DimensionValue::DimValue(1433)),
            },
        ]);
        let bytes = ours.encode_to_vec();
        let theirs = full::ValueInfoProto::decode(bytes.as_slice()).unwrap();
        let Some(full::type_proto::Value::TensorType(t)) = theirs.r#type.unwrap().value else {
            panic!("not a tensor type");
        };
        assert_eq!(t.elem_type, FLOAT);
        let dims: Vec<_> = t.shape.unwrap().dim.into_iter().map(|d| d.value).collect();
        assert_eq!(
            dims,
            [
                Some(full::tensor_shape_proto::dimension::Value::DimParam(
                    "num_nodes".into()
                )),
                Some(full::tensor_shape_proto::dimension::Value::DimValue(1433)),
            ]
        );
        // and back: what the full messages write, ours read the same
        let full_bytes = full::ValueInfoProto {
            name: "x".into(),
            r#type: Some(full::TypeProto {
                value: Some(full::type_proto::Value::TensorType(
                    full::type_proto::Tensor {
                        elem_type: FLOAT,
                        shape: Some(full::TensorShapeProto {
                            dim: vec![
                                full::tensor_shape_proto::Dimension {
                                    value: Some(
                                        full::tensor_shape_proto::dimension::Value::DimParam(
                                            "num_nodes".into(),
                                        ),
                                    ),
                                    ..Default::default()
                                },
                                full::tensor_shape_proto::Dimension {
                                    value: Some(
                                        full::tensor_shape_proto::dimension::Value::DimValue(1433),
                                    ),
                                    ..Default::default()
                                },
                            ],
                        }),
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(full_bytes, bytes);
        assert_eq!(ValueInfoProto::decode(full_bytes.as_slice()).unwrap(), ours);
    }

    #[test]
    fn repeated_numbers_are_written_as_proto2_writes_them() {
        // proto2 writes `repeated int64 dims = 1` unpacked (one tag per value): 08 02 08 03
        let t = TensorProto {
            dims: vec![2, 3],
            ..Default::default()
        };
        assert_eq!(t.encode_to_vec(), [0x08, 0x02, 0x08, 0x03]);
        // and `float_data` is declared [packed = true]: one tag, a length, the values
        let t = TensorProto {
            float_data: vec![1.0],
            ..Default::default()
        };
        assert_eq!(t.encode_to_vec(), [0x22, 0x04, 0x00, 0x00, 0x80, 0x3f]);
    }
}
