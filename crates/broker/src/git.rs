//! The `git` tool's vetted surface: the subcommands a run may ask for and the arguments it may
//! pass them. The tool runs git inside the run's sandbox, on the run's own repository, with
//! a config Switchboard wrote; what is vetted here is what would let one `git.<subcommand>`
//! rule stand for more than it names: writing a file wherever (`--output`), running a program
//! (`--open-files-in-pager`, `--ext-diff`, signing with gpg, a merge strategy found on the
//! `PATH`), reading another repository or files outside the working tree (`--git-dir`,
//! `--work-tree`, `--no-index`), or setting config (`-c`). A subcommand not listed is not
//! offered: `push`, `fetch`, `clone` and `remote` have nowhere to go (a run's repository has no
//! remote; its branch is kept for the person), and `config`, `submodule`, `worktree`,
//! `filter-branch`, `archive`, `bundle` and `format-patch` write or run what the rules could
//! not see. Pure: no I/O.

use std::fmt;

/// The subcommands offered, sorted.
pub const SUBCOMMANDS: [&str; 31] = [
    "add",
    "blame",
    "branch",
    "cat-file",
    "checkout",
    "cherry-pick",
    "clean",
    "commit",
    "describe",
    "diff",
    "grep",
    "log",
    "ls-files",
    "ls-tree",
    "merge",
    "merge-base",
    "mv",
    "reflog",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-ref",
    "stash",
    "status",
    "switch",
    "tag",
];

/// At most this many arguments, each at most [`MAX_ARG_BYTES`].
pub const MAX_ARGS: usize = 64;
pub const MAX_ARG_BYTES: usize = 4096;

/// Long options refused on every subcommand, with why (`--name` or `--name=value`).
const REFUSED_LONG: [(&str, &str); 20] = [
    ("--output", "writes a file outside what the rules see"),
    (
        "--output-directory",
        "writes files outside what the rules see",
    ),
    ("--exec", "runs a program"),
    ("--exec-path", "runs programs from another directory"),
    ("--upload-pack", "runs a program"),
    ("--receive-pack", "runs a program"),
    ("--ext-diff", "runs an external diff program"),
    ("--textconv", "runs a text conversion program"),
    ("--open-files-in-pager", "runs a program"),
    ("--config-env", "sets git config"),
    ("--git-dir", "names another repository"),
    ("--work-tree", "names another working tree"),
    ("--namespace", "names another ref namespace"),
    ("--super-prefix", "is internal to git"),
    ("--no-index", "reads files outside the repository"),
    ("--gpg-sign", "runs gpg"),
    ("--show-signature", "runs gpg"),
    // A nested repository's config is the run's to write, and can name any program (a diff
    // driver, a filter): git never enters one for the tool.
    (
        "--submodule",
        "enters a nested repository, whose config can name programs",
    ),
    (
        "--recurse-submodules",
        "enters a nested repository, whose config can name programs",
    ),
    (
        "--ignore-submodules",
        "enters a nested repository, whose config can name programs",
    ),
];

/// Why a `git` call's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRefusal {
    pub subcommand: String,
    /// The argument refused, cut to 64 characters; `None` when the subcommand itself is.
    pub argument: Option<String>,
    pub why: &'static str,
}

impl fmt::Display for GitRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.argument {
            Some(arg) => write!(
                f,
                "git {} {arg}: not offered, it {}",
                self.subcommand, self.why
            ),
            None => write!(
                f,
                "git {} is not offered: {}; offered: {}",
                self.subcommand,
                self.why,
                SUBCOMMANDS.join(", ")
            ),
        }
    }
}

/// Whether `subcommand` with `args` is within the vetted surface.
pub fn check(subcommand: &str, args: &[String]) -> Result<(), GitRefusal> {
    let refuse = |argument: Option<&str>, why: &'static str| GitRefusal {
        subcommand: subcommand.to_owned(),
        argument: argument.map(|a| a.chars().take(64).collect()),
        why,
    };
    if SUBCOMMANDS.binary_search(&subcommand).is_err() {
        let why = match subcommand {
            "push" | "fetch" | "pull" | "clone" | "remote" | "ls-remote" => {
                "a run's repository has no remote; its branch is kept for the person it acts for"
            }
            _ => "it writes or runs what the rules cannot see",
        };
        return Err(refuse(None, why));
    }
    if args.len() > MAX_ARGS {
        return Err(refuse(None, "too many arguments"));
    }
    for arg in args {
        if arg.len() > MAX_ARG_BYTES || arg.contains('\0') {
            return Err(refuse(Some(arg), "is too long or holds a NUL byte"));
        }
        if let Some(why) = refused(subcommand, arg) {
            return Err(refuse(Some(arg), why));
        }
    }
    Ok(())
}

/// Why `arg` is refused for `subcommand`, if it is.
fn refused(subcommand: &str, arg: &str) -> Option<&'static str> {
    if arg == "-c" || arg == "-C" {
        return Some("sets config or names another directory");
    }
    if let Some((_, why)) = REFUSED_LONG.iter().find(|(name, _)| {
        arg == *name || arg.strip_prefix(name).is_some_and(|r| r.starts_with('='))
    }) {
        return Some(why);
    }
    // A cluster of short options (`-nO`, `-sm`): each letter counts.
    let short = arg
        .strip_prefix('-')
        .filter(|rest| !rest.starts_with('-') && !rest.is_empty());
    let has = |letters: &str| short.is_some_and(|s| s.chars().any(|c| letters.contains(c)));
    match subcommand {
        // `-O` runs a pager program on the matching files.
        "grep" if has("O") => Some("runs a program"),
        // `-S` signs with gpg.
        "commit" | "merge" | "cherry-pick" | "revert" if has("S") => Some("runs gpg"),
        // A strategy other than git's own is a program found on the PATH.
        "merge" | "cherry-pick" | "revert" if has("s") || arg.starts_with("--strategy") => {
            Some("may run a merge strategy program")
        }
        "tag" if has("su") || arg.starts_with("--sign") || arg.starts_with("--local-user") => {
            Some("runs gpg")
        }
        "commit" | "merge" | "tag" | "revert" | "cherry-pick" if arg == "-e" || arg == "--edit" => {
            Some("runs an editor")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_subcommands_are_sorted_for_the_search() {
        let mut sorted = SUBCOMMANDS;
        sorted.sort_unstable();
        assert_eq!(sorted, SUBCOMMANDS);
    }

    #[test]
    fn what_reads_and_writes_the_runs_own_repository_is_offered() {
        for (sub, a) in [
            ("status", vec![]),
            (
                "log",
                vec!["-p", "--stat", "-S", "needle", "-s", "--format=%H"],
            ),
            ("diff", vec!["HEAD~1", "--", "src"]),
            ("show", vec!["HEAD:README.md"]),
            ("grep", vec!["-n", "-i", "todo"]),
            ("commit", vec!["-am", "fix the build"]),
            ("tag", vec!["-a", "v1", "-m", "first"]),
            ("rev-parse", vec!["HEAD"]),
            ("merge", vec!["-X", "ours", "topic"]),
            ("stash", vec!["-S"]),
        ] {
            assert_eq!(check(sub, &args(&a)), Ok(()), "{sub} {a:?}");
        }
    }

    /// The bad-input table: each refused, each for a reason the model reads.
    #[test]
    fn what_writes_runs_or_reaches_elsewhere_is_refused() {
        for (sub, a) in [
            ("push", vec!["origin", "main"]),
            ("fetch", vec![]),
            ("clone", vec!["https://example.com/x"]),
            ("config", vec!["core.hooksPath", "/tmp"]),
            ("submodule", vec!["update"]),
            ("archive", vec!["HEAD"]),
            ("format-patch", vec!["-1"]),
            ("difftool", vec![]),
            ("-c", vec![]),
            ("log", vec!["--output=/tmp/x"]),
            ("log", vec!["--output", "/tmp/x"]),
            ("diff", vec!["--ext-diff"]),
            ("diff", vec!["--no-index", "/etc/passwd", "/dev/null"]),
            ("show", vec!["--textconv", "HEAD:x"]),
            ("grep", vec!["-O", "x"]),
            ("grep", vec!["-nOless", "x"]),
            ("grep", vec!["--open-files-in-pager=sh", "x"]),
            ("log", vec!["-c"]),
            ("status", vec!["-C", "/"]),
            ("status", vec!["--git-dir=/elsewhere"]),
            ("status", vec!["--work-tree", "/"]),
            ("log", vec!["--show-signature"]),
            ("commit", vec!["-S", "-m", "x"]),
            ("commit", vec!["-aSm", "x"]),
            ("commit", vec!["--gpg-sign=key"]),
            ("commit", vec!["-e"]),
            ("merge", vec!["-s", "evil", "topic"]),
            ("merge", vec!["--strategy=evil", "topic"]),
            ("tag", vec!["-s", "v1"]),
            ("tag", vec!["-asm", "x", "v1"]),
            ("tag", vec!["--local-user=k", "v1"]),
            ("log", vec!["--exec-path=/tmp"]),
            ("status", vec!["x\0y"]),
            ("diff", vec!["--submodule=diff"]),
            ("log", vec!["-p", "--submodule"]),
            ("grep", vec!["--recurse-submodules", "x"]),
            ("checkout", vec!["--recurse-submodules", "main"]),
            ("status", vec!["--ignore-submodules=none"]),
        ] {
            let refusal = check(sub, &args(&a)).expect_err(&format!("{sub} {a:?} was accepted"));
            assert!(!refusal.to_string().is_empty());
        }
        let many: Vec<String> = (0..=MAX_ARGS).map(|i| i.to_string()).collect();
        assert!(check("log", &many).is_err());
        assert!(check("log", &["x".repeat(MAX_ARG_BYTES + 1)]).is_err());
    }

    #[test]
    fn a_refusal_says_what_is_offered_or_why() {
        let push = check("push", &[]).unwrap_err().to_string();
        assert!(push.contains("has no remote"), "{push}");
        let pager = check("grep", &args(&["-O", "x"])).unwrap_err().to_string();
        assert_eq!(pager, "git grep -O: not offered, it runs a program");
    }
}
