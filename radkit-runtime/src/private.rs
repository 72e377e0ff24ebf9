//! What macro expansions name (`::radkit::__private::…`). Not a public API: it changes with the
//! macros. Users never depend on `serde`, `async-trait` or `inventory` directly for the macros.
//!
//! The traits here carry `#[diagnostic::on_unimplemented]` so that a type rule broken in user code
//! (a payload that is not serde, a start parameter that is not `Default`) reads as our message at the
//! user's type, once.

use std::sync::Arc;

pub use async_trait::async_trait;
pub use inventory;
pub use serde;
pub use serde_json::{Error as JsonError, Value};

pub use crate::flow::{
    ErasedSkill, Event, FlowSkill, SkillInfo, StepCtx, StepError, StepInfo, StepResult, Transition,
};
pub use crate::model::Content;
pub use crate::registry::SkillRegistration;

/// The macros a `#[flow_skill]` impl block may name without importing them. When an impl block
/// writes a bare `goto!`, `await_input!` or `#[step]`, the expansion glob-imports this module next to
/// it: the user's own `use radkit::goto;` shadows the glob (and stays used), and without one the
/// glob resolves the name.
pub mod macros {
    pub use crate::{await_input, goto};
    pub use radkit_macros::step;
}

/// The metadata a `#[flow_skill(..)]` attribute declares (all `'static`, so registration is const).
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    /// Skill id.
    pub id: &'static str,
    /// Skill name.
    pub name: &'static str,
    /// Description (doc comments or `description = ".."`).
    pub description: &'static str,
    /// Explicit version, if any (else derived from the step graph).
    pub version: Option<&'static str>,
    /// Tags.
    pub tags: &'static [&'static str],
    /// Examples.
    pub examples: &'static [&'static str],
    /// Input modes.
    pub input_modes: &'static [&'static str],
    /// Output modes.
    pub output_modes: &'static [&'static str],
}

impl Meta {
    /// Stands in for metadata that did not parse, so that one bad argument is one error.
    pub const PLACEHOLDER: Meta = Meta {
        id: "",
        name: "",
        description: "",
        version: None,
        tags: &[],
        examples: &[],
        input_modes: &[],
        output_modes: &[],
    };
}

/// Where a skill's metadata lives: written by `#[flow_skill(..)]` on the impl block or on the struct.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no skill metadata",
    label = "this impl block needs an `id` and a `name`",
    note = "write `#[flow_skill(id = \"..\", name = \"..\")]` on the impl block, or on the struct with a bare `#[flow_skill]` on the impl block"
)]
pub trait SkillMeta {
    /// The metadata.
    const META: Meta;
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

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Payload for T {}

/// A start-step parameter seeded with `Default::default()` on the first message.
#[diagnostic::on_unimplemented(
    message = "start-step parameter `{Self}` must implement `Default`",
    label = "the first message seeds this parameter with `Default::default()`",
    note = "derive or implement `Default` for it, or make it the step's `Content` parameter"
)]
pub trait Seed: Default {}

// `do_not_recommend` keeps rustc from explaining the blanket impl: the message stays ours and does not
// depend on how rustc abbreviates `Default` in a given build.
#[diagnostic::do_not_recommend]
impl<T: Default> Seed for T {}

/// A skill the registry can build.
#[diagnostic::on_unimplemented(
    message = "`{Self}` must implement `Default` to be registered",
    label = "the registry builds the skill with `Default::default()`",
    note = "derive `Default` for the skill struct, or write `register = false` in #[flow_skill(..)] and hand the skill to the engine yourself"
)]
pub trait Registrable: FlowSkill + Default {}

#[diagnostic::do_not_recommend]
impl<T: FlowSkill + Default> Registrable for T {}

/// How one payload parameter goes to and from JSON. Building it is the only place that requires
/// `T: Payload`: the expansion builds each one once, in a function spanned at the user's type, so a
/// type that is not serde is one error at that type (and the state enum's serde impls stay valid).
pub struct Codec<T> {
    to_json: fn(&T) -> Result<Value, JsonError>,
    from_json: fn(Value) -> Result<T, JsonError>,
}

impl<T> Codec<T> {
    /// Encode.
    pub fn to_json(&self, value: &T) -> Result<Value, JsonError> {
        (self.to_json)(value)
    }

    /// Decode.
    pub fn from_json(&self, value: Value) -> Result<T, JsonError> {
        (self.from_json)(value)
    }
}

/// The codec of a payload type.
pub fn codec<T: Payload>() -> Codec<T> {
    Codec {
        to_json: |value| serde_json::to_value(value),
        from_json: serde_json::from_value,
    }
}

/// Several encoded parameters as one JSON array (the payload tuple).
pub fn json_tuple<const N: usize>(
    items: [Result<Value, JsonError>; N],
) -> Result<Value, JsonError> {
    items
        .into_iter()
        .collect::<Result<Vec<Value>, JsonError>>()
        .map(Value::Array)
}

/// A JSON array of exactly `N` values (the payload tuple of a step with `N` parameters).
pub fn json_untuple<const N: usize>(value: Value) -> Result<[Value; N], JsonError> {
    use serde::de::Error;
    match value {
        Value::Array(items) => {
            let found = items.len();
            <[Value; N]>::try_from(items).map_err(|_| {
                JsonError::invalid_length(found, &format!("a payload of {N} values").as_str())
            })
        }
        other => Err(JsonError::custom(format!(
            "expected a payload of {N} values, found {other}"
        ))),
    }
}

/// The payload of a step without parameters.
pub fn json_unit(value: Value) -> Result<(), JsonError> {
    serde_json::from_value(value)
}

/// Serialize one variant of a hidden state enum as `{"step": payload}`.
pub fn ser_variant<S: serde::Serializer>(
    serializer: S,
    step: &'static str,
    payload: Result<Value, JsonError>,
) -> Result<S::Ok, S::Error> {
    use serde::ser::{Error, SerializeMap};
    let payload = payload.map_err(S::Error::custom)?;
    let mut map = serializer.serialize_map(Some(1))?;
    map.serialize_entry(step, &payload)?;
    map.end()
}

/// Read `{"step": payload}` (or `"step"`) into the step name and its JSON payload.
pub fn de_variant<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<(String, Value), D::Error> {
    use serde::de::Error;
    match <Value as serde::Deserialize>::deserialize(deserializer)? {
        Value::String(name) => Ok((name, Value::Null)),
        Value::Object(map) if map.len() == 1 => Ok(map.into_iter().next().unwrap_or_default()),
        other => Err(D::Error::custom(format!(
            "expected a step state like {{\"step\": payload}}, found {other}"
        ))),
    }
}

/// A payload that does not decode, as the deserializer's error naming the step.
pub fn de_payload<T, E: serde::de::Error>(
    step: &str,
    decoded: Result<T, JsonError>,
) -> Result<T, E> {
    decoded.map_err(|e| E::custom(format!("payload of step `{step}`: {e}")))
}

/// `Debug` of a hidden state enum: its JSON form, `{"critique":["draft",[]]}`.
pub fn debug_state<T: serde::Serialize>(
    state: &T,
    f: &mut std::fmt::Formatter<'_>,
) -> std::fmt::Result {
    match serde_json::to_value(state) {
        Ok(value) => write!(f, "{value}"),
        Err(e) => write!(f, "<state that does not serialize: {e}>"),
    }
}

/// An unknown step name.
pub fn unknown_variant<E: serde::de::Error>(name: &str, expected: &'static [&'static str]) -> E {
    E::unknown_variant(name, expected)
}

/// The default value of a start-step parameter.
pub fn seed<T: Seed>() -> T {
    T::default()
}

/// Stands in for `goto!`/`await_input!` in a skill that has compile errors elsewhere: it uses its
/// arguments (no "unused variable" warnings) and fits any type (no follow-on type errors). Never runs.
pub fn neutral<A, R>(_arguments: A) -> R {
    unreachable!("a #[flow_skill] with compile errors never runs")
}

/// A step's future, checked `Send` at the call of that step (spanned at the step's name), so that a
/// step holding an `Rc` across an `.await` is one error at that step rather than at the attribute.
#[allow(clippy::type_complexity)]
pub fn send_step<'a, F: std::future::Future + Send + 'a>(
    future: F,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = F::Output> + Send + 'a>> {
    Box::pin(future)
}

/// Build a registered skill.
pub fn build_default<T: Registrable>() -> Arc<dyn ErasedSkill> {
    crate::flow::erase(T::default())
}

/// The `SkillInfo` of a macro skill; the version is derived from `steps` unless one is declared.
pub fn skill_info(meta: &Meta, steps: Vec<StepInfo>) -> SkillInfo {
    let mut info = SkillInfo::new(meta.id, meta.name)
        .description(meta.description)
        .tags(meta.tags.iter().copied())
        .examples(meta.examples.iter().copied());
    info.input_modes = meta.input_modes.iter().map(|s| (*s).to_owned()).collect();
    info.output_modes = meta.output_modes.iter().map(|s| (*s).to_owned()).collect();
    info.version = match meta.version {
        Some(v) => v.to_owned(),
        None => SkillInfo::graph_version(&steps),
    };
    info.steps = steps;
    info
}

/// Go to another step of the skill: `goto!("step", payload)`, or `goto!("step")` when the step takes
/// no payload.
///
/// Inside a `#[step]` method of a `#[flow_skill]` impl block, `#[flow_skill]` rewrites it into
/// `Ok(Transition::goto(..))` of the skill's hidden state enum: it compiles only if `step` exists, is
/// not a `resume_from` step, and `payload` has that step's payload type. There it needs no import.
/// Anywhere else it is a compile error saying so.
#[macro_export]
macro_rules! goto {
    (@__radkit_typed $typed:expr) => {
        $typed
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!("`goto!` only works inside a #[step] method of a #[flow_skill] impl block, where it becomes a typed transition")
    };
}

/// Wait for the user: `await_input!(slot = "name", message = "question", carry = payload)`.
///
/// The task becomes `input-required` with `message`; the user's reply runs the step declared
/// `#[step(resume_from = "<this step>")]` with `carry` (leave `carry` out for `()`) and the reply as
/// its `Content` parameter. It compiles only inside a `#[step]` method that such a step resumes
/// from, with a carry of that step's payload type; there it needs no import.
#[macro_export]
macro_rules! await_input {
    (@__radkit_typed $typed:expr) => {
        $typed
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!("`await_input!` only works inside a #[step] method of a #[flow_skill] impl block, where it becomes a typed transition")
    };
}
