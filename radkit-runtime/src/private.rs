//! What macro expansions name (`::radkit::__private::…`). Not a public API: it changes with the
//! macros. Users never depend on `serde`, `async-trait` or `inventory` directly for the macros.
//!
//! The type rules a skill must follow are traits in the public `flow::rules` (rustc names them in its
//! messages). What stays here is plumbing: serde helpers of the state enum, stand-ins for a skill
//! with errors, and the compile-time probes below.

use std::marker::PhantomData;

pub use async_trait::async_trait;
pub use inventory;
pub use serde;
// Not re-exported: rustc names a type through the first public path it finds, and a user crate that
// does not name `serde_json` itself would read `radkit::__private::JsonError` in its messages (the
// `From` impls of `StepError`, the implementors of `Deserialize`).
use serde_json::{Error as JsonError, Value};

pub use crate::flow::rules::Meta;
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

/// The encoded payload of a step without parameters.
pub fn json_null() -> Result<Value, JsonError> {
    Ok(Value::Null)
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

/// Stands in for `goto!`/`await_input!` in a skill that has compile errors elsewhere: it uses its
/// arguments (no "unused variable" warnings) and fits any type (no follow-on type errors). Never runs.
pub fn neutral<A, R>(_arguments: A) -> R {
    unreachable!("a #[flow_skill] with compile errors never runs")
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
    info.while_working = meta.while_working;
    info.answers_with_message = meta.answers_with_message;
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

/// A compile-time question about a skill type `T` (and a step name hashed to `H`), answered by which
/// associated const resolves: an inherent const when `T` has the marker, else the [`Otherwise`]
/// default. The expansion reads the answers in a `const` item and panics there with its own
/// message, so a mistake that spans two items (steps split over two impl blocks, metadata written
/// twice) is reported in words about both, not as a trait conflict.
pub struct Probe<T: ?Sized, const H: u128 = 0>(PhantomData<T>);

// The marks the probes read are public in `flow::rules`: a skill split over three impl blocks (or
// one step declared in two) makes two blocks implement the same mark, and rustc names the mark in
// its "conflicting implementations"; it must not print `__private` there.
pub use crate::flow::rules::{HasStep, ResumesFrom, StepsBlock};

/// The answers when the marker is missing.
pub trait Otherwise {
    /// Some impl block of `T` has the start step (it implements `FlowSkill`, for real or as the
    /// stand-in of a block with errors).
    const START_BLOCK: bool = false;
    /// Some impl block of `T` has no start step.
    const STEPS_BLOCK: bool = false;
    /// Some impl block of `T` has the step hashed to `H`.
    const HAS_STEP: bool = false;
    /// Some step of `T` resumes from the step hashed to `H`.
    const RESUMES_FROM: bool = false;
    /// `T` has metadata on its struct.
    const STRUCT_META: bool = false;
    /// `T` is the step context.
    const IS_STEP_CTX: bool = false;
}

impl<T: ?Sized, const H: u128> Otherwise for Probe<T, H> {}

impl<T: ?Sized + FlowSkill, const H: u128> Probe<T, H> {
    /// See [`Otherwise::START_BLOCK`].
    pub const START_BLOCK: bool = true;
}

impl<T: ?Sized + StepsBlock, const H: u128> Probe<T, H> {
    /// See [`Otherwise::STEPS_BLOCK`].
    pub const STEPS_BLOCK: bool = true;
}

impl<T: ?Sized + HasStep<H>, const H: u128> Probe<T, H> {
    /// See [`Otherwise::HAS_STEP`].
    pub const HAS_STEP: bool = true;
}

impl<T: ?Sized + ResumesFrom<H>, const H: u128> Probe<T, H> {
    /// See [`Otherwise::RESUMES_FROM`].
    pub const RESUMES_FROM: bool = true;
}

impl<T: ?Sized + crate::flow::rules::SkillMeta, const H: u128> Probe<T, H> {
    /// See [`Otherwise::STRUCT_META`].
    pub const STRUCT_META: bool = true;
}

impl<const H: u128> Probe<StepCtx, H> {
    /// See [`Otherwise::IS_STEP_CTX`].
    pub const IS_STEP_CTX: bool = true;
}

/// The payload a task carried into a step, as its old version journaled it (`FlowSkill::migrate`).
pub type MigrationPayload = Value;
