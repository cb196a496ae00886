//! The two tokens a run gets: a capability token (opens the run's live page for whoever was
//! handed it) and a run-scoped agent token (a JWT the agent presents when calling back over
//! MCP). The capability token is stored only as its SHA-256; the agent token is not stored at
//! all — it names its run, is checked by its signature and expiry, and is minted after the
//! run record exists (its claims carry the run id). Neither is ever logged.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The agent token's claims (surfaces.md): run id, agent name, principal id, expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentClaims {
    pub run: String,
    pub agent: String,
    /// The principal the agent acts for.
    pub sub: String,
    /// Seconds since the epoch.
    pub exp: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the system's random source failed: {0}")]
    Random(String),
    #[error("signing the agent token failed: {0}")]
    Sign(String),
    #[error("the agent token secret is not usable: {0}")]
    Secret(String),
    #[error("the agent token is not valid")]
    Invalid,
}

/// 32 random bytes as hex.
pub fn random_token() -> Result<String, TokenError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Mints and checks agent tokens with one HS256 secret.
pub struct AgentTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl AgentTokens {
    /// From the configured secret (`SWITCHBOARD_AGENT_TOKEN_SECRET`).
    pub fn new(secret: &[u8]) -> Result<Self, TokenError> {
        if secret.len() < 16 {
            return Err(TokenError::Secret(
                "use at least 16 bytes (32 random bytes as hex is a good choice)".into(),
            ));
        }
        let bad = |e: jsonwebtoken::errors::Error| TokenError::Secret(e.to_string());
        Ok(AgentTokens {
            encoding: EncodingKey::from_secret(secret).map_err(bad)?,
            decoding: DecodingKey::from_secret(secret).map_err(bad)?,
        })
    }

    /// A secret of this process only: tokens die with it, and another replica cannot check
    /// them. For a single process with no configured secret.
    pub fn ephemeral() -> Result<Self, TokenError> {
        AgentTokens::new(random_token()?.as_bytes())
    }

    pub fn mint(&self, claims: &AgentClaims) -> Result<String, TokenError> {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .map_err(|e| TokenError::Sign(e.to_string()))
    }

    /// The claims of a token this minter signed and that has not expired.
    pub fn verify(&self, token: &str) -> Result<AgentClaims, TokenError> {
        let validation = Validation::new(Algorithm::HS256);
        jsonwebtoken::decode::<AgentClaims>(token, &self.decoding, &validation)
            .map(|d| d.claims)
            .map_err(|_| TokenError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_other_secrets_fail() {
        let t = AgentTokens::new(b"0123456789abcdef0123456789abcdef").unwrap();
        let claims = AgentClaims {
            run: "r1".into(),
            agent: "coding".into(),
            sub: "slack:U1".into(),
            exp: 4_000_000_000,
        };
        let jwt = t.mint(&claims).unwrap();
        assert_eq!(t.verify(&jwt).unwrap(), claims);
        let other = AgentTokens::ephemeral().unwrap();
        assert!(other.verify(&jwt).is_err());
        let expired = AgentClaims { exp: 1, ..claims };
        assert!(t.verify(&t.mint(&expired).unwrap()).is_err());
        assert_eq!(random_token().unwrap().len(), 64);
        assert_ne!(random_token().unwrap(), random_token().unwrap());
    }
}
