//! An outside agent's own tool call before it runs (Claude Code's, through its `PreToolUse`
//! hook): the same three steps as a call of the `openai` loop, the rule table asked about each
//! of its actions, the grant of the Switchboard tool it stands for. Nothing runs here: the
//! agent runs the call itself once this says yes.

use authz_core::{Action, authorize};
use broker::{Label, RuleDecision, RuleKey};

use super::broker_gate::{BrokerGate, refused};
use super::host_form::in_host_form;
use super::{AgentAllowed, AgentCall};
use crate::EventSink;

impl BrokerGate {
    /// Whether the rule table, under the run's promises, denies `action` for `call` outright.
    fn denies(&self, call: &AgentCall, action: &str) -> bool {
        let key = RuleKey {
            action,
            tool: broker::agent_tools::canonical_tool(&call.shown.name),
            model: self.model.as_deref(),
            agent_kind: self.agent_kind.as_deref(),
        };
        let answer = self.table.lookup(&key);
        self.with(|m| m.ratchet.bound(action, answer.decision)) == RuleDecision::Deny
    }

    pub(super) async fn decide_agent_call(
        &self,
        call: &AgentCall,
        sink: &EventSink,
    ) -> Result<AgentAllowed, String> {
        if let Some(why) = self.with(|m| m.closed) {
            return Err(refused(why));
        }
        let Some(first) = call.actions.first() else {
            return Err(refused("the call names no action"));
        };
        if let Some(repo) = &self.repo
            && !authorize(&self.agent, &Action::RepoUse, repo).is_allow()
        {
            return Err(refused(
                "the person this run acts for may not use this repository",
            ));
        }
        // A denied action refuses the call before anyone is asked about another of its actions.
        let order = call
            .actions
            .iter()
            .filter(|a| self.denies(call, a))
            .chain(call.actions.iter().filter(|a| !self.denies(call, a)));
        let mut said_yes = false;
        for action in order {
            said_yes |= self.rules(&call.shown, action, false, sink).await?;
        }
        let Some(granted) = &call.granted_as else {
            sink.event(
                "tool",
                &format!(
                    "{} {}: allowed by the rule table (no grant kind covers it)",
                    call.shown.name,
                    call.actions.join(", ")
                ),
            )
            .await;
            return Ok(AgentAllowed {
                label: Label {
                    untrusted: call.untrusted_result,
                    ..Label::default()
                },
                person_said_yes: said_yes,
            });
        };
        let granted = in_host_form(granted, &self.executor.workspace);
        let (decision, asked_here) = self
            .grant(&granted, &call.shown, first, said_yes, sink)
            .await?;
        // The path as the executor would open it: beneath its grant, no deny_read name, no
        // write into .git/, .switchboard/ or a protected path, no link.
        // The refusal names the path as the agent sees it (its sandbox's), never the host's.
        let host = self.executor.workspace.to_string_lossy().into_owned();
        self.executor
            .check_agent_path(&decision)
            .map_err(|why| refused(why.replace(&host, crate::sandbox::SANDBOX_WORKSPACE)))?;
        sink.event(
            "tool",
            &format!(
                "{} {}: allowed by grant {}",
                call.shown.name,
                call.actions.join(", "),
                decision.grant()
            ),
        )
        .await;
        Ok(AgentAllowed {
            label: decision.label(),
            person_said_yes: said_yes || asked_here,
        })
    }
}
