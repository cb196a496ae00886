//! Why an Access token was refused: the key set and the verifier both answer with it.

/// Why a token was refused: a token for the `[access]` log line, never shown to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("missing")]
    Missing,
    #[error("malformed")]
    Malformed,
    #[error("bad-alg")]
    BadAlg,
    #[error("no-kid")]
    NoKid,
    #[error("unknown-kid")]
    UnknownKid,
    #[error("bad-signature")]
    BadSignature,
    #[error("expired")]
    Expired,
    #[error("not-yet-valid")]
    NotYetValid,
    #[error("wrong-audience")]
    WrongAudience,
    #[error("wrong-issuer")]
    WrongIssuer,
    #[error("missing-claim")]
    MissingClaim,
    #[error("no-subject")]
    NoSubject,
    #[error("bad-subject")]
    BadSubject,
    #[error("jwks-unavailable")]
    JwksUnavailable,
    /// Two tokens in one request (two cookies of the name, or the header twice): a sibling
    /// site can set a cookie of its own beside the viewer's, so neither is taken.
    #[error("two-tokens")]
    TwoTokens,
}
