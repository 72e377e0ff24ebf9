//! `ScriptedModel`: answers from a closure or a fixed list, for examples and tests (no network).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::{LlmRequest, LlmResponse, Model};
use crate::flow::EffectError;

type Script = dyn Fn(&LlmRequest) -> Result<serde_json::Value, EffectError> + Send + Sync;

/// A model whose answers are scripted.
#[derive(Clone)]
pub struct ScriptedModel {
    script: Arc<Script>,
    calls: Arc<AtomicUsize>,
}

impl ScriptedModel {
    /// Answer every request with `script(request)`.
    pub fn new(
        script: impl Fn(&LlmRequest) -> Result<serde_json::Value, EffectError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel {
            script: Arc::new(script),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Answer the n-th call with `answers[n]`, repeating the last one when the list runs out.
    pub fn sequence(answers: Vec<serde_json::Value>) -> Self {
        let next = Arc::new(AtomicUsize::new(0));
        Self::new(move |_| {
            let i = next.fetch_add(1, Ordering::SeqCst);
            answers
                .get(i)
                .or_else(|| answers.last())
                .cloned()
                .ok_or_else(|| EffectError::permanent("scripted model has no answers"))
        })
    }

    /// How many times the model was called (retries included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let output = (self.script)(&request)?;
        let usage = serde_json::json!({ "input_tokens": request.input.to_string().len() / 4, "output_tokens": output.to_string().len() / 4 });
        Ok(LlmResponse {
            output,
            usage: Some(usage),
        })
    }
}
