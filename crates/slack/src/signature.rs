//! Slack's v0 request signature, checked over the raw body before anything is parsed.
//!
//! `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:{ts}:{body}")>`, with
//! `X-Slack-Request-Timestamp` within five minutes of now. The comparison is constant-time.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The replay window: a timestamp further than this from now (either way) is refused.
pub const WINDOW_SECONDS: i64 = 5 * 60;

/// Why a request was refused: a token for the `[slack]` log line, never shown to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("missing-timestamp")]
    MissingTimestamp,
    #[error("missing-signature")]
    MissingSignature,
    #[error("bad-timestamp")]
    BadTimestamp,
    #[error("stale-timestamp")]
    Stale,
    #[error("bad-signature")]
    BadSignature,
}

/// The signing secret. Its `Debug` shows nothing.
#[derive(Clone)]
pub struct SigningSecret(Vec<u8>);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(…)")
    }
}

impl SigningSecret {
    pub fn new(secret: &str) -> Self {
        SigningSecret(secret.trim().as_bytes().to_vec())
    }

    /// `v0=<hex>` for a timestamp and body: what Slack sends, and what tests sign with.
    pub fn sign(&self, timestamp: &str, body: &[u8]) -> String {
        format!("v0={}", hex::encode(self.mac(timestamp, body)))
    }

    fn mac(&self, timestamp: &str, body: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length; the error arm cannot happen, and refuses if it did.
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&self.0) else {
            return Vec::new();
        };
        mac.update(b"v0:");
        mac.update(timestamp.as_bytes());
        mac.update(b":");
        mac.update(body);
        mac.finalize().into_bytes().to_vec()
    }

    /// Checks a request's two headers against its raw body at `now` (Unix seconds).
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: i64,
    ) -> Result<(), Refused> {
        let timestamp = timestamp.ok_or(Refused::MissingTimestamp)?;
        let signature = signature.ok_or(Refused::MissingSignature)?;
        let at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| Refused::BadTimestamp)?;
        // `abs_diff`: a timestamp near i64::MIN or MAX must not wrap into the window.
        if now.abs_diff(at) > WINDOW_SECONDS.unsigned_abs() {
            return Err(Refused::Stale);
        }
        let given = signature
            .strip_prefix("v0=")
            .and_then(|h| hex::decode(h).ok())
            .ok_or(Refused::BadSignature)?;
        let want = self.mac(timestamp, body);
        if !want.is_empty() && bool::from(want.as_slice().ct_eq(given.as_slice())) {
            Ok(())
        } else {
            Err(Refused::BadSignature)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's own worked example (api.slack.com, "Verifying requests from Slack").
    #[test]
    fn slacks_documented_example_verifies() {
        let secret = SigningSecret::new("8f742231b10e8888abcd99yyyzzz85a5");
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(secret.sign("1531420618", body), sig);
        assert_eq!(
            secret.verify(Some("1531420618"), Some(sig), body, 1531420618 + 60),
            Ok(())
        );
    }

    #[test]
    fn every_fault_is_refused_with_its_reason() {
        let secret = SigningSecret::new("s3cret");
        let body = br#"{"type":"event_callback"}"#;
        let now = 1_700_000_000;
        let ts = now.to_string();
        let good = secret.sign(&ts, body);
        let old = (now - WINDOW_SECONDS - 1).to_string();
        let old_sig = secret.sign(&old, body);
        let other = SigningSecret::new("other").sign(&ts, body);
        for (ts, sig, body, want) in [
            (
                None,
                Some(good.as_str()),
                &body[..],
                Refused::MissingTimestamp,
            ),
            (
                Some(ts.as_str()),
                None,
                &body[..],
                Refused::MissingSignature,
            ),
            (
                Some("soon"),
                Some(good.as_str()),
                &body[..],
                Refused::BadTimestamp,
            ),
            (
                Some(old.as_str()),
                Some(old_sig.as_str()),
                &body[..],
                Refused::Stale,
            ),
            (
                Some(ts.as_str()),
                Some(other.as_str()),
                &body[..],
                Refused::BadSignature,
            ),
            (
                Some(ts.as_str()),
                Some("v0=zz"),
                &body[..],
                Refused::BadSignature,
            ),
            (
                Some(ts.as_str()),
                Some(&good[3..]),
                &body[..],
                Refused::BadSignature,
            ),
            (
                Some(ts.as_str()),
                Some(good.as_str()),
                &b"{}"[..],
                Refused::BadSignature,
            ),
        ] {
            assert_eq!(
                secret.verify(ts, sig, body, now),
                Err(want),
                "{ts:?} {sig:?}"
            );
        }
        // A replayed body under a new timestamp does not carry its old signature.
        let new_ts = (now + 10).to_string();
        assert_eq!(
            secret.verify(Some(&new_ts), Some(&good), body, now + 10),
            Err(Refused::BadSignature)
        );
        assert_eq!(secret.verify(Some(&ts), Some(&good), body, now), Ok(()));
    }

    /// A timestamp 2^63 away (or at either end of i64) is stale, correctly signed or not:
    /// the difference never wraps into the window, and never panics.
    #[test]
    fn a_timestamp_far_away_never_wraps_into_the_window() {
        let secret = SigningSecret::new("s3cret");
        let body = b"{}";
        let now: i64 = 1_700_000_000;
        for at in [
            now.wrapping_sub(i64::MIN),
            now.wrapping_add(i64::MIN),
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            -now,
        ] {
            let ts = at.to_string();
            let sig = secret.sign(&ts, body);
            for clock in [now, i64::MIN, i64::MAX] {
                assert_eq!(
                    secret.verify(Some(&ts), Some(&sig), body, clock).is_ok(),
                    // Only a clock within five minutes of the stamp takes it.
                    (i128::from(clock) - i128::from(at)).abs() <= 300,
                    "{ts} at {clock}"
                );
            }
        }
    }
}
