//! `Effects`: the registry of models and tools the engine performs commands with. It maps a command to
//! the code that performs it (one attempt; the engine retries and journals) and knows nothing of
//! journals.

use std::collections::HashMap;
use std::sync::Arc;

use crate::flow::{CmdKind, EffectError, EffectPolicy, InvocationId, RetryPolicy};
use crate::llm::{LlmRequest, Model, Tokens};
use crate::tools::{Tool, ToolSchema, ToolSource};

/// Registered models and tools.
#[derive(Clone, Default)]
pub struct Effects {
    models: HashMap<String, Arc<dyn Model>>,
    default_model: Option<Arc<dyn Model>>,
    tools: HashMap<String, Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    /// Descriptions of registered tools for models (`Effects::describe`).
    described: HashMap<String, ToolSchema>,
}

/// What an effect returned: its value and accounting.
#[derive(Debug, Clone, PartialEq)]
pub struct Performed {
    /// The value.
    pub value: serde_json::Value,
    /// Usage (tokens) to record on the receipt.
    pub usage: Option<serde_json::Value>,
}

impl Effects {
    /// No models, no tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `model` under `name` (`ctx.llm(name)`).
    pub fn model(mut self, name: impl Into<String>, model: impl Model) -> Self {
        self.models.insert(name.into(), Arc::new(model));
        self
    }

    /// Use `model` for every name without a model of its own.
    pub fn default_model(mut self, model: impl Model) -> Self {
        self.default_model = Some(Arc::new(model));
        self
    }

    /// The same tools, but every model name answered by `model` (what `--llm openai` does to a
    /// program's scripted models).
    pub fn replace_models(mut self, model: impl Model) -> Self {
        self.models.clear();
        self.default_model = Some(Arc::new(model));
        self
    }

    /// The names models are registered under (not the default model's).
    pub fn model_names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// Register `tool` under `name` (`ctx.tool(name)`).
    pub fn tool(mut self, name: impl Into<String>, tool: impl Tool) -> Self {
        self.tools.insert(name.into(), Arc::new(tool));
        self
    }

    /// Look tools up in `source` when a command runs (the tools of an MCP server: `tools::mcp`).
    /// A tool registered by name with [`tool`](Self::tool) wins; sources are asked in the order
    /// they were added.
    pub fn tools_from(mut self, source: impl ToolSource) -> Self {
        self.sources.push(Arc::new(source));
        self
    }

    /// The tool registered as `name`, or offered under it by a source now.
    pub fn find_tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .get(name)
            .cloned()
            .or_else(|| self.sources.iter().find_map(|s| s.find(name)))
    }

    /// The schemas of the sources' tools as they are now (what a model's tool calling offers), sorted
    /// by name. Tools registered by name with [`tool`](Self::tool) carry no schema and are not listed.
    pub fn tool_schemas(&self) -> Vec<ToolSchema> {
        let mut schemas: Vec<ToolSchema> = self
            .sources
            .iter()
            .flat_map(|s| s.schemas())
            .filter(|s| !self.tools.contains_key(&s.name))
            .collect();
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        schemas.dedup_by(|later, first| later.name == first.name);
        schemas
    }

    /// The policy a command runs under: a registered tool's declared policy wins.
    pub fn policy_for(&self, kind: &CmdKind, requested: EffectPolicy) -> EffectPolicy {
        match kind {
            CmdKind::Tool { tool, .. } => self
                .find_tool(tool)
                .map(|t| t.policy())
                .unwrap_or(requested),
            _ => requested,
        }
    }

    /// Describe tool `name` for models that call tools (`ctx.llm(..).tools([..])`): what it does and
    /// the JSON Schema of its arguments. Tools from a [`ToolSource`] (MCP servers) describe
    /// themselves.
    pub fn describe(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: serde_json::Value,
    ) -> Self {
        let name = name.into();
        self.described.insert(
            name.clone(),
            ToolSchema {
                name,
                description: Some(description.into()),
                input_schema,
            },
        );
        self
    }

    /// The schemas of the tools `names` that model `model` is offered, in that order; a tool that
    /// is not registered, or has no description, is a permanent error naming it.
    fn offered(&self, model: &str, names: &[String]) -> Result<Vec<ToolSchema>, EffectError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let sourced = self.tool_schemas();
        names
            .iter()
            .map(|name| {
                if self.find_tool(name).is_none() {
                    return Err(EffectError::permanent(format!(
                        "model `{model}` is offered tool `{name}`, which is not registered"
                    )));
                }
                self.described
                    .get(name)
                    .or_else(|| sourced.iter().find(|s| &s.name == name))
                    .cloned()
                    .ok_or_else(|| {
                        EffectError::permanent(format!(
                            "model `{model}` is offered tool `{name}`, which has no description for models: register it with `Effects::describe(\"{name}\", description, input_schema)`"
                        ))
                    })
            })
            .collect()
    }

    /// Perform an `llm` or `tool` command once.
    pub async fn perform(
        &self,
        id: &InvocationId,
        kind: &CmdKind,
    ) -> Result<Performed, EffectError> {
        self.perform_streaming(id, kind, &Tokens::none()).await
    }

    /// Perform an `llm` or `tool` command once; a model call the step asked to stream sends its
    /// text to `tokens` while it is generated ([`Model::stream`]).
    pub async fn perform_streaming(
        &self,
        id: &InvocationId,
        kind: &CmdKind,
        tokens: &Tokens,
    ) -> Result<Performed, EffectError> {
        match kind {
            CmdKind::Llm {
                model,
                input,
                schema,
                tools,
                turns,
                stream,
            } => {
                let provider = self
                    .models
                    .get(model)
                    .or(self.default_model.as_ref())
                    .ok_or_else(|| {
                        EffectError::permanent(format!("no model registered as `{model}`"))
                    })?;
                let request = LlmRequest {
                    model: model.clone(),
                    input: input.clone(),
                    schema: schema.clone(),
                    invocation_id: id.clone(),
                    tools: self.offered(model, tools)?,
                    turns: turns.clone(),
                };
                let response = if stream.is_some() && tokens.is_live() {
                    provider.stream(request, tokens).await?
                } else {
                    provider.complete(request).await?
                };
                // A call that offers tools answers `{"answer": ..}` or `{"tool_calls": [..]}`.
                let value = match (tools.is_empty(), response.tool_calls.is_empty()) {
                    (true, _) => response.output,
                    (false, true) => serde_json::json!({ "answer": response.output }),
                    (false, false) => serde_json::json!({
                        "tool_calls": response.tool_calls,
                        "text": response.output.as_str().unwrap_or_default(),
                    }),
                };
                Ok(Performed {
                    value,
                    usage: response.usage,
                })
            }
            CmdKind::Tool { tool, args } => {
                let t = self.find_tool(tool).ok_or_else(|| {
                    EffectError::permanent(format!("no tool registered as `{tool}`"))
                })?;
                Ok(Performed {
                    value: t.call(args.clone(), id).await?,
                    usage: None,
                })
            }
            other => Err(EffectError::permanent(format!(
                "`{}` is performed by the engine, not an effect",
                other.kind_name()
            ))),
        }
    }

    /// Run the compensation of tool command `kind` that returned `output`, with the command's id as
    /// its key. Transient errors are retried ([`RetryPolicy::default`], with backoff); the engine
    /// journals the final outcome. A crash mid-compensation runs it again on recovery, so
    /// compensations must tolerate a repeat (deduplicate on the key).
    pub async fn compensate(
        &self,
        id: &InvocationId,
        kind: &CmdKind,
        output: serde_json::Value,
    ) -> Result<serde_json::Value, EffectError> {
        let CmdKind::Tool { tool, args } = kind else {
            return Err(EffectError::permanent(
                "only tool commands have compensations",
            ));
        };
        let t = self
            .find_tool(tool)
            .ok_or_else(|| EffectError::permanent(format!("no tool registered as `{tool}`")))?;
        let retry = RetryPolicy::default();
        let span = tracing::info_span!("compensate", invocation = %id, tool = %tool);
        let attempts = async {
            let mut attempt = 1;
            loop {
                let started = std::time::Instant::now();
                let result = t.compensate(args.clone(), output.clone(), id).await;
                tracing::debug!(
                    attempt,
                    latency_us = started.elapsed().as_micros() as u64,
                    ok = result.is_ok(),
                    "compensation attempt"
                );
                match result {
                    Err(e) if e.is_transient() && attempt < retry.max_attempts => {
                        attempt += 1;
                        let hint = std::time::Duration::from_millis(e.retry_after_ms.unwrap_or(0));
                        tokio::time::sleep(retry.backoff(attempt).max(hint)).await;
                    }
                    other => return other,
                }
            }
        };
        tracing::Instrument::instrument(attempts, span).await
    }
}
