//! The type rules of the authoring macros, one trait each. `#[flow_skill]` checks a skill's types
//! against these traits at the user's own tokens, so a broken rule is one error there, in the words
//! of the rule ("step payload `Opaque` must be `Serialize + DeserializeOwned`"). Users never implement
//! them: each is implemented for every type that follows its rule (`SkillMeta` by the expansion of
//! `#[flow_skill(..)]` on a struct). The module is public, and documented, because rustc names these
//! traits in its messages; it owns no behaviour beyond the checks and never touches the engine.
//!
//! The checks read an associated item of the trait (`<T as Payload>::CODEC`) rather than call a
//! function with a bound, so the error carries no "required by a bound in …" note naming the
//! expansion's plumbing.
//!
//! The module also holds the marks each `#[flow_skill]` impl block puts on its type ([`StepsBlock`],
//! [`HasStep`], [`ResumesFrom`]), which the expansion's checks across impl blocks read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Error as JsonError, Value};

use super::{ErasedSkill, FlowSkill, StepCtx};

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
    /// What a message sent while a task works does (`while_working = ".."`; a skill with a
    /// `#[step(interrupt)]` is interrupted whatever this says).
    pub while_working: super::WhileWorking,
    /// A task answers its client with its completion message (`answer = "message"`).
    pub answers_with_message: bool,
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
        while_working: super::WhileWorking::Refuse,
        answers_with_message: false,
    };
}

/// A skill whose metadata is written on its struct (`#[flow_skill(id = "..", name = "..")] struct S;`),
/// read by the bare `#[flow_skill]` on its impl block.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no skill metadata",
    label = "this impl block needs an `id` and a `name`",
    note = "write `#[flow_skill(id = \"..\", name = \"..\")]` on the impl block, or on the struct with a bare `#[flow_skill]` on the impl block"
)]
pub trait SkillMeta {
    /// The metadata.
    const META: Meta;
}

/// How one payload parameter goes to and from JSON.
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

/// A step payload: what the journal stores between steps. Every `Serialize + DeserializeOwned + Send +
/// 'static` type is one.
#[diagnostic::on_unimplemented(
    message = "step payload `{Self}` must be `Serialize + DeserializeOwned + Send`",
    label = "this payload is persisted in the journal",
    note = "derive `serde::Serialize` and `serde::Deserialize` for it; a payload moves between threads with its task, so it cannot hold an `Rc` or a raw pointer"
)]
pub trait Payload: Sized {
    /// Its JSON codec. Reading it is the only place that requires `T: Payload`: the expansion reads it
    /// once per parameter, spanned at the user's type, so a type that is not serde is one error there.
    const CODEC: Codec<Self>;
}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Payload for T {
    const CODEC: Codec<T> = Codec {
        to_json: |value| serde_json::to_value(value),
        from_json: serde_json::from_value,
    };
}

/// What a typed migration (`#[migrate(from = .., step = "..")]`) reads: the payload an older
/// version of the skill journaled. Every `DeserializeOwned` type is one.
#[diagnostic::on_unimplemented(
    message = "migration input `{Self}` must be `DeserializeOwned`",
    label = "the payload the old version journaled is read as this type",
    note = "derive `serde::Deserialize` for it, with the fields the old version's payload had"
)]
pub trait MigrationInput: Sized {
    /// Its decoder. Read once, spanned at the user's input type, so a type that is not serde is one
    /// error there.
    const DECODE: fn(serde_json::Value) -> Result<Self, serde_json::Error>;
}

#[diagnostic::do_not_recommend]
impl<T: serde::de::DeserializeOwned> MigrationInput for T {
    const DECODE: fn(serde_json::Value) -> Result<T, serde_json::Error> = serde_json::from_value;
}

/// Run a typed migration from version `from` into step `step`: decode the old `payload` with
/// `decode`, map it with `migration` to the step's payload `P` (the expansion names `P`, so a
/// migration that returns another type is an error at its return type), and say why when either
/// fails.
pub fn migrate<I, P, E: std::fmt::Display>(
    from: &str,
    step: &str,
    payload: serde_json::Value,
    decode: fn(serde_json::Value) -> Result<I, serde_json::Error>,
    migration: fn(I) -> Result<P, E>,
) -> Result<P, String> {
    let old = decode(payload).map_err(|e| {
        format!("the payload version {from} carried into step `{step}` does not decode as the migration's input: {e}")
    })?;
    migration(old).map_err(|e| e.to_string())
}

// A step parameter of type `StepCtx` by value can only be the context written through an alias
// (`use radkit::flow::StepCtx as Ctx; .. ctx: Ctx`): the expansion reports that at the parameter as
// "write `ctx: &Ctx`". These two impls keep the context from also failing the payload rules (it is
// neither serde nor `Default`), so that message is the only one. Neither ever runs, and
// `do_not_recommend` keeps them out of other types' errors.
#[diagnostic::do_not_recommend]
impl Payload for StepCtx {
    const CODEC: Codec<StepCtx> = Codec {
        to_json: |_| {
            Err(serde::ser::Error::custom(
                "the step context is not a payload",
            ))
        },
        from_json: |_| {
            Err(serde::de::Error::custom(
                "the step context is not a payload",
            ))
        },
    };
}

/// A start-step parameter other than `Content`: the first message seeds it with `Default::default()`.
#[diagnostic::on_unimplemented(
    message = "start-step parameter `{Self}` must implement `Default`",
    label = "the first message seeds this parameter with `Default::default()`",
    note = "derive or implement `Default` for it, or make it the step's `Content` parameter"
)]
pub trait Seed: Sized {
    /// The value the first message starts with.
    fn seed() -> Self;
}

// `do_not_recommend` keeps rustc from explaining the blanket impl: the message stays ours and does not
// depend on how rustc abbreviates `Default` in a given build.
#[diagnostic::do_not_recommend]
impl<T: Default> Seed for T {
    fn seed() -> Self {
        T::default()
    }
}

#[diagnostic::do_not_recommend]
impl Seed for StepCtx {
    fn seed() -> Self {
        unreachable!("a start-step parameter of type `StepCtx` is a compile error")
    }
}

/// A skill the registry can build: a `FlowSkill` that is `Default`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` must implement `Default` to be registered",
    label = "the registry builds the skill with `Default::default()`",
    note = "derive `Default` for the skill struct, or write `register = false` in #[flow_skill(..)] and hand the skill to the engine yourself"
)]
pub trait Registrable {
    /// A fresh instance, type-erased for the engine.
    fn build() -> Arc<dyn ErasedSkill>;
}

#[diagnostic::do_not_recommend]
impl<T: FlowSkill + Default> Registrable for T {
    fn build() -> Arc<dyn ErasedSkill> {
        super::erase(T::default())
    }
}

/// The type of a borrowed step parameter (`&T`): only the step context may be borrowed. A step
/// parameter `ctx: &Ctx` is the context whatever the path to it (`use radkit::flow::StepCtx as Ctx`),
/// which a macro cannot see; this trait is how the compiler tells.
#[diagnostic::on_unimplemented(
    message = "step parameter `&{Self}` is a reference; step payloads are journaled and must be owned",
    label = "take the value, not a reference",
    note = "only the step context is borrowed: `ctx: &StepCtx`"
)]
pub trait StepContext {
    /// The context, as the parameter's type.
    fn lend(ctx: &StepCtx) -> &Self;
}

#[diagnostic::do_not_recommend]
impl StepContext for StepCtx {
    fn lend(ctx: &StepCtx) -> &Self {
        ctx
    }
}

/// Marks a skill type that has a `#[flow_skill]` impl block without the `#[step(start)]` method (the
/// block with it implements [`FlowSkill`]). Implemented by the expansion only. A skill whose steps
/// are spread over three or more impl blocks implements it twice: rustc reports that as a conflict
/// of this trait, next to the message that says to move the steps into the block with the start step.
pub trait StepsBlock {}

/// Marks a skill type that has the step whose name hashes to `H` (FNV-1a, 128 bits) in a
/// `#[flow_skill]` impl block. Implemented by the expansion only; a step declared in two impl blocks
/// of one skill is a conflict of this trait, next to rustc's "duplicate definitions" of the method.
pub trait HasStep<const H: u128> {}

/// Marks a skill type one of whose steps resumes from the step whose name hashes to `H`. Implemented
/// by the expansion only; two impl blocks that each resume from the same step are a conflict of this
/// trait.
pub trait ResumesFrom<const H: u128> {}

/// A step's future, checked `Send` where the expansion calls the step (spanned at the step's name):
/// a task moves between worker threads, so a step holding an `Rc` across an `.await` is one error at
/// that step.
#[allow(clippy::type_complexity)]
pub fn step_future_must_be_send<'a, F: Future + Send + 'a>(
    future: F,
) -> Pin<Box<dyn Future<Output = F::Output> + Send + 'a>> {
    Box::pin(future)
}
