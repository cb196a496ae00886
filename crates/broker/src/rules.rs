//! The rule table: a call's action, tool, model and agent kind against the agent
//! policy rules, giving one of five decisions. Three layers: the org's `[agent_policy]` (a
//! ceiling), the project's `.switchboard/agent-policy.toml`, and one run's `--policy-rule`s,
//! with the shipped defaults under them all. Pure: the files are parsed before a run starts
//! (the crate's `file` module, which builds on these types) and the rules handed in.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;

/// The five decisions, most restrictive first: `Ord` puts `Deny` lowest, so the more
/// restrictive of two is their `min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    Deny,
    /// A reviewer agent's yes, then a person's.
    AgentThenHuman,
    /// A person's yes.
    Ask,
    /// A reviewer agent's yes.
    AgentReview,
    Allow,
}

impl RuleDecision {
    pub const ALL: [RuleDecision; 5] = [
        RuleDecision::Deny,
        RuleDecision::AgentThenHuman,
        RuleDecision::Ask,
        RuleDecision::AgentReview,
        RuleDecision::Allow,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleDecision::Deny => "deny",
            RuleDecision::AgentThenHuman => "agent_then_human",
            RuleDecision::Ask => "ask",
            RuleDecision::AgentReview => "agent_review",
            RuleDecision::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Option<RuleDecision> {
        Self::ALL.into_iter().find(|d| d.as_str() == text)
    }

    /// Whether a person must answer before the call runs.
    pub fn needs_a_person(self) -> bool {
        matches!(self, RuleDecision::Ask | RuleDecision::AgentThenHuman)
    }

    /// Whether a reviewer agent must answer before the call runs.
    pub fn needs_a_reviewer(self) -> bool {
        matches!(
            self,
            RuleDecision::AgentReview | RuleDecision::AgentThenHuman
        )
    }
}

impl fmt::Display for RuleDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which names a pattern field accepts in its segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// Actions and tools: `[a-z0-9_-]`.
    Lower,
    /// Models and agent kinds: also upper case, `/`, `:` and `@`.
    Wide,
}

impl Charset {
    fn allows(self, c: char) -> bool {
        match self {
            Charset::Lower => {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-')
            }
            Charset::Wide => c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | ':' | '@'),
        }
    }
}

/// `git.push` matches only itself; `git.*` matches every name below `git` and not `git`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NamePattern {
    Exact(String),
    /// The prefix without its `.*`.
    Below(String),
}

/// Why a name pattern was refused; the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("a bare \"*\" is not a pattern: leave the field out to match every value")]
    BareStar,
    #[error("{0:?}: \"*\" may only be the whole last segment (as in \"net.*\")")]
    StarInside(String),
    #[error("{0:?}: expected dot-separated names of {1}")]
    Segment(String, &'static str),
    #[error(
        "{0:?}: an MCP tool is named by its action (action = \"mcp.<server>.<tool>\"), not as a tool"
    )]
    AgentMcpTool(String),
}

impl NamePattern {
    pub fn parse(text: &str, charset: Charset) -> Result<NamePattern, PatternError> {
        if text == "*" {
            return Err(PatternError::BareStar);
        }
        let (name, below) = match text.strip_suffix(".*") {
            Some(prefix) => (prefix, true),
            None => (text, false),
        };
        if name.contains('*') {
            return Err(PatternError::StarInside(text.to_owned()));
        }
        let ok = name
            .split('.')
            .all(|segment| !segment.is_empty() && segment.chars().all(|c| charset.allows(c)));
        if !ok {
            let expected = match charset {
                Charset::Lower => "[a-z0-9_-]",
                Charset::Wide => "[A-Za-z0-9_/:@-]",
            };
            return Err(PatternError::Segment(text.to_owned(), expected));
        }
        Ok(if below {
            NamePattern::Below(name.to_owned())
        } else {
            NamePattern::Exact(name.to_owned())
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        match self {
            NamePattern::Exact(exact) => exact == name,
            NamePattern::Below(prefix) => name
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1),
        }
    }

    /// Within one field: absent < any prefix (longer beats shorter) < exact.
    fn specificity(pattern: Option<&NamePattern>) -> (u8, usize) {
        match pattern {
            None => (0, 0),
            Some(NamePattern::Below(prefix)) => (1, prefix.len()),
            Some(NamePattern::Exact(_)) => (2, 0),
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamePattern::Exact(name) => f.write_str(name),
            NamePattern::Below(prefix) => write!(f, "{prefix}.*"),
        }
    }
}

/// One rule: a key of four optional patterns (absent matches every value) and a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    pub action: Option<NamePattern>,
    pub tool: Option<NamePattern>,
    pub model: Option<NamePattern>,
    pub agent_kind: Option<NamePattern>,
    pub decision: RuleDecision,
}

impl ToolRule {
    /// A rule on the action alone (the shape of a `--policy-rule` and of the shipped defaults).
    pub fn for_action(action: NamePattern, decision: RuleDecision) -> ToolRule {
        ToolRule {
            action: Some(action),
            tool: None,
            model: None,
            agent_kind: None,
            decision,
        }
    }

    fn matches(&self, key: &RuleKey<'_>) -> bool {
        fn field(pattern: &Option<NamePattern>, value: Option<&str>) -> bool {
            match (pattern, value) {
                (None, _) => true,
                (Some(pattern), Some(value)) => pattern.matches(value),
                (Some(_), None) => false,
            }
        }
        field(&self.action, Some(key.action))
            && field(&self.tool, Some(key.tool))
            && field(&self.model, key.model)
            && field(&self.agent_kind, key.agent_kind)
    }

    /// Compared field by field in the order action, tool, model, agent kind.
    fn specificity(&self) -> Specificity {
        Specificity([
            NamePattern::specificity(self.action.as_ref()),
            NamePattern::specificity(self.tool.as_ref()),
            NamePattern::specificity(self.model.as_ref()),
            NamePattern::specificity(self.agent_kind.as_ref()),
        ])
    }
}

impl fmt::Display for ToolRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields = [
            ("action", &self.action),
            ("tool", &self.tool),
            ("model", &self.model),
            ("agent_kind", &self.agent_kind),
        ];
        for (name, pattern) in fields {
            if let Some(pattern) = pattern {
                write!(f, "{name}={pattern} ")?;
            }
        }
        write!(f, "=> {}", self.decision)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Specificity([(u8, usize); 4]);

/// What a call is looked up by. The model and agent kind may be unknown; a rule that names one
/// then does not match.
#[derive(Debug, Clone, Copy)]
pub struct RuleKey<'a> {
    pub action: &'a str,
    pub tool: &'a str,
    pub model: Option<&'a str>,
    pub agent_kind: Option<&'a str>,
}

/// One layer's rules, indexed by their action so a lookup reads only the rules that can match:
/// those naming the action exactly, those naming one of its prefixes, and those naming none.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    rules: Vec<ToolRule>,
    exact: HashMap<String, Vec<usize>>,
    below: HashMap<String, Vec<usize>>,
    any_action: Vec<usize>,
}

impl Layer {
    pub fn new(rules: Vec<ToolRule>) -> Layer {
        let mut layer = Layer::default();
        for (i, rule) in rules.iter().enumerate() {
            match &rule.action {
                Some(NamePattern::Exact(name)) => {
                    layer.exact.entry(name.clone()).or_default().push(i)
                }
                Some(NamePattern::Below(prefix)) => {
                    layer.below.entry(prefix.clone()).or_default().push(i)
                }
                None => layer.any_action.push(i),
            }
        }
        layer.rules = rules;
        layer
    }

    /// The most specific matching rule's decision; equal specificity takes the more restrictive
    /// decision, so the order of the rules never matters.
    pub fn lookup(&self, key: &RuleKey<'_>) -> Option<RuleDecision> {
        let prefixes = key
            .action
            .match_indices('.')
            .filter_map(|(at, _)| key.action.get(..at))
            .filter_map(|prefix| self.below.get(prefix));
        let candidates = self
            .exact
            .get(key.action)
            .into_iter()
            .chain(prefixes)
            .chain(std::iter::once(&self.any_action))
            .flatten()
            .filter_map(|&i| self.rules.get(i))
            .filter(|rule| rule.matches(key));
        let mut best: Option<(Specificity, RuleDecision)> = None;
        for rule in candidates {
            let score = rule.specificity();
            best = match best {
                Some((s, d)) if s > score => Some((s, d)),
                Some((s, d)) if s == score => Some((s, d.min(rule.decision))),
                _ => Some((score, rule.decision)),
            };
        }
        best.map(|(_, decision)| decision)
    }
}

/// Where an answer came from, for the run's event and the audit line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// A `--policy-rule` of this run.
    Run,
    /// The project's `.switchboard/agent-policy.toml`.
    Project,
    /// The org's `[agent_policy]`.
    Org,
    /// The rules Switchboard ships (docs/broker.md).
    Shipped,
    /// No rule names the action: `ask`.
    Unnamed,
}

impl RuleSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSource::Run => "run",
            RuleSource::Project => "project",
            RuleSource::Org => "org",
            RuleSource::Shipped => "shipped",
            RuleSource::Unnamed => "unnamed",
        }
    }
}

/// The table's answer for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleAnswer {
    pub decision: RuleDecision,
    /// The layer that answered below the ceiling.
    pub source: RuleSource,
    /// True when the org ceiling lowered that layer's answer.
    pub capped_by_org: bool,
}

/// The table for one run: org ceiling, project, the run's own rules, the shipped defaults.
#[derive(Debug, Clone)]
pub struct RuleTable {
    org: Layer,
    project: Layer,
    run: Layer,
    shipped: Layer,
}

impl RuleTable {
    pub fn new(org: Vec<ToolRule>, project: Vec<ToolRule>, run: Vec<ToolRule>) -> RuleTable {
        RuleTable {
            org: Layer::new(org),
            project: Layer::new(project),
            run: Layer::new(run),
            shipped: Layer::new(shipped_rules()),
        }
    }

    /// The same table with the org's rules replaced (a reloaded `[agent_policy]`): the
    /// project's, the run's and the shipped defaults stay.
    pub fn with_org(&self, org: Vec<ToolRule>) -> RuleTable {
        RuleTable {
            org: Layer::new(org),
            ..self.clone()
        }
    }

    /// Every action pattern a rule of any layer names (the shipped defaults included).
    pub fn named_actions(&self) -> impl Iterator<Item = &NamePattern> {
        [&self.org, &self.project, &self.run, &self.shipped]
            .into_iter()
            .flat_map(|layer| layer.rules.iter())
            .filter_map(|rule| rule.action.as_ref())
    }

    /// The run's rule answers instead of the project's, the project's instead of the org's, the
    /// org's instead of the shipped default; an action none names answers `ask`. Then the org's
    /// own matching rule, when there is one, is the ceiling: the more restrictive of the two.
    pub fn lookup(&self, key: &RuleKey<'_>) -> RuleAnswer {
        let org = self.org.lookup(key);
        let (below, source) = [
            (self.run.lookup(key), RuleSource::Run),
            (self.project.lookup(key), RuleSource::Project),
            (org, RuleSource::Org),
            (self.shipped.lookup(key), RuleSource::Shipped),
        ]
        .into_iter()
        .find_map(|(decision, source)| decision.map(|d| (d, source)))
        .unwrap_or((RuleDecision::Ask, RuleSource::Unnamed));
        let decision = org.map_or(below, |ceiling| ceiling.min(below));
        RuleAnswer {
            decision,
            source,
            capped_by_org: decision != below,
        }
    }
}

/// The defaults Switchboard ships, so an unconfigured run is usable and nothing is silently
/// allowed: reading and looking at git inside the workspace (the grants hold the paths) are
/// allowed; writing, running, fetching and committing ask; pushing is denied unless configured;
/// widening a promise asks.
pub fn shipped_rules() -> Vec<ToolRule> {
    use RuleDecision::{Allow, Ask, Deny};
    [
        ("fs.read", Allow),
        ("git.status", Allow),
        ("git.diff", Allow),
        ("git.log", Allow),
        ("fs.write", Ask),
        ("shell.exec", Ask),
        ("net.fetch", Ask),
        ("git.commit", Ask),
        ("git.push", Deny),
        ("policy.widen", Ask),
    ]
    .into_iter()
    .map(|(action, decision)| ToolRule::for_action(NamePattern::Exact(action.to_owned()), decision))
    .collect()
}

/// Why a `--policy-rule` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunRuleError {
    #[error("--policy-rule {0:?}: expected <action>=<decision>, e.g. \"net.fetch=allow\"")]
    Shape(String),
    #[error("--policy-rule {given:?}: {problem}")]
    Action {
        given: String,
        problem: PatternError,
    },
    #[error(
        "--policy-rule {0:?}: the decision must be one of deny, agent_then_human, ask, agent_review, allow"
    )]
    Decision(String),
}

/// Parses one `--policy-rule "<action>=<decision>"`: an action and a decision, nothing else.
pub fn parse_run_rule(text: &str) -> Result<ToolRule, RunRuleError> {
    let (action, decision) = text
        .split_once('=')
        .ok_or_else(|| RunRuleError::Shape(text.to_owned()))?;
    let action = NamePattern::parse(action.trim(), Charset::Lower).map_err(|problem| {
        RunRuleError::Action {
            given: text.to_owned(),
            problem,
        }
    })?;
    let decision = RuleDecision::parse(decision.trim())
        .ok_or_else(|| RunRuleError::Decision(text.to_owned()))?;
    Ok(ToolRule::for_action(action, decision))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> NamePattern {
        NamePattern::parse(text, Charset::Wide).unwrap()
    }

    fn rule(
        action: Option<&str>,
        tool: Option<&str>,
        model: Option<&str>,
        kind: Option<&str>,
        decision: RuleDecision,
    ) -> ToolRule {
        ToolRule {
            action: action.map(pattern),
            tool: tool.map(pattern),
            model: model.map(pattern),
            agent_kind: kind.map(pattern),
            decision,
        }
    }

    fn key<'a>(
        action: &'a str,
        tool: &'a str,
        model: Option<&'a str>,
        kind: Option<&'a str>,
    ) -> RuleKey<'a> {
        RuleKey {
            action,
            tool,
            model,
            agent_kind: kind,
        }
    }

    #[test]
    fn patterns() {
        let git = pattern("git.*");
        assert!(git.matches("git.push"));
        assert!(git.matches("git.branch.delete"));
        assert!(!git.matches("git"));
        assert!(!git.matches("gitx.push"));
        assert!(!git.matches("git."));
        assert!(pattern("git.push").matches("git.push"));
        assert!(!pattern("git.push").matches("git.push.x"));
        let bad = [
            ("*", PatternError::BareStar),
            (
                "net.*.fetch",
                PatternError::StarInside("net.*.fetch".into()),
            ),
            ("net*", PatternError::StarInside("net*".into())),
            ("net.f*", PatternError::StarInside("net.f*".into())),
        ];
        for (text, want) in bad {
            assert_eq!(
                NamePattern::parse(text, Charset::Lower),
                Err(want),
                "{text}"
            );
        }
        for text in ["", ".", "net..fetch", "Net.fetch", "net fetch", ".*"] {
            assert!(
                NamePattern::parse(text, Charset::Lower).is_err(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_seed_example() {
        use RuleDecision::*;
        let layer = Layer::new(vec![
            rule(Some("git.*"), None, None, None, Ask),
            rule(Some("git.push"), None, None, None, Deny),
            rule(Some("git.commit"), None, None, Some("main"), Allow),
        ]);
        let cases = [
            ("git.push", Some("main"), Some(Deny)),
            ("git.commit", Some("main"), Some(Allow)),
            ("git.commit", Some("reviewer"), Some(Ask)),
            ("git.commit", None, Some(Ask)),
            ("git.branch.delete", Some("main"), Some(Ask)),
            ("git", Some("main"), None),
            ("fs.read", Some("main"), None),
        ];
        for (action, kind, want) in cases {
            assert_eq!(
                layer.lookup(&key(action, "git", None, kind)),
                want,
                "{action} {kind:?}"
            );
        }
    }

    #[test]
    fn specificity_is_field_by_field_then_most_restrictive() {
        use RuleDecision::*;
        let cases: Vec<(&str, Vec<ToolRule>, RuleDecision)> = vec![
            // Exact action beats a prefix with every other field named.
            (
                "net.fetch",
                vec![
                    rule(Some("net.fetch"), None, None, None, Allow),
                    rule(
                        Some("net.*"),
                        Some("http_fetch"),
                        Some("gpt-4o"),
                        Some("main"),
                        Deny,
                    ),
                ],
                Allow,
            ),
            // A longer prefix beats a shorter.
            (
                "mcp.gh.list",
                vec![
                    rule(Some("mcp.*"), None, None, None, Deny),
                    rule(Some("mcp.gh.*"), None, None, None, Allow),
                ],
                Allow,
            ),
            // Any prefix beats absent.
            (
                "net.fetch",
                vec![
                    rule(None, Some("http_fetch"), None, None, Deny),
                    rule(Some("net.*"), None, None, None, Allow),
                ],
                Allow,
            ),
            // Action tied: the tool decides.
            (
                "net.fetch",
                vec![
                    rule(
                        Some("net.fetch"),
                        Some("http_fetch"),
                        None,
                        None,
                        AgentReview,
                    ),
                    rule(Some("net.fetch"), None, Some("gpt-4o"), Some("main"), Deny),
                ],
                AgentReview,
            ),
            // Model before agent kind.
            (
                "net.fetch",
                vec![
                    rule(Some("net.fetch"), None, Some("gpt-4o"), None, Allow),
                    rule(Some("net.fetch"), None, None, Some("main"), Deny),
                ],
                Allow,
            ),
            // Equal specificity: the more restrictive, in either order.
            (
                "net.fetch",
                vec![
                    rule(Some("net.fetch"), None, None, None, Allow),
                    rule(Some("net.fetch"), None, None, None, AgentThenHuman),
                ],
                AgentThenHuman,
            ),
            (
                "net.fetch",
                vec![
                    rule(Some("net.fetch"), None, None, None, AgentThenHuman),
                    rule(Some("net.fetch"), None, None, None, Allow),
                ],
                AgentThenHuman,
            ),
        ];
        for (action, rules, want) in cases {
            let layer = Layer::new(rules.clone());
            let got = layer.lookup(&key(action, "http_fetch", Some("gpt-4o"), Some("main")));
            assert_eq!(got, Some(want), "{rules:?}");
        }
        // A rule naming a model does not match a call whose model is unknown.
        let layer = Layer::new(vec![rule(None, None, Some("gpt-4o"), None, Allow)]);
        assert_eq!(layer.lookup(&key("fs.read", "read_file", None, None)), None);
    }

    #[test]
    fn layers_run_then_project_then_org_then_shipped_under_the_org_ceiling() {
        use RuleDecision::*;
        let org = vec![
            rule(Some("net.*"), None, None, None, Ask),
            rule(Some("git.push"), None, None, None, Allow),
        ];
        let project = vec![
            rule(Some("net.fetch"), None, None, None, Deny),
            rule(Some("fs.write"), None, None, None, Allow),
        ];
        let run = vec![
            parse_run_rule("net.fetch=allow").unwrap(),
            parse_run_rule("fs.write=deny").unwrap(),
        ];
        let table = RuleTable::new(org, project, run);
        let answer = |action: &str| table.lookup(&key(action, "x", None, None));
        // The run answers instead of the project; the org ceiling still holds it.
        assert_eq!(
            answer("net.fetch"),
            RuleAnswer {
                decision: Ask,
                source: RuleSource::Run,
                capped_by_org: true
            }
        );
        assert_eq!(answer("fs.write").decision, Deny);
        // The org's own rule answers when nothing below names the action.
        assert_eq!(answer("git.push").decision, Allow);
        assert_eq!(answer("git.push").source, RuleSource::Org);
        // The shipped defaults, then ask.
        assert_eq!(answer("fs.read").decision, Allow);
        assert_eq!(answer("git.commit").source, RuleSource::Shipped);
        assert_eq!(answer("mcp.gh.list").decision, Ask);
        assert_eq!(answer("mcp.gh.list").source, RuleSource::Unnamed);
        // Without the run's rules (a child run's table), the project's answer stands.
        let child = RuleTable::new(
            vec![rule(Some("net.*"), None, None, None, Ask)],
            vec![rule(Some("net.fetch"), None, None, None, Deny)],
            vec![],
        );
        assert_eq!(
            child.lookup(&key("net.fetch", "x", None, None)).decision,
            Deny
        );
        // Unconfigured: git.push is denied.
        let bare = RuleTable::new(vec![], vec![], vec![]);
        assert_eq!(
            bare.lookup(&key("git.push", "git", None, None)).decision,
            Deny
        );
        assert_eq!(
            bare.lookup(&key("policy.widen", "restrict_self", None, None))
                .decision,
            Ask
        );
    }

    #[test]
    fn run_rules_bad_input() {
        let cases = [
            "net.fetch",
            "=allow",
            "*=allow",
            "net.*.fetch=allow",
            "net.fetch=maybe",
            "net.fetch=",
            "net.fetch=Allow",
            "tool=shell=allow",
        ];
        for text in cases {
            assert!(parse_run_rule(text).is_err(), "{text} was accepted");
        }
        let rule = parse_run_rule("net.fetch.*=allow").unwrap();
        assert_eq!(rule.to_string(), "action=net.fetch.* => allow");
    }
}
