//! `ScriptedModel`: answers from a closure, a fixed list or a JSON file, for examples and tests (no
//! network).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::{LlmRequest, LlmResponse, Model, Tokens};
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

    /// Answers from a JSON file: either an array of answers (the n-th call gets the n-th, the last one
    /// repeats), or an object mapping registered model names (`ctx.llm(name)`) to such arrays, with
    /// `"*"` for every other name. An answer is any JSON value (a string for a text answer); an object
    /// `{"$error": "message", "transient": true}` makes that call fail instead.
    ///
    /// ```json
    /// { "research": ["A first draft.", "A better draft."],
    ///   "critic":   [{"verdict": "revise"}, {"$error": "rate limited", "transient": true}, {"verdict": "approve"}] }
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_json(&text).map_err(|e| match e {
            ScriptError::Invalid { message, .. } => ScriptError::Invalid {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// Answers from the JSON text of a script (see [`from_file`](Self::from_file)).
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let invalid = |message: String| ScriptError::Invalid {
            path: "<json>".to_owned(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let scripts: HashMap<String, Vec<serde_json::Value>> = match value {
            serde_json::Value::Array(answers) => HashMap::from([("*".to_owned(), answers)]),
            serde_json::Value::Object(models) => models
                .into_iter()
                .map(|(name, answers)| match answers {
                    serde_json::Value::Array(a) => Ok((name, a)),
                    _ => Err(invalid(format!(
                        "the answers of model `{name}` must be an array"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(invalid(
                    "expected an array of answers or an object of model name -> answers".into(),
                ))
            }
        };
        if let Some((name, _)) = scripts.iter().find(|(_, a)| a.is_empty()) {
            return Err(invalid(format!("model `{name}` has no answers")));
        }
        let counters: HashMap<String, AtomicUsize> = scripts
            .keys()
            .map(|k| (k.clone(), AtomicUsize::new(0)))
            .collect();
        Ok(Self::new(move |request| {
            let name = if scripts.contains_key(&request.model) {
                request.model.as_str()
            } else {
                "*"
            };
            let (Some(answers), Some(counter)) = (scripts.get(name), counters.get(name)) else {
                return Err(EffectError::permanent(format!(
                    "the script has no answers for model `{}`",
                    request.model
                )));
            };
            let i = counter.fetch_add(1, Ordering::SeqCst);
            let answer = answers
                .get(i)
                .or_else(|| answers.last())
                .cloned()
                .unwrap_or_default();
            match answer.get("$error").and_then(serde_json::Value::as_str) {
                Some(message)
                    if answer.get("transient").and_then(serde_json::Value::as_bool)
                        == Some(true) =>
                {
                    Err(EffectError::transient(message))
                }
                Some(message) => Err(EffectError::permanent(message)),
                None => Ok(answer),
            }
        }))
    }

    /// How many times the model was called (retries included).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// Why a script file could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read the model script {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// The file is not a script.
    #[error("the model script {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

#[async_trait]
impl Model for ScriptedModel {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, EffectError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let output = (self.script)(&request)?;
        let usage = serde_json::json!({ "input_tokens": request.input.to_string().len() / 4, "output_tokens": output.to_string().len() / 4 });
        Ok(LlmResponse::answer(output, Some(usage)))
    }

    /// The scripted answer, sent word by word (a structured answer as its JSON text at once).
    async fn stream(
        &self,
        request: LlmRequest,
        tokens: &Tokens,
    ) -> Result<LlmResponse, EffectError> {
        let response = self.complete(request).await?;
        match &response.output {
            serde_json::Value::String(text) => {
                for word in text.split_inclusive(char::is_whitespace) {
                    tokens.send(word);
                }
            }
            other => tokens.send(&other.to_string()),
        }
        Ok(response)
    }
}
