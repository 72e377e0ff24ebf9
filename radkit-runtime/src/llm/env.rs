//! Models from the environment, for programs configured without code (`radkit serve --llm ..`):
//! which provider, which of its models, where, and with which key.
//!
//! One provider for every model name: [`from_env`] reads `RADKIT_LLM_MODEL` (required),
//! `RADKIT_LLM_BASE_URL`, `RADKIT_LLM_API_KEY` and `RADKIT_LLM_TIMEOUT_SECS`, each falling back to
//! the provider's own variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`,
//! `OLLAMA_HOST`, ..). Per model name: [`from_spec`] reads `provider:model` (the value of
//! `RADKIT_LLM_<NAME>`, e.g. `RADKIT_LLM_CRITIC=anthropic:claude-sonnet-4-5`).

use std::sync::Arc;
use std::time::Duration;

use super::openai::ConfigError;
use super::{AnthropicModel, GeminiModel, Model, OllamaModel, OpenAiModel};

/// A model provider radkit speaks natively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI's Chat Completions API, or any server that speaks it (`openai`).
    OpenAi,
    /// OpenAI's Responses API (`openai-responses`).
    OpenAiResponses,
    /// Anthropic's Messages API (`anthropic`).
    Anthropic,
    /// Google's Gemini API (`gemini`).
    Gemini,
    /// Ollama's native chat API (`ollama`).
    Ollama,
}

impl Provider {
    /// Every provider, by the name the CLI and the environment use.
    pub const ALL: [(&'static str, Provider); 5] = [
        ("openai", Provider::OpenAi),
        ("openai-responses", Provider::OpenAiResponses),
        ("anthropic", Provider::Anthropic),
        ("gemini", Provider::Gemini),
        ("ollama", Provider::Ollama),
    ];

    /// The provider named `name` (`openai`, `openai-responses`, `anthropic`, `gemini`, `ollama`).
    pub fn parse(name: &str) -> Option<Provider> {
        Self::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
            .map(|(_, p)| *p)
    }

    /// The provider's own variables for the API key and the base URL.
    fn own_vars(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses => {
                (&["OPENAI_API_KEY"], &["OPENAI_BASE_URL"])
            }
            Provider::Anthropic => (&["ANTHROPIC_API_KEY"], &["ANTHROPIC_BASE_URL"]),
            Provider::Gemini => (&["GEMINI_API_KEY", "GOOGLE_API_KEY"], &["GEMINI_BASE_URL"]),
            Provider::Ollama => (&[], &["OLLAMA_HOST"]),
        }
    }
}

/// A `provider` model from the environment: `RADKIT_LLM_MODEL` (required), `RADKIT_LLM_BASE_URL`,
/// `RADKIT_LLM_API_KEY` and `RADKIT_LLM_TIMEOUT_SECS`, each falling back to the provider's own
/// variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `OLLAMA_HOST`, ..).
pub fn from_env(provider: Provider) -> Result<Arc<dyn Model>, ConfigError> {
    from_vars(provider, None, &|name| std::env::var(name).ok())
}

/// The model `spec` names, `provider:model` (e.g. `anthropic:claude-sonnet-4-5`,
/// `ollama:llama3.2`), with its key, base URL and timeout from `var` as [`from_env`] reads them.
pub fn from_spec(
    spec: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Model>, ConfigError> {
    let (provider, model) = spec
        .split_once(':')
        .filter(|(_, m)| !m.trim().is_empty())
        .ok_or_else(|| ConfigError::BadSpec(spec.to_owned()))?;
    let provider = Provider::parse(provider)
        .ok_or_else(|| ConfigError::UnknownProvider(provider.to_owned()))?;
    from_vars(provider, Some(model.trim()), var)
}

fn from_vars(
    provider: Provider,
    model: Option<&str>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Model>, ConfigError> {
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| var(n).filter(|v| !v.trim().is_empty()))
            .map(|v| v.trim().to_owned())
    };
    let (keys, urls) = provider.own_vars();
    let model = match model {
        Some(m) => m.to_owned(),
        None => get(&["RADKIT_LLM_MODEL", "OPENAI_MODEL"]).ok_or(ConfigError::MissingModel)?,
    };
    let key = get(&[&["RADKIT_LLM_API_KEY"][..], keys].concat());
    let base = get(&[&["RADKIT_LLM_BASE_URL"][..], urls].concat());
    if let Some(base) = &base {
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ConfigError::BadBaseUrl(base.clone()));
        }
    }
    let timeout = get(&["RADKIT_LLM_TIMEOUT_SECS"])
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64);
    Ok(match provider {
        Provider::OpenAi | Provider::OpenAiResponses => {
            let mut m = OpenAiModel::new(
                base.unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
                model,
            );
            if let Some(key) = key {
                m = m.api_key(key);
            }
            if let Some(t) = timeout {
                m = m.timeout(t);
            }
            if provider == Provider::OpenAiResponses {
                m = m.responses();
            }
            Arc::new(m)
        }
        Provider::Anthropic => {
            let mut m = AnthropicModel::new(model);
            if let Some(base) = base {
                m = m.base_url(base);
            }
            if let Some(key) = key {
                m = m.api_key(key);
            }
            if let Some(t) = timeout {
                m = m.timeout(t);
            }
            Arc::new(m)
        }
        Provider::Gemini => {
            let mut m = GeminiModel::new(model);
            if let Some(base) = base {
                m = m.base_url(base);
            }
            if let Some(key) = key {
                m = m.api_key(key);
            }
            if let Some(t) = timeout {
                m = m.timeout(t);
            }
            Arc::new(m)
        }
        Provider::Ollama => {
            let mut m = OllamaModel::new(model);
            if let Some(base) = base {
                m = m.base_url(base);
            }
            if let Some(t) = timeout {
                m = m.timeout(t);
            }
            Arc::new(m)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn a_spec_names_a_provider_and_its_model_and_bad_specs_say_why() {
        let env = vars(&[("ANTHROPIC_API_KEY", "k")]);
        assert!(from_spec("anthropic:claude-sonnet-4-5", &env).is_ok());
        assert_eq!(
            from_spec("anthropic: ", &env).err(),
            Some(ConfigError::BadSpec("anthropic: ".into()))
        );
        assert_eq!(
            from_spec("claude", &env).err(),
            Some(ConfigError::BadSpec("claude".into()))
        );
        assert_eq!(
            from_spec("bard:x", &env).err(),
            Some(ConfigError::UnknownProvider("bard".into()))
        );
    }

    #[test]
    fn a_base_url_must_be_http_and_one_provider_for_all_names_needs_a_model() {
        let env = vars(&[("RADKIT_LLM_MODEL", "m"), ("GEMINI_BASE_URL", "ftp://x")]);
        assert_eq!(
            from_vars(Provider::Gemini, None, &env).err(),
            Some(ConfigError::BadBaseUrl("ftp://x".into()))
        );
        assert_eq!(
            from_vars(Provider::Ollama, None, &vars(&[])).err(),
            Some(ConfigError::MissingModel)
        );
        assert_eq!(Provider::parse("Anthropic"), Some(Provider::Anthropic));
    }
}
