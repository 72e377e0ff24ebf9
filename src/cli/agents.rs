//! `--agent NAME=URL` and `--agent-token NAME=TOKEN`, options of `serve` and `worker`: the A2A agents
//! a program's steps call with `ctx.agent("NAME")`. Each value is checked when the arguments are
//! parsed (a clap error names the bad one), the options are checked against each other before
//! anything starts ([`AgentArgs::check`]), and they reach the engine only through
//! [`EngineBuilder::agent`]. No card is read here: the engine connects to an agent on its first call.

use std::collections::BTreeMap;
use std::fmt;

use crate::engine::AgentSpec;
use crate::engine::EngineBuilder;

/// The prefix of the environment variables that hold agents' tokens: `RADKIT_AGENT_TOKEN_PLANNER`
/// for the agent `planner`.
pub const TOKEN_ENV_PREFIX: &str = "RADKIT_AGENT_TOKEN_";

/// The agent options of `serve` and `worker`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AgentArgs {
    /// An A2A agent that steps call as `ctx.agent("NAME")`: `NAME=URL`, where URL is the agent's
    /// card URL or its base URL (its card is read from `/.well-known/agent-card.json` there), and
    /// the card says whether it speaks A2A 1.0 or 0.3. NAME is letters, digits, `-` and `_`.
    /// Repeatable.
    #[arg(id = "agent", long = "agent", value_name = "NAME=URL", value_parser = parse_agent)]
    pub agents: Vec<AgentDecl>,
    /// The bearer token to call the agent NAME with: `NAME=TOKEN` (repeatable; NAME must be declared
    /// with `--agent`). Without it, the environment variable `RADKIT_AGENT_TOKEN_<NAME>` (NAME
    /// uppercased, `-` written `_`) is used when it is set.
    #[arg(id = "agent_token", long = "agent-token", value_name = "NAME=TOKEN", value_parser = parse_token)]
    pub tokens: Vec<AgentToken>,
}

/// One `--agent NAME=URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentDecl {
    /// The name steps call it by.
    pub name: String,
    /// Its card URL or base URL, as given.
    pub url: String,
}

/// One `--agent-token NAME=TOKEN`. Its `Debug` form hides the token.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentToken {
    /// The agent's name.
    pub name: String,
    /// The bearer token.
    pub token: String,
}

impl fmt::Debug for AgentToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentToken")
            .field("name", &self.name)
            .field("token", &"<hidden>")
            .finish()
    }
}

/// An agent name: what `ctx.agent(..)` is given, and (uppercased) the end of an environment
/// variable's name, so it is kept to characters both allow.
fn check_name(name: &str, option: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!(
            "the agent's name is empty; write `{option} NAME=..`"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "`{name}` is not an agent name (`{c}`); use letters, digits, `-` and `_`"
        ));
    }
    Ok(())
}

/// Parse `NAME=URL` (the value of `--agent`).
pub fn parse_agent(value: &str) -> Result<AgentDecl, String> {
    let Some((name, url)) = value.split_once('=') else {
        return Err(format!(
            "expected NAME=URL, the name steps call the agent by and its card or base URL, like `{value}=http://127.0.0.1:9101`"
        ));
    };
    check_name(name, "--agent")?;
    let url = url.trim();
    if url.is_empty() {
        return Err(format!("no URL after `{name}=`; expected NAME=URL"));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        format!("`{url}` is not a URL ({e}); write the agent's base URL or card URL, like `http://127.0.0.1:9101`")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(format!(
            "`{url}` is not an http(s) URL with a host; write it like `http://127.0.0.1:9101`"
        ));
    }
    Ok(AgentDecl {
        name: name.to_owned(),
        url: url.to_owned(),
    })
}

/// Parse `NAME=TOKEN` (the value of `--agent-token`); the first `=` ends the name, so a token may
/// hold `=`.
pub fn parse_token(value: &str) -> Result<AgentToken, String> {
    let Some((name, token)) = value.split_once('=') else {
        return Err(
            "expected NAME=TOKEN, the agent's name (as declared with --agent) and its bearer token"
                .to_owned(),
        );
    };
    check_name(name, "--agent-token")?;
    if token.is_empty() {
        return Err(format!("no token after `{name}=`; expected NAME=TOKEN"));
    }
    Ok(AgentToken {
        name: name.to_owned(),
        token: token.to_owned(),
    })
}

/// The environment variable that holds the token of the agent `name`.
pub fn token_env_var(name: &str) -> String {
    format!(
        "{TOKEN_ENV_PREFIX}{}",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

impl AgentArgs {
    /// What the options say together that no single value can: each agent is declared once, each
    /// token given once, and only for a declared agent. The message is the clap error's.
    pub fn check(&self) -> Result<(), String> {
        let mut declared: BTreeMap<&str, &str> = BTreeMap::new();
        for agent in &self.agents {
            if let Some(first) = declared.insert(&agent.name, &agent.url) {
                return Err(format!(
                    "the agent `{}` is declared twice (`--agent {0}={first}` and `--agent {0}={}`); declare each name once",
                    agent.name, agent.url
                ));
            }
        }
        let mut tokens = std::collections::BTreeSet::new();
        for token in &self.tokens {
            if !declared.contains_key(token.name.as_str()) {
                let known = if declared.is_empty() {
                    "no agent is declared".to_owned()
                } else {
                    let names: Vec<&str> = declared.keys().copied().collect();
                    format!("the declared agents are {}", names.join(", "))
                };
                return Err(format!(
                    "--agent-token names the agent `{}`, which no --agent declares ({known}); add `--agent {0}=URL`",
                    token.name
                ));
            }
            if !tokens.insert(token.name.as_str()) {
                return Err(format!(
                    "--agent-token gives the agent `{}` two tokens; give it one",
                    token.name
                ));
            }
        }
        Ok(())
    }

    /// Each declared agent with its URL and its token: the `--agent-token`, else the one in its
    /// environment variable (`env` looks a variable up: `std::env::var` in the CLI).
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Vec<(AgentDecl, Option<String>)> {
        self.agents
            .iter()
            .map(|agent| {
                let token = self
                    .tokens
                    .iter()
                    .find(|t| t.name == agent.name)
                    .map(|t| t.token.clone())
                    .or_else(|| env(&token_env_var(&agent.name)).filter(|t| !t.is_empty()));
                (agent.clone(), token)
            })
            .collect()
    }

    /// Declare the agents on `builder` (tokens from the options, else from the environment).
    pub fn apply(&self, mut builder: EngineBuilder) -> EngineBuilder {
        for (agent, token) in self.resolve(|var| std::env::var(var).ok()) {
            tracing::info!(agent = %agent.name, url = %agent.url, bearer = token.is_some(), "agent declared");
            let spec = AgentSpec::new(agent.url);
            let spec = match token {
                Some(token) => spec.bearer(token),
                None => spec,
            };
            builder = builder.agent(agent.name, spec);
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(agents: &[&str], tokens: &[&str]) -> AgentArgs {
        AgentArgs {
            agents: agents.iter().map(|a| parse_agent(a).unwrap()).collect(),
            tokens: tokens.iter().map(|t| parse_token(t).unwrap()).collect(),
        }
    }

    #[test]
    fn an_agent_is_a_name_and_an_http_url() {
        let a = parse_agent("planner=http://127.0.0.1:9101").unwrap();
        assert_eq!(
            (a.name.as_str(), a.url.as_str()),
            ("planner", "http://127.0.0.1:9101")
        );
        let a = parse_agent("web-search_2=https://agents.example/card.json").unwrap();
        assert_eq!(a.url, "https://agents.example/card.json");
        for (bad, says) in [
            ("planner", "expected NAME=URL"),
            ("=http://h", "name is empty"),
            ("plan ner=http://h", "not an agent name"),
            ("planner=", "no URL"),
            ("planner=not a url", "is not a URL"),
            ("planner=localhost:9101", "http(s) URL"),
            ("planner=ftp://h/", "http(s) URL"),
        ] {
            let err = parse_agent(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_token_ends_its_name_at_the_first_equals_sign() {
        let t = parse_token("planner=abc=def").unwrap();
        assert_eq!((t.name.as_str(), t.token.as_str()), ("planner", "abc=def"));
        assert!(parse_token("planner").unwrap_err().contains("NAME=TOKEN"));
        assert!(parse_token("planner=").unwrap_err().contains("no token"));
        assert!(!format!("{t:?}").contains("abc"), "Debug hides the token");
    }

    #[test]
    fn a_token_for_an_undeclared_agent_or_a_name_given_twice_is_refused() {
        assert!(args(&["a=http://h", "b=http://h"], &["a=t"])
            .check()
            .is_ok());
        let err = args(&["a=http://h"], &["ghost=t"]).check().unwrap_err();
        assert!(
            err.contains("`ghost`") && err.contains("declared agents are a"),
            "{err}"
        );
        let err = args(&[], &["ghost=t"]).check().unwrap_err();
        assert!(err.contains("no agent is declared"), "{err}");
        let err = args(&["a=http://h", "a=http://i"], &[])
            .check()
            .unwrap_err();
        assert!(err.contains("declared twice"), "{err}");
        let err = args(&["a=http://h"], &["a=t", "a=u"]).check().unwrap_err();
        assert!(err.contains("two tokens"), "{err}");
    }

    #[test]
    fn a_token_option_wins_over_the_environment_which_is_read_per_agent() {
        let args = args(
            &["planner=http://h", "web-search=http://i", "plain=http://j"],
            &["planner=from-option"],
        );
        let env = |var: &str| match var {
            "RADKIT_AGENT_TOKEN_PLANNER" => Some("from-env".to_owned()),
            "RADKIT_AGENT_TOKEN_WEB_SEARCH" => Some("search-token".to_owned()),
            _ => None,
        };
        let got: Vec<(String, String, Option<String>)> = args
            .resolve(env)
            .into_iter()
            .map(|(a, token)| (a.name, a.url, token))
            .collect();
        let want = |name: &str, url: &str, token: Option<&str>| {
            (name.to_owned(), url.to_owned(), token.map(str::to_owned))
        };
        assert_eq!(
            got,
            [
                want("planner", "http://h", Some("from-option")),
                want("web-search", "http://i", Some("search-token")),
                want("plain", "http://j", None),
            ]
        );
    }
}
