//! What macro expansions name (`::radkit::__private::…`). Not a public API: it changes with the
//! macros. Users never depend on `serde`, `async-trait` or `inventory` directly for the macros.

use std::sync::Arc;

pub use async_trait::async_trait;
pub use inventory;
pub use serde;

pub use crate::flow::{
    ErasedSkill, Event, FlowSkill, SkillInfo, StepCtx, StepError, StepInfo, StepResult, Transition,
};
pub use crate::model::Content;
pub use crate::registry::SkillRegistration;

/// The metadata a `#[flow_skill(..)]` attribute declares.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no skill metadata",
    label = "this impl block needs an `id` and a `name`",
    note = "write `#[flow_skill(id = \"..\", name = \"..\")]` on the impl block, or on the struct with a bare `#[flow_skill]` on the impl block"
)]
pub trait SkillMeta {
    /// Skill id.
    const ID: &'static str;
    /// Skill name.
    const NAME: &'static str;
    /// Description (doc comments or `description = ".."`).
    const DESCRIPTION: &'static str;
    /// Explicit version, if any (else derived from the step graph).
    const VERSION: Option<&'static str>;
    /// Tags.
    const TAGS: &'static [&'static str];
    /// Examples.
    const EXAMPLES: &'static [&'static str];
    /// Input modes.
    const INPUT_MODES: &'static [&'static str];
    /// Output modes.
    const OUTPUT_MODES: &'static [&'static str];
}

/// Implemented only by the impl-block expansion of `#[flow_skill]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has #[flow_skill] on its struct but no #[flow_skill] impl block",
    label = "the steps of this skill are never registered",
    note = "add a bare `#[flow_skill]` to the `impl {Self}` block that holds the #[step] methods"
)]
pub trait FlowSkillImpl {}

/// A step payload: what the journal stores between steps.
#[diagnostic::on_unimplemented(
    message = "step payload `{Self}` must be `Serialize + DeserializeOwned`",
    label = "this payload is persisted in the journal",
    note = "derive `serde::Serialize` and `serde::Deserialize` for it"
)]
pub trait Payload: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Payload for T {}

/// A start-step parameter seeded with `Default::default()` on the first message.
#[diagnostic::on_unimplemented(
    message = "start-step parameter `{Self}` must implement `Default`",
    label = "the first message seeds this parameter with `Default::default()`",
    note = "derive or implement `Default` for it, or make it the step's `Content` parameter"
)]
pub trait Seed: Default {}
impl<T: Default> Seed for T {}

/// A skill the registry can build.
#[diagnostic::on_unimplemented(
    message = "`{Self}` must implement `Default` to be registered",
    label = "the registry builds the skill with `Default::default()`",
    note = "derive `Default` for the skill struct (configuration belongs in models and tools)"
)]
pub trait Registrable: FlowSkill + Default {}
impl<T: FlowSkill + Default> Registrable for T {}

/// Serialize one variant of a hidden state enum as `{"Variant": payload}`.
pub fn ser_variant<T: Payload, S: serde::Serializer>(
    serializer: S,
    variant: &'static str,
    payload: &T,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(1))?;
    map.serialize_entry(variant, payload)?;
    map.end()
}

/// Read `{"Variant": payload}` (or `"Variant"`) into the variant name and its JSON payload.
pub fn de_variant<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<(String, serde_json::Value), D::Error> {
    use serde::de::Error;
    match <serde_json::Value as serde::Deserialize>::deserialize(deserializer)? {
        serde_json::Value::String(name) => Ok((name, serde_json::Value::Null)),
        serde_json::Value::Object(map) if map.len() == 1 => {
            Ok(map.into_iter().next().unwrap_or_default())
        }
        other => Err(D::Error::custom(format!(
            "expected a step state like {{\"StepName\": payload}}, found {other}"
        ))),
    }
}

/// Decode a variant's payload.
pub fn de_payload<T: Payload, E: serde::de::Error>(value: serde_json::Value) -> Result<T, E> {
    serde_json::from_value(value).map_err(E::custom)
}

/// An unknown variant name.
pub fn unknown_variant<E: serde::de::Error>(name: &str, expected: &'static [&'static str]) -> E {
    E::unknown_variant(name, expected)
}

/// The default value of a start-step parameter.
pub fn seed<T: Seed>() -> T {
    T::default()
}

/// Build a registered skill.
pub fn build_default<T: Registrable>() -> Arc<dyn ErasedSkill> {
    crate::flow::erase(T::default())
}

/// The `SkillInfo` of a macro skill.
pub fn skill_info<T: SkillMeta>(steps: Vec<StepInfo>) -> SkillInfo {
    let mut info = SkillInfo::new(T::ID, T::NAME)
        .description(T::DESCRIPTION)
        .tags(T::TAGS.iter().copied())
        .examples(T::EXAMPLES.iter().copied());
    info.input_modes = T::INPUT_MODES.iter().map(|s| (*s).to_owned()).collect();
    info.output_modes = T::OUTPUT_MODES.iter().map(|s| (*s).to_owned()).collect();
    info.version = match T::VERSION {
        Some(v) => v.to_owned(),
        None => SkillInfo::graph_version(&steps),
    };
    info.steps = steps;
    info
}

/// `goto!` outside a step.
#[macro_export]
macro_rules! goto {
    (@__radkit_typed $typed:expr) => {
        $typed
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!("`goto!` only works inside a #[step] method of a #[flow_skill] impl block, where it becomes a typed transition")
    };
}

/// `await_input!` outside a step.
#[macro_export]
macro_rules! await_input {
    (@__radkit_typed $typed:expr) => {
        $typed
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!("`await_input!` only works inside a #[step] method of a #[flow_skill] impl block, where it becomes a typed transition")
    };
}
