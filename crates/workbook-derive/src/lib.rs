//! `#[derive(Module)]` for [workbook](../workbook/index.html) layers.
//!
//! The derive visits **every** field of the struct, so a tensor cannot be left out of
//! `to_device`, `to_dtype`, the placement checks, `inspect` tables or checkpoints (the
//! failure PyTorch meets when a tensor is kept in a plain attribute instead of
//! `register_buffer`). Each field is one of:
//!
//! - no attribute: a **parameter** (its type implements `workbook::module::Tensors`:
//!   `Tensor`, `Option<Tensor>`, `candle_nn::Linear`, `Vec<_>` of those, ...), named after
//!   the field, or `#[module(name = "lin.weight")]`;
//! - `#[module(buffer)]`: a **buffer** (moved with the layer, not trained);
//! - `#[module(placement)]`: the layer's `Placement` (exactly one field);
//! - `#[module(skip)]`: not a tensor (a config, a flag); cloned as is. Opting out is explicit: a
//!   field without an attribute whose type holds no tensors does not compile.
//! - `#[module(or = "lin_l")]` on an `Option` parameter: when `None`, the named field's tensors
//!   are listed under this field's name too (PyG's shared weights, e.g. GATv2's
//!   `share_weights`, appear under both names in its `state_dict`).
//!
//! ```ignore
//! #[derive(Clone, Debug, workbook::Module)]
//! struct Scale {
//!     weight: Tensor,                  // parameter "weight"
//!     #[module(buffer)] mean: Tensor,  // buffer "mean"
//!     #[module(placement)] at: Placement,
//!     #[module(skip)] width: usize,
//! }
//! ```

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_macro_input, Data, DeriveInput, Fields, LitStr};

enum Role {
    Parameter,
    Buffer,
    Placement,
    Skip,
}

struct FieldSpec {
    ident: syn::Ident,
    /// Where errors about the field's type point (the field itself, not the derive).
    span: proc_macro2::Span,
    role: Role,
    name: String,
    or: Option<syn::Ident>,
}

/// Derives `workbook::module::Module`; see the crate docs for the field attributes.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] needs a struct with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] needs a struct with named fields",
        ));
    };
    let mut specs = Vec::new();
    for f in &fields.named {
        let ident = f.ident.clone().expect("named fields have names");
        let mut spec = FieldSpec {
            span: f.ty.span(),
            name: ident.to_string(),
            ident,
            role: Role::Parameter,
            or: None,
        };
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("buffer") {
                    spec.role = Role::Buffer;
                } else if meta.path.is_ident("placement") {
                    spec.role = Role::Placement;
                } else if meta.path.is_ident("skip") {
                    spec.role = Role::Skip;
                } else if meta.path.is_ident("name") {
                    spec.name = meta.value()?.parse::<LitStr>()?.value();
                } else if meta.path.is_ident("or") {
                    let lit = meta.value()?.parse::<LitStr>()?;
                    spec.or = Some(format_ident!("{}", lit.value()));
                } else {
                    return Err(meta.error(
                        "unknown #[module] option; expected buffer, placement, skip, name = \"...\" or or = \"field\"",
                    ));
                }
                Ok(())
            })?;
        }
        specs.push(spec);
    }
    let placements: Vec<_> = specs
        .iter()
        .filter(|s| matches!(s.role, Role::Placement))
        .collect();
    if placements.len() != 1 {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] needs exactly one field marked #[module(placement)] (a workbook::Placement: where the layer's tensors live)",
        ));
    }
    let placement = &placements[0].ident;
    let krate = quote!(::workbook::module);
    let mut visits = Vec::new();
    let mut maps = Vec::new();
    for s in &specs {
        let ident = &s.ident;
        let name = &s.name;
        let kind = match s.role {
            Role::Buffer => quote!(#krate::Kind::Buffer),
            _ => quote!(#krate::Kind::Parameter),
        };
        match s.role {
            Role::Parameter | Role::Buffer => {
                match &s.or {
                    Some(other) => visits.push(quote! {
                        match &self.#ident {
                            ::core::option::Option::Some(v) => #krate::Tensors::visit(v, #name, #kind, f),
                            ::core::option::Option::None => #krate::Tensors::visit(&self.#other, #name, #kind, f),
                        }
                    }),
                    None => visits.push(quote_spanned! {s.span=>
                        #krate::Tensors::visit(&self.#ident, #name, #kind, f);
                    }),
                }
                maps.push(quote_spanned! {s.span=>
                    #ident: #krate::Tensors::map(&self.#ident, #name, #kind, m)?,
                });
            }
            Role::Placement => {
                maps.push(quote! { #ident: #krate::TensorMap::target(m).clone(), });
            }
            Role::Skip => {
                maps.push(quote! { #ident: ::core::clone::Clone::clone(&self.#ident), });
            }
        }
    }
    let ty = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #krate::Module for #ty #ty_generics #where_clause {
            fn visit_tensors<'a>(&'a self, f: &mut dyn FnMut(#krate::Named<'a>)) {
                #(#visits)*
            }
            fn map_tensors(&self, m: &mut dyn #krate::TensorMap) -> ::workbook::Result<Self> {
                ::core::result::Result::Ok(Self { #(#maps)* })
            }
            fn placement(&self) -> &::workbook::Placement {
                &self.#placement
            }
        }
    })
}
