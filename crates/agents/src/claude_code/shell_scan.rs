//! What a `Bash` command runs of git: each git subcommand a command line plainly starts,
//! through `sh -c`, `$(…)`, back quotes, `eval`, `env`, `command`, `xargs` and the like, or a
//! path ending in `/git`. The broker decides each as `git.<subcommand>` beside `shell.exec`,
//! so `git.push = deny` binds `Bash: git push`.
//!
//! It is a reading of the text, not a sandbox: what runs but is not on the line (`$g push`,
//! `… | sh`, `… | xargs git`) is reported as [`Scan::dynamic`] (decided as `shell.dynamic`), a
//! git subcommand git does not ship (an alias, which may stand for any other) as
//! [`Scan::unknown_git`] (refused), any line naming git and a way to push (`push`,
//! `send-pack`, `receive-pack`) anywhere as a push, and a program that writes a repository's
//! files itself is not git at all (docs/broker.md says so).

/// What one command line starts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Each git subcommand, in order, once.
    pub git: Vec<String>,
    /// A program whose name is not literal text (`$tool`, `"$(which git)"`, a glob).
    pub dynamic: bool,
    /// A git subcommand git itself does not have (an alias, or a name computed at run time).
    pub unknown_git: Vec<String>,
}

/// How deep `sh -c` and `$(…)` are followed; deeper is [`Scan::dynamic`].
const MAX_DEPTH: usize = 8;

/// Reads `command` as a shell would split it.
pub fn scan(command: &str) -> Scan {
    let mut scan = Scan::default();
    scan_into(command, 0, &mut scan);
    // However the line is written (a program that runs git itself, a `find -exec`, an
    // fsmonitor named in config), a line naming git and a way to push is decided as a push.
    let lower = command.to_ascii_lowercase();
    let pushes = ["push", "send-pack", "receive-pack"]
        .iter()
        .any(|p| lower.contains(p));
    if lower.contains("git") && pushes && !scan.git.iter().any(|g| g == "push") {
        scan.git.push("push".to_owned());
    }
    scan
}

fn scan_into(command: &str, depth: usize, scan: &mut Scan) {
    if depth > MAX_DEPTH {
        scan.dynamic = true;
        return;
    }
    let (commands, nested) = split(command);
    for inner in nested {
        scan_into(&inner, depth + 1, scan);
    }
    for words in commands {
        simple_command(&words, depth, scan);
    }
}

/// One word: its text with quotes removed, and whether any part of it is expanded at run
/// time (`$`, a back quote) or a glob.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    dynamic: bool,
}

/// The command line's simple commands (each a list of words) and the text of every `$(…)` and
/// back-quoted command in it (scanned on their own).
fn split(line: &str) -> (Vec<Vec<Word>>, Vec<String>) {
    let chars: Vec<char> = line.chars().collect();
    let mut commands = Vec::new();
    let mut nested = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut word: Option<Word> = None;
    let mut i = 0;
    let end_word = |word: &mut Option<Word>, words: &mut Vec<Word>| {
        if let Some(w) = word.take() {
            words.push(w);
        }
    };
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                let w = word.get_or_insert_with(empty_word);
                if let Some(&next) = chars.get(i + 1)
                    && next != '\n'
                {
                    w.text.push(next);
                }
                i += 2;
                continue;
            }
            '\'' => {
                let w = word.get_or_insert_with(empty_word);
                i += 1;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    if q == '\'' {
                        break;
                    }
                    w.text.push(q);
                }
                continue;
            }
            '"' => {
                let w = word.get_or_insert_with(empty_word);
                i += 1;
                while let Some(&q) = chars.get(i) {
                    match q {
                        '"' => {
                            i += 1;
                            break;
                        }
                        '\\' => {
                            if let Some(&next) = chars.get(i + 1) {
                                w.text.push(next);
                            }
                            i += 2;
                        }
                        '$' | '`' => {
                            let (inner, after) = substitution(&chars, i);
                            if let Some(inner) = inner {
                                nested.push(inner);
                            }
                            w.dynamic = true;
                            i = after;
                        }
                        _ => {
                            w.text.push(q);
                            i += 1;
                        }
                    }
                }
                continue;
            }
            '$' | '`' => {
                let (inner, after) = substitution(&chars, i);
                if let Some(inner) = inner {
                    nested.push(inner);
                }
                word.get_or_insert_with(empty_word).dynamic = true;
                i = after;
                continue;
            }
            '#' if word.is_none() => {
                while chars.get(i).is_some_and(|&c| c != '\n') {
                    i += 1;
                }
                continue;
            }
            ';' | '&' | '|' | '\n' | '(' | ')' => {
                end_word(&mut word, &mut words);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '<' | '>' => {
                // A redirection's target is not a program: skip it.
                end_word(&mut word, &mut words);
                i += 1;
                while chars
                    .get(i)
                    .is_some_and(|&c| matches!(c, '<' | '>' | '&' | '|'))
                {
                    i += 1;
                }
                while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
                    i += 1;
                }
                while chars
                    .get(i)
                    .is_some_and(|&c| !c.is_whitespace() && !";&|()<>".contains(c))
                {
                    i += 1;
                }
                continue;
            }
            c if c.is_whitespace() => end_word(&mut word, &mut words),
            c => {
                let w = word.get_or_insert_with(empty_word);
                if matches!(c, '*' | '?' | '[' | '{' | '~') {
                    w.dynamic = true;
                }
                w.text.push(c);
            }
        }
        i += 1;
    }
    end_word(&mut word, &mut words);
    if !words.is_empty() {
        commands.push(words);
    }
    (commands, nested)
}

fn empty_word() -> Word {
    Word {
        text: String::new(),
        dynamic: false,
    }
}

/// The command inside `$(…)` or back quotes starting at `start`, and where reading goes on;
/// `None` for a parameter (`$x`, `${x}`).
fn substitution(chars: &[char], start: usize) -> (Option<String>, usize) {
    let at = |i: usize| chars.get(i).copied();
    if at(start) == Some('`') {
        let mut i = start + 1;
        let mut inner = String::new();
        while let Some(c) = at(i) {
            i += 1;
            match c {
                '`' => break,
                '\\' => {
                    if let Some(next) = at(i) {
                        inner.push(next);
                        i += 1;
                    }
                }
                c => inner.push(c),
            }
        }
        return (Some(inner), i);
    }
    match at(start + 1) {
        Some('(') => {
            let mut depth = 0usize;
            let mut i = start + 1;
            let mut inner = String::new();
            while let Some(c) = at(i) {
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if depth == 0 {
                    return (Some(inner.trim_start_matches('(').to_owned()), i + 1);
                }
                if !(c == '(' && depth == 1) {
                    inner.push(c);
                }
                i += 1;
            }
            (Some(inner), i)
        }
        Some('{') => {
            let mut i = start + 2;
            while at(i).is_some_and(|c| c != '}') {
                i += 1;
            }
            (None, i + 1)
        }
        _ => {
            let mut i = start + 1;
            while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                i += 1;
            }
            // `$?`, `$1`, `$@`: one character.
            if i == start + 1 && at(i).is_some() {
                i += 1;
            }
            (None, i)
        }
    }
}

/// Programs that run the command after their own options.
const WRAPPERS: [&str; 16] = [
    "env", "command", "exec", "nice", "nohup", "time", "timeout", "stdbuf", "setsid", "sudo",
    "xargs", "builtin", "ionice", "chrt", "unbuffer", "doas",
];
/// Each wrapper's options that take the next word as their value.
const WRAPPER_VALUED: [(&str, &[&str]); 9] = [
    ("env", &["-u", "--unset", "-C", "--chdir"]),
    ("exec", &["-a"]),
    ("timeout", &["-s", "--signal", "-k", "--kill-after"]),
    ("nice", &["-n", "--adjustment"]),
    (
        "sudo",
        &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
    ),
    ("doas", &["-u", "-C"]),
    ("ionice", &["-c", "-n", "-p"]),
    ("stdbuf", &["-i", "-o", "-e"]),
    ("xargs", &["-I", "-L", "-n", "-P", "-s", "-d", "-a", "-E"]),
];
/// Shell words that come before a command.
const KEYWORDS: [&str; 11] = [
    "then", "do", "else", "elif", "if", "while", "until", "!", "{", "coproc", "time",
];
/// Shells whose `-c` argument is a command line.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "busybox", "ash"];

fn simple_command(words: &[Word], depth: usize, scan: &mut Scan) {
    let mut rest = words;
    // Assignments, keywords, wrappers and their options, before the program.
    loop {
        let Some((first, after)) = rest.split_first() else {
            return;
        };
        let name = basename(&first.text);
        let assignment = !first.dynamic
            && first.text.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        let assigned = assignment || (first.text.contains('=') && first.dynamic);
        if assigned || KEYWORDS.contains(&first.text.as_str()) {
            rest = after;
        } else if first.text == "function" {
            // `function name { …; }`: its name, then its body's commands.
            rest = after.get(1..).unwrap_or_default();
        } else if WRAPPERS.contains(&name) && !first.dynamic {
            // Its options (with their values), and a duration or priority.
            let valued = WRAPPER_VALUED
                .iter()
                .find(|(w, _)| *w == name)
                .map_or(&[][..], |(_, v)| *v);
            rest = after;
            while let Some((w, more)) = rest.split_first() {
                let numeric = w.text.chars().next().is_some_and(|c| c.is_ascii_digit());
                if name == "env"
                    && (w.text.starts_with("-S") || w.text.starts_with("--split-string"))
                {
                    // `env -S 'git push'`: a command line of its own.
                    let line = match w.text.split_once('=').map(|(_, v)| v) {
                        Some(v) => v.to_owned(),
                        None if w.text.len() > 2 && w.text.starts_with("-S") => {
                            w.text[2..].to_owned()
                        }
                        None => more.first().map_or(String::new(), |v| v.text.clone()),
                    };
                    scan_into(&line, depth + 1, scan);
                    return;
                }
                if valued.contains(&w.text.as_str()) {
                    rest = more.get(1..).unwrap_or_default();
                } else if w.text.starts_with('-') || numeric || w.dynamic {
                    rest = more;
                } else {
                    break;
                }
            }
        } else {
            break;
        }
    }
    let Some((program, args)) = rest.split_first() else {
        return;
    };
    if program.dynamic || program.text.is_empty() {
        scan.dynamic = true;
        return;
    }
    let name = basename(&program.text);
    if name == "trap" {
        // `trap 'git push' EXIT`: its first argument is a command line.
        if let Some(line) = args.first() {
            scan_into(&line.text, depth + 1, scan);
        }
        return;
    }
    if name == "eval" || name == "." || name == "source" {
        let joined: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if name == "eval" {
            scan_into(&joined.join(" "), depth + 1, scan);
        } else {
            // A script file: what it runs is not in this line.
            scan.dynamic = true;
        }
        return;
    }
    if SHELLS.contains(&name) {
        // A command line after `-c` (in a cluster of one-letter options, never `--norc`);
        // without one, a shell reads its commands from a file or stdin, not from this line.
        let command_flag = |w: &Word| {
            w.text.len() > 1
                && w.text.starts_with('-')
                && !w.text.starts_with("--")
                && w.text[1..].chars().all(|c| c.is_ascii_alphabetic())
                && w.text.contains('c')
        };
        match args.iter().position(command_flag) {
            Some(i) => match args.get(i + 1) {
                Some(line) => scan_into(&line.text, depth + 1, scan),
                None => scan.dynamic = true,
            },
            None => scan.dynamic = true,
        }
        return;
    }
    if name == "git" {
        git_subcommand(args, scan);
    } else if let Some(sub) = name.strip_prefix("git-") {
        add_git(sub, scan);
    }
}

/// The part of a program name after its last `/`.
fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

/// git's options that take the next word as their value.
const GIT_VALUED: [&str; 7] = [
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
];

fn git_subcommand(args: &[Word], scan: &mut Scan) {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if w.text == "-c"
            && args
                .get(i + 1)
                .is_some_and(|v| v.text.starts_with("alias."))
        {
            // An alias given here stands for any subcommand.
            scan.unknown_git.push(format!(
                "-c {}",
                args.get(i + 1).map_or("", |v| v.text.as_str())
            ));
        }
        if GIT_VALUED.contains(&w.text.as_str()) {
            i += 2;
        } else if w.text.starts_with('-') {
            i += 1;
        } else if w.dynamic {
            scan.dynamic = true;
            return;
        } else {
            add_git(&w.text, scan);
            return;
        }
    }
    // No subcommand on the line: it comes from elsewhere (`… | xargs git`).
    scan.dynamic = true;
}

fn add_git(sub: &str, scan: &mut Scan) {
    if GIT_COMMANDS.binary_search(&sub).is_ok() {
        if !scan.git.iter().any(|s| s == sub) {
            scan.git.push(sub.to_owned());
        }
    } else if !scan.unknown_git.iter().any(|s| s == sub) {
        scan.unknown_git.push(sub.to_owned());
    }
}

/// Every subcommand git ships (`git help -a`, sorted): any other name is an alias, which may
/// stand for any of them.
const GIT_COMMANDS: [&str; 155] = [
    "add",
    "am",
    "annotate",
    "apply",
    "archimport",
    "archive",
    "backfill",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "citool",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-store",
    "cvsexportcommit",
    "cvsimport",
    "cvsserver",
    "daemon",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-pairs",
    "diff-tree",
    "difftool",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "filter-branch",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "gitk",
    "gitweb",
    "grep",
    "gui",
    "hash-object",
    "help",
    "hook",
    "http-backend",
    "imap-send",
    "index-pack",
    "init",
    "instaweb",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-one-file",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "p4",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "quiltimport",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "refs",
    "remote",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "scalar",
    "send-email",
    "send-pack",
    "sh-i18n",
    "sh-setup",
    "shell",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "svn",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_commands_are_sorted_for_the_search() {
        let mut sorted = GIT_COMMANDS;
        sorted.sort_unstable();
        assert_eq!(sorted, GIT_COMMANDS);
    }

    /// Every way of writing a push that the line shows is read as one.
    #[test]
    fn a_push_is_found_however_the_line_writes_it() {
        let pushes = [
            "git push",
            "git push origin main",
            "cd repo && git push",
            "git -C ../other push --force",
            "git -c user.name=x --no-pager push",
            "/usr/bin/git push",
            "env GIT_DIR=x git push",
            "FOO=1 git push",
            "command git push",
            "exec git push",
            "timeout 30 git push",
            "nice -n 5 git push",
            "sh -c 'git push'",
            "bash -lc \"git push origin\"",
            "sh -c \"sh -c 'git push'\"",
            "echo $(git push)",
            "echo `git push`",
            "x=\"$(git push 2>&1)\"",
            "eval git push",
            "eval 'git push'",
            "true; git push",
            "false || git push",
            "ls | xargs git push",
            "ls | xargs -n1 git push",
            "if true; then git push; fi",
            "(git push)",
            "{ git push; }",
            "git\tpush",
            "g\\it push",
            "'git' push",
            "\"git\" \"push\"",
            "git push > /dev/null 2>&1",
            "git-push",
            "/usr/lib/git-core/git-send-pack x",
            "sudo git push",
            "echo push | xargs git",
            "echo 'git push' | sh",
            "bash < f.sh",
            "bash --norc -c 'git push'",
            "exec -a x git push",
            "env -u HOME git push",
            "timeout -s KILL 5 git push",
            "env -S 'git push'",
            "function f { git push; }; f",
            "trap 'git push' EXIT",
            "coproc git push",
            "echo $(echo \")\"; git push)",
            "find . -exec git push \\;",
            "awk 'BEGIN{system(\"git push\")}'",
            "python3 -c 'import os; os.system(\"git push\")'",
            "git -c core.fsmonitor='git push #' status",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='git push #' git status",
            "git send-pack ../r main",
        ];
        for line in pushes {
            let s = scan(line);
            assert!(
                s.git.iter().any(|g| g == "push" || g == "send-pack")
                    || !s.unknown_git.is_empty()
                    || s.dynamic,
                "{line:?}: {s:?}"
            );
        }
        for line in [
            "git push",
            "sh -c 'git push'",
            "echo $(git push)",
            "g\\it push",
        ] {
            assert_eq!(scan(line).git, vec!["push".to_owned()], "{line}");
        }
    }

    #[test]
    fn a_computed_program_or_an_alias_is_never_read_as_harmless() {
        let table: [(&str, bool, bool); 9] = [
            // (line, dynamic, unknown git)
            ("$g push", true, false),
            ("g=git; $g push", true, false),
            ("\"$(which git)\" push", true, false),
            ("${GIT:-git} push", true, false),
            ("git $sub", true, false),
            ("sh script.sh", true, false),
            ("git p", false, true),
            ("git -c alias.p=push p", false, true),
            ("/tmp/gi* push", true, false),
        ];
        for (line, dynamic, unknown) in table {
            let s = scan(line);
            assert_eq!(s.dynamic, dynamic, "{line:?}: {s:?}");
            assert_eq!(!s.unknown_git.is_empty(), unknown, "{line:?}: {s:?}");
        }
    }

    #[test]
    fn plain_commands_are_plain() {
        for line in ["ls -la", "cargo test", "echo done", "cat <<< git", ""] {
            let s = scan(line);
            assert!(
                s.git.is_empty() && !s.dynamic && s.unknown_git.is_empty(),
                "{line:?}: {s:?}"
            );
        }
        assert_eq!(scan("git status && git diff").git, vec!["status", "diff"]);
        // A line that names git and a push anywhere is decided as a push too (fail closed):
        // a message, a grep, an echo into a file.
        assert_eq!(
            scan("git commit -m 'x; git push'").git,
            vec!["commit", "push"]
        );
        assert_eq!(scan("echo 'git push' > notes.md").git, vec!["push"]);
    }
}
