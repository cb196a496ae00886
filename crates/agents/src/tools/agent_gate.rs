//! An outside agent's own tool call before it runs (Claude Code's, through its `PreToolUse`
//! hook): the same three steps as a call of the `openai` loop, the rule table asked about each
//! of its actions, the grant of the Switchboard tool it stands for. Nothing runs here: the
//! agent runs the call itself once this says yes.

use broker::{Label, RuleDecision, RuleKey};

use super::Who;
use super::broker_gate::{BrokerGate, refused};
use super::host_form::in_host_form;
use super::in_force::InForce;
use super::{AgentAllowed, AgentCall};
use crate::EventSink;

impl BrokerGate {
    /// The rule table's decision for `action` of `call`, under the run's promises.
    fn bounded(&self, now: &InForce, call: &AgentCall, action: &str) -> RuleDecision {
        let key = RuleKey {
            action,
            tool: broker::agent_tools::key_tool(action, &call.shown.name),
            model: self.model.as_deref(),
            agent_kind: self.agent_kind.as_deref(),
        };
        let answer = now.table.lookup(&key);
        self.with(|m| m.ratchet.bound(action, answer.decision))
    }

    /// Step 2 for every action of the call at once: a denied one refuses it before anyone is
    /// asked; otherwise one question to each approver the actions need, about the whole call.
    /// `Ok(true)` when a person said yes to it.
    async fn rules_for_all(
        &self,
        now: &InForce,
        call: &AgentCall,
        sink: &EventSink,
    ) -> Result<bool, String> {
        let (mut person, mut reviewer) = (false, false);
        for action in &call.actions {
            let decision = self.bounded(now, call, action);
            if decision == RuleDecision::Deny {
                // The table's own refusal, with its reason (nothing is asked at a deny).
                self.rules(now, &call.shown, action, false, sink).await?;
                return Err(refused(format!("{action} is denied")));
            }
            person |= decision.needs_a_person();
            reviewer |= decision.needs_a_reviewer();
        }
        let actions = call.actions.join(", ");
        if person && self.person.is_none() {
            return Err(self.nobody_to_ask(&actions, sink).await);
        }
        if reviewer {
            self.require(&call.shown, &actions, Who::Reviewer, sink)
                .await?;
        }
        if person {
            self.require(&call.shown, &actions, Who::Person, sink)
                .await?;
        }
        Ok(person)
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
        // One policy decides the whole call, whatever a reload does meanwhile.
        let now = self.in_force();
        if !now.may_use_repo() {
            return Err(refused(
                "the person this run acts for may not use this repository",
            ));
        }
        let said_yes = self.rules_for_all(&now, call, sink).await?;
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
