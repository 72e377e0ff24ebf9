//! The extended agent card (A2A 1.0 `GetExtendedAgentCard`, 0.3
//! `agent/getAuthenticatedExtendedCard`): what it adds to the public card, read once from JSON and
//! checked then, so a bad file is an error when the server starts rather than on the first call. It
//! owns the rules of that addition; who may read the result is the server's concern.
//!
//! The JSON is an object in the 1.0 card's shape (ProtoJSON names). `skills` are added to the
//! public card's skills (one with the id of a public skill replaces it); every other member is an
//! RFC 7396 JSON Merge Patch over the public card (an object merges member by member, `null`
//! removes, anything else replaces). `supportedInterfaces` and `signatures` are the server's own
//! and may not be given.

use serde_json::{Map, Value};

use super::v1::{AgentCard, AgentSkill};

/// An extended card file that cannot be used, with what is wrong in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("extended agent card: {0}")]
pub struct ExtendedCardError(String);

/// What the extended agent card adds to the public one.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedCard {
    skills: Vec<AgentSkill>,
    patch: Map<String, Value>,
}

impl ExtendedCard {
    /// Read the addition from `json` (see the module docs), checking that it yields a valid card.
    pub fn from_json(json: Value) -> Result<ExtendedCard, ExtendedCardError> {
        let Value::Object(mut patch) = json else {
            return Err(ExtendedCardError(
                "the file must hold a JSON object in the shape of an A2A 1.0 AgentCard".into(),
            ));
        };
        for owned in ["supportedInterfaces", "signatures"] {
            if patch.contains_key(owned) {
                return Err(ExtendedCardError(format!(
                    "`{owned}` is set by the server (the interfaces it serves, the signatures of its key); remove it"
                )));
            }
        }
        let skills = match patch.remove("skills") {
            None => Vec::new(),
            Some(Value::Array(skills)) => skills
                .into_iter()
                .enumerate()
                .map(|(i, skill)| {
                    serde_json::from_value::<AgentSkill>(skill).map_err(|e| {
                        ExtendedCardError(format!(
                            "`skills[{i}]` is not an A2A 1.0 AgentSkill (id, name, description, tags): {e}"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ExtendedCardError(
                    "`skills` must be a list of A2A 1.0 AgentSkill objects".into(),
                ))
            }
        };
        let extended = ExtendedCard { skills, patch };
        // Every member must also fit the card it patches: try it on a card with every required
        // member set.
        extended.apply(&AgentCard {
            name: "n".into(),
            description: "d".into(),
            supported_interfaces: Vec::new(),
            provider: None,
            version: "v".into(),
            documentation_url: None,
            capabilities: Default::default(),
            security_schemes: Default::default(),
            security_requirements: Vec::new(),
            default_input_modes: Vec::new(),
            default_output_modes: Vec::new(),
            skills: Vec::new(),
            signatures: Vec::new(),
            icon_url: None,
        })?;
        Ok(extended)
    }

    /// The extended card: `public` with this addition, its `signatures` dropped (they signed the
    /// public card).
    pub fn apply(&self, public: &AgentCard) -> Result<AgentCard, ExtendedCardError> {
        let mut card = public.clone();
        card.signatures.clear();
        for skill in &self.skills {
            match card.skills.iter_mut().find(|s| s.id == skill.id) {
                Some(existing) => *existing = skill.clone(),
                None => card.skills.push(skill.clone()),
            }
        }
        let mut value = serde_json::to_value(&card)
            .map_err(|e| ExtendedCardError(format!("the public card does not serialize: {e}")))?;
        merge_patch(&mut value, &Value::Object(self.patch.clone()));
        serde_json::from_value(value).map_err(|e| {
            ExtendedCardError(format!(
                "the card it makes is not an A2A 1.0 AgentCard: {e}"
            ))
        })
    }
}

/// RFC 7396 JSON Merge Patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn public() -> AgentCard {
        serde_json::from_value(json!({
            "name": "Agent",
            "description": "public",
            "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "version": "1",
            "capabilities": {"streaming": true},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": []}],
            "signatures": [{"protected": "e30", "signature": "c2ln"}]
        }))
        .unwrap()
    }

    #[test]
    fn skills_are_added_or_replaced_by_id_and_other_members_merge_patched() {
        let extended = ExtendedCard::from_json(json!({
            "description": "for members",
            "provider": {"organization": "Acme", "url": "https://acme.example"},
            "capabilities": {"streaming": null},
            "skills": [
                {"id": "admin", "name": "Admin", "description": "members only", "tags": ["ops"]},
                {"id": "echo", "name": "Echo", "description": "echoes, with more detail", "tags": []}
            ]
        }))
        .unwrap();
        let card = extended.apply(&public()).unwrap();
        assert_eq!(card.description, "for members");
        assert_eq!(card.provider.unwrap().organization, "Acme");
        assert_eq!(card.capabilities.streaming, None, "null removes");
        let skills: Vec<(&str, &str)> = card
            .skills
            .iter()
            .map(|s| (s.id.as_str(), s.description.as_str()))
            .collect();
        assert_eq!(
            skills,
            [
                ("echo", "echoes, with more detail"),
                ("admin", "members only")
            ]
        );
        assert!(
            card.signatures.is_empty(),
            "the public card's signatures do not carry over"
        );
        assert_eq!(card.supported_interfaces, public().supported_interfaces);
    }

    #[test]
    fn a_file_that_cannot_make_a_card_is_refused_naming_the_member() {
        for (json, names) in [
            (json!([]), "JSON object"),
            (json!({"supportedInterfaces": []}), "`supportedInterfaces`"),
            (json!({"signatures": []}), "`signatures`"),
            (json!({"skills": {}}), "`skills` must be a list"),
            (json!({"skills": [{"id": "x"}]}), "`skills[0]`"),
            (json!({"name": 5}), "not an A2A 1.0 AgentCard"),
            (
                json!({"capabilities": {"streaming": "yes"}}),
                "not an A2A 1.0 AgentCard",
            ),
        ] {
            let e = ExtendedCard::from_json(json.clone())
                .unwrap_err()
                .to_string();
            assert!(e.contains(names), "{json}: {e}");
        }
    }
}
