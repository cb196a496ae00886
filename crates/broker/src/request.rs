//! One tool call as the model asked for it: the session (the run), the call's number in it, the
//! tool's name and its arguments as raw JSON. Nothing here is trusted until `decide` parses it.

use std::fmt;

use authz_core::RunId;
use serde::Deserialize;

/// The run a call belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct SessionId(RunId);

impl SessionId {
    pub fn parse(id: &str) -> Result<SessionId, authz_core::IdError> {
        RunId::parse(id).map(SessionId)
    }

    pub fn run(&self) -> &RunId {
        &self.0
    }
}

impl From<RunId> for SessionId {
    fn from(run: RunId) -> SessionId {
        SessionId(run)
    }
}

impl TryFrom<String> for SessionId {
    type Error = authz_core::IdError;
    fn try_from(id: String) -> Result<SessionId, Self::Error> {
        SessionId::parse(&id)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// A call's number within its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct CallId(pub u64);

/// A tool call as asked for. `arguments` is the model's raw JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    pub session: SessionId,
    pub call: CallId,
    pub tool: String,
    pub arguments: String,
}
