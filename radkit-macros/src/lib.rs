//! Procedural macros for radkit: `#[flow_skill]` on an impl block (or on the skill struct) and
//! `#[step]` on its methods. `goto!` and `await_input!` inside steps are rewritten by `#[flow_skill]`;
//! outside a skill they are `macro_rules!` stubs in the runtime that fail with a clear message.
//!
//! Pipeline: `attr` (arguments) -> `ast::from_syn` (the skill model; `sig` checks each signature,
//! `scan` reads each step body) -> `valid` (rules across steps; `probe` writes those the compiler
//! finishes, such as steps split over two impl blocks) -> `expand` (code; `meta` the metadata,
//! `rewrite` turns the macros into transitions, `codec` names the state enum and writes its serde and
//! constructors, `imports` lets bare `goto!`/`await_input!`/`#[step]` resolve without an import). Every stage collects errors; on error `fallback` emits the user's
//! item (minus `#[step]`) next to the `compile_error!`s, so IDEs keep working and errors do not
//! cascade. Users read the documentation on the `radkit` re-exports (`radkit::macros_guide`).

use proc_macro::TokenStream;

mod ast;
mod attr;
mod codec;
mod expand;
mod fallback;
mod imports;
mod meta;
mod migrate;
mod probe;
mod rewrite;
mod scan;
mod sig;
mod valid;

/// Turns an impl block of `#[step]` methods into a durable skill, or, on a struct, records the
/// skill's metadata for a bare `#[flow_skill]` on its impl block. See the `radkit` crate docs for
/// every argument, the allowed step signatures and the errors.
#[proc_macro_attribute]
pub fn flow_skill(args: TokenStream, input: TokenStream) -> TokenStream {
    let output = expand::flow_skill(args.into(), input.into());
    if std::env::var_os("RADKIT_MACROS_DEBUG").is_some() {
        eprintln!("{output}");
    }
    output.into()
}

/// Marks a step of a `#[flow_skill]` impl block: `#[step]`, `#[step(start)]` or
/// `#[step(resume_from = "other_step")]`. `#[flow_skill]` consumes it; anywhere else it is an error.
#[proc_macro_attribute]
pub fn step(args: TokenStream, input: TokenStream) -> TokenStream {
    // `#[flow_skill]` emits `#[step(@__radkit_used)]` on a stand-in item so that the user's
    // `use radkit::step` counts as used; that item is dropped.
    let args: Vec<proc_macro2::TokenTree> =
        proc_macro2::TokenStream::from(args).into_iter().collect();
    if let [proc_macro2::TokenTree::Punct(at), proc_macro2::TokenTree::Ident(marker)] = &args[..] {
        if at.as_char() == '@' && marker == "__radkit_used" {
            return TokenStream::new();
        }
    }
    let item: proc_macro2::TokenStream = input.into();
    let error = syn::Error::new(
        proc_macro2::Span::call_site(),
        "#[step] only works on methods of an impl block marked #[flow_skill]; add #[flow_skill] to the impl block",
    )
    .to_compile_error();
    quote::quote!(#error #item).into()
}
