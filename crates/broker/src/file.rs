//! The project's policy file, `.switchboard/agent-policy.toml`, and the org's `[agent_policy]`
//! rules: parsed whole before a run starts, every fault reported as `file:line:column: what
//! was expected`. Reading the file is [`load_project`]'s only I/O; [`parse_project`] is pure
//! (the directory check is a function it is given).
//!
//! ```toml
//! deny_read = [".env", "config/production-secrets.toml"]
//! protected = ["tools/git-hooks", "scripts/release.sh"]
//!
//! [policy]
//! agents = [{ kind = "main" }, { kind = "reviewer", parent = "main" }]
//! rules = [
//!   { action = "git.*", decision = "ask" },
//!   { action = "git.push", decision = "deny" },
//!   { agent_kind = "main", action = "git.commit", decision = "allow" },
//! ]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::rules::{Charset, NamePattern, PatternError, RuleDecision, ToolRule};

/// Where the project file lives, relative to the workspace root.
pub const PROJECT_POLICY_FILE: &str = ".switchboard/agent-policy.toml";

/// A fault in a policy file, located.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct PolicyFileError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A project's agent policy: files kept out of the run, agent kinds, rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectPolicy {
    /// Project-relative, normalised file names.
    pub deny_read: Vec<String>,
    /// Project-relative, normalised paths (files or directories) a run may read but never
    /// change: read-only in the sandbox, refused by the file tools, never kept on its branch.
    /// What git on a person's machine runs from the tree (a team's own hook directory, say).
    pub protected: Vec<String>,
    pub agents: Vec<AgentKind>,
    pub rules: Vec<ToolRule>,
}

/// A declared agent kind and its parent kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentKind {
    pub kind: String,
    #[serde(default)]
    pub parent: Option<String>,
}

macro_rules! pattern_field {
    ($name:ident, $charset:expr) => {
        #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
        #[serde(try_from = "String")]
        struct $name(NamePattern);

        impl TryFrom<String> for $name {
            type Error = PatternError;
            fn try_from(text: String) -> Result<Self, PatternError> {
                NamePattern::parse(&text, $charset).map($name)
            }
        }
    };
}
pattern_field!(LowerPattern, Charset::Lower);
pattern_field!(WidePattern, Charset::Wide);

/// A rule's `tool`: Switchboard's name or an outside agent's own (`Bash` is `shell`), read
/// through [`crate::agent_tools::canonical_tool`] so a rule written either way binds.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
struct ToolPattern(NamePattern);

impl TryFrom<String> for ToolPattern {
    type Error = PatternError;
    fn try_from(text: String) -> Result<Self, PatternError> {
        let tool = crate::agent_tools::rule_tool(&text)
            .ok_or_else(|| PatternError::AgentMcpTool(text.clone()))?;
        NamePattern::parse(tool, Charset::Lower).map(ToolPattern)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleToml {
    #[serde(default)]
    action: Option<LowerPattern>,
    #[serde(default)]
    tool: Option<ToolPattern>,
    #[serde(default)]
    model: Option<WidePattern>,
    #[serde(default)]
    agent_kind: Option<WidePattern>,
    decision: RuleDecision,
}

impl From<RuleToml> for ToolRule {
    fn from(rule: RuleToml) -> ToolRule {
        ToolRule {
            action: rule.action.map(|p| p.0),
            tool: rule.tool.map(|p| p.0),
            model: rule.model.map(|p| p.0),
            agent_kind: rule.agent_kind.map(|p| p.0),
            decision: rule.decision,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyToml {
    #[serde(default)]
    agents: Vec<Spanned<AgentKind>>,
    #[serde(default)]
    rules: Vec<RuleToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectToml {
    #[serde(default)]
    deny_read: Vec<Spanned<String>>,
    #[serde(default)]
    protected: Vec<Spanned<String>>,
    #[serde(default)]
    policy: Option<PolicyToml>,
}

/// The org's `[agent_policy]` section of the deployment's config: its rules (a ceiling over
/// every project) and how long an approval may take.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrgPolicyToml {
    #[serde(default)]
    rules: Vec<RuleToml>,
    /// An unanswered ask is refused after this many seconds (default 300).
    #[serde(default)]
    pub approval_timeout_seconds: Option<u64>,
    /// The declared agent that answers `agent_review` (and the first half of
    /// `agent_then_human`); none: those are refused.
    #[serde(default)]
    pub reviewer: Option<String>,
}

impl OrgPolicyToml {
    pub fn rules(&self) -> Vec<ToolRule> {
        self.rules.iter().cloned().map(ToolRule::from).collect()
    }
}

/// Reads and parses `<workspace>/.switchboard/agent-policy.toml`; a workspace without one has
/// the empty policy. A file that cannot be read is an error, never an empty policy.
pub fn load_project(workspace: &Path) -> Result<ProjectPolicy, PolicyFileError> {
    let path = workspace.join(PROJECT_POLICY_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ProjectPolicy::default()),
        Err(e) => {
            return Err(PolicyFileError {
                file: path.display().to_string(),
                line: 0,
                column: 0,
                message: format!("cannot be read: {e}"),
            });
        }
    };
    let is_dir = |relative: &str| workspace.join(relative).is_dir();
    parse_project(&text, &path, &is_dir)
}

/// Parses a project policy file's text. `is_dir` answers whether a project-relative name is a
/// directory in the workspace (deny_read names files only).
pub fn parse_project(
    text: &str,
    file: &Path,
    is_dir: &dyn Fn(&str) -> bool,
) -> Result<ProjectPolicy, PolicyFileError> {
    let located = |offset: usize, message: String| locate(text, file, offset, message);
    let parsed: ProjectToml = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        located(offset, expected(e.message()))
    })?;
    let mut deny_read = Vec::new();
    for name in &parsed.deny_read {
        let clean = deny_read_name(name.get_ref(), is_dir)
            .map_err(|why| located(name.span().start, why))?;
        deny_read.push(clean);
    }
    let mut protected = Vec::new();
    for name in &parsed.protected {
        let clean = project_path("protected", name.get_ref())
            .map_err(|why| located(name.span().start, why))?;
        protected.push(clean);
    }
    let policy = parsed.policy.unwrap_or(PolicyToml {
        agents: Vec::new(),
        rules: Vec::new(),
    });
    let agents = check_agents(&policy.agents).map_err(|(offset, why)| located(offset, why))?;
    Ok(ProjectPolicy {
        deny_read,
        protected,
        agents,
        rules: policy.rules.into_iter().map(ToolRule::from).collect(),
    })
}

fn check_agents(agents: &[Spanned<AgentKind>]) -> Result<Vec<AgentKind>, (usize, String)> {
    let kinds: Vec<&str> = agents.iter().map(|a| a.get_ref().kind.as_str()).collect();
    for (i, agent) in agents.iter().enumerate() {
        let at = agent.span().start;
        let kind = &agent.get_ref().kind;
        if kinds.iter().take(i).any(|k| k == kind) {
            return Err((at, format!("agent kind {kind:?} is declared twice")));
        }
        if let Some(parent) = &agent.get_ref().parent {
            if !kinds.contains(&parent.as_str()) {
                return Err((
                    at,
                    format!("agent kind {kind:?}: its parent {parent:?} is not a declared kind"),
                ));
            }
            if parent == kind {
                return Err((at, format!("agent kind {kind:?} cannot be its own parent")));
            }
        }
    }
    Ok(agents.iter().map(|a| a.get_ref().clone()).collect())
}

/// A project-relative path of the `key` list, checked and normalised (`.` and empty segments
/// dropped); each refusal says why.
fn project_path(key: &str, name: &str) -> Result<String, String> {
    if name.starts_with('/') || name.starts_with('~') {
        return Err(format!(
            "{key} {name:?}: expected a path relative to the project root; an absolute path is outside the sandbox already"
        ));
    }
    if name.contains(['*', '?', '[', ']', '{', '}']) {
        return Err(format!(
            "{key} {name:?}: expected a path, not a glob (a pattern that matches nothing reads like one that protects something)"
        ));
    }
    let segments: Vec<&str> = name
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.is_empty() {
        return Err(format!("{key} {name:?}: expected a path"));
    }
    if segments.contains(&"..") {
        return Err(format!(
            "{key} {name:?}: expected a path that stays inside the project"
        ));
    }
    Ok(segments.join("/"))
}

/// A deny_read name, checked and normalised; each refusal says why.
fn deny_read_name(name: &str, is_dir: &dyn Fn(&str) -> bool) -> Result<String, String> {
    let clean = project_path("deny_read", name)?;
    if name.ends_with('/') || is_dir(&clean) {
        return Err(format!(
            "deny_read {name:?}: expected a file; this is a directory (name the files in it)"
        ));
    }
    if clean == PROJECT_POLICY_FILE {
        return Err(format!(
            "deny_read {name:?}: the policy file itself cannot be denied; it is bound read-only so the agent can read the rules it works under"
        ));
    }
    Ok(clean)
}

/// toml's messages, with serde's "unknown field" made to say where a rule goes.
fn expected(message: &str) -> String {
    let message = message.trim_end();
    if message.starts_with("unknown field") && message.contains("expected `agents` or `rules`") {
        format!("{message} (a rule goes inside [policy] rules = [...], not beside agents)")
    } else {
        message.to_owned()
    }
}

fn locate(text: &str, file: &Path, offset: usize, message: String) -> PolicyFileError {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    PolicyFileError {
        file: file.display().to_string(),
        line,
        column,
        message,
    }
}

/// The project file's path in `workspace`.
pub fn project_policy_path(workspace: &Path) -> PathBuf {
    workspace.join(PROJECT_POLICY_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProjectPolicy, PolicyFileError> {
        parse_project(text, Path::new("agent-policy.toml"), &|name| {
            name == "secrets"
        })
    }

    #[test]
    fn the_seed_file_parses() {
        let policy = parse(
            r#"deny_read = [".env", "./config//production-secrets.toml", "not-yet-there"]
[policy]
agents = [{ kind = "main" }, { kind = "reviewer", parent = "main" }]
rules = [
  { action = "git.*", decision = "ask" },
  { action = "git.push", decision = "deny" },
  { agent_kind = "main", action = "git.commit", decision = "allow" },
]
"#,
        )
        .unwrap();
        assert_eq!(
            policy.deny_read,
            [".env", "config/production-secrets.toml", "not-yet-there"]
        );
        assert_eq!(policy.agents.len(), 2);
        assert_eq!(policy.rules.len(), 3);
        assert_eq!(policy.rules[2].decision, RuleDecision::Allow);
        assert_eq!(parse("").unwrap(), ProjectPolicy::default());
        let protected =
            parse("protected = [\"./tools//hooks/\", \"secrets\", \".husky\"]\n").unwrap();
        assert_eq!(protected.protected, ["tools/hooks", "secrets", ".husky"]);
    }

    /// Each malformed policy file the docs describe, and a few more: the line, the column and what was expected.
    #[test]
    fn malformed_files_name_line_column_and_what_was_expected() {
        let cases: [(&str, &str, (usize, usize), &str); 17] = [
            (
                "a rule beside agents",
                "[policy]\nagents = [{ kind = \"main\" }]\naction = \"git.push\"\ndecision = \"deny\"\n",
                (3, 1),
                "not beside agents",
            ),
            (
                "an unknown decision",
                "[policy]\nrules = [{ action = \"git.push\", decision = \"maybe\" }]\n",
                (2, 44),
                "unknown variant `maybe`",
            ),
            (
                "a bare star",
                "[policy]\nrules = [{ action = \"*\", decision = \"deny\" }]\n",
                (2, 21),
                "leave the field out",
            ),
            (
                "a star mid-name",
                "[policy]\nrules = [\n  { action = \"net.*.fetch\", decision = \"deny\" },\n]\n",
                (3, 14),
                "whole last segment",
            ),
            (
                "a directory",
                "deny_read = [\".env\", \"secrets\"]\n",
                (1, 22),
                "this is a directory",
            ),
            (
                "a directory by its slash",
                "deny_read = [\"keys/\"]\n",
                (1, 14),
                "this is a directory",
            ),
            ("a glob", "deny_read = [\"*.pem\"]\n", (1, 14), "not a glob"),
            (
                "an absolute path",
                "deny_read = [\"/etc/passwd\"]\n",
                (1, 14),
                "relative to the project root",
            ),
            (
                "a home path",
                "deny_read = [\"~/.aws/credentials\"]\n",
                (1, 14),
                "relative to the project root",
            ),
            (
                "climbing out",
                "deny_read = [\"../other/.env\"]\n",
                (1, 14),
                "stays inside the project",
            ),
            (
                "the policy file itself",
                "deny_read = [\"./.switchboard/agent-policy.toml\"]\n",
                (1, 14),
                "policy file itself",
            ),
            (
                "a protected glob",
                "protected = [\"hooks/*\"]\n",
                (1, 14),
                "not a glob",
            ),
            (
                "a protected absolute path",
                "protected = [\".githooks\", \"/usr/bin\"]\n",
                (1, 27),
                "relative to the project root",
            ),
            (
                "a protected path climbing out",
                "protected = [\"a/../../b\"]\n",
                (1, 14),
                "stays inside the project",
            ),
            (
                "a rule without a decision",
                "[policy]\nrules = [{ action = \"fs.read\" }]\n",
                (2, 10),
                "missing field `decision`",
            ),
            (
                "an unknown parent",
                "[policy]\nagents = [{ kind = \"reviewer\", parent = \"main\" }]\n",
                (2, 11),
                "not a declared kind",
            ),
            (
                "not TOML",
                "deny_read = [\".env\"\n",
                (1, 20),
                "expected `]`",
            ),
        ];
        for (what, text, (line, column), says) in cases {
            let err = parse(text).expect_err(what);
            assert_eq!((err.line, err.column), (line, column), "{what}: {err}");
            assert!(err.message.contains(says), "{what}: {err}");
            assert!(
                err.to_string()
                    .starts_with(&format!("agent-policy.toml:{line}:{column}: ")),
                "{what}: {err}"
            );
        }
    }

    #[test]
    fn load_reads_the_workspace_file_and_checks_directories_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load_project(dir.path()).unwrap(), ProjectPolicy::default());
        std::fs::create_dir_all(dir.path().join(".switchboard")).unwrap();
        std::fs::create_dir_all(dir.path().join("creds")).unwrap();
        std::fs::write(project_policy_path(dir.path()), "deny_read = [\"creds\"]\n").unwrap();
        let err = load_project(dir.path()).unwrap_err();
        assert!(err.message.contains("directory"), "{err}");
        assert!(err.file.ends_with(PROJECT_POLICY_FILE), "{err}");
        std::fs::write(
            project_policy_path(dir.path()),
            "deny_read = [\"creds/key.pem\"]\n",
        )
        .unwrap();
        assert_eq!(
            load_project(dir.path()).unwrap().deny_read,
            ["creds/key.pem"]
        );
    }

    #[test]
    fn org_rules_parse_with_the_same_checks() {
        let org: OrgPolicyToml =
            toml::from_str("rules = [{ action = \"git.push\", decision = \"deny\" }]").unwrap();
        assert_eq!(org.rules().len(), 1);
        assert!(
            toml::from_str::<OrgPolicyToml>("rules = [{ action = \"*\", decision = \"deny\" }]")
                .is_err()
        );
        assert!(toml::from_str::<OrgPolicyToml>("deny_read = []").is_err());
    }

    /// A rule's `tool` written as an outside agent names it is Switchboard's: `Bash` binds the
    /// calls `shell` does, from either caller; a name no rule can hold is still refused.
    #[test]
    fn a_rule_names_a_tool_either_way() {
        use crate::rules::{RuleKey, RuleTable};
        for written in ["Bash", "shell"] {
            let org: OrgPolicyToml = toml::from_str(&format!(
                "rules = [{{ tool = \"{written}\", action = \"shell.exec\", decision = \"deny\" }}]"
            ))
            .unwrap();
            let table = RuleTable::new(org.rules(), vec![], vec![]);
            for caller in ["Bash", "shell"] {
                let key = RuleKey {
                    action: "shell.exec",
                    tool: crate::agent_tools::canonical_tool(caller),
                    model: None,
                    agent_kind: None,
                };
                assert_eq!(
                    table.lookup(&key).decision,
                    RuleDecision::Deny,
                    "a rule on {written}, a call of {caller}"
                );
            }
        }
        for refused in ["Weird Tool", "mcp__github__create_issue"] {
            assert!(
                toml::from_str::<OrgPolicyToml>(&format!(
                    "rules = [{{ tool = \"{refused}\", decision = \"deny\" }}]"
                ))
                .is_err(),
                "{refused}"
            );
        }
    }
}
