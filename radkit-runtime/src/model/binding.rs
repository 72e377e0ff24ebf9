//! The A2A protocol bindings (spec §3.2: JSON-RPC, HTTP+JSON, gRPC) as a type: what an agent card's
//! `protocolBinding` names, what a server offers (`ServerConfig::bindings`) and what a client speaks
//! (`client::A2aClient::binding`). A name only: how each binding is spoken is the server's and the
//! client's.

/// One A2A protocol binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (A2A 0.3 and 1.0): `JSONRPC` on a card.
    JsonRpc,
    /// HTTP+JSON, the REST binding (A2A 1.0): `HTTP+JSON` on a card.
    HttpJson,
    /// gRPC (A2A 1.0): `GRPC` on a card.
    Grpc,
}

impl Binding {
    /// Every binding, in the order radkit prefers them as a client and lists them on its card.
    pub const ALL: [Binding; 3] = [Binding::JsonRpc, Binding::HttpJson, Binding::Grpc];

    /// The name a card's `protocolBinding` gives it (`JSONRPC`, `HTTP+JSON`, `GRPC`).
    pub fn name(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }

    /// The binding a card's `protocolBinding` names (ASCII case ignored), if A2A defines it.
    pub fn from_name(name: &str) -> Option<Binding> {
        Binding::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_reads_back_from_its_card_name() {
        for b in Binding::ALL {
            assert_eq!(Binding::from_name(b.name()), Some(b));
        }
        assert_eq!(Binding::from_name("http+json"), Some(Binding::HttpJson));
        assert_eq!(Binding::from_name("REST"), None);
    }
}
