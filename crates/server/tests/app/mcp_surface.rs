//! `/mcp` over real HTTP on loopback, driven by rmcp's own client (and raw HTTP for the bad
//! input rmcp's client would never send).

mod agent_tokens;
mod ask;
mod bad_input;
mod common;
mod reads;
mod tools;

use std::time::Duration;

use authz_core::ChannelVisibility as V;
use commands::ReplyKind;
use common::*;
use rmcp::model::PaginatedRequestParams;
use serde_json::{Value, json};

const READER: &str = "reader-token-0123456789";
const OPSBOT: &str = "opsbot-token-0123456789";
const FLEET: &str = "fleet-token-01234567890";
const NOBODY: &str = "nobody-token-0123456789";
